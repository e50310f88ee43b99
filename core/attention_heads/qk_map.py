"""One head's queries and keys over a whole corpus on one 2-D map (AttentionViz, Yeh et al., IEEE VIS 2023).

One recorded pass over the corpus (``record_corpus``: the trace's recording pass,
``core.model.trace_layers.pass_queries_keys``, at sdpa's speed and stopped at the last layer asked for; no family needs
code of its own) keeps those layers' queries and keys. For one head, ``normalise`` then scales queries by
``c`` and keys by ``1 / c`` so their mean norms match (every dot product unchanged) and adds one vector to every
key so the keys' centroid is the queries' centroid (each query's softmax over its text's keys is unchanged: the
same number is added to all its logits). On that joint set of ``2N`` points a query lands near the keys it
attends to, and a projection (PCA, UMAP or t-SNE, Euclidean like the dot product) draws it. How faithful and how
ordered by position a map is: ``core.attention_heads.qk_map_quality``.

Shapes: ``N`` tokens of the corpus (special tokens included, texts one after another), ``d`` head size,
``Hq`` query heads, ``Hkv`` key/value heads; query head ``h`` reads key/value head ``h // (Hq / Hkv)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.errors import UserFacingError
from core.maths.projection import METHOD_NAMES, MIN_POINTS_NONLINEAR, UMAP_NEIGHBOURS, ProjectionError, distinct_points, run_isolated
from core.model.models import LoadedModel, threads_for_input
from core.model.recording import LayerRecord, is_recordable, rotate_back
from core.model.tokens import span_labels
from core.model.trace_layers import pass_queries_keys

# A map of more points is slow to draw and to project; texts past this many tokens are left out (``texts_used``).
MAX_CORPUS_TOKENS = 12_000
BATCH_SIZE = 8
METHODS = ("pca", "umap", "tsne")
UMAP_EPOCHS = 200


class QueryKeyMapError(UserFacingError, ValueError):
    """The corpus or the model cannot give a query-key map. The message is a sentence meant for the user."""


@dataclass(frozen=True, eq=False)
class CorpusLayer:
    """One layer of a recorded corpus pass.

    ``queries`` float32 ``[Hq, N, d]`` and ``keys`` ``[Hkv, N, d]`` as the dot product sees them (after rotary
    embedding and any q/k-norm); ``cos``/``sin`` float32 ``[N, r]`` the rotary tables of each token (None
    without rotary); ``keep`` bool ``[T_max, T_max]``: query position i may look at key position j of its own
    text (every text's mask is the top-left block of it); ``scaling`` and ``softcap`` as the model applies them.
    """

    queries: np.ndarray
    keys: np.ndarray
    cos: np.ndarray | None
    sin: np.ndarray | None
    keep: np.ndarray
    scaling: float
    softcap: float | None
    module: torch.nn.Module

    @property
    def kv_groups(self) -> int:
        return self.queries.shape[0] // self.keys.shape[0]

    @property
    def has_rotary(self) -> bool:
        return self.cos is not None and self.sin is not None

    def head(self, head: int, *, rotary: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(queries, keys)`` float32 ``[N, d]`` of query head ``head`` and the key head it reads; with
        ``rotary=False`` before the rotary embedding (the same as after for a model without one)."""
        q, k = self.queries[head], self.keys[head // self.kv_groups]
        if rotary or not self.has_rotary:
            return q, k
        record = LayerRecord(self.module, torch.tensor(q)[None, None], torch.tensor(k)[None, None], torch.empty(0),
                             None, None, self.scaling, self.softcap, None,
                             cos=torch.tensor(self.cos)[None], sin=torch.tensor(self.sin)[None])
        before_q, before_k = rotate_back(record.queries, record), rotate_back(record.keys, record)
        if before_q is None or before_k is None:
            return q, k
        return before_q[0, 0].numpy(), before_k[0, 0].numpy()


@dataclass(frozen=True, eq=False)
class CorpusQueriesKeys:
    """Queries and keys of every recorded layer over a corpus (see ``record_corpus``).

    ``tokens``: ``N`` readable token labels; ``text_index`` int ``[N]`` (texts in corpus order, contiguous);
    ``position`` int ``[N]`` (0 = the text's first token); ``starts`` int ``[texts_used + 1]``: text t is
    ``starts[t]:starts[t + 1]``; ``texts_used``: texts read (the first ones, up to ``MAX_CORPUS_TOKENS``);
    ``truncated``: how many of them were cut at the token limit.
    """

    model_name: str
    tokens: tuple[str, ...]
    text_index: np.ndarray
    position: np.ndarray
    starts: np.ndarray
    layers: dict[int, CorpusLayer]
    num_texts: int
    texts_used: int
    truncated: int

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)


def _keep_block(record: LayerRecord, row: int, t: int) -> np.ndarray:
    """bool ``[t, t]``: where query i of ``row`` may look at key j (a bool mask True, an additive one 0 there; no
    mask: every key, or the causal cells where sdpa skipped the mask, ``record.causal``)."""
    mask = record.mask
    if mask is None:
        return np.tril(np.ones((t, t), dtype=bool)) if record.causal else np.ones((t, t), dtype=bool)
    block = mask[min(row, mask.shape[0] - 1), 0]
    block = block.expand(block.shape[-1], block.shape[-1]) if block.shape[0] == 1 else block
    block = block[:t, :t]
    if block.dtype == torch.bool:
        return block.cpu().numpy()
    return (block > torch.finfo(block.dtype).min / 2).cpu().numpy()


def record_corpus(
    model: LoadedModel,
    texts: Sequence[str],
    *,
    layers: set[int] | None = None,
    max_tokens: int | None = None,
    max_corpus_tokens: int = MAX_CORPUS_TOKENS,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> CorpusQueriesKeys:
    """Run ``model`` once over ``texts`` (batched, padded on the right) and keep the queries and keys of ``layers``
    (None = all). Texts are read in order until ``max_corpus_tokens`` tokens (at least one text); each is cut at
    ``max_tokens`` (capped at the model's own limit). ``progress(done, total)`` after each batch.
    """
    if not is_recordable(model.model):
        raise QueryKeyMapError(
            f"{model.name} is not loaded through the app's recording attention, so its queries and keys cannot be read "
            "from one pass yet. This page works on recorded models such as SmolLM2-135M-Instruct and other Llama, "
            "Qwen, Mistral or Gemma decoders."
        )
    texts = [t for t in texts]
    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise QueryKeyMapError("Every document of the corpus needs some text.")
    tok = model.tokenizer
    limit = model.max_tokens if max_tokens is None else min(int(max_tokens), model.max_tokens)
    floor = tok.num_special_tokens_to_add(pair=False) + 1
    if limit < floor:
        raise QueryKeyMapError(f"The token limit is {limit}, but {model.name} adds {floor - 1} special tokens to every "
                               f"text, so it needs a limit of at least {floor} to read one token of it.")
    full_lengths = [len(ids) for ids in tok(texts, truncation=False)["input_ids"]]
    lengths = [min(n, limit) for n in full_lengths]
    used, total = 0, 0
    while used < len(texts) and (used == 0 or total + lengths[used] <= max_corpus_tokens):
        total += lengths[used]
        used += 1
    if total == 0:
        raise QueryKeyMapError("The tokenizer produced no tokens for these documents.")
    order = sorted(range(used), key=lambda i: -lengths[i])  # the longest first: its mask holds every other one
    per_text: dict[int, dict] = {}
    layer_parts: dict[int, dict] = {}
    keep_full: dict[int, np.ndarray] = {}
    done = 0
    for start in range(0, used, max(1, batch_size)):
        batch = order[start:start + batch_size]
        encoding = tok([texts[i] for i in batch], truncation=True, max_length=limit, padding=True,
                       return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt")
        inputs = {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}
        if "token_type_ids" in encoding and "token_type_ids" in tok.model_input_names:
            inputs["token_type_ids"] = encoding["token_type_ids"]
        inputs = {k: v.to(model.device) for k, v in inputs.items()}
        # layer l's queries and keys depend only on the layers before it: the pass stops at the last one wanted
        with threads_for_input(inputs["input_ids"].numel()):
            records = pass_queries_keys(model.model, inputs, layers)
        if not records:
            raise QueryKeyMapError(f"{model.name}'s pass recorded no attention layer, so it has no queries and keys to draw.")
        for row, index in enumerate(batch):
            t = int(encoding["attention_mask"][row].sum())
            ids = encoding["input_ids"][row, :t].tolist()
            per_text[index] = {"tokens": span_labels(
                texts[index], tok.convert_ids_to_tokens(ids), [tuple(o) for o in encoding["offset_mapping"][row, :t].tolist()],
                [bool(s) for s in encoding["special_tokens_mask"][row, :t].tolist()])}
            for layer, record in records.items():
                keep = _keep_block(record, row, t)
                if layer not in keep_full:
                    keep_full[layer] = keep  # the longest text's mask
                elif not np.array_equal(keep, keep_full[layer][:t, :t]):
                    raise QueryKeyMapError(f"Layer {layer} of {model.name} masks texts in ways that differ with their "
                                           "length, which this map cannot show.")
                parts = layer_parts.setdefault(layer, {"record": record, "q": {}, "k": {}, "cos": {}, "sin": {}})
                parts["q"][index] = record.queries[row, :, :t].float().cpu().numpy()
                parts["k"][index] = record.keys[row, :, :t].float().cpu().numpy()
                if record.cos is not None and record.sin is not None:
                    parts["cos"][index] = record.cos[min(row, record.cos.shape[0] - 1), :t].float().cpu().numpy()
                    parts["sin"][index] = record.sin[min(row, record.sin.shape[0] - 1), :t].float().cpu().numpy()
        done += len(batch)
        if progress is not None:
            progress(done, used)
    tokens = [label for i in range(used) for label in per_text[i]["tokens"]]
    sizes = np.array([len(per_text[i]["tokens"]) for i in range(used)])
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    text_index = np.repeat(np.arange(used), sizes)
    position = np.arange(len(tokens)) - starts[text_index]
    recorded = {}
    for layer, parts in sorted(layer_parts.items()):
        record = parts["record"]
        rotary = len(parts["cos"]) == used
        recorded[layer] = CorpusLayer(
            queries=np.ascontiguousarray(np.concatenate([parts["q"][i] for i in range(used)], axis=1)),
            keys=np.ascontiguousarray(np.concatenate([parts["k"][i] for i in range(used)], axis=1)),
            cos=np.concatenate([parts["cos"][i] for i in range(used)]) if rotary else None,
            sin=np.concatenate([parts["sin"][i] for i in range(used)]) if rotary else None,
            keep=keep_full[layer], scaling=float(record.scaling), softcap=record.softcap, module=record.module,
        )
    for array in (text_index, position, starts, *(a for lay in recorded.values() for a in (lay.queries, lay.keys, lay.keep))):
        array.setflags(write=False)
    return CorpusQueriesKeys(model.name, tuple(tokens), text_index, position, starts, recorded, len(texts), used,
                             sum(1 for i in range(used) if full_lengths[i] > limit))


@dataclass(frozen=True, eq=False)
class QueryKeyMap:
    """One head's joint query-key map over a corpus.

    ``queries`` / ``keys`` float32 ``[N, d]`` after the normalisation (``factor`` c: queries × c, keys / c, then
    ``shift`` ``[d]`` added to every key), so that ``softmax(scale · q·k)`` over a text's keys, with ``keep``
    (bool ``[T_max, T_max]``), is the head's attention (for a model without a soft-cap; ``attention`` applies
    the cap to the dot products before the shift, so it is exact for every model). ``coords`` float32 ``[2N, 2]``:
    the N queries first, then the N keys. ``tokens``, ``text_index`` ``[N]``, ``position`` ``[N]``, ``starts``
    as in ``CorpusQueriesKeys``.
    """

    layer: int
    head: int
    kv_head: int
    rotary: bool
    method: str
    queries: np.ndarray
    keys: np.ndarray
    scale: float
    softcap: float | None
    factor: float
    shift: np.ndarray
    coords: np.ndarray
    keep: np.ndarray
    tokens: tuple[str, ...]
    text_index: np.ndarray
    position: np.ndarray
    starts: np.ndarray

    @property
    def num_tokens(self) -> int:
        return self.queries.shape[0]

    def allowed_keys(self, query: int) -> np.ndarray:
        """int ``[K]``: the corpus indices of the keys ``query`` may look at (its own text, under the mask)."""
        start = int(self.starts[self.text_index[query]])
        t = int(self.starts[self.text_index[query] + 1]) - start
        return start + np.flatnonzero(self.keep[self.position[query], :t])

    def attention(self, query: int) -> tuple[np.ndarray, np.ndarray]:
        """``(key indices [K], weights [K])``: the head's attention of ``query`` over its own text (float64)."""
        keys = self.allowed_keys(query)
        q, k = self.queries[query].astype(np.float64), self.keys[keys].astype(np.float64) - self.shift
        scaled = (k @ q) * self.scale
        if self.softcap:
            scaled = np.tanh(scaled / self.softcap) * self.softcap
        weights = np.exp(scaled - scaled.max())
        return keys, weights / weights.sum()


def normalise(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """AttentionViz's normalisation of ``queries`` and ``keys`` ``[N, d]``: ``(queries', keys', c, shift)`` with
    ``queries' = c · queries`` and ``keys' = keys / c + shift``, ``c = sqrt(mean |k| / mean |q|)`` (equal mean norms,
    dot products unchanged) and ``shift`` the vector that moves the keys' centroid onto the queries' centroid."""
    q, k = np.asarray(queries, dtype=np.float64), np.asarray(keys, dtype=np.float64)
    q_norm, k_norm = float(np.linalg.norm(q, axis=1).mean()), float(np.linalg.norm(k, axis=1).mean())
    factor = float(np.sqrt(k_norm / q_norm)) if q_norm > 0 and k_norm > 0 else 1.0
    q, k = q * factor, k / factor
    shift = q.mean(axis=0) - k.mean(axis=0)
    return q.astype(np.float32), (k + shift).astype(np.float32), factor, shift


def query_key_map(
    model: LoadedModel | None,
    texts: Sequence[str] | None,
    layer: int,
    head: int,
    *,
    method: str = "pca",
    rotary: bool = True,
    max_tokens: int | None = None,
    corpus: CorpusQueriesKeys | None = None,
    random_state: int = 0,
) -> QueryKeyMap:
    """The joint query-key map of ``head`` of ``layer`` over ``texts`` (see ``QueryKeyMap``).

    ``rotary=False`` uses queries and keys before the rotary embedding (what a model without it would compare).
    ``corpus``: a ``record_corpus`` result with ``layer`` in it, so that no model runs (``model`` and ``texts``
    may then be None). ``method`` in ``METHODS``; the projection is deterministic for a fixed ``random_state``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")
    if corpus is None or layer not in corpus.layers:
        corpus = record_corpus(model, texts, layers={layer}, max_tokens=max_tokens)
    recorded = corpus.layers[layer]
    if not 0 <= head < recorded.queries.shape[0]:
        raise QueryKeyMapError(f"Layer {layer} has {recorded.queries.shape[0]} heads, counted from 0; there is no head {head}.")
    raw_q, raw_k = recorded.head(head, rotary=rotary)
    queries, keys, factor, shift = normalise(raw_q, raw_k)
    coords = project_points(np.concatenate([queries, keys]), method, random_state)
    for array in (queries, keys, coords, shift):
        array.setflags(write=False)
    return QueryKeyMap(layer, head, head // recorded.kv_groups, rotary and recorded.has_rotary, method, queries, keys,
                       recorded.scaling, recorded.softcap, factor, shift, coords, recorded.keep, corpus.tokens,
                       corpus.text_index, corpus.position, corpus.starts)


def project_points(points: np.ndarray, method: str = "pca", random_state: int = 0) -> np.ndarray:
    """float32 ``[M, 2]`` of ``points`` ``[M, d]`` in Euclidean distance (the dot product's geometry, unlike the
    cosine maps of ``core.maths.projection``). Identical rows share one position; UMAP and t-SNE need
    ``MIN_POINTS_NONLINEAR`` distinct points. t-SNE runs in a helper process (``core.maths.projection.run_isolated``)."""
    x = np.asarray(points, dtype=np.float32)
    if not np.isfinite(x).all():
        raise ProjectionError("Some of these vectors contain infinite or undefined numbers, so they cannot be drawn.")
    distinct = distinct_points(x, "pca")
    out = np.zeros((x.shape[0], 2), dtype=np.float32)
    if distinct.count < 2:
        return out
    unique = x[distinct.first]
    if method == "pca":
        from sklearn.decomposition import PCA  # noqa: PLC0415 - scikit-learn's import cost, only when asked

        components = min(2, unique.shape[0] - 1, unique.shape[1])
        placed = PCA(n_components=components, svd_solver="full").fit_transform(unique)
    elif distinct.count < MIN_POINTS_NONLINEAR:
        raise ProjectionError(f"{METHOD_NAMES[method]} needs at least {MIN_POINTS_NONLINEAR} different points "
                              f"(there are {distinct.count}); choose PCA.")
    elif method == "umap":
        placed = _umap_euclidean(unique, random_state)
    else:
        placed = run_isolated("core.attention_heads.qk_map:_tsne_euclidean", unique, random_state, what="t-SNE")
    out[:, :placed.shape[1]] = np.asarray(placed, dtype=np.float32)[distinct.group]
    return out


def _umap_euclidean(x: np.ndarray, random_state: int) -> np.ndarray:
    import umap  # noqa: PLC0415 - UMAP and numba take seconds to import: only when asked

    # 200 epochs, umap-learn's own choice above 10,000 points, for every size: a corpus map has thousands
    reducer = umap.UMAP(n_components=2, n_neighbors=min(UMAP_NEIGHBOURS, x.shape[0] - 1), metric="euclidean",
                        random_state=random_state, n_jobs=1, n_epochs=UMAP_EPOCHS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(reducer.fit_transform(x), dtype=np.float32)


def _tsne_euclidean(x: np.ndarray, random_state: int) -> np.ndarray:
    from sklearn.manifold import TSNE  # noqa: PLC0415 - scikit-learn's import cost, only when asked

    tsne = TSNE(n_components=2, perplexity=min(30.0, (x.shape[0] - 1) / 3), init="pca", random_state=random_state)
    return np.asarray(tsne.fit_transform(x), dtype=np.float32)
