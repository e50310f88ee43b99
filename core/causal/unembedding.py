"""A vector of the residual stream read in the vocabulary: through a causal language model's final norm and
unembedding. The Information flow page reads a node (its logit lens, ``lens_logits``) and what a head, an MLP or a
neuron wrote there (``written_logits``, the norm's scale frozen as in direct logit attribution)."""

from __future__ import annotations

import numpy as np
import torch

from core.causal.logit_attribution import frozen_norm
from core.model.tokens import decoded_tokens, readable_token
from core.outputs.causal_lm import causal_parts


def unembedding_of(lm) -> tuple[torch.nn.Module, torch.Tensor]:
    """``(final norm, W_U [V, D])`` of a causal language model (``core.outputs.predictions.LanguageModel``); raises
    ``UnsupportedArchitecture`` (a sentence) for other layouts."""
    parts = causal_parts(lm)
    return parts.final_norm, parts.unembedding.weight.detach().float()


def written_logits(lm, write: torch.Tensor, final_residual: torch.Tensor) -> np.ndarray:
    """``[V]``: what ``write`` ``[D]`` (a head's or an MLP's output at one position) adds to each logit there, through
    the final norm with its scale frozen at that position's last residual ``final_residual`` ``[D]`` and the
    unembedding (the norm's shift and the head's bias belong to no part and are left out, as in direct logit
    attribution)."""
    norm, unembedding = unembedding_of(lm)
    frozen, _shift = frozen_norm(norm, final_residual.float())
    with torch.inference_mode():
        return (frozen(write.double()).float() @ unembedding.T).numpy()  # float32: a copy of W_U in float64 is slow


def lens_logits(lm, residual: torch.Tensor) -> np.ndarray:
    """``[V]``: the logit lens of one residual ``[D]``: the final norm, then the unembedding."""
    norm, unembedding = unembedding_of(lm)
    with torch.inference_mode():
        return (norm(residual.float()[None])[0] @ unembedding.T).numpy()


def top_tokens(lm, logits: np.ndarray, k: int = 5, *, lowest: bool = False) -> list[tuple[str, float]]:
    """The ``k`` highest (``lowest``: most negative) entries of ``logits`` ``[V]`` as ``(label, value)``, each token
    written by the app's one rule (``core.model.tokens.readable_token``)."""
    picked = np.argsort(logits)[:k] if lowest else np.argsort(logits)[::-1][:k]
    return list(zip([readable_token(t) for t in decoded_tokens(lm.tokenizer, picked.tolist())], map(float, logits[picked])))
