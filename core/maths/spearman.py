"""The two-sided p-value of Spearman's ρ against "no relation": exact (every pairing) for small samples.

scipy's default p-value comes from a t approximation that breaks down for few items and |ρ| near 1 (ρ = −1 over
5 items gives 1.4e-24, where only 2 of the 5! orderings are that extreme: p = 2/120). Up to ``EXACT_UP_TO`` items
``scipy.stats.permutation_test`` (``permutation_type="pairings"``) enumerates every pairing of the two rankings;
above that the t approximation is used.
"""

from __future__ import annotations

import numpy as np

EXACT_UP_TO = 8  # 8! = 40,320 pairings, scored in one vectorised call


def spearman_p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Spearman's ρ of ``a`` and ``b`` (``[n]`` each, neither constant): the share of the n!
    pairings of their ranks with |ρ| at least the observed one when n ≤ ``EXACT_UP_TO``, scipy's t approximation
    otherwise."""
    from scipy.stats import permutation_test, rankdata, spearmanr  # noqa: PLC0415 - SciPy's import cost, only when asked

    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    n = len(a)
    if n > EXACT_UP_TO:
        return float(spearmanr(a, b).pvalue)
    ra, rb = rankdata(a) - (n + 1) / 2, rankdata(b) - (n + 1) / 2  # centred average ranks: ρ is their cosine
    scale = np.linalg.norm(ra) * np.linalg.norm(rb)

    def abs_rho(reordered_b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.abs((ra * reordered_b).sum(axis=axis)) / scale

    # One sample: "pairings" then reorders ``rb`` against the fixed ``ra``, all n! orders (two samples would be
    # sampled at random). |ρ| with alternative="greater" counts the pairings at least as extreme on either side;
    # scipy's two-sided rule doubles the smaller tail, which differs when ties make the null distribution asymmetric.
    result = permutation_test((rb,), abs_rho, permutation_type="pairings", vectorized=True, n_resamples=np.inf,
                              alternative="greater")
    return float(result.pvalue)
