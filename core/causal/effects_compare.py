"""Beside the knock-out map: attention to a token, rank correlation, sentence cosine, and a language
model's prediction before and after a knock-out (importable from ``core.causal.effects`` too)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from core.causal.effects import Method, Target, ablation, check_measure, encode, logits_at, network, resolve_target
from core.causal.token_attribution import Attribution
from core.maths.spearman import spearman_p_value
from core.model.analysis import Analysis
from core.model.tokens import decoded_tokens
from core.outputs.predictions import LanguageModel


def attention_to_token(analysis: Analysis, token: int) -> np.ndarray:
    """float32 ``[layers, heads]``: the attention each head gives key ``token``, averaged over the
    queries that are not special tokens (and, for a decoder, that can see it: queries at or after it)."""
    if analysis.attentions is None:
        raise ValueError("this Analysis was computed without attentions")
    if not 0 <= token < analysis.num_tokens:
        raise ValueError(f"token must be in 0..{analysis.num_tokens - 1}, got {token}")
    queries = ~analysis.special_mask
    if analysis.is_decoder:
        queries &= np.arange(analysis.num_tokens) >= token
    if not queries.any():
        queries = np.ones(analysis.num_tokens, dtype=bool)
        if analysis.is_decoder:
            queries &= np.arange(analysis.num_tokens) >= token
    return analysis.attentions[:, :, queries, token].mean(axis=-1).astype(np.float32)


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's ρ between two sets of numbers, with its two-sided p-value against no relation (ρ = 0) and ``n``."""

    rho: float
    p_value: float
    n: int


def rank_correlation(a: np.ndarray, b: np.ndarray) -> RankCorrelation:
    """Spearman rank correlation of ``a`` and ``b`` (flattened, same size) with an exact p-value for few items
    (``core.maths.spearman``); NaN when either is constant."""
    from scipy.stats import spearmanr  # noqa: PLC0415 - SciPy's import cost, only when asked

    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"{a.shape} vs {b.shape}")
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return RankCorrelation(float("nan"), float("nan"), len(a))
    return RankCorrelation(float(spearmanr(a, b).statistic), spearman_p_value(a, b), len(a))


def correlation_sentence(rc: RankCorrelation, what: str) -> str:
    """A markdown sentence about Spearman's ρ (``core.causal.effects_compare.RankCorrelation``) written from its
    numbers, with the chance level (ρ = 0) and its p-value. ``what`` is markdown already (escaped by the caller)."""
    if np.isnan(rc.rho):
        return f"The rank correlation of {what} is undefined here: one of them is the same for every item."
    strength = "no clear" if abs(rc.rho) < 0.2 else "a weak" if abs(rc.rho) < 0.4 else "a moderate" if abs(rc.rho) < 0.7 else "a strong"
    direction = "" if abs(rc.rho) < 0.2 else " positive" if rc.rho > 0 else " negative"
    chance = ("could easily arise by chance (p ≥ 0.05)" if rc.p_value >= 0.05
              else f"would be unlikely by chance (p = {rc.p_value:.2g})")
    return (f"Spearman's ρ of {what}: **{rc.rho:+.2f}** over {rc.n} items, {strength}{direction} relation "
            f"(ρ = 0 means none; ρ = 1 the same order). A ρ this far from 0 {chance}.")



def sentence_cosine(original: Analysis, ablated: Analysis) -> float:
    """Cosine between the two runs' sentence embeddings (mean of the last hidden state over the tokens)."""
    a = original.hidden_states[-1].astype(np.float64).mean(axis=0)
    b = ablated.hidden_states[-1].astype(np.float64).mean(axis=0)
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))


def default_token(labels: list[str], special_mask: np.ndarray) -> int:
    """The token the importance map's picker starts at: the longest non-special token (the last of equals), or the
    longest token when every one is special."""
    candidates = [i for i in range(len(labels)) if not special_mask[i]] or list(range(len(labels)))
    return max((len(labels[i]), i) for i in candidates)[1]


