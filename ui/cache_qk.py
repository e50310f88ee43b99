"""The Queries and keys page's caches: one recorded pass over a corpus, one head's map per projection, and every
head's PCA thumbnail with its position order (all from the same pass: changing the head never runs the model)."""

from __future__ import annotations

import numpy as np

from core.qk_map import query_key_map, record_corpus
from core.qk_measures import nearest_key_agreement, position_order
from ui.cache import bounded_store, cached_model, in_model_turn, read_only

# SmolLM2, one layer of the 3,000-token sample corpus: 9 MB; MiniLM, all 6 layers: 55 MB. 12,000 tokens at most.
MAX_CORPUS_PASSES = 6
MAX_CORPUS_PASS_BYTES = 600_000_000
MAX_MAPS = 64
MAX_MAP_BYTES = 200_000_000
THUMBNAIL_POINTS = 300  # queries (and as many keys) drawn per small multiple


def recorded_layers(model_name: str, layer: int) -> tuple[int, ...] | None:
    """What one pass records: every layer of an encoder (the matrix view shows them all), else only ``layer``
    (a decoder's pass then stops after it)."""
    return None if not cached_model(model_name).is_decoder else (layer,)


def cached_corpus_queries_keys(model_name: str, texts: tuple[str, ...], max_tokens: int | None,
                               layers: tuple[int, ...] | None, progress=None):
    """``core.qk_map.record_corpus`` keyed by (model, texts, token limit, layers); ``progress(done, total)`` only
    when the model runs."""
    store = bounded_store("qk-corpus", MAX_CORPUS_PASSES, MAX_CORPUS_PASS_BYTES)
    return store.get_or_compute(
        (model_name, texts, max_tokens, layers),
        lambda: in_model_turn(record_corpus, cached_model(model_name), list(texts), max_tokens=max_tokens,
                              layers=None if layers is None else set(layers), progress=progress))


def cached_query_key_map(model_name: str, texts: tuple[str, ...], max_tokens: int | None, layers, layer: int, head: int,
                         rotary: bool, method: str):
    """``core.qk_map.query_key_map`` of the cached pass (random state 0): a ``QueryKeyMap``."""
    corpus = cached_corpus_queries_keys(model_name, texts, max_tokens, layers)
    return bounded_store("qk-maps", MAX_MAPS, MAX_MAP_BYTES).get_or_compute(
        (model_name, texts, max_tokens, layer, head, rotary, method),
        lambda: query_key_map(None, None, layer, head, method=method, rotary=rotary, corpus=corpus))


def cached_agreement(model_name: str, texts: tuple[str, ...], max_tokens: int | None, layers, layer: int, head: int,
                     rotary: bool, method: str):
    """``core.qk_map.nearest_key_agreement`` of ``cached_query_key_map(...)``."""
    qmap = cached_query_key_map(model_name, texts, max_tokens, layers, layer, head, rotary, method)
    return bounded_store("qk-agreements", MAX_MAPS, 1_000_000).get_or_compute(
        (model_name, texts, max_tokens, layer, head, rotary, method), lambda: nearest_key_agreement(qmap))


def cached_thumbnails(model_name: str, texts: tuple[str, ...], max_tokens: int | None, layers, shown: tuple[int, ...],
                      rotary: bool, method: str):
    """For every head of the layers ``shown``: ``(layer, head, query_xy [n, 2], key_xy [n, 2], position order)``,
    the same ``n`` ≤ ``THUMBNAIL_POINTS`` tokens drawn in every panel (evenly spaced over the corpus); the order is
    measured on all points. ``method`` is PCA, or a method whose maps are already cached (never computed here)."""
    corpus = cached_corpus_queries_keys(model_name, texts, max_tokens, layers)

    def compute():
        n = corpus.num_tokens
        drawn = np.unique(np.linspace(0, n - 1, min(n, THUMBNAIL_POINTS)).round().astype(int))
        positions = np.concatenate([corpus.position, corpus.position])
        panels = []
        for layer in shown:
            for head in range(corpus.layers[layer].queries.shape[0]):
                coords = cached_query_key_map(model_name, texts, max_tokens, layers, layer, head, rotary, method).coords
                panels.append((layer, head, read_only(coords[drawn].copy()), read_only(coords[n + drawn].copy()),
                               position_order(coords, positions)))
        return panels

    return bounded_store("qk-thumbnails", 16, MAX_MAP_BYTES).get_or_compute(
        (model_name, texts, max_tokens, shown, rotary, method), compute)


def has_cached_maps(model_name: str, texts: tuple[str, ...], max_tokens: int | None, shown: tuple[int, ...], heads: int,
                    rotary: bool, method: str) -> bool:
    """Whether every head of ``shown`` already has its ``method`` map cached (so the matrix view can draw them)."""
    store = bounded_store("qk-maps", MAX_MAPS, MAX_MAP_BYTES)
    return all(store.get((model_name, texts, max_tokens, layer, head, rotary, method)) is not None
               for layer in shown for head in range(heads))
