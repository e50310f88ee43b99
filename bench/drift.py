"""Drift: the page's pipeline on the sample corpus vs padding every document to the model maximum.

The pipeline (``core.representations.drift.embed_corpus``) sorts documents by length and pads each batch
only to its longest document. The alternative pads every document to the model's maximum
(512 tokens for all-MiniLM-L6-v2), as a naive ``padding="max_length"`` call does. Both use
the same batch size, no attention weights, and give the same mean-pooled vectors.
Run with ``python -m bench drift``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from core.model.models import load_model
from core.representations.corpus import sample_corpus
from core.representations.drift import embed_corpus

BATCH_SIZE = 16
REPEATS = 2


def _padded_to_maximum(model, texts: list[str]) -> np.ndarray:
    """Mean-pooled (attention-mask weighted) hidden states ``[N, L + 1, D]``, every batch padded to ``model.max_tokens``."""
    pooled = []
    for start in range(0, len(texts), BATCH_SIZE):
        encoding = model.tokenizer(
            texts[start : start + BATCH_SIZE],
            padding="max_length",
            truncation=True,
            max_length=model.max_tokens,
            return_tensors="pt",
        )
        with torch.inference_mode():
            out = model.model(**encoding, output_hidden_states=True)
        hidden = torch.stack(out.hidden_states, dim=1)  # [B, L + 1, T, D]
        mask = encoding["attention_mask"][:, None, :, None].float()
        pooled.append(((hidden * mask).sum(2) / mask.sum(2)).numpy())
    return np.concatenate(pooled)


def _best_time(run) -> tuple[float, object]:
    times, result = [], None
    for _ in range(REPEATS):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> dict:
    model = load_model()
    texts = [doc.text for doc in sample_corpus()]
    embed_corpus(model, texts[:4], batch_size=BATCH_SIZE)  # warm-up
    dynamic_s, embeddings = _best_time(lambda: embed_corpus(model, texts, batch_size=BATCH_SIZE))
    padded_s, padded = _best_time(lambda: _padded_to_maximum(model, texts))
    real_tokens = int(embeddings.num_tokens.sum())
    result = {
        "model": model.name,
        "documents": len(texts),
        "batch_size": BATCH_SIZE,
        "torch_threads": torch.get_num_threads(),
        "real_tokens": real_tokens,
        "tokens_padded_to_maximum": len(texts) * model.max_tokens,
        "dynamic_padding_seconds": round(dynamic_s, 2),
        "pad_to_maximum_seconds": round(padded_s, 2),
        "speed_up": round(padded_s / dynamic_s, 1),
        "max_abs_difference_of_mean_pooled_vectors": float(np.abs(embeddings.pooled["mean"] - padded).max()),
    }
    for key, value in result.items():
        print(f"{key:>44}: {value}")
    return result


if __name__ == "__main__":
    main()
