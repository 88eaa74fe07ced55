"""The risk ladder across the three papers (``book/risk_ladder``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from .core import PALETTE, _finish, _legend_below, _new_figure, style

if TYPE_CHECKING:
    from ..ladder import Ladder

__all__ = ["risk_ladder"]

_MARKERS = ("o", "s", "D", "^", "v", "P", "X")
_LABELS = {
    "gd0": "1 GD step from $0$",
    "gd_mu": r"1 GD step from $\mu$",
    "pgd1": r"1 GD step, $P = \Sigma^{-1}$",
    "pgd2": r"2 GD steps, $P = \Sigma^{-1}$",
    "pgd3": r"3 GD steps, $P = \Sigma^{-1}$",
    "lsa1": "LSA, $H = 1$",
    "lsa_d": r"LSA, $H \geq d + 1$",
    "yq_lsa": "$y_q$-LSA (trained guess)",
    "sparse2": "sparse TF on $S$, 2 layers",
    "sparse3": "sparse TF on $S$, 3 layers",
    "gdpp2": "GD++ on $S$, 2 layers",
    "gdpp3": "GD++ on $S$, 3 layers",
}
"""Axis labels of the rungs with mathtext (default: the label of :data:`iclgd.ladder.RUNGS`)."""


def risk_ladder(ladders: Mapping[str, Sequence[Ladder]], claims: Sequence[tuple] = ()) -> Figure:
    """Every rung's risk, one panel per context length ``C``, one colour per setting.

    The risk is divided by that of predicting ``0`` (:func:`iclgd.ladder.null_risk`), so that
    the settings share an axis; Monte Carlo rungs carry bars of 2 standard errors. A claim of a
    paper is drawn as a black ring around its marker with a short label beside it.

    Args:
        ladders: setting name -> its :class:`iclgd.ladder.Ladder` at each ``C`` (at most three
            distinct ``C`` over all settings).
        claims: ``(setting, C, rung key, label)`` tuples: the marker to ring and its label.

    Returns:
        The figure (8 in wide).
    """
    from ..ladder import RUNGS, Ladder, null_risk  # lazy: iclgd.ladder imports sympy

    if not isinstance(ladders, Mapping) or not ladders:
        raise ValueError("ladders must be a non-empty dict setting name -> sequence of Ladders")
    for name, seq in ladders.items():
        if isinstance(seq, Ladder) or not all(isinstance(x, Ladder) for x in seq):
            raise ValueError(f"ladders[{name!r}] must be a sequence of iclgd.ladder.Ladder")
    if isinstance(claims, (str, bytes)) or any(len(c) != 4 for c in claims):
        raise ValueError("claims must be a sequence of (setting, C, rung key, label) tuples")
    Cs = sorted({lad.C for seq in ladders.values() for lad in seq})
    if len(Cs) > 3:
        raise ValueError(f"at most three context lengths fit on the page, got C = {Cs}")
    keys = [k for k in RUNGS if any(k in lad.keys() for seq in ladders.values() for lad in seq)]
    row = {k: i for i, k in enumerate(keys)}
    n_set = len(ladders)
    offs = (np.arange(n_set) - (n_set - 1) / 2) * (0.6 / max(n_set, 1))
    with style():
        fig = _new_figure(8.0, 0.3 * len(keys) + 2.2)
        axes = np.atleast_1d(fig.subplots(1, len(Cs), sharey=True, squeeze=False)[0])
        for j, (name, seq) in enumerate(ladders.items()):
            color, marker = PALETTE[j % len(PALETTE)], _MARKERS[j % len(_MARKERS)]
            for lad in seq:
                ax = axes[Cs.index(lad.C)]
                r0 = null_risk(lad.prior)
                ys = np.array([row[r.key] + offs[j] for r in lad.rungs])
                xs = np.array([r.risk / r0 for r in lad.rungs])
                err = np.array([2 * r.stderr / r0 for r in lad.rungs])
                label = name if lad.C == Cs[0] else "_nolegend_"
                ax.errorbar(xs, ys, xerr=err, fmt=marker, color=color, ms=5.5, label=label)
                for setting, C, key, text in claims:
                    if setting == name and C == lad.C and key in lad.keys():
                        x, y = lad.risk(key) / r0, row[key] + offs[j]
                        ax.plot(x, y, "o", ms=11, mfc="none", mec="black", mew=1.2)
                        ax.annotate(text, (x, y), xytext=(7, -3), textcoords="offset points")
        top = max(
            r.risk / null_risk(lad.prior)
            for s_ in ladders.values()
            for lad in s_
            for r in lad.rungs
        )
        for ax, C in zip(axes, Cs, strict=True):
            ax.set_xlim(-0.03, 1.1 * top + 0.03)
            ax.set(title=f"$C = {C}$", xlabel="risk / risk of predicting 0")
        axes[0].set_yticks(range(len(keys)), [_LABELS.get(k, RUNGS[k][0]) for k in keys])
        axes[0].set_ylim(len(keys) - 0.5, -0.5)
        handles, labels = axes[0].get_legend_handles_labels()
        if len(Cs) > 1:
            fig.legend(handles, labels, loc="outside lower center", ncol=3)
        else:
            _legend_below(axes[0], ncol=3)
    return _finish(fig)
