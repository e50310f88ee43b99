"""Where a recorded model's parts are: one lookup for every family, found from what a probe pass does, not from
module names or a list of families.

Per attention layer of each stack ("self", or "encoder", "decoder" and "cross" for an encoder-decoder):

- ``block``: the element of the model's layer list that holds the attention module (``blocks_of``);
- ``attention``: the module that calls the attention function (``core.model.attention_layers.attention_modules``);
- ``output_projection``: the linear map (``nn.Linear`` or GPT-2's ``Conv1D``) whose input, in a probe pass, is the
  heads' outputs side by side ``[B, T, Hq·d]`` (weights @ values of the layer's record): ``o_proj``, ``c_proj``,
  ``out_lin``, BERT's ``attention.output.dense``, T5's ``o`` … whatever it is called;
- ``mlp_output``: the MLP's last linear map to the hidden size, outside the attention modules; ``mlp``: the module
  that holds it (None where the block holds it directly, as BART's ``fc2``).

For the model: ``final_norm``, the first norm called after the last block of the output stack and before any other
block (Llama's ``model.norm``, GPT-2's ``ln_f``; None for BERT), and ``unembedding``, transformers'
``get_output_embeddings()`` (None without a language-model head); ``heads`` (``Hq``) and ``head_dim`` (``d``) as the
attention function received them.

The probe is one pass over four tokens inside a ``Recorder``, with hooks through ``core.model.hooks``; its result is kept
on the model object, so each model is probed once. Example::

    parts = parts_of(lm.model)
    parts.layers[3].output_projection        # the module whose input is layer 3's heads' outputs
    parts.stacks["cross"][0].attention       # an encoder-decoder's first cross-attention
"""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass

import torch

from core.model.attention_layers import SINGLE_STACK, attention_modules, cached_record_keys, model_of
from core.model.hooks import first_tensor, hooked, main_input
from core.model.recording import Recorder, UnsupportedArchitecture, is_recordable

PROBE_TOKENS = 4
_LOCK = threading.Lock()


@dataclass(frozen=True)
class LayerParts:
    """One attention layer's modules (see the module docstring)."""

    block: torch.nn.Module
    attention: torch.nn.Module
    output_projection: torch.nn.Module
    mlp: torch.nn.Module | None
    mlp_output: torch.nn.Module | None


@dataclass(frozen=True)
class ModelParts:
    """``stacks[stack][l]``: ``LayerParts`` of layer ``l`` ("self", or "encoder", "decoder", "cross")."""

    stacks: dict[str, tuple[LayerParts, ...]]
    final_norm: torch.nn.Module | None
    unembedding: torch.nn.Module | None
    heads: int
    head_dim: int

    @property
    def layers(self) -> tuple[LayerParts, ...]:
        """The layers of a model with one stack (an encoder-decoder's decoder self-attention otherwise)."""
        return self.stacks.get(SINGLE_STACK) or self.stacks["decoder"]

    @property
    def blocks(self) -> list[torch.nn.Module]:
        return [p.block for p in self.layers]

    @property
    def output_projections(self) -> list[torch.nn.Module]:
        return [p.output_projection for p in self.layers]


