"""The figure of the chapter 'The shared setting' (Xie et al. Fig. 1)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from .. import checks as v
from .core import (
    _as_array,
    _curve_ylim,
    _dc_text,
    _finish,
    _gd_line,
    _legend_below,
    _mean_se,
    _new_figure,
    _nonempty,
    _scale_text,
    log_ticks,
    smooth,
    style,
)


def fig1_prior_mean(
    losses: Mapping[str, np.ndarray],
    evaluation: Mapping[str, tuple[float, float]],
    gd_risk: float,
    *,
    d: int,
    C: int,
    scale: str | None = None,
    window: int = 50,
) -> Figure:
    """Fig. 1 of Xie et al. (shared_setting): one-head LSA trained with w* = 0 and w* = (2, ..., 2).

    One panel, log risk against the training step: the smoothed training loss of each run, its
    evaluation risk at the last step with a bar of 2 standard errors, and the exact risk of one GD
    step with the optimal step size. Drawn in ``shared_setting.ipynb``.

    Args:
        losses: run name (plain text or mathtext, e.g. ``"w* = 0"``) -> per-step training losses,
            shape (steps,).
        evaluation: run name -> ``(risk, standard_error)`` of the trained model on fresh prompts
            (``iclgd.evaluate``). Same keys as ``losses``.
        gd_risk: exact risk of one GD step from w* with the optimal step, d(d+1)/(C+d+1).
        d, C: dimension and context length (title).
        scale: ``"ci"`` or ``"paper"`` (title); ``None`` reads ``iclgd.scale()``.
        window: moving-average window of the training curves (:func:`smooth`).
    """
    _nonempty(losses=losses, evaluation=evaluation)
    d, C = v.positive_int("d", d), v.positive_int("C", C)
    if set(losses) != set(evaluation):
        raise ValueError(f"losses and evaluation need the same runs: {list(losses)}, {evaluation}")
    with style():
        fig = _new_figure(6.5, 4.4)
        ax = fig.add_subplot()
        colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
        curves = []
        for i, (name, loss) in enumerate(losses.items()):
            loss = _as_array(f"losses[{name!r}]", loss)
            y, x = smooth(loss, window)
            curves.append(y)
            col = colors[i % len(colors)]
            ax.plot(x, y, color=col, label=f"LSA, {name} (train, {window}-step mean)")
            ev, se = _mean_se(f"evaluation[{name!r}]", evaluation[name])
            ax.errorbar(
                [loss.size], [ev], yerr=[2 * se], fmt="o", color=col, mec="k", capsize=4, zorder=3
            )
        _gd_line(ax, gd_risk, "one-step GD, optimal $\\eta$ (exact)")
        ax.set(
            xlabel="training step",
            ylabel="ICL risk",
            yscale="log",
            title=f"{_dc_text(d, C)}, one head, $y_q = 0$ ({_scale_text(scale)} scale)",
        )
        ax.set_ylim(_curve_ylim(curves, [gd_risk], None))
        log_ticks(ax)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(ax.containers[0])
        labels.append("evaluation risk $\\pm$ 2 s.e. (fresh prompts)")
        _legend_below(ax, ncol=2, handles=handles, labels=labels)
        return _finish(fig)


# ----------------------------------------------------------------------------------------------
# part1/multihead_theory
