"""The Queries and keys page's caches: one recorded pass over a corpus, one head's map per projection, and every
head's PCA thumbnail with its position order (all from the same pass: changing the head never runs the model)."""

from __future__ import annotations

import numpy as np

from core.attention_heads.qk_map import query_key_map, record_corpus
from core.attention_heads.qk_map_quality import nearest_key_agreement, position_order
from ui.cache import cached_model, in_model_turn, model_and_run, read_only, run_of
from ui.store import cached, stored

THUMBNAIL_POINTS = 300  # queries (and as many keys) drawn per small multiple


def recorded_layers(model_name: str, layer: int) -> tuple[int, ...] | None:
    """What one pass records: every layer of an encoder (the matrix view shows them all), else only ``layer``
    (a decoder's pass then stops after it)."""
    return None if not cached_model(model_name).is_decoder else (layer,)


def cached_corpus_queries_keys(model_name: str, texts: tuple[str, ...], max_tokens: int | None,
                               layers: tuple[int, ...] | None, progress=None):
    """``core.attention_heads.qk_map.record_corpus`` keyed by (model, texts, token limit, layers); ``progress(done, total)`` only
    when the model runs."""
    model, run = model_and_run(model_name, texts, max_tokens)
    return cached("qk-corpus", run,
                  lambda: in_model_turn(record_corpus, model, list(texts), max_tokens=max_tokens,
                                        layers=None if layers is None else set(layers), progress=progress),
                  (layers,))


def cached_query_key_map(model_name: str, texts: tuple[str, ...], max_tokens: int | None, layers, layer: int, head: int,
                         rotary: bool, method: str):
    """``core.attention_heads.qk_map.query_key_map`` of the cached pass (random state 0): a ``QueryKeyMap``."""
    corpus = cached_corpus_queries_keys(model_name, texts, max_tokens, layers)
    return cached("qk-maps", run_of(model_name, texts, max_tokens),
                  lambda: query_key_map(None, None, layer, head, method=method, rotary=rotary, corpus=corpus),
                  (layer, head, rotary, method))


def cached_agreement(model_name: str, texts: tuple[str, ...], max_tokens: int | None, layers, layer: int, head: int,
                     rotary: bool, method: str):
    """``core.attention_heads.qk_map.nearest_key_agreement`` of ``cached_query_key_map(...)``."""
    qmap = cached_query_key_map(model_name, texts, max_tokens, layers, layer, head, rotary, method)
    return cached("qk-agreements", run_of(model_name, texts, max_tokens), lambda: nearest_key_agreement(qmap),
                  (layer, head, rotary, method))


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

    return cached("qk-thumbnails", run_of(model_name, texts, max_tokens), compute, (shown, rotary, method))


def has_cached_maps(model_name: str, texts: tuple[str, ...], max_tokens: int | None, shown: tuple[int, ...], heads: int,
                    rotary: bool, method: str) -> bool:
    """Whether every head of ``shown`` already has its ``method`` map cached (so the matrix view can draw them)."""
    run = run_of(model_name, texts, max_tokens)
    return all(stored("qk-maps", run, (layer, head, rotary, method)) is not None
               for layer in shown for head in range(heads))


def query_key_map_if_cached(model_name: str, texts: tuple[str, ...], max_tokens: int | None, layer: int, head: int,
                            rotary: bool, method: str):
    """The ``QueryKeyMap`` ``cached_query_key_map`` made for these arguments, or None when it has not run."""
    return stored("qk-maps", run_of(model_name, texts, max_tokens), (layer, head, rotary, method))
