"""Queries and keys: one head's joint map over the bundled sample corpus (issue 38's figures).

For each bundled model whose attention is recorded (``core.model.recording.is_recordable``): the recorded pass over the
corpus (one layer, and every layer), the normalisation and PCA of one head, the nearest-key figure, UMAP (after a
first call that compiles it) and every head of one layer with PCA and its position order (the matrix view). Best of
``REPEATS`` where cheap. Run with ``python -m bench qk_map``.
"""

from __future__ import annotations

import time

import numpy as np

REPEATS = 3
MODELS = ("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct")


def timed(run) -> tuple[float, object]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def best_of(repeats: int, run) -> float:
    return min(timed(run)[0] for _ in range(repeats))


def main() -> dict:
    from core.attention_heads.qk_map import query_key_map, record_corpus
    from core.attention_heads.qk_map_quality import nearest_key_agreement, position_order
    from core.model.models import load_model
    from core.model.recording import is_recordable
    from core.representations.corpus import sample_corpus

    texts = [doc.text for doc in sample_corpus()]
    results = {}
    for name in MODELS:
        model = load_model(name)
        if not is_recordable(model.model):
            print(f"{name}: not recorded on this code, skipped")
            results[name] = None
            continue
        layer = model.num_layers // 2
        row = {"layer": layer}
        row["pass_one_layer_s"], corpus = timed(lambda: record_corpus(model, texts, layers={layer}))
        row["pass_first_layer_s"] = best_of(1, lambda: record_corpus(model, texts, layers={0}))
        row["pass_every_layer_s"] = best_of(1, lambda: record_corpus(model, texts))
        row["tokens"], row["points"] = corpus.num_tokens, 2 * corpus.num_tokens
        query_key_map(None, None, layer, 0, corpus=corpus)  # imports scikit-learn
        row["pca_s"] = best_of(REPEATS, lambda: query_key_map(None, None, layer, 0, corpus=corpus))
        qmap = query_key_map(None, None, layer, 0, corpus=corpus)
        row["agreement_s"], agreement = timed(lambda: nearest_key_agreement(qmap))
        row["agreement_on_map"], row["agreement_in_space"], row["chance"] = agreement.on_map, agreement.in_space, agreement.chance
        row["umap_first_s"] = best_of(1, lambda: query_key_map(None, None, layer, 0, method="umap", corpus=corpus))
        row["umap_s"] = best_of(1, lambda: query_key_map(None, None, layer, 1, method="umap", corpus=corpus))
        positions = np.concatenate([corpus.position, corpus.position])

        def matrix():
            return [position_order(query_key_map(None, None, layer, h, corpus=corpus).coords, positions)
                    for h in range(model.num_heads)]

        row["matrix_pca_s"] = best_of(1, matrix)
        for key, value in row.items():
            print(f"{name}: {key} = {value:.3f}" if isinstance(value, float) else f"{name}: {key} = {value}")
        results[name] = row
    return results
