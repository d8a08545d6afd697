"""Statistics of success rates: Wilson intervals, Fisher exact tests per task, and the
Cochran-Mantel-Haenszel test across tasks (the overall comparison that respects task strata).

Wilson and Fisher come from ``scipy.stats`` (``binomtest(...).proportion_ci(method="wilson")``,
``fisher_exact``); Benjamini-Hochberg from ``scipy.stats.false_discovery_control``. scipy has no
Cochran-Mantel-Haenszel test (and statsmodels, which has one, is not a dependency), so
:func:`cmh_test` implements the textbook statistic (Agresti, *Categorical Data Analysis*, 3rd ed.,
§6.4.2; with the continuity correction that R's ``mantelhaen.test`` applies by default) and uses
``scipy.stats.chi2`` for its p-value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["wilson_interval", "fisher_two_sided", "cmh_test", "CmhResult", "bh_adjust", "verdict"]


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval of a success rate (``scipy.stats.binomtest(k, n).proportion_ci``).

    Args:
        k: successes (int, 0 <= k <= n).
        n: episodes with a task outcome (int).
        confidence: coverage (default 0.95).
    Returns:
        ``(low, high)`` as fractions in [0, 1], or None when ``n == 0``.
    Raises:
        ValueError: ``k`` outside ``[0, n]``.
    """
    if n == 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"successes {k} outside [0, {n}]")
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def fisher_two_sided(k_a: int, n_a: int, k_b: int, n_b: int) -> float | None:
    """Two-sided Fisher exact test p-value of ``k_a/n_a`` vs ``k_b/n_b`` (``scipy.stats.fisher_exact``
    on ``[[k_a, n_a - k_a], [k_b, n_b - k_b]]``); None when either side has no episodes.
    E.g. 70/100 vs 73/100 gives p = 0.754 (the issue rounds it to 0.75)."""
    if n_a == 0 or n_b == 0:
        return None
    from scipy.stats import fisher_exact

    return float(fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]], alternative="two-sided").pvalue)


@dataclass(frozen=True)
class CmhResult:
    """Cochran-Mantel-Haenszel test over strata (tasks).

    Attributes:
        statistic: the chi-square statistic (1 degree of freedom), continuity corrected when asked.
        pvalue: two-sided p-value (``scipy.stats.chi2.sf``); 1.0 when no stratum is informative.
        common_odds_ratio: Mantel-Haenszel estimate of the common odds ratio of success, B vs A
            (``sum(d_i a'_i / n_i) / sum(b_i c'_i / n_i)``; inf/nan where undefined).
        strata_used: strata with >= 2 episodes and a non-degenerate margin.
    """

    statistic: float
    pvalue: float
    common_odds_ratio: float
    strata_used: int


def cmh_test(strata: list[tuple[int, int, int, int]], correction: bool = True) -> CmhResult:
    """Cochran-Mantel-Haenszel test that the success probability of A and B is equal in every stratum.

    Args:
        strata: one ``(k_a, n_a, k_b, n_b)`` per task (successes and episodes of arm A and arm B).
        correction: subtract 0.5 from ``|sum(k_a - E[k_a])|`` (Yates-style; R's default).
    Returns:
        :class:`CmhResult`. With table ``[[k_a, n_a-k_a], [k_b, n_b-k_b]]`` per stratum,
        ``E[k_a] = n_a * m1 / n`` and ``Var[k_a] = n_a n_b m1 m0 / (n^2 (n-1))`` where ``m1``/``m0``
        are the stratum's total successes/failures (Agresti §6.4.2).
    Raises:
        ValueError: a stratum with ``k`` outside ``[0, n]``.
    """
    from scipy.stats import chi2

    dev = var = num = den = 0.0
    used = 0
    for k_a, n_a, k_b, n_b in strata:
        if not (0 <= k_a <= n_a and 0 <= k_b <= n_b):
            raise ValueError(f"bad stratum {(k_a, n_a, k_b, n_b)}: successes must lie in [0, episodes]")
        n = n_a + n_b
        if n < 2:
            continue
        m1 = k_a + k_b
        m0 = n - m1
        v = n_a * n_b * m1 * m0 / (n * n * (n - 1))
        if v == 0:
            continue
        used += 1
        dev += k_a - n_a * m1 / n
        var += v
        # odds of success of B relative to A
        num += k_b * (n_a - k_a) / n
        den += k_a * (n_b - k_b) / n
    if used == 0:
        return CmhResult(0.0, 1.0, float("nan"), 0)
    a = abs(dev) - (0.5 if correction else 0.0)
    stat = max(a, 0.0) ** 2 / var
    ratio = num / den if den > 0 else (float("inf") if num > 0 else float("nan"))
    return CmhResult(float(stat), float(chi2.sf(stat, 1)), float(ratio), used)


def bh_adjust(pvalues: list[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (``scipy.stats.false_discovery_control``); None stays None."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if not idx:
        return out
    from scipy.stats import false_discovery_control

    adj = false_discovery_control([pvalues[i] for i in idx], method="bh")
    for i, q in zip(idx, adj):
        out[i] = float(q)
    return out


def verdict(diff: float | None, p: float | None, alpha: float) -> str:
    """``better`` / ``worse`` (B vs A, when ``p < alpha``) / ``no significant difference`` /
    ``no data`` (either side without episodes)."""
    if diff is None or p is None or (isinstance(p, float) and math.isnan(p)):
        return "no data"
    if p < alpha and diff > 0:
        return "better"
    if p < alpha and diff < 0:
        return "worse"
    return "no significant difference"
