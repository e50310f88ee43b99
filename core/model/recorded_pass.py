"""One recorded forward pass over one text: every quantity a view needs, under documented names.

The idea of TransformerLens' ``ActivationCache``, on the model transformers loaded: the attention layers are recorded
through the registered attention function (``core.model.recording``), and the residual stream around each block's two
sub-blocks through forward hooks on the block and its norms (registered by ``core.model.hooks``), found without a list of families:

- a *block* is the element of the model's layer list (a ``ModuleList``) that holds an attention module;
- the residual stream *between* attention and MLP is the input of the first norm the block calls after its
  attention whose input is not the attention's own output (Llama's ``post_attention_layernorm``, GPT-2's ``ln_2``,
  Gemma's ``pre_feedforward_layernorm``; Gemma's ``post_attention_layernorm`` normalises the attention output
  itself and is skipped). A block with no such norm (GPT-J's parallel attention and MLP) has no point between the
  two, and ``record_pass`` says so;
- a *post-norm* block (BERT, DistilBERT) is one whose output is the output of the last norm it called: there the
  first norm after the attention reads ``x + update`` (``attention_sum``) and returns the stream the MLP adds to
  (``residual_mid``), and the last reads ``residual_mid + the MLP's output`` (``mlp_sum``);
- blocks, output projections and MLP output maps are ``core.model.parts``' (``parts_of``: the one lookup of a model's
  parts); where the output projection is outside the attention module (BERT's ``attention.output.dense`` reads
  ``BertSelfAttention``'s heads side by side), ``attention_output`` is what that map returned.

Shapes (``L`` layers, ``T`` tokens, ``D`` hidden size, ``Hq`` query heads, ``Hkv`` key/value heads, ``d`` head size,
``F`` the MLP's inner width), all float32 tensors on the CPU::

    residual_pre        [L, T, D]   the block's input: the residual stream before layer l
    residual_mid        [L, T, D]   after the attention sub-block has added its update
    residual_post       [L, T, D]   the block's output: after the MLP sub-block (= residual_pre[l + 1])
    attention_output    [L, T, D]   what the attention module returned (its output projection's result, bias included)
    attention_update    [L, T, D]   what attention added: residual_mid - residual_pre (attention_output, or its norm
                                    where the block has one); attention_sum - residual_pre in a post-norm block
    mlp_update          [L, T, D]   residual_post - residual_mid; mlp_sum - residual_mid in a post-norm block
    attention_sum       [L, T, D]   post-norm blocks only (else None): the input of the norm after attention
    mlp_sum             [L, T, D]   post-norm blocks only (else None): the input of the block's last norm
    records[l]          LayerRecord  queries [1, Hq, T, d] after rotary and q/k-norm, keys/values [1, Hkv, T, d], mask …
    mlp_activations     [L, T, F]   the input of each MLP's last linear map (its neurons), when asked for

Attention weights are not stored: ``attention(layer, heads)`` computes them from the recorded queries and keys when a
view needs them, exactly as the family's eager attention does (scaling, soft-cap, mask and sliding window included).

Example::

    recorded = record_pass(loaded_model, input_ids)           # input_ids: list[int]
    recorded.attention(3, [5]).shape                           # (1, T, T): layer 3, head 5
    recorded.residual_mid[3] - recorded.residual_pre[3]        # the attention update of layer 3
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from core.model.attention_layers import SINGLE_STACK
from core.model.fast_attention import causal_mask
from core.model.hooks import first_tensor, hooked
from core.model.models import LoadedModel, threads_for_input
from core.model.on_demand import eager_weights
from core.model.parts import is_norm, parts_of  # the one lookup of a model's parts
from core.model.recording import LayerRecord, Recorder, UnsupportedArchitecture


@dataclass(frozen=True, eq=False)
class RecordedPass:
    """One forward pass's recorded quantities (see the module docstring for names and shapes)."""

    input_ids: tuple[int, ...]
    records: dict[int, LayerRecord]
    residual_pre: torch.Tensor
    residual_mid: torch.Tensor
    residual_post: torch.Tensor
    attention_output: torch.Tensor
    mlp_activations: torch.Tensor | None = None
    attention_sum: torch.Tensor | None = None
    mlp_sum: torch.Tensor | None = None
    _attention_norms: tuple[bool, ...] = field(default=())
    _output_projections: tuple[torch.nn.Module | None, ...] = field(default=(), repr=False)
    _last_layer: tuple[int, np.ndarray] | None = field(default=None, repr=False)

    @property
    def num_layers(self) -> int:
        return self.residual_pre.shape[0]

    @property
    def num_tokens(self) -> int:
        return self.residual_pre.shape[1]

    @property
    def post_norm(self) -> bool:
        """True when the blocks normalise the residual stream after adding each update (BERT, DistilBERT)."""
        return self.attention_sum is not None

    @property
    def attention_update(self) -> torch.Tensor:
        """``[L, T, D]`` what the attention sub-block added to the residual stream (before a post-norm block's norm)."""
        return (self.residual_mid if self.attention_sum is None else self.attention_sum) - self.residual_pre

    @property
    def mlp_update(self) -> torch.Tensor:
        """``[L, T, D]`` what the MLP sub-block added to the residual stream (before a post-norm block's norm)."""
        return (self.residual_post if self.mlp_sum is None else self.mlp_sum) - self.residual_mid

    def output_projection(self, layer: int) -> torch.nn.Module | None:
        """The module outside the attention module that turned its heads' outputs into ``attention_output[layer]``
        (BERT's ``attention.output.dense``), or None when the attention module projects them itself."""
        return self._output_projections[layer] if self._output_projections else None

    def attention_is_normed(self, layer: int) -> bool:
        """True when block ``layer`` normalises its attention output before adding it (Gemma 2/3)."""
        return bool(self._attention_norms and self._attention_norms[layer])

    def attention(self, layer: int, heads: list[int] | None = None) -> np.ndarray:
        """float32 ``[len(heads), T, T]`` (all heads when None): softmax(q·k × scaling, soft-capped, + mask).
        The last layer asked for is kept, so views that read one layer several times compute it once."""
        if self._last_layer is not None and self._last_layer[0] == layer:
            weights = self._last_layer[1]
        else:
            weights = attention_weights(self.records[layer])
            object.__setattr__(self, "_last_layer", (layer, weights))
        return weights if heads is None else weights[list(heads)]

    def head_outputs(self, layer: int, heads: list[int] | None = None) -> torch.Tensor:
        """``[len(heads), T, d]``: each head's output before the output projection, Σ_j weight_ij · value_j."""
        record = self.records[layer]
        heads = list(range(record.queries.shape[1])) if heads is None else list(heads)
        weights = torch.from_numpy(self.attention(layer, heads))
        values = record.values[0, [h // record.kv_groups for h in heads]].float()
        return weights @ values


def attention_weights(record: LayerRecord, heads: list[int] | None = None, rows=None) -> np.ndarray:
    """float32 ``[len(heads), Q, T]`` recomputed from ``record`` in the order of operations of transformers' eager
    attention: q·kᵀ × scaling, then soft-cap (cap·tanh(x / cap)), then the additive mask, then a float32 softmax.
    ``rows``: the query positions to compute (a slice or a list; all ``T`` when None). T5's relative-position bias
    (``record.position_bias``, one ``[T, S]`` per head) is added to the scores before the mask, as its eager
    attention does. A record of an sdpa pass whose mask was skipped (``record.causal``) gets the causal cells."""
    queries = record.queries[0].float()
    heads = list(range(queries.shape[0])) if heads is None else list(heads)
    rows = slice(None) if rows is None else rows
    q = queries[heads][:, rows]
    k = record.keys[0].float()[[h // record.kv_groups for h in heads]]
    mask = None if record.mask is None else record.mask[0, 0][rows, : k.shape[1]]
    if mask is None and record.causal:  # sdpa's skipped causal mask (core.model.fast_attention)
        mask = causal_mask(queries.shape[1], k.shape[1])[rows]
    if record.position_bias is not None:  # T5: added to the scores before the mask, per head
        bias = record.position_bias[0].float()
        bias = bias[heads] if bias.shape[0] > 1 else bias
        bias = bias[:, rows, : k.shape[1]]
        if mask is not None:
            low = torch.finfo(torch.float32).min
            bias = bias + (torch.where(mask, 0.0, low) if mask.dtype == torch.bool else mask.float())
        mask = bias
    return eager_weights(q, k, record.scaling, record.softcap, mask).numpy()


@dataclass
class _BlockCalls:
    """What one block's hooks saw in one pass, in call order."""

    pre: torch.Tensor | None = None
    post: torch.Tensor | None = None
    attention_output: torch.Tensor | None = None
    norm_inputs: list[torch.Tensor] = field(default_factory=list)  # norms called after the attention, in order
    norm_outputs: list[torch.Tensor] = field(default_factory=list)  # and what they returned
    projection: torch.nn.Module | None = None  # the output projection, where it is outside the attention module
    mlp_activations: torch.Tensor | None = None


def record_pass(model: LoadedModel, input_ids: list[int], *, neurons: bool = False) -> RecordedPass:
    """Run ``model`` once over ``input_ids`` and record it (see the module docstring). ``neurons`` also keeps each
    MLP's inner activations ``[L, T, F]`` (the input of its last linear map whose output has the hidden size).
    Raises ``UnsupportedArchitecture`` for a model that is not recorded or whose blocks have no point between
    attention and MLP."""
    base = model.model
    try:
        parts = parts_of(base).stacks  # core.model.parts: blocks, output projections and MLP maps, found once per model
    except UnsupportedArchitecture as err:
        raise UnsupportedArchitecture(f"{model.name}: {err}") from err
    layers = parts.get(SINGLE_STACK)
    if not layers:
        raise UnsupportedArchitecture(f"{model.name} has no single stack of attention layers the app can record.")
    calls = [_BlockCalls() for _ in layers]
    hooks = []  # registered through core.model.hooks

    def watch(layer: int, block: torch.nn.Module, attention: torch.nn.Module, projection: torch.nn.Module,
              mlp_output: torch.nn.Module | None) -> None:
        seen = calls[layer]

        def block_pre(_module, args, kwargs):
            seen.pre = first_tensor(kwargs.get("hidden_states", args[0] if args else None)).detach()[0]

        def block_post(_module, _args, output):
            seen.post = first_tensor(output).detach()[0]

        def attention_post(_module, _args, output):
            seen.attention_output = first_tensor(output).detach()[0]

        def projection_post(_module, _args, output):
            # the heads' outputs side by side are projected outside the attention module (BERT's attention.output.dense)
            seen.attention_output = first_tensor(output).detach()[0]

        def norm_post(_module, args, kwargs, output):
            if seen.attention_output is not None:
                seen.norm_inputs.append(first_tensor(kwargs.get("hidden_states", args[0] if args else None)).detach()[0])
                seen.norm_outputs.append(first_tensor(output).detach()[0])

        hooks.extend([(block, "pre", block_pre), (block, "post", block_post), (attention, "post", attention_post)])
        inside_attention = {id(m) for m in attention.modules()}
        if id(projection) not in inside_attention:
            seen.projection = projection
            hooks.append((projection, "post", projection_post))
        hooks.extend((module, "post_kwargs", norm_post) for module in block.modules()
                     if id(module) not in inside_attention and is_norm(module))
        if neurons and mlp_output is not None:
            def neuron_pre(_module, args, kwargs):
                seen.mlp_activations = (args[0] if args else kwargs["input"]).detach()[0]

            hooks.append((mlp_output, "pre", neuron_pre))

    for layer, part in enumerate(layers):
        watch(layer, part.block, part.attention, part.output_projection, part.mlp_output)
    ids = torch.tensor([list(input_ids)], device=model.device)
    # one torch thread at every length: on the shared 2-core machine two wait for each other (SmolLM2, 128
    # tokens, load 20: 2.6–2.9 s on one thread, 40–45 s on two)
    with torch.inference_mode(), threads_for_input(0), hooked(hooks), Recorder(base, keep_weights=False) as rec:
        base(input_ids=ids, attention_mask=torch.ones_like(ids))
    if len(rec.records) != len(layers):
        raise UnsupportedArchitecture(f"{model.name}'s attention is not recorded by the app (it was loaded without it).")
    mids, normed, sums = [], [], []
    for layer, seen in enumerate(calls):
        if seen.pre is None or seen.post is None or seen.attention_output is None:
            raise UnsupportedArchitecture(f"Block {layer} of {model.name} did not run as the app expects.")
        output = seen.attention_output
        if len(seen.norm_outputs) >= 2 and torch.equal(seen.norm_outputs[-1], seen.post):
            # post-norm (BERT): the first norm after the attention turns x + update into the stream the MLP adds
            # to, and the block's output is the last norm's, of that stream + the MLP's update
            mids.append(seen.norm_outputs[0])
            sums.append((seen.norm_inputs[0], seen.norm_inputs[-1]))
            normed.append(False)
            continue
        after = [x for x in seen.norm_inputs if not (x.shape == output.shape and torch.equal(x, output))]
        if not after:  # GPT-J-style blocks run attention and MLP side by side
            raise UnsupportedArchitecture(
                f"The app cannot find the residual stream between attention and MLP in {model.name}'s blocks (no "
                "norm of the block reads it), so this view is not available for this model yet."
            )
        mids.append(after[0])
        normed.append(len(after) < len(seen.norm_inputs))
    if sums and len(sums) != len(calls):
        raise UnsupportedArchitecture(f"{model.name} mixes blocks that normalise before and after their updates.")
    activations = None
    if neurons and all(seen.mlp_activations is not None for seen in calls):
        activations = torch.stack([seen.mlp_activations.float() for seen in calls])
    return RecordedPass(
        input_ids=tuple(input_ids),
        records=rec.records,
        residual_pre=torch.stack([seen.pre.float() for seen in calls]),
        residual_mid=torch.stack([m.float() for m in mids]),
        residual_post=torch.stack([seen.post.float() for seen in calls]),
        attention_output=torch.stack([seen.attention_output.float() for seen in calls]),
        mlp_activations=activations,
        attention_sum=torch.stack([a.float() for a, _ in sums]) if sums else None,
        mlp_sum=torch.stack([m.float() for _, m in sums]) if sums else None,
        _attention_norms=tuple(normed),
        _output_projections=tuple(seen.projection for seen in calls),
    )
