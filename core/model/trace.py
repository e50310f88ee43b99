"""One trace per text: one forward pass, run at the model's own speed, whose every quantity is read by name.

``record(model, text)`` (``record(model, (source, target))`` for an encoder-decoder, the target teacher-forced and
shifted right; ``record_ids(model, ids)`` for token ids as given, ``core.model.trace_tokens``) runs the loaded model
once inside ``Recorder(sdpa=True)``: each layer's output is computed by transformers' sdpa
(``core.model.fast_attention``; eager for a soft-capped layer, Gemma 2) and no weights are made.
The idea of TransformerLens' ``ActivationCache`` and the LLM Transparency Tool's ``TransparentLlm``, on the model
transformers loaded, through the one registered attention function for every family.

Stacks (``Trace.stack_names``): ``"self"`` for a model with one stack; ``"encoder"``, ``"decoder"`` and ``"cross"``
for an encoder-decoder (cross: decoder queries, encoder keys; it shares the decoder's blocks and residual stream).
Shapes (``L`` layers, ``T`` query tokens, ``S`` key tokens (= ``T`` but for cross), ``D`` hidden size, ``Hq`` query
heads, ``Hkv`` key/value heads, ``d`` head size), float32 numpy arrays::

    tokens(stack) / key_tokens(stack)   TokenSequence: tokens, ids, offsets, special_mask bool [T], word_ids
    residual_pre(stack, l)     [T, D]   the block's input (kept)
    residual_post(stack, l)    [T, D]   the block's output (kept; = residual_pre(stack, l + 1); the last before any
                                        final norm, unlike transformers' hidden_states[-1] for GPT-2)
    residual_mid(stack, l)     [T, D]   after the attention sub-block (recomputed)
    queries(stack, l)          [Hq, T, d]  after rotary and q/k-norm, projection biases included (recomputed)
    keys(stack, l), values(stack, l)  [Hkv, S, d]  (recomputed)
    head_outputs(stack, l)     [Hq, T, d]  each head's output before the output projection (recomputed)
    mlp_output(stack, l)       [T, D]   what the MLP's output map returned (recomputed; ``core.model.parts``)
    mask(stack, l)             bool [T, S]  True = may attend (causal, sliding window, padding)
    layer_info(stack, l)       scaling, softcap, sliding_window, heads, kv_heads, head_dim (kept)
    attention(stack, l, heads, rows)  float32 [heads, rows, S]
    attentions(stack)          [L, Hq, T, S]  every layer's weights (kept), None above STORED_WEIGHTS_MAX_TOKENS
    outputs[name]              the pass's own output tensors, batch axis dropped (kept): "last_hidden_state" [T, D]
                               (after the final norm: transformers' hidden_states[-1]; an encoder-decoder's decoder's
                               and "unembedding_input", hooked), "encoder_last_hidden_state", "pooler_output" [D] …

What is kept and what is recomputed: the trace keeps the residual stream between blocks (``(L + 1)·D·4`` bytes per
token per block stack) and each block's call (``core.model.on_demand.keep_argument``: masks as bool, rotary tables,
T5's position bias); everything inside a layer is recomputed by calling that block alone
(``run_block``), the last ``MEMO_LAYERS`` kept; queries, keys, values, mask and weights need only the block called up to
its attention (``queries_keys``; the last ``MEMO_LAYERS`` kept, all at or under ``STORED_WEIGHTS_MAX_TOKENS``: SmolLM2 59 MB).
Weights are computed only when asked (``attention``): from those queries and keys in the order of operations of eager
attention (``core.model.trace_layers.attention_weights``), ``BLOCK_CELLS`` at a time; a whole layer asked for at or
under ``STORED_WEIGHTS_MAX_TOKENS`` query tokens is kept (``layers × heads × T × S × 4`` bytes at most).
A trace holds the loaded model weakly: once that model is gone, recomputing raises ``AnalysisError``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from core.errors import AnalysisError
from core.model.attention_layers import SINGLE_STACK, record_keys
from core.model.hooks import hooked, keeping_call
from core.model.models import LoadedModel, threads_for_input
from core.model.on_demand import BLOCK_CELLS
from core.model.pair_tokens import decoder_tokens, encode_text
from core.model.recording import LayerRecord, Recorder
from core.model.text_limits import check_text, token_limit
from core.model.trace_layers import BlockKeeper, LayerTrace, attention_weights, block_layout, pair_output_hooks, queries_keys, run_block
from core.model.trace_tokens import TokenSequence, ids_inputs, text_inputs, token_sequence

STORED_WEIGHTS_MAX_TOKENS = 512  # a whole layer's weights asked for at or under this many query tokens are kept
MEMO_LAYERS = 2  # block calls whose quantities stay computed (a view's layer and the one before)
BLOCKS_OF = {SINGLE_STACK: SINGLE_STACK, "encoder": "encoder", "decoder": "decoder", "cross": "decoder"}


@dataclass(frozen=True)
class LayerInfo:
    """What a layer's attention call was given: scaling, soft-cap, sliding window (None = full), head counts."""

    scaling: float
    softcap: float | None
    sliding_window: int | None
    heads: int
    kv_heads: int
    head_dim: int
    causal: bool


