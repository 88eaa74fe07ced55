"""Fig. 6 of Xie et al. (§5.3) redrawn: the LM's MSE with and without initial guesses.

It draws plain numbers (matplotlib only): the LM stack of ``iclgd.llm`` is not imported.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np

from .core import PALETTE, _finish, _new_figure, style

__all__ = ["fig6_refinement"]


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
