"""Statistics of §5.3's paired runs: differences of squared errors, their bootstrap interval, the
smallest effect the runs can detect, and what the answers look like.

Every arm of :func:`~iclgd.llm.run_refinement` answers the same ``R`` queries, so two predictors
``a`` and ``b`` of the scores ``t`` are compared run by run through the paired differences

    ``d_r = (a_r - t_r)^2 - (b_r - t_r)^2``

on the runs where both are finite (both answers parsed): ``mean(d) < 0`` means ``a`` has the lower
MSE. With the runs independent (a fresh context each, as App. C.3), the mean's confidence
interval comes from resampling the runs (:func:`bootstrap_ci`), and the smallest true mean
difference that the runs detect with a given power is (:func:`min_detectable_effect`)

    ``MDE = (z_{1 - alpha/2} + z_{power}) s_d / sqrt(n)``

(the two-sided ``z``-test of level ``alpha``; ``s_d`` the standard deviation of the ``n``
differences; ``2.80 s_d / sqrt(n)`` at ``alpha = 0.05`` and power 0.8).
"""

from __future__ import annotations

import jax
import numpy as np

from .. import checks as v

__all__ = [
    "paired_differences",
    "bootstrap_ci",
    "min_detectable_effect",
    "compare_paired",
    "answer_distribution",
    "copy_rate",
    "mse",
    "format_ci",
]


def _level(name: str, value) -> float:
    x = v.finite_float(name, value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {x}")
    return x


def paired_differences(truth, pred, base) -> np.ndarray:
    """``(P,)`` the differences ``(pred - truth)^2 - (base - truth)^2`` on the ``P`` runs where
    ``pred`` and ``base`` are both finite (NaN marks an unparsed answer).

    Args:
        truth: ``(R,)`` the true scores (finite); pred, base: ``(R,)`` two predictions.
    """
    dims = v.Dims()
    t = np.asarray(v.array("truth", truth, "R", dims), np.float64)
    a = np.asarray(v.array("pred", pred, "R", dims, finite=False, what="to match truth"), float)
    b = np.asarray(v.array("base", base, "R", dims, finite=False, what="to match truth"), float)
    ok = np.isfinite(a) & np.isfinite(b)
    return (a[ok] - t[ok]) ** 2 - (b[ok] - t[ok]) ** 2


def bootstrap_ci(x, key: jax.Array, *, n_boot: int = 10_000, level: float = 0.95) -> tuple:
    """Percentile bootstrap interval of the mean of ``x``: ``(low, high)``.

    ``n_boot`` resamples of the ``n`` values with replacement, indices drawn by
    ``jax.random.randint(key, (n_boot, n), 0, n)``; the interval runs between the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of their means.

    Args:
        x: ``(n,)`` finite values, ``n >= 2``.
        key: PRNG key of the resampling.
        n_boot: number of resamples, ``>= 1``.
        level: coverage, in ``(0, 1)``.
    """
    v.prng_key("key", key)
    x = np.asarray(v.array("x", x, "n"), np.float64)
    if len(x) < 2:
        raise ValueError(f"x must hold at least 2 values, got {len(x)}")
    n_boot = v.positive_int("n_boot", n_boot)
    level = _level("level", level)
    idx = np.asarray(jax.random.randint(key, (n_boot, len(x)), 0, len(x)))
    means = x[idx].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def min_detectable_effect(sd, n, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """``(z_{1 - alpha/2} + z_{power}) sd / sqrt(n)``: the smallest true mean difference that a
    two-sided test of level ``alpha`` on ``n`` paired differences of standard deviation ``sd``
    detects with probability ``power`` (normal approximation).

    Args:
        sd: the differences' standard deviation, ``>= 0``; n: their number, ``>= 1``.
        alpha, power: in ``(0, 1)`` (defaults 0.05 and 0.8: the factor is 2.80).
    """
    from scipy import stats

    sd = v.nonneg_float("sd", sd)
    n = v.positive_int("n", n)
    alpha, power = _level("alpha", alpha), _level("power", power)
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return float(z * sd / np.sqrt(n))


def compare_paired(
    truth,
    pred,
    base,
    key: jax.Array,
    *,
    n_boot: int = 10_000,
    level: float = 0.95,
    alpha=0.05,
    power=0.8,
) -> dict:
    """Predictor ``pred`` against ``base``, run by run (the module docstring).

    Returns:
        ``{"n", "mean", "sem", "ci_low", "ci_high", "mde", "p_t", "p_wilcoxon"}``: the number of
        paired runs, the mean difference of squared errors (``pred`` minus ``base``; negative:
        ``pred`` is better), its standard error, the bootstrap interval (:func:`bootstrap_ci`), the
        minimum detectable effect (:func:`min_detectable_effect`), the paired ``t``-test's and the
        signed-rank test's two-sided p-values (NaN when every difference is zero).

    Raises:
        ValueError: fewer than 2 runs where both predictions are finite.
    """
    from scipy import stats

    d = paired_differences(truth, pred, base)
    n = len(d)
    if n < 2:
        raise ValueError(f"pred and base must both be finite on at least 2 runs, got {n}")
    sd = float(d.std(ddof=1))
    lo, hi = bootstrap_ci(d, key, n_boot=n_boot, level=level)
    out = {"n": n, "mean": float(d.mean()), "sem": sd / np.sqrt(n), "ci_low": lo, "ci_high": hi}
    out["mde"] = min_detectable_effect(sd, n, alpha=alpha, power=power)
    if np.any(d != 0):
        out["p_t"] = float(stats.ttest_1samp(d, 0.0).pvalue)
        out["p_wilcoxon"] = float(stats.wilcoxon(d).pvalue)
    else:
        out["p_t"] = out["p_wilcoxon"] = float("nan")
    return out


def answer_distribution(values) -> dict:
    """How spread the parsed answers are (a model that collapses to one value ignores the pairs).

    Args:
        values: ``(R,)`` answers, NaN where unparsed.

    Returns:
        ``{"parsed", "distinct", "mode", "mode_share", "sd"}``: the number of parsed answers, of
        distinct values among them (to two decimals), the most frequent value (the smallest of
        ties), its share of the parsed answers and their standard deviation (NaN values when none
        parsed).
    """
    x = np.asarray(v.array("values", values, "R", finite=False), float)
    x = np.round(x[np.isfinite(x)], 2)
    if len(x) == 0:
        nan = float("nan")
        return {"parsed": 0, "distinct": 0, "mode": nan, "mode_share": nan, "sd": nan}
    vals, counts = np.unique(x, return_counts=True)
    i = int(np.argmax(counts))
    return {
        "parsed": len(x),
        "distinct": len(vals),
        "mode": float(vals[i]),
        "mode_share": float(counts[i] / len(x)),
        "sd": float(x.std(ddof=1)) if len(x) > 1 else 0.0,
    }


def copy_rate(values, shown) -> float:
    """The share of parsed answers equal, to two decimals (as the prompt prints it), to the guess
    the prompt showed for the query: ``(R,)`` each, NaN where unparsed; NaN when none parsed."""
    dims = v.Dims()
    a = np.asarray(v.array("values", values, "R", dims, finite=False), float)
    g = np.asarray(v.array("shown", shown, "R", dims, what="to match values"), float)
    ok = np.isfinite(a)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.round(a[ok], 2) == np.round(g[ok], 2)))


