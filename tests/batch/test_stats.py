"""Wilson, Fisher, CMH and BH against scipy and against values computed by hand."""

import math

import pytest
from scipy import stats as ss

from rpent.batch.stats import bh_adjust, cmh_test, fisher_two_sided, verdict, wilson_interval


def test_wilson_matches_the_formula():
    lo, hi = wilson_interval(70, 100)
    # Wilson score interval by hand: (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)
    z, n, p = ss.norm.ppf(0.975), 100, 0.7
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert lo == pytest.approx((centre - half) / (1 + z * z / n), abs=1e-9)
    assert hi == pytest.approx((centre + half) / (1 + z * z / n), abs=1e-9)
    assert wilson_interval(0, 0) is None
    assert wilson_interval(2, 2)[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outside"):
        wilson_interval(3, 2)


def test_seed_comparison_is_not_significant():
    p = fisher_two_sided(70, 100, 73, 100)
    assert p == pytest.approx(ss.fisher_exact([[70, 30], [73, 27]]).pvalue)
    assert p == pytest.approx(0.7542, abs=1e-4)
    assert verdict(3.0, p, 0.05) == "no significant difference"
    assert verdict(-40.0, 0.001, 0.05) == "worse" and verdict(40.0, 0.001, 0.05) == "better"
    assert fisher_two_sided(1, 0, 2, 3) is None and verdict(None, None, 0.05) == "no data"


def test_cmh_against_a_hand_computed_value():
    strata = [(2, 5, 4, 5), (1, 4, 3, 4)]
    # by hand: E[k_a] = 3 and 2, deviations -1 and -1; Var = 5*5*6*4/(10^2*9) = 2/3 and 4*4*4*4/(8^2*7) = 4/7
    var = 2 / 3 + 4 / 7
    corrected, plain = cmh_test(strata), cmh_test(strata, correction=False)
    assert corrected.statistic == pytest.approx((2 - 0.5) ** 2 / var)  # 1.8173
    assert plain.statistic == pytest.approx(4 / var)  # 3.2308
    assert corrected.pvalue == pytest.approx(math.erfc(math.sqrt(corrected.statistic / 2)))  # chi2(1) tail
    # Mantel-Haenszel odds ratio B vs A: (4*3/10 + 3*3/8) / (2*1/10 + 1*1/8)
    assert corrected.common_odds_ratio == pytest.approx(2.325 / 0.325)
    assert corrected.strata_used == 2


def test_cmh_degenerate_strata_and_single_stratum():
    # strata with no variance (all successes) carry no information
    assert cmh_test([(5, 5, 5, 5)]).pvalue == 1.0 and cmh_test([]).strata_used == 0
    # one stratum without correction equals Pearson's chi-square times (n-1)/n
    k_a, n_a, k_b, n_b = 3, 10, 8, 10
    chi2 = ss.chi2_contingency([[k_a, n_a - k_a], [k_b, n_b - k_b]], correction=False).statistic
    assert cmh_test([(k_a, n_a, k_b, n_b)], correction=False).statistic == pytest.approx(chi2 * 19 / 20)
    with pytest.raises(ValueError, match="bad stratum"):
        cmh_test([(4, 3, 1, 2)])


def test_bh_adjust_matches_scipy_and_keeps_none():
    ps = [0.01, None, 0.04, 0.03, 0.5]
    got = bh_adjust(ps)
    want = ss.false_discovery_control([0.01, 0.04, 0.03, 0.5])
    assert got[1] is None and [got[0], got[2], got[3], got[4]] == pytest.approx(list(want))
