"""Fig. 6 of Xie et al. (§5.3) redrawn: the LM's MSE with and without initial guesses, and the
paired differences of squared errors between arms (:func:`fig6_paired_differences`).

It draws plain numbers (matplotlib only): the LM stack of ``iclgd.llm`` is not imported.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np

from .core import PALETTE, _finish, _new_figure, style

__all__ = ["fig6_refinement", "fig6_paired_differences"]


def fig6_refinement(bars: Mapping[str, tuple[float, float]], *, title: str = "", paper=None):
    """Bars of MSE with error bars of 2 standard errors.

    Args:
        bars: ``{label: (mse, standard error)}`` in the order to draw, e.g. ``{"LM with guesses":
            ..., "LM without guesses": ..., "guess alone": ..., "mean predictor": ...}``.
        title: the axes title (the model, the number of runs, the scale).
        paper: optional ``{label: mse}`` read off the paper's figure, drawn as black ticks.

    Returns:
        A matplotlib ``Figure`` (not shown).
    """
    if not isinstance(bars, Mapping) or not bars:
        raise TypeError("bars must be a non-empty dict {label: (mse, standard error)}")
    labels = list(bars)
    vals = np.asarray([bars[k] for k in labels], float)
    if vals.shape != (len(labels), 2) or not np.all(np.isfinite(vals)):
        raise ValueError(f"bars must map each label to a finite (mse, standard error), got {bars}")
    with style():
        fig = _new_figure(6.5, 3.2)
        ax = fig.add_subplot()
        x = np.arange(len(labels))
        colors = [PALETTE[i % len(PALETTE)] for i in range(len(labels))]
        ax.bar(x, vals[:, 0], yerr=2 * vals[:, 1], color=colors, capsize=4, alpha=0.85)
        if paper:
            for i, k in enumerate(labels):
                if k in paper:
                    ax.plot([i - 0.4, i + 0.4], [paper[k]] * 2, "k-", lw=2, label="paper")
            handles, names = ax.get_legend_handles_labels()
            if handles:
                ax.legend(handles[:1], names[:1], loc="upper right")
        ax.set_xticks(x, labels)
        ax.set_ylabel("MSE on STS-B test (0-5 scale)")
        ax.set_title("\n".join(textwrap.wrap(title, 60)))  # a long model name stays on the page
        ax.grid(axis="x", visible=False)
    return _finish(fig)


def fig6_paired_differences(
    diffs: Mapping[str, np.ndarray],
    intervals: Mapping[str, tuple[float, float]],
    *,
    title: str = "",
    xlabel: str = "squared error: arm minus LM without guesses",
):
    """Fig. 6 as paired differences: one row per comparison, each run a dot, the mean a diamond
    and its confidence interval a capped bar just above the row; left of zero the arm has the
    lower error.

    Args:
        diffs: ``{label: (P,) differences of squared errors}`` (e.g. from
            ``iclgd.llm.paired_differences``), drawn top to bottom in this order.
        intervals: ``{label: (low, high)}`` the mean's interval for every label of ``diffs``
            (e.g. ``iclgd.llm.bootstrap_ci``).
        title: the axes title (the model, the number of runs, the scale).
        xlabel: the x-axis label.

    Returns:
        A matplotlib ``Figure`` (not shown).
    """
    if not isinstance(diffs, Mapping) or not diffs:
        raise TypeError("diffs must be a non-empty dict {label: (P,) differences}")
    if not isinstance(intervals, Mapping) or set(intervals) != set(diffs):
        raise ValueError(
            f"intervals must give (low, high) for exactly the labels of diffs {list(diffs)}"
        )
    labels = list(diffs)
    ds = [np.asarray(diffs[k], float) for k in labels]
    for k, d in zip(labels, ds, strict=True):
        if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)):
            raise ValueError(f"diffs[{k!r}] must be a non-empty 1-D array of finite values")
    ci = np.asarray([intervals[k] for k in labels], float)
    if ci.shape != (len(labels), 2) or not np.all(np.isfinite(ci)) or np.any(ci[:, 0] > ci[:, 1]):
        raise ValueError(f"intervals must map each label to a finite (low, high), got {intervals}")
    with style():
        fig = _new_figure(6.5, 1.0 + 0.55 * len(labels))
        ax = fig.add_subplot()
        for i, (d, (lo, hi)) in enumerate(zip(ds, ci, strict=True)):
            y = len(labels) - 1 - i
            jitter = (np.arange(d.size) % 7 - 3) * 0.04  # fixed offsets: the same figure each time
            color = PALETTE[i % len(PALETTE)]
            ax.plot(d, y + jitter, "o", color=color, alpha=0.35, ms=3.5, mec="none")
            ax.plot([d.mean()], [y], "D", color=color, mec="k", ms=7)
            # the interval just above the row, with end caps, so that a narrow one is not hidden
            # under the diamond or the dots
            ax.plot([lo, hi], [y + 0.3, y + 0.3], "-|", color="k", lw=2, ms=8, mew=2)
        ax.axvline(0.0, color="k", lw=0.8, ls="--")
        ax.set_yticks(np.arange(len(labels))[::-1], labels)
        ax.set_xlabel(xlabel)
        ax.set_title("\n".join(textwrap.wrap(title, 70)))
        ax.grid(axis="y", visible=False)
    return _finish(fig)