def default_word(shared: list[str], chosen: str | None) -> str:
    """The word of ``shared`` (two texts' common words, non-empty) compared across a knock-out: ``chosen`` where it
    is one of them, else the longest (the last of equals)."""
    if chosen in shared:
        return chosen
    longest = max(len(word) for word in shared)
    return [word for word in shared if len(word) == longest][-1]


@dataclass(frozen=True)
class ImportanceSummary:
    """``top``: the ``k`` largest effects as ``(layer, head, effect)``, largest first; ``median``: over every head."""

    top: list[tuple[int, int, float]]
    median: float


def importance_summary(importance: np.ndarray, k: int = 5) -> ImportanceSummary:
    """The largest effects of ``importance`` ``[layers, heads]`` and its median."""
    flat = np.asarray(importance, dtype=np.float64).ravel()
    heads = importance.shape[1]
    order = np.argsort(flat, kind="stable")[::-1][:k]
    return ImportanceSummary([(*divmod(int(i), heads), float(flat[i])) for i in order], float(np.median(flat)))


def attribution_correlations(integrated: Attribution, simple: Attribution, rollout: np.ndarray
                             ) -> tuple[RankCorrelation, RankCorrelation] | None:
    """Spearman's ρ of |integrated gradients| with attention ``rollout`` (``[T]``, ``rollout_to_tokens``) and with
    |gradient × input| over the non-special tokens (and not a kept first token, whose score is 0 by construction);
    None with fewer than three such tokens."""
    keep = ~integrated.special_mask
    keep[0] &= not integrated.first_token_kept
    if keep.sum() < 3:
        return None
    scores = np.abs(integrated.scores[keep])
    return (rank_correlation(scores, np.asarray(rollout)[keep]), rank_correlation(scores, np.abs(simple.scores[keep])))


@dataclass(frozen=True, eq=False)
class TargetChange:
    """A language model's prediction at the target position before and after an ablation.

    ``before_ids``, ``after_ids``: int ``[k]``; ``before_probs``, ``after_probs``: ``[k]``, best first;
    ``before_candidates``, ``after_candidates``: those ids decoded; ``target_logp_before`` and
    ``target_logp_after``: log p(target) in the two runs (natural log).
    """

    target: Target
    before_ids: np.ndarray
    before_probs: np.ndarray
    before_candidates: list[str]
    after_ids: np.ndarray
    after_probs: np.ndarray
    after_candidates: list[str]
    target_logp_before: float
    target_logp_after: float

    @property
    def logp_change(self) -> float:
        """log p(target) after − before (negative: the ablation made the target less likely)."""
        return self.target_logp_after - self.target_logp_before

    @property
    def logp_drop(self) -> float:
        """log p(target) before − after: the page's effect (positive: the ablation made the target less likely)."""
        return self.target_logp_before - self.target_logp_after


def target_change(
    model: LanguageModel,
    text: str,
    heads: Iterable[tuple[int, int]],
    *,
    method: Method = "zero",
    target: str | int | None = None,
    k: int = 5,
    max_tokens: int | None = None,
) -> TargetChange:
    """Top-``k`` predictions and log p(``target``) at the target position (see ``Target``), with and without ``heads`` ablated."""
    net = network(model)
    check_measure(net, "target")
    inputs = encode(net, text, max_tokens)
    resolved = resolve_target(net, inputs, target)
    runs = []
    with torch.inference_mode():
        for chosen in ([], list(heads)):
            with ablation(model, chosen, method=method):
                logp = logits_at(net, resolved.position, **inputs)[0].double().log_softmax(-1)
            best = logp.topk(max(1, min(int(k), logp.shape[-1])))
            ids = best.indices.cpu().numpy()
            candidates = decoded_tokens(net.tokenizer, ids)
            runs.append((ids, best.values.exp().cpu().numpy(), candidates, float(logp[resolved.token_id])))
    (b_ids, b_probs, b_cands, b_logp), (a_ids, a_probs, a_cands, a_logp) = runs
    return TargetChange(resolved, b_ids, b_probs, b_cands, a_ids, a_probs, a_cands, b_logp, a_logp)