@dataclass(frozen=True, eq=False)
class StackCalls:
    """Per block stack: block paths, each block's kept call, the stored tensors they name, and the MLP output maps."""

    paths: tuple[str, ...]
    calls: tuple[tuple[tuple, dict], ...]
    stored: tuple
    mlp_outputs: tuple[str | None, ...]


@dataclass(frozen=True, eq=False)
class Trace:
    """One forward pass of one text or one source/target pair (module docstring for names and shapes)."""

    model_name: str
    sequences: dict[str, TokenSequence]  # "text", or "source" and "target"
    stacks: dict[str, tuple[LayerInfo, ...]]
    residual: dict[str, np.ndarray]  # per block stack ("self", "encoder", "decoder"): [L + 1, T, D]
    blocks: dict[str, StackCalls] = field(repr=False)
    _model: weakref.ref = field(repr=False)
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # the pass's own (module docstring)
    _memo: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False)
    _weights: dict = field(default_factory=dict, init=False, repr=False)
    _records: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False)  # (stack, layer) -> queries-keys record
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        for array in (*self.residual.values(), *self.outputs.values()):
            array.setflags(write=False)

    @property
    def stack_names(self) -> tuple[str, ...]:
        return tuple(self.stacks)

    def num_layers(self, stack: str) -> int:
        return len(self._stack(stack))

    def tokens(self, stack: str) -> TokenSequence:
        """The sequence whose tokens ask (the rows)."""
        return self.sequences["text" if stack == SINGLE_STACK else "source" if stack == "encoder" else "target"]

    def key_tokens(self, stack: str) -> TokenSequence:
        """The sequence whose tokens are asked (the columns): the query tokens, but the source for cross-attention."""
        return self.sequences["source"] if stack == "cross" else self.tokens(stack)

    def layer_info(self, stack: str, layer: int) -> LayerInfo:
        return self._stack(stack)[self._check(stack, layer)]

    def residual_pre(self, stack: str, layer: int) -> np.ndarray:
        return self.residual[BLOCKS_OF[stack]][self._check(stack, layer)]

    def residual_post(self, stack: str, layer: int) -> np.ndarray:
        return self.residual[BLOCKS_OF[stack]][self._check(stack, layer) + 1]

    def residual_mid(self, stack: str, layer: int) -> np.ndarray | None:
        return self.layer(stack, layer).residual_mid[stack]

    def mlp_output(self, stack: str, layer: int) -> np.ndarray | None:
        return self.layer(stack, layer).mlp_output

    def queries(self, stack: str, layer: int) -> np.ndarray:
        return self.attention_record(stack, layer).queries[0].float().numpy()

    def keys(self, stack: str, layer: int) -> np.ndarray:
        return self.attention_record(stack, layer).keys[0].float().numpy()

    def values(self, stack: str, layer: int) -> np.ndarray:
        return self.attention_record(stack, layer).values[0].float().numpy()

    def head_outputs(self, stack: str, layer: int) -> np.ndarray:
        """``[Hq, T, d]``: what each head hands the output projection."""
        return self.layer(stack, layer).records[stack].output[0].transpose(0, 1).float().numpy()

    def mask(self, stack: str, layer: int) -> np.ndarray:
        """bool ``[T, S]``: True where a query may attend to a key."""
        record = self.attention_record(stack, layer)
        t, s = record.queries.shape[2], record.keys.shape[2]
        if record.mask is None:
            return np.tril(np.ones((t, s), dtype=bool)) if record.causal else np.ones((t, s), dtype=bool)
        plane = record.mask[0, 0, :, :s]
        return plane.numpy().copy() if plane.dtype == torch.bool else (plane > torch.finfo(plane.dtype).min / 2).numpy()

    def attention(self, stack: str, layer: int, heads: list[int] | None = None, rows=None,
                  keys: slice | None = None) -> np.ndarray:
        """float32 ``[len(heads), len(rows), S]`` (all heads / all query rows when None): exactly the weights of the
        model's eager attention (scaling, soft-cap, mask and sliding window, query head ``h`` reading key/value head
        ``h // (Hq / Hkv)``). A whole layer at or under ``STORED_WEIGHTS_MAX_TOKENS`` query tokens is kept.
        ``keys`` (a slice): those key columns alone, for a caller that knows the rows put no weight outside them (a
        decoder's rows up to ``i`` read keys ``0 … i``), the same numbers as ``attention(...)[..., keys]``."""
        info = self.layer_info(stack, layer)
        chosen = list(range(info.heads)) if heads is None else [int(h) for h in heads]
        if any(not 0 <= h < info.heads for h in chosen):
            raise ValueError(f"heads must be in 0..{info.heads - 1}, got {heads}")
        t = len(self.tokens(stack))
        key = (stack, layer)
        with self._lock:
            whole = self._weights.get(key)
        if whole is None and t <= STORED_WEIGHTS_MAX_TOKENS:
            whole = self._compute_weights(stack, layer, list(range(info.heads)), np.arange(t))
            whole.setflags(write=False)
            with self._lock:
                self._weights[key] = whole
        positions = np.arange(t)[slice(None) if rows is None else rows]
        if whole is not None:
            return whole[chosen][:, positions][..., slice(None) if keys is None else keys]
        return self._compute_weights(stack, layer, chosen, positions, keys)

    def attentions(self, stack: str) -> np.ndarray | None:
        """float32 ``[L, H, T, S]``: every layer's weights in one array (kept; ``attention`` then reads views of it),
        or None above ``STORED_WEIGHTS_MAX_TOKENS`` query tokens."""
        t, infos = len(self.tokens(stack)), self._stack(stack)
        if t > STORED_WEIGHTS_MAX_TOKENS:
            return None
        with self._lock:
            whole = self._weights.get((stack, None))
        if whole is None:
            whole = np.empty((len(infos), infos[0].heads, t, len(self.key_tokens(stack))), dtype=np.float32)
            for layer in range(len(infos)):
                with self._lock:
                    found = self._weights.get((stack, layer))
                whole[layer] = found if found is not None else self._compute_weights(
                    stack, layer, list(range(infos[layer].heads)), np.arange(t))
            whole.setflags(write=False)
            with self._lock:
                self._weights.update({(stack, None): whole, **{(stack, layer): whole[layer] for layer in range(len(infos))}})
        return whole

    def _compute_weights(self, stack: str, layer: int, heads: list[int], positions: np.ndarray,
                         keys: slice | None = None) -> np.ndarray:
        record = self.attention_record(stack, layer)
        s = len(range(*(keys or slice(None)).indices(record.keys.shape[2])))
        out = np.empty((len(heads), len(positions), s), dtype=np.float32)
        step = max(1, BLOCK_CELLS // max(1, len(heads) * s))
        for start in range(0, len(positions), step):
            part = positions[start: start + step]
            out[:, start: start + len(part)] = attention_weights(record, heads, torch.from_numpy(part), keys)
        return out

    def attention_record(self, stack: str, layer: int) -> LayerRecord:
        """Queries, keys, values, mask: from a kept block call, else the block called up to that attention alone."""
        key = (stack, self._check(stack, layer))
        with self._lock:
            found = self._memo.get((BLOCKS_OF[stack], layer))
            found = found.records[stack] if found is not None else self._records.get(key)
        if found is not None:
            return found
        model, calls = self._loaded(), self.blocks[BLOCKS_OF[stack]]
        with threads_for_input(self.residual[BLOCKS_OF[stack]].shape[1]):
            found = queries_keys(model, model.get_submodule(calls.paths[layer]), layer, calls.calls[layer],
                                 self.residual[BLOCKS_OF[stack]], calls.stored, stack)
        with self._lock:
            self._records[key] = found
            while len(self._records) > (MEMO_LAYERS if len(self.tokens(stack)) > STORED_WEIGHTS_MAX_TOKENS else 10**6):
                self._records.popitem(last=False)
        return found

    @property
    def nbytes(self) -> int:
        """Bytes held: residual streams, kept calls' tensors, stored weights and the memo (not the model)."""
        held = sum(a.nbytes for a in (*self.residual.values(), *self.outputs.values()))
        held += sum(item.allowed.nbytes if hasattr(item, "allowed") else item.nelement() * item.element_size()
                    for calls in self.blocks.values() for item in calls.stored)
        with self._lock:
            held += sum(w.nbytes for w in self._weights.values() if w.base is None) + sum(m.nbytes for m in self._memo.values())
            held += sum(t.nbytes for r in self._records.values() for t in (r.queries, r.keys, r.values, r.mask) if t is not None)
        return held

    def layer(self, stack: str, layer: int) -> LayerTrace:
        """Everything inside block ``layer`` of ``stack``: kept from a recent call, else its block called again."""
        self._check(stack, layer)
        key = (BLOCKS_OF[stack], layer)
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
                return found
        found = self._run(key[0], layer)
        with self._lock:
            self._memo[key] = found
            while len(self._memo) > MEMO_LAYERS:
                self._memo.popitem(last=False)
        return found

    def _loaded(self) -> torch.nn.Module:
        model = self._model()
        if model is None:
            raise AnalysisError(f"{self.model_name} was loaded again since this text was read: read it again.")
        return model

    def _run(self, blocks: str, layer: int) -> LayerTrace:
        model = self._loaded()
        calls = self.blocks[blocks]
        mlp = calls.mlp_outputs[layer]
        with threads_for_input(self.residual[blocks].shape[1]):
            return run_block(model, model.get_submodule(calls.paths[layer]), layer, calls.calls[layer],
                             self.residual[blocks], calls.stored, None if mlp is None else model.get_submodule(mlp),
                             record_keys(model))

    def _stack(self, stack: str) -> tuple[LayerInfo, ...]:
        if stack not in self.stacks:
            raise ValueError(f"no {stack!r} stack here; there are {', '.join(map(repr, self.stacks))}")
        return self.stacks[stack]

    def _check(self, stack: str, layer: int) -> int:
        n = len(self._stack(stack))
        if not 0 <= layer < n:
            raise ValueError(f"layer must be in 0..{n - 1}, got {layer}")
        return int(layer)


def record(model: LoadedModel, text: str | tuple[str, str], *, max_tokens: int | None = None,
           progress: Callable[[int, int], None] | None = None) -> Trace:
    """Run ``model`` once over ``text`` (a one-stack model) or ``(source, target)`` (an encoder-decoder) and keep its
    trace (module docstring). Texts are cut to ``max_tokens`` (default and ceiling: the model's limit). Raises
    ``AnalysisError`` (a sentence) for an empty text, a text where a pair is needed or the other way round, and a
    model whose attention the app does not record. ``progress(layers_done, layers_total)`` is called with 0 as the
    pass starts, then after each block (an encoder's, then a decoder's, counted together); whatever it raises ends
    the pass and propagates, and nothing is kept (every hook is removed)."""
    pair = isinstance(text, tuple)
    if pair != bool(model.is_encoder_decoder):
        raise AnalysisError(f"{model.name} reads " + ("a source and a target: record (source, target)." if
                                                       model.is_encoder_decoder else "one text, not a pair."))
    for part in text if pair else (text,):
        check_text(part)
    limit = token_limit(model, max_tokens)
    block_layout(model)  # an unrecorded model is refused before the text is read
    if pair:
        source, target = text
        src, source_seq = text_inputs(model, source, limit)
        tgt, tgt_full = encode_text(model, target, limit, target=True)
        decoder_ids, offsets, added = decoder_tokens(model, tgt)
        target_seq = token_sequence(model, target, tgt_full, decoder_ids[0].tolist(), offsets, added)
        sequences = {"source": source_seq, "target": target_seq}
        inputs = {"input_ids": src["input_ids"], "attention_mask": src["attention_mask"], "decoder_input_ids": decoder_ids}
    else:
        inputs, sequence = text_inputs(model, text, limit)
        sequences = {"text": sequence}
    return _recorded(model, inputs, sequences, progress)


def record_ids(model: LoadedModel, ids, *, progress: Callable[[int, int], None] | None = None) -> Trace:
    """``record`` of the token ids ``ids`` (a list or a ``[T]`` tensor) as given, for a one-stack model: nothing added,
    nothing cut; the sequence's text is the ids decoded one at a time (``core.model.trace_tokens.ids_inputs``). For a
    test sequence that is no text (the induction test's repeated random tokens)."""
    if model.is_encoder_decoder:
        raise AnalysisError(f"{model.name} reads a source and a target: record (source, target).")
    inputs, sequence = ids_inputs(model, ids)
    return _recorded(model, inputs, {"text": sequence}, progress)


def _recorded(model: LoadedModel, inputs: dict, sequences: dict, progress) -> Trace:
    """The one pass of ``record`` and ``record_ids`` over the model's ``inputs``, kept as a ``Trace``."""
    pair = "decoder_input_ids" in inputs
    layout = block_layout(model)
    inputs = {k: v.to(model.device) for k, v in inputs.items()}
    kept = {s: BlockKeeper(len(paths)) for s, paths in layout.items() if s != "cross"}
    total, done, hooks = sum(k.layers for k in kept.values()), [0], []

    def step(*_) -> None:
        done[0] += 1
        progress(done[0], total)

    for stack, keeper in kept.items():
        for layer, path in enumerate(layout[stack]):
            block = model.model.get_submodule(path[0])
            hooks += [keeping_call(block, keeper.pre(layer)), (block, "post", keeper.post(layer))]
            hooks += [(block, "post", step)] if progress else []
    kept_outputs: dict[str, np.ndarray] = {}  # an encoder-decoder's decoder output and language-model head input
    hooks += pair_output_hooks(model, kept_outputs) if pair else []
    if progress:
        progress(0, total)
    extra = {"use_cache": False} if model.is_decoder or pair else {}
    with (torch.inference_mode(), threads_for_input(inputs["input_ids"].numel()), hooked(hooks),
          Recorder(model.model, queries_keys_only=True, shapes_only=True, sdpa=True) as rec):
        out = model.model(**inputs, return_dict=True, **extra)
    outputs = {name: value[0].float().numpy() for name, value in out.items() if isinstance(value, torch.Tensor)}
    outputs.update(kept_outputs)
    stacks = {}
    for stack, paths in layout.items():
        layers = rec.stacks.get(stack, {})
        if sorted(layers) != list(range(len(paths))) or any(c is None for k in kept.values() for c in k.calls):
            raise AnalysisError(f"{model.name}'s attention was not recorded in every layer, so the app cannot read it.")
        stacks[stack] = tuple(_info(layers[layer]) for layer in range(len(layers)))
    blocks = {s: StackCalls(tuple(p for p, _ in layout[s]), tuple(k.calls), tuple(k.stored), tuple(m for _, m in layout[s]))
              for s, k in kept.items()}
    return Trace(model.name, sequences, stacks, {s: k.residual for s, k in kept.items()}, blocks, weakref.ref(model.model),
                 outputs)


def _info(record: LayerRecord) -> LayerInfo:
    return LayerInfo(float(record.scaling), float(record.softcap) if record.softcap else None,
                     None if record.sliding_window is None else int(record.sliding_window),
                     int(record.queries.shape[1]), int(record.keys.shape[1]), int(record.queries.shape[3]),
                     bool(record.causal))
