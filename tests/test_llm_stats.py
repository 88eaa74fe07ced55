"""iclgd.llm.stats: paired differences, the bootstrap interval, the minimum detectable effect, the
answers' spread and copy rate (plain NumPy inputs: no LM, no assets)."""

import jax
import numpy as np
import pytest
from scipy import stats

from iclgd import llm

KEY = jax.random.key(0)


def test_paired_differences_drop_unparsed_runs():
    t = np.array([1.0, 2.0, 3.0, 4.0])
    a = np.array([1.5, np.nan, 3.0, 2.0])
    b = np.array([1.0, 2.5, np.nan, 5.0])
    d = llm.paired_differences(t, a, b)
    np.testing.assert_allclose(d, [0.25 - 0.0, 4.0 - 1.0])  # runs 0 and 3 only
    with pytest.raises(ValueError, match="pred must have shape"):
        llm.paired_differences(t, a[:3], b)
    with pytest.raises(ValueError, match="truth must contain only finite"):
        llm.paired_differences(np.array([np.nan, 1.0, 1.0, 1.0]), a, b)


def test_bootstrap_ci_covers_the_mean_and_shrinks_with_n():
    x = np.asarray(jax.random.normal(jax.random.key(1), (400,)), np.float64) + 0.3
    lo, hi = llm.bootstrap_ci(x, KEY, n_boot=4000)
    assert lo < x.mean() < hi
    # the percentile interval is about mean +- 1.96 s / sqrt(n)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.1)
    lo4, hi4 = llm.bootstrap_ci(x[:25], KEY, n_boot=4000)
    assert hi4 - lo4 > 2.5 * (hi - lo)  # 16 times fewer values: about 4 times wider
    assert llm.bootstrap_ci(x, KEY, n_boot=4000) == (lo, hi)  # the key fixes it
    assert llm.bootstrap_ci(x, jax.random.key(2), n_boot=4000) != (lo, hi)
    narrow = llm.bootstrap_ci(x, KEY, n_boot=4000, level=0.5)
    assert lo < narrow[0] < narrow[1] < hi


def test_bootstrap_ci_bad_input():
    with pytest.raises(ValueError, match="x must hold at least 2 values"):
        llm.bootstrap_ci(np.ones(1), KEY)
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\)"):
        llm.bootstrap_ci(np.ones(3), KEY, level=1.0)
    with pytest.raises(TypeError, match="key must be"):
        llm.bootstrap_ci(np.ones(3), 0)
    with pytest.raises(ValueError, match="n_boot must be an integer >= 1"):
        llm.bootstrap_ci(np.ones(3), KEY, n_boot=0)


def test_min_detectable_effect_formula_and_power():
    assert llm.min_detectable_effect(1.0, 100) == pytest.approx(
        (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / 10
    )
    assert llm.min_detectable_effect(1.0, 100) == pytest.approx(0.2802, abs=1e-4)
    assert llm.min_detectable_effect(2.0, 400) == pytest.approx(llm.min_detectable_effect(1.0, 100))
    # simulated: a true effect of one MDE is detected by the z-test in about 80% of samples
    sd, n = 1.5, 64
    mde = llm.min_detectable_effect(sd, n)
    x = mde + sd * np.asarray(jax.random.normal(jax.random.key(3), (4000, n)), np.float64)
    z = x.mean(1) / (sd / np.sqrt(n))
    assert np.mean(np.abs(z) > stats.norm.ppf(0.975)) == pytest.approx(0.8, abs=0.03)
    with pytest.raises(ValueError, match=r"power must be in \(0, 1\)"):
        llm.min_detectable_effect(1.0, 10, power=0.0)
    with pytest.raises(ValueError, match="sd must be a finite number >= 0"):
        llm.min_detectable_effect(-1.0, 10)


def test_compare_paired_sign_and_tests():
    t = np.linspace(0, 5, 40)
    noise = np.asarray(jax.random.normal(jax.random.key(4), (40,)), np.float64)
    good, bad = t + 0.1 * noise, t + 1.0 * noise
    c = llm.compare_paired(t, good, bad, KEY, n_boot=2000)
    assert c["n"] == 40 and c["mean"] < 0 and c["ci_high"] < 0 and c["p_t"] < 1e-3
    assert c["mean"] == pytest.approx(np.mean((good - t) ** 2 - (bad - t) ** 2))
    assert c["mde"] == pytest.approx(llm.min_detectable_effect(c["sem"] * np.sqrt(40), 40))
    same = llm.compare_paired(t, good, good, KEY, n_boot=100)
    assert same["mean"] == 0 and np.isnan(same["p_t"]) and same["ci_low"] == same["ci_high"] == 0
    with pytest.raises(ValueError, match="at least 2 runs"):
        llm.compare_paired(t[:2], np.array([1.0, np.nan]), t[:2], KEY)


def test_answer_distribution_and_copy_rate():
    vals = np.array([3.0, 3.0, 3.0, np.nan, 2.5, 4.001])
    d = llm.answer_distribution(vals)
    assert d == {
        "parsed": 5,
        "distinct": 3,
        "mode": 3.0,
        "mode_share": 0.6,
        "sd": pytest.approx(np.std([3, 3, 3, 2.5, 4.0], ddof=1)),
    }
    assert llm.answer_distribution(np.full(3, np.nan))["parsed"] == 0
    shown = np.array([3.0, 1.0, 3.004, 2.0, 2.5, 0.0])
    assert llm.copy_rate(vals, shown) == pytest.approx(3 / 5)  # 3.00, 3.00 (3.004), 2.50
    assert np.isnan(llm.copy_rate(np.full(2, np.nan), np.ones(2)))
    with pytest.raises(ValueError, match="shown must have shape"):
        llm.copy_rate(vals, shown[:5])


def test_mse_skips_unparsed_answers_and_checks_shapes():
    from iclgd.llm import stats as st

    assert st.mse([1.0, float("nan"), 3.0], [0.0, 5.0, 1.0]) == 2.5
    assert np.isnan(st.mse([float("nan")], [1.0]))
    with pytest.raises(ValueError, match="truth"):
        st.mse([1.0, 2.0], [1.0])


def test_format_ci():
    from iclgd.llm import stats as st

    c = {"mean": 0.163, "ci_low": -0.314, "ci_high": 0.6249}
    assert st.format_ci(c) == "+0.16 [-0.31, +0.62]"
    with pytest.raises(TypeError, match="comparison"):
        st.format_ci((0.1, 0.2))