def blocks_of(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's blocks in layer order: for each attention module (``core.model.attention_layers.attention_modules``), its
    nearest ancestor that is an element of a ``ModuleList``."""
    parents: dict[int, tuple[torch.nn.Module, str]] = {}
    for module in model.modules():
        for child_name, child in module.named_children():
            parents[id(child)] = (module, child_name)
    blocks = []
    for attention in attention_modules(model):  # in the model's order
        node = attention
        while id(node) in parents:
            parent, _ = parents[id(node)]
            if isinstance(parent, torch.nn.ModuleList):
                break
            node = parent
        else:
            raise UnsupportedArchitecture(f"{type(attention).__name__} is not inside a list of blocks the app can find.")
        blocks.append(node)
    return blocks


def is_norm(module: torch.nn.Module) -> bool:
    """True for a normalisation layer (LayerNorm, RMSNorm …: by class, not by attribute name)."""
    return isinstance(module, torch.nn.LayerNorm) or type(module).__name__.endswith(("Norm", "RMSNorm", "LayerNorm"))


def last_linear_to_hidden(block: torch.nn.Module, attention: torch.nn.Module, hidden: int) -> torch.nn.Module | None:
    """The MLP's output map: the last linear map (``nn.Linear`` or GPT-2's ``Conv1D``) registered in ``block`` outside
    its attention whose output has the hidden size (``down_proj``, ``c_proj``, ``fc2``, ``dense_4h_to_h`` …)."""
    inside_attention = {id(m) for m in attention.modules()}
    found = None
    for module in block.modules():
        if id(module) in inside_attention:
            continue
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.ndim != 2 or is_norm(module):
            continue
        out_features = getattr(module, "out_features", None) or getattr(module, "nf", None)
        if out_features == hidden:
            found = module
    return found




def _linear_like(module: torch.nn.Module) -> bool:
    weight = getattr(module, "weight", None)
    return isinstance(weight, torch.Tensor) and weight.ndim == 2 and not isinstance(module, torch.nn.Embedding)


def _probe_inputs(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    config = model.config
    vocab = int(getattr(config, "vocab_size", PROBE_TOKENS + 1) or PROBE_TOKENS + 1)
    device = next(model.parameters()).device
    # ids from the middle of the vocabulary: the first few are often padding, whose embedding may be all zeros
    ids = torch.tensor([[(vocab // 2 + i) % vocab for i in range(PROBE_TOKENS)]], device=device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if getattr(config, "is_encoder_decoder", False):
        start = getattr(config, "decoder_start_token_id", None)
        inputs["decoder_input_ids"] = torch.cat([torch.tensor([[start if isinstance(start, int) else 0]], device=device),
                                                 ids[:, :2]], dim=1)
    return inputs


def parts_of(model: torch.nn.Module) -> ModelParts:
    """The parts of ``model`` (a transformers model loaded by ``core.model.models.load_model`` or
    ``core.outputs.predictions.load_language_model``), found once per model. Raises ``UnsupportedArchitecture`` (a sentence)
    for a model whose attention is not recorded or whose heads' outputs reach no linear map."""
    found = getattr(model, "_explorer_parts", None)
    if found is not None:
        return found
    with _LOCK:
        found = getattr(model, "_explorer_parts", None)
        if found is None:
            found = contextvars.Context().run(_probe, model)  # an empty context: no caller's Recorder changes the probe
            model._explorer_parts = found
    return found


def last_state_is_normed(model: torch.nn.Module) -> bool:
    """True when the model's last hidden state (``hidden_states[-1]``, as transformers returns it) is not its last
    block's output but that output after the final norm (Llama's ``model.norm``, Gemma's, GPT-2's ``ln_f``), measured
    on one probe pass: the last hidden state differs from the last block's output and equals the final norm of it.
    False for a model the app does not record, an encoder-decoder, or a model whose last state is the block's output."""
    found = getattr(model, "_explorer_last_normed", None)
    if found is not None:
        return found
    try:
        parts = parts_of(model)
    except UnsupportedArchitecture:
        return False
    layers = parts.stacks.get(SINGLE_STACK)
    normed = False
    if layers and parts.final_norm is not None:
        seen: dict[str, torch.Tensor] = {}
        with torch.inference_mode(), hooked([(layers[-1].block, "post", lambda _m, _a, out: seen.update(out=first_tensor(out)))]):
            last = model(**_probe_inputs(model), output_hidden_states=True).hidden_states[-1].float()
            normed_out = parts.final_norm(seen["out"]).float()
        scale = float(last.abs().max()) or 1.0
        normed = (float((last - seen["out"].float()).abs().max()) / scale > 1e-4
                  and float((normed_out - last).abs().max()) / scale < 1e-4)
    model._explorer_last_normed = normed
    return normed


def layer_parts(attention: torch.nn.Module) -> LayerParts:
    """The ``LayerParts`` of the layer whose attention module is ``attention`` (a ``LayerRecord``'s ``module``)."""
    model = model_of(attention)
    found = None if model is None else next((p for layers in parts_of(model).stacks.values() for p in layers
                                             if p.attention is attention), None)
    if found is None:
        raise UnsupportedArchitecture(f"{type(attention).__name__} is not an attention layer of a model the app recorded.")
    return found