def mse(pred, truth) -> float:
    """Mean squared error of the parsed predictions: ``pred`` and ``truth`` ``(R,)``, ``pred`` NaN
    where an answer was not parsed (those runs are left out); NaN when none parsed.

    >>> mse([1.0, float("nan"), 3.0], [0.0, 5.0, 1.0])
    2.5
    """
    dims = v.Dims()
    p = np.asarray(v.array("pred", pred, "R", dims, finite=False), float)
    t = np.asarray(v.array("truth", truth, "R", dims), float)
    ok = np.isfinite(p)
    return float(np.mean((p[ok] - t[ok]) ** 2)) if ok.any() else float("nan")


def format_ci(comparison: dict) -> str:
    """``"+0.16 [-0.31, +0.62]"``: the mean difference and bootstrap interval of
    :func:`compare_paired`'s result, to two decimals."""
    if not isinstance(comparison, dict):
        kind = type(comparison).__name__
        raise v.ArgumentTypeError(f"comparison must be compare_paired's dict, got {kind}")
    keys = ("mean", "ci_low", "ci_high")
    missing = [k for k in keys if k not in comparison]
    if missing:
        raise ValueError(
            f"comparison must be compare_paired's dict, with the keys 'mean', 'ci_low' and "
            f"'ci_high'; missing {missing}"
        )
    c = {k: v.finite_float(f"comparison[{k!r}]", comparison[k]) for k in keys}
    return f"{c['mean']:+.2f} [{c['ci_low']:+.2f}, {c['ci_high']:+.2f}]"
