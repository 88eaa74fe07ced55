"""Figures of Part I's y_q-LSA chapter (Xie et al. Fig. 5 and 5(b))."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .core import (
    _GD_STYLE,
    _as_array,
    _colors_for,
    _curve_ylim,
    _finish,
    _gd_line,
    _new_figure,
    _nonempty,
    _scale_text,
    _w2_label,
    log_ticks,
    smooth,
    style,
)


def fig5_yq_training(
    sampled: Mapping[float, tuple[np.ndarray, float]],
    exact: Mapping[float, np.ndarray],
    gd_risk: float,
    *,
    scale: str | None = None,
    colors: Mapping[float, str] | None = None,
    ylim: tuple[float, float] | None = (4.0, 60.0),
    window: int = 50,
) -> Figure:
    """Fig. 5 of Xie et al. (yq_lsa): y_q-LSA trained against one GD step, d = C = 10, one head.

    (a) left: sampled training curves (smoothed) for each ‖w*‖², ending in a dot at the exact
    risk of the trained weights; (b) right, same y-axis: the same Adam on the exact risk, the exact
    risk at every step. One GD step with the optimal step size (dashed red) in both; one legend
    below. Drawn in ``part1/yq_lsa.ipynb``.

    Args:
        sampled: ‖w*‖² -> ``(losses, exact_risk)``: per-step minibatch losses of the sampled run,
            shape (steps,), and the exact risk of its final weights (a float).
        exact: ‖w*‖² -> exact risk at each step of Adam on the exact risk, shape (exact_steps,).
        gd_risk: exact risk of one GD step from w* with the optimal step, d(d+1)/(C+d+1).
        scale: ``"ci"`` or ``"paper"``; ``None`` reads ``iclgd.scale()``.
        colors: ‖w*‖² -> colour; default :data:`PALETTE` in increasing order of ‖w*‖² over the
            keys of both dicts (pass the same ``colors`` to :func:`fig5b_yq_vs_gd`).
        ylim: the shared y-limits (log axis); None: the range of the curves.
        window: moving-average window of the sampled curves.
    """
    _nonempty(sampled=sampled)
    cols = _colors_for(set(sampled) | set(exact), colors)
    steps = len(next(iter(sampled.values()))[0])
    exact_steps = len(next(iter(exact.values())))
    with style():
        fig = _new_figure(8.0, 5.0)
        ax1, ax2 = fig.subplots(1, 2, sharey=True)
        curves = []
        for s2, (loss, r_exact) in sorted(sampled.items()):
            y, x = smooth(_as_array("losses", loss), window)
            ax1.plot(x, y, color=cols[s2], lw=1.2, label="_nolegend_")
            ax1.plot([len(loss)], [r_exact], "o", color=cols[s2], mec="k", ms=8, zorder=3)
            curves.append(y)
        for s2, curve in sorted(exact.items()):
            curve = _as_array("exact", curve)
            ax2.plot(np.arange(1, curve.size + 1), curve, color=cols[s2], lw=1.5)
            curves.append(curve)
        for ax in (ax1, ax2):
            _gd_line(ax, gd_risk)
            ax.set(xlabel="training step", yscale="log")
        ax1.set(
            ylabel="ICL risk",
            title=f"(a) sampled training, {steps} steps\n({_scale_text(scale)} scale)",
        )
        ax2.set(title=f"(b) the same Adam on the exact risk\n{exact_steps} steps")
        ax1.set_ylim(_curve_ylim(curves, [gd_risk], ylim))
        log_ticks(ax1)
        handles = [Line2D([], [], color=cols[s2], lw=2) for s2 in cols]
        labels = [_w2_label(s2) for s2 in cols]
        handles += [
            Line2D([], [], **_GD_STYLE),
            Line2D([], [], ls="none", marker="o", color="gray", mec="k", ms=8),
        ]
        labels += ["one-step GD, $\\eta^\\star$ (exact)", "exact risk of the trained weights"]
        fig.legend(handles, labels, loc="outside lower center", ncol=3)
        return _finish(fig)


def fig5b_yq_vs_gd(
    metrics: Mapping[float, Mapping[str, np.ndarray | float]],
    *,
    colors: Mapping[float, str] | None = None,
    bins: int = 60,
    log_bins=None,
) -> Figure:
    """Fig. 5(b) of Xie et al. (yq_lsa, App. C.2): trained y_q-LSA vs one GD step, prompt by prompt.

    Histograms over test prompts, one colour per ‖w*‖²: (a) top left: relative prediction
    difference ``|f_yq - f_GD| / rms f_GD``; (b) top right: relative difference of the input
    gradients ``||grad f_GD - grad f_yq|| / mean ||grad f_GD||``; (c) bottom, full width:
    1 - cosine similarity of the input gradients (log x), outlined, with GD against the task's
    true weights filled. One legend below. Drawn in ``part1/yq_lsa.ipynb``.

    Args:
        metrics: ‖w*‖² -> dict with ``"pred_diff"`` (n,), ``"pred_scale"`` (float),
            ``"grad_diff"`` (n,), ``"grad_scale"`` (float), ``"cos"`` (n,) and ``"cos_ref"``
            (n,), as computed in the notebook (cell [27]).
        colors: ‖w*‖² -> colour; default :data:`PALETTE` in increasing order of ‖w*‖².
        bins: number of bins of panels (a) and (b).
        log_bins: bin edges of panel (c); default ``np.logspace(-6, 0, 61)``.
    """
    _nonempty(metrics=metrics)
    keys = ("pred_diff", "pred_scale", "grad_diff", "grad_scale", "cos", "cos_ref")
    for s2, m in metrics.items():
        missing = [k for k in keys if k not in m]
        if missing:
            raise ValueError(f"metrics[{s2!r}] lacks {missing}")
    cols = _colors_for(metrics, colors)
    log_bins = np.logspace(-6, 0, 61) if log_bins is None else np.asarray(log_bins)
    with style():
        fig = _new_figure(8.0, 7.0)
        gs = fig.add_gridspec(2, 2)
        ax_a, ax_b = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])
        ax_c = fig.add_subplot(gs[1, :])
        for s2 in cols:
            m, c = metrics[s2], cols[s2]
            pred_rel = _as_array("pred_diff", m["pred_diff"]) / float(m["pred_scale"])
            grad_rel = _as_array("grad_diff", m["grad_diff"]) / float(m["grad_scale"])
            ax_a.hist(pred_rel, bins=bins, histtype="step", color=c, lw=1.4)
            ax_b.hist(grad_rel, bins=bins, histtype="step", color=c, lw=1.4)
            ax_c.hist(
                1 - _as_array("cos", m["cos"]), bins=log_bins, histtype="step", color=c, lw=1.4
            )
            ax_c.hist(
                1 - _as_array("cos_ref", m["cos_ref"]),
                bins=log_bins,
                histtype="stepfilled",
                alpha=0.18,
                color=c,
            )
        ax_a.set(
            xlabel="$|f_{y_q} - f_{GD}|$ / rms $f_{GD}$",
            ylabel="test prompts",
            title="(a) prediction difference",
        )
        ax_b.set(
            xlabel="$\\|\\nabla f_{GD} - \\nabla f_{y_q}\\|$ / mean $\\|\\nabla f_{GD}\\|$",
            title="(b) input-gradient difference",
        )
        ax_c.set(
            xscale="log",
            xlabel="1 $-$ cosine similarity of the input gradients $\\nabla_{x_q} f$",
            ylabel="test prompts",
            title="(c) gradient alignment",
        )
        handles = [Line2D([], [], color=cols[s2], lw=2) for s2 in cols]
        labels = [_w2_label(s2) for s2 in cols]
        handles += [
            Line2D([], [], color="gray", lw=1.4),
            Patch(facecolor="gray", alpha=0.3, edgecolor="none"),
        ]
        labels += ["trained $y_q$-LSA vs one GD step", "(c) one GD step vs the true $\\hat w$"]
        fig.legend(handles, labels, loc="outside lower center", ncol=3)
        return _finish(fig)