def _probe(model: torch.nn.Module) -> ModelParts:
    kind = getattr(model.config, "model_type", type(model).__name__)
    if not is_recordable(model):
        raise UnsupportedArchitecture(f"The app does not record the attention of {kind} models, so it cannot find "
                                      "each head's output in them.")
    attentions = attention_modules(model)
    blocks = blocks_of(model)
    block_ids = {id(b) for b in blocks}
    inside_block = {id(m) for b in blocks for m in b.modules()}
    candidates = [m for b in dict.fromkeys(blocks) for m in b.modules() if _linear_like(m)]
    base = getattr(model, "base_model", model)  # not a masked-LM head's own norm
    norms = [m for m in base.modules() if is_norm(m) and id(m) not in inside_block]
    inputs: dict[int, torch.Tensor] = {}
    calls: list[tuple[str, int]] = []  # ("enter" | "exit" | "norm", id) in call order

    def keep_input(module, args, kwargs):
        x = main_input(args, kwargs, "input")
        if isinstance(x, torch.Tensor):
            inputs[id(module)] = x.detach()

    def event(name):
        def hook(module, *_):
            calls.append((name, id(module)))
        return hook

    hooks = [(m, "pre", keep_input) for m in candidates]
    hooks += [(b, "pre", event("enter")) for b in dict.fromkeys(blocks)]
    hooks += [(b, "post", event("exit")) for b in dict.fromkeys(blocks)]
    hooks += [(n, "pre", event("norm")) for n in norms]
    with torch.inference_mode(), hooked(hooks), Recorder(model) as rec:
        model(**_probe_inputs(model))
    keys = cached_record_keys(model)
    hidden = int(model.config.hidden_size)
    stacks: dict[str, list[LayerParts | None]] = {}
    heads = head_dim = 0
    for attention, block in zip(attentions, blocks, strict=True):
        stack, layer = keys[id(attention)]
        record = rec.stacks.get(stack, {}).get(layer)
        if record is None or record.weights is None:
            raise UnsupportedArchitecture(f"Layer {layer} of this {kind} model's {stack} did not record its attention.")
        heads, head_dim = record.queries.shape[1], record.queries.shape[3]
        values = record.values.repeat_interleave(record.kv_groups, dim=1)
        concat = (record.weights @ values).transpose(1, 2).flatten(2)  # [B, T, Hq·d]
        projection = _closest([m for m in block.modules() if _linear_like(m)], inputs, concat.float())
        if projection is None:
            raise UnsupportedArchitecture(f"{type(attention).__name__} hands its heads' outputs to no linear map the "
                                          "app can find, so its heads cannot be knocked out.")
        mlp_output = last_linear_to_hidden(block, attention, hidden)
        owner = None if mlp_output is None else next((m for m in block.modules()
                                                      if any(c is mlp_output for c in m.children())), None)
        mlp = owner if owner is not None and owner is not block else None
        layers = stacks.setdefault(stack, [])
        layers.extend([None] * (layer + 1 - len(layers)))
        layers[layer] = LayerParts(block, attention, projection, mlp, mlp_output)
    if any(p is None for layers in stacks.values() for p in layers):
        raise UnsupportedArchitecture(f"The attention layers of this {kind} model are not numbered the way the app reads them.")
    output_stack = stacks.get(SINGLE_STACK) or stacks.get("decoder") or []
    final_norm = _norm_after(calls, id(output_stack[-1].block), block_ids, norms) if output_stack else None
    return ModelParts({s: tuple(layers) for s, layers in stacks.items()}, final_norm, model.get_output_embeddings(),
                      int(heads), int(head_dim))


def _closest(candidates: list[torch.nn.Module], inputs: dict[int, torch.Tensor],
             concat: torch.Tensor) -> torch.nn.Module | None:
    """The candidate whose probe input is nearest ``concat``, if it equals it up to float rounding (relative to the
    largest entry: a random model's small values must not pass an absolute tolerance)."""
    scale = float(concat.abs().max()) or 1.0
    errors = {id(m): float((x.float() - concat).abs().max()) / scale
              for m in candidates if (x := inputs.get(id(m))) is not None and x.shape == concat.shape}
    best = min(candidates, key=lambda m: errors.get(id(m), float("inf")))
    return best if errors.get(id(best), float("inf")) < 1e-4 else None


def _norm_after(calls: list[tuple[str, int]], last_block: int, block_ids: set[int],
                norms: list[torch.nn.Module]) -> torch.nn.Module | None:
    """The first norm outside the blocks called after ``last_block`` returned, before any block runs again."""
    exits = [i for i, (name, ident) in enumerate(calls) if name == "exit" and ident == last_block]
    if not exits:
        return None
    by_id = {id(n): n for n in norms}
    for name, ident in calls[exits[-1] + 1:]:
        if name == "enter" and ident in block_ids:
            return None
        if name == "norm":
            return by_id[ident]
    return None
