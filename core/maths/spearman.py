"""The two-sided p-value of Spearman's ρ against "no relation": exact (every permutation) for small samples.

scipy's default p-value comes from a t approximation that breaks down for few items and |ρ| near 1 (ρ = −1 over
5 items gives 1.4e-24, where only 2 of the 5! orderings are that extreme: p = 2/120). Up to ``EXACT_UP_TO`` items
every pairing of the two rankings is enumerated; above that the t approximation is used.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np

EXACT_UP_TO = 8  # 8! = 40,320 orderings: a few milliseconds
_TOLERANCE = 1e-12  # orderings as extreme as the observed one, up to rounding


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata  # noqa: PLC0415 - SciPy's import cost, only when asked

    return rankdata(x)  # average ranks for ties


def spearman_p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Spearman's ρ of ``a`` and ``b`` (``[n]`` each, neither constant): the share of the n!
    pairings of their ranks with |ρ| at least the observed one when n ≤ ``EXACT_UP_TO``, scipy's t approximation
    otherwise."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    n = len(a)
    if n > EXACT_UP_TO:
        from scipy.stats import spearmanr  # noqa: PLC0415 - SciPy's import cost, only when asked

        return float(spearmanr(a, b).pvalue)
    ra, rb = _ranks(a) - (n + 1) / 2, _ranks(b) - (n + 1) / 2  # centred: ρ is their cosine
    orders = np.array(list(permutations(range(n))))  # [n!, n]
    rhos = (rb[orders] @ ra) / (np.linalg.norm(ra) * np.linalg.norm(rb))  # [n!]
    observed = abs(float(ra @ rb) / (np.linalg.norm(ra) * np.linalg.norm(rb)))
    return float(np.mean(np.abs(rhos) >= observed - _TOLERANCE))
