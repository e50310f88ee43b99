"""What each block of an encoder-decoder's two stacks did in one pass, read with hooks (``core.model.hooks``) for
``core.causal.flow_pair.record_pair``: its input and output, each attention's output, the norms called after it, and
its MLP's output map's input (the neurons) and output.

A block here is the element of the stack's outermost layer list (T5's ``T5Block``, BART's layer), which holds the
self-attention, the decoder's cross-attention and the MLP; ``core.model.parts`` finds T5's blocks one list lower, its
sub-layers (``T5LayerSelfAttention`` …), so a T5 block's MLP is not in its parts."""

from __future__ import annotations

import torch

from core.model.hooks import first_tensor, main_input
from core.model.parts import is_norm
from core.model.recording import UnsupportedArchitecture


def outer_blocks(stack: torch.nn.Module, attentions: list[torch.nn.Module]) -> list[torch.nn.Module]:
    """Per attention module, the element of ``stack``'s outermost ``ModuleList`` that holds it (T5's ``T5Block``,
    not the ``T5LayerSelfAttention`` of its inner list; BART's layer)."""
    lists = sorted(((name, m) for name, m in stack.named_modules() if isinstance(m, torch.nn.ModuleList)),
                   key=lambda item: item[0].count("."))
    for _, layers in lists:
        holding = [next((b for b in layers if any(m is a for m in b.modules())), None) for a in attentions]
        if all(b is not None for b in holding):
            return holding
    raise UnsupportedArchitecture(f"{type(stack).__name__} keeps its attention layers in no list of blocks.")


class BlockCalls:
    """What one block's hooks saw: its input and output, each attention's output and the norms called after it."""

    def __init__(self, attentions: list[torch.nn.Module]):
        self.attentions, self.pre, self.post = attentions, None, None
        self.mlp_map, self.neurons, self.written = None, None, None  # the MLP's output map, its input and output
        self.outputs: list[torch.Tensor] = []
        self.norms: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # (attentions done, input, output)

    def sums(self, stack: str) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor, bool]:
        """``(y per attention, m per attention, y of the MLP, post-norm)`` (see ``core.causal.flow_pair``'s docstring)."""
        count = len(self.attentions)
        if self.pre is None or self.post is None or len(self.outputs) != count:
            raise UnsupportedArchitecture(f"A block of the {stack} did not run as the app expects.")
        after = [[(x, y) for done, x, y in self.norms if done == k + 1] for k in range(count)]
        post_norm = bool(self.norms) and torch.equal(self.norms[-1][2], self.post) and all(after)
        if post_norm:  # BART: each update is added, then normalised; the MLP's sum is the last norm's input
            return [a[0][0] for a in after], [a[0][1] for a in after], self.norms[-1][1], True
        mids = []
        for k, seen in enumerate(after):
            found = [x for x, _ in seen if not (x.shape == self.outputs[k].shape and torch.equal(x, self.outputs[k]))]
            if not found:
                raise UnsupportedArchitecture(f"The app cannot find the stream after each attention of the {stack}.")
            mids.append(found[0])
        return mids, mids, self.post, False


def block_hooks(calls: BlockCalls, block: torch.nn.Module) -> list:
    """Hooks (for ``core.model.hooks.hooked``) on ``block``, its attention modules, its norms outside them and its MLP's
    output map (``calls.mlp_map``, where the caller found one)."""
    def block_pre(_module, args, kwargs):
        calls.pre = first_tensor(kwargs.get("hidden_states", args[0] if args else None)).detach()[0]

    def block_post(_module, _args, output):
        calls.post = first_tensor(output).detach()[0]

    def attention_post(_module, _args, output):
        calls.outputs.append(first_tensor(output).detach()[0])

    def norm_post(_module, args, kwargs, output):
        if calls.outputs:
            x = first_tensor(kwargs.get("hidden_states", args[0] if args else None)).detach()[0]
            calls.norms.append((len(calls.outputs), x, first_tensor(output).detach()[0]))

    def neurons_pre(_module, args, kwargs):
        calls.neurons = main_input(args, kwargs, "input").detach()[0]

    def written_post(_module, _args, output):
        calls.written = first_tensor(output).detach()[0]

    inside = {id(m) for a in calls.attentions for m in a.modules()}
    hooks = [(block, "pre", block_pre), (block, "post", block_post)]
    hooks += [(a, "post", attention_post) for a in calls.attentions]
    if calls.mlp_map is not None:
        hooks += [(calls.mlp_map, "pre", neurons_pre), (calls.mlp_map, "post", written_post)]
    return hooks + [(m, "post_kwargs", norm_post) for m in block.modules() if is_norm(m) and id(m) not in inside]
