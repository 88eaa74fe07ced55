"""Figures of Part II (Yang et al. 2024): the setting chapter's Lemma 5 check and the convergence
of the attention matrix ``A_hat(theta)`` to ``A`` (eq. 34-38), Theorem 1's rate and Fig. 4 (training
chapter), Fig. 2(a) and Fig. 3 (inference chapter)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from .. import checks as v
from .core import (
    _as_array,
    _finish,
    _mean_se,
    _new_figure,
    _positive,
    _same_len,
    style,
)

__all__ = ["lemma5_check", "theorem1_rate", "heads_sweep", "fig2a_inference", "fig3_gap"]


def lemma5_check(
    estimates: Mapping[str, tuple[float, float]],
    closed_forms: Mapping[str, float],
    steps,
    gap,
    dist,
) -> Figure:
    """Lemma 5 against Monte Carlo, and ``A_hat(theta) -> A`` during training
    (``book/part2/setting``).

    (a) Monte Carlo estimates (mean and standard error; error bars are 4 SE) beside the closed
    forms as horizontal lines; (b) ``L(theta_t) - L*`` and ``||A_hat(theta_t) - A||_F`` against the
    training step (log scale).

    Args:
        estimates: label -> ``(mean, standard error)`` of a Monte Carlo estimate.
        closed_forms: label -> value of a closed form.
        steps: ``(R,)`` recorded steps.
        gap: ``(R,)`` ``L(theta_t) - L*`` (positive).
        dist: ``(R,)`` ``||A_hat(theta_t) - A||_F``.
    """
    for name, m in (("estimates", estimates), ("closed_forms", closed_forms)):
        if not isinstance(m, Mapping):
            raise TypeError(f"{name} must be a mapping (a dict), got {type(m).__name__}")
    if not estimates or not closed_forms:
        raise ValueError("estimates and closed_forms must be non-empty mappings")
    steps, gap, dist = _as_array("steps", steps), _as_array("gap", gap), _as_array("dist", dist)
    _same_len(steps=steps, gap=gap, dist=dist)
    if np.any(gap <= 0) or np.any(dist <= 0):
        raise ValueError("gap and dist must be positive (they are drawn on a log scale)")
    with style():
        fig = _new_figure(8.0, 3.4)
        ax1, ax2 = fig.subplots(1, 2)
        for i, (label, pair) in enumerate(estimates.items()):
            mean, se = _mean_se(f"estimates[{label!r}]", pair)
            ax1.errorbar([i], [mean], yerr=[4 * se], fmt="o", color="k", capsize=4)
        ax1.set_xticks(range(len(estimates)), list(estimates), fontsize=9)
        for j, (label, val) in enumerate(closed_forms.items()):
            ax1.axhline(val, color=f"C{j}", ls="--", label=label)
        ax1.set_xlim(-0.6, len(estimates) - 0.4)
        ax1.set_ylabel("loss")
        ax1.set_title("(a) Monte Carlo (±4 SE) vs closed forms")
        ax1.legend(loc="center left")
        ax2.semilogy(steps, gap, label=r"$L(\theta_t) - L^\star$")
        ax2.semilogy(steps, dist, label=r"$\|\widehat A(\theta_t) - A\|_F$")
        ax2.set_xlabel("step")
        ax2.set_title(r"(b) $\widehat A(\theta) \to A$ (eq. 38)")
        ax2.legend()
    return _finish(fig)


def theorem1_rate(steps, gap, fit_steps, fit_gap, bound) -> Figure:
    """Theorem 1: ``L(theta_t) - L*`` under GD against ``t`` (log scale), the fitted line over the
    stated range and the bound of eq. 18 (``book/part2/training``).

    Args:
        steps: ``(T,)`` steps.
        gap: ``(T,)`` measured ``L(theta_t) - L*`` (positive).
        fit_steps: ``(F,)`` steps of the fitted range.
        fit_gap: ``(F,)`` the fitted line ``exp(a + b t)`` there.
        bound: ``(T,)`` the bound ``(1 - eta_w zeta0 / 2K)^t Delta0`` of eq. 18.
    """
    steps, gap, bound = _as_array("steps", steps), _as_array("gap", gap), _as_array("bound", bound)
    fit_steps, fit_gap = _as_array("fit_steps", fit_steps), _as_array("fit_gap", fit_gap)
    _same_len(steps=steps, gap=gap, bound=bound)
    _same_len(fit_steps=fit_steps, fit_gap=fit_gap)
    if np.any(gap <= 0) or np.any(bound <= 0) or np.any(fit_gap <= 0):
        raise ValueError("gap, fit_gap and bound must be positive (they are drawn on a log scale)")
    with style():
        fig = _new_figure(6.5, 3.4)
        ax = fig.subplots()
        ax.semilogy(steps, gap, label=r"GD, $L(\theta_t) - L^\star$")
        ax.semilogy(fit_steps, fit_gap, "k--", label="linear fit of log gap")
        ax.semilogy(steps, bound, color="C3", label="bound, eq. 18")
        ax.set_xlabel("step t")
        ax.set_ylabel(r"loss gap $L(\theta_t) - L^\star$")
        ax.legend()
    return _finish(fig)


def heads_sweep(curves: Mapping[int, np.ndarray], L_star: float) -> Figure:
    """Fig. 4: training loss of the one-layer model against the step for several numbers of heads
    ``H`` (``book/part2/training``), with ``L*`` as a dashed line.

    Args:
        curves: ``H`` -> ``(T,)`` losses (a run that diverged may be shorter; one that diverged
            at step 0, whose losses are empty, is drawn as nothing, its legend entry saying so).
        L_star: the minimum of the loss (``> 0``: a line on the log axis).
    """
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty mapping H -> losses")
    L_star = _positive("L_star", L_star)
    with style():
        fig = _new_figure(6.5, 3.8)
        ax = fig.subplots()
        for i, (H, loss) in enumerate(curves.items()):
            if np.size(loss) == 0 and np.ndim(loss) == 1:  # diverged at step 0: nothing to draw
                ax.semilogy([], [], color=f"C{i % 10}", label=f"H={H} (diverged at step 0)")
                continue
            loss = _as_array(f"curves[{H}]", loss)
            ax.semilogy(np.arange(loss.size), loss, color=f"C{i % 10}", label=f"H={H}")
        ax.axhline(L_star, color="k", ls="--", lw=1, label=r"$L^\star$")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _finish(fig)


def fig2a_inference(
    steps, train_loss, curves: Mapping[str, np.ndarray], exact: Mapping[str, np.ndarray], L_star
) -> Figure:
    """Fig. 2(a): training loss and inference losses of the one-layer model against the step
    (``book/part2/inference``), log scale.

    Args:
        steps: ``(R,)`` recorded steps.
        train_loss: ``(R,)`` the training loss ``L(theta_t)``.
        curves: label -> ``(R,)`` inference losses measured on test prompts (solid).
        exact: label -> ``(R,)`` their exact expectations (dashed, same colour order as ``curves``).
        L_star: the infimum of the training loss (dotted line).
    """
    steps, train_loss = _as_array("steps", steps), _as_array("train_loss", train_loss)
    _same_len(steps=steps, train_loss=train_loss)
    if not curves:
        raise ValueError("curves must be a non-empty mapping label -> losses")
    with style():
        fig = _new_figure(6.5, 3.6)
        ax = fig.subplots()
        ax.semilogy(steps, train_loss, color="k", label="training loss")
        for i, (label, y) in enumerate(curves.items()):
            y = _as_array(f"curves[{label!r}]", y)
            _same_len(steps=steps, curve=y)
            ax.semilogy(steps, y, color=f"C{i}", label=label)
        for i, (label, y) in enumerate(exact.items()):
            y = _as_array(f"exact[{label!r}]", y)
            _same_len(steps=steps, exact=y)
            ax.semilogy(steps, y, color=f"C{i}", ls="--", lw=1, label=label)
        ax.axhline(L_star, color="k", ls=":", lw=1, label=r"$L^\star$")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _finish(fig)


def fig3_gap(Ns, gaps, m: int) -> Figure:
    """Fig. 3: the gap ``1/K ||y_star - y_best||^2`` against the prompt length ``N``, one thin line
    per seed and their mean, log scale (exact zeros, at ``N = m``, are not drawn on it; a vertical
    line marks ``N = m``) (``book/part2/inference``).

    Args:
        Ns: ``(n,)`` prompt lengths.
        gaps: ``(S, n)`` gaps, one row per seed (dictionary draw).
        m: number of basis functions.
    """
    Ns = _as_array("Ns", Ns)
    gaps = _as_array("gaps", gaps, ndim=2)
    m = v.positive_int("m", m)
    if gaps.shape[1] != Ns.size:
        raise ValueError(f"gaps must have shape (S, {Ns.size}) to match Ns, got {gaps.shape}")
    if np.any(gaps < 0):
        raise ValueError("gaps must be >= 0")
    pos = lambda g: np.where(g > 0, g, np.nan)  # noqa: E731
    with style():
        fig = _new_figure(6.5, 3.6)
        ax = fig.subplots()
        for g in gaps:
            ax.semilogy(Ns, pos(g), color="C0", lw=0.8, alpha=0.5)
        mean = pos(gaps.mean(axis=0))
        ax.semilogy(Ns, mean, color="C0", lw=2, label=f"mean of {len(gaps)} seeds")
        ax.axvline(m, color="k", ls="--", lw=1, label=f"N = m = {m} (gap 0)")
        ax.set_xlabel("N (examples in the prompt)")
        ax.set_ylabel(r"$\frac{1}{K}\,\mathbb{E}\,\|\widehat y^\star - \widehat y^{best}\|^2$")
        ax.legend()
    return _finish(fig)
