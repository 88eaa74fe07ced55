"""Every figure of the iclgd book: one function per figure, each returning a matplotlib Figure.

The notebooks compute; this module draws. Each function takes plain data (NumPy arrays, floats,
dicts keyed by the swept value) and returns a :class:`matplotlib.figure.Figure` created through
pyplot, so that in a notebook it is shown at the end of the cell like any pyplot figure (assign
it, ``fig = iclgd.plot.fig2_heads(...)``, rather than leaving it as the cell's last expression,
which would show it twice). Nothing is shown or closed here.

Readability at the book's page width (an HTML column of about 800-850 px):

* every figure is at most :data:`MAX_WIDTH` = 8 inches wide at :data:`DPI` = 100, so it is shown
  at about 100 %;
* tick labels are 10 pt, axis labels and titles 11 pt, legends 9.5 pt;
* crowded legends sit outside the axes (below or to the right), never on the data;
* three panels are laid out on a grid (one panel spanning a row), not in one long row.

The style is applied inside each function (:func:`style`), never globally on import.

Index (notebook -> function):

* ``shared_setting``: Fig. 1 -> :func:`fig1_prior_mean`.
* ``part1/multihead_theory``: optimum against H -> :func:`heads_optimum`; the gap to one GD step
  against C and ‖w*‖² -> :func:`gd_gap`.
* ``part1/multihead_experiments``: Fig. 2 -> :func:`fig2_heads`, Fig. 3 -> :func:`fig3_prior_mean`,
  Fig. 4 -> :func:`fig4_initial_guess`.
* ``part1/yq_lsa``: Fig. 5 -> :func:`fig5_yq_training`, Fig. 5(b) -> :func:`fig5b_yq_vs_gd`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter

from . import config

__all__ = [
    "DPI",
    "MAX_WIDTH",
    "STYLE",
    "fig1_prior_mean",
    "fig2_heads",
    "fig3_prior_mean",
    "fig4_initial_guess",
    "fig5_yq_training",
    "fig5b_yq_vs_gd",
    "gd_gap",
    "heads_optimum",
    "log_ticks",
    "smooth",
    "style",
]

DPI = 100
"""Dots per inch of every figure: the notebook's inline PNG is shown at this resolution."""

MAX_WIDTH = 8.0
"""Width of the widest figure, in inches (8 in at 100 dpi = 800 px: the book's content column)."""

TICK_SIZE = 10.0
"""Font size of tick labels, in points."""

STYLE: dict = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "font.size": 11.0,
    "axes.titlesize": 11.0,
    "axes.labelsize": 11.0,
    "xtick.labelsize": TICK_SIZE,
    "ytick.labelsize": TICK_SIZE,
    "legend.fontsize": 9.5,
    "legend.framealpha": 0.9,
    "lines.linewidth": 1.5,
    "lines.markersize": 7.0,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "figure.constrained_layout.use": True,
    "mathtext.fontset": "dejavusans",
    "text.usetex": False,
}
"""The rcParams every figure is drawn with (see :func:`style`)."""

GD_COLOR = "red"
GD_STYLE = {"color": GD_COLOR, "ls": "--", "lw": 1.4}
PALETTE = (
    "tab:blue",
    "tab:green",
    "tab:orange",
    "tab:purple",
    "tab:brown",
    "tab:cyan",
    "tab:olive",
)
"""Colours of the priors in Fig. 5 and 5(b), in increasing order of ‖w*‖²."""


@contextlib.contextmanager
def style() -> Iterator[dict]:
    """Context manager applying :data:`STYLE` (a ``matplotlib.rc_context``); yields the dict.

    Every function of this module draws inside it; nothing is changed outside the ``with`` block::

        with iclgd.plot.style():
            fig, ax = plt.subplots()
    """
    with mpl.rc_context(STYLE):
        yield STYLE


def smooth(x, w: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Moving average of a 1-D series over windows of ``w`` consecutive values.

    Args:
        x: array of shape (n,), e.g. per-step training losses.
        w: window length (>= 1). A window longer than the series is shortened to ``n``.

    Returns:
        ``(values, steps)``, both of shape (n - w + 1,): ``values[k] = mean(x[k : k + w])`` and
        ``steps[k] = k + w``, the number of steps taken when the window's last value was recorded
        (so ``plot(steps, values)`` ends at ``n``).
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1:
        raise ValueError(f"w must be an integer >= 1, got {w!r}")
    w = int(min(w, x.size))
    return np.convolve(x, np.ones(w) / w, mode="valid"), np.arange(w, x.size + 1)


_MANTISSAS = ((1, 1.5, 2, 3, 4, 5, 6, 8), (1, 2, 3, 5), (1, 2, 5), (1, 3), (1,))


def _nice_log_ticks(lo: float, hi: float, max_ticks: int = 9) -> list[float]:
    """Ticks m * 10^k inside [lo, hi], with the densest mantissa set giving <= max_ticks ticks."""
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
        return []
    k0, k1 = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    ticks: list[float] = []
    for ms in _MANTISSAS:
        ticks = [
            float(f"{m * 10.0**k:.6g}")
            for k in range(k0, k1 + 1)
            for m in ms
            if lo * (1 - 1e-9) <= m * 10.0**k <= hi * (1 + 1e-9)
        ]
        if len(ticks) <= max_ticks:
            break
    return ticks


def log_ticks(ax, ticks: Sequence[float] | None = None, *, axis: str = "y") -> list[float]:
    """Label a log axis with plain numbers (5, 10, 20, ...) instead of powers of ten.

    Args:
        ax: a matplotlib Axes whose ``axis`` is (or will be) log-scaled.
        ticks: tick positions; ``None`` chooses them in the current axis limits among
            m * 10^k, m in (1, 1.5, 2, 3, 4, 5, 6, 8), thinned to at most 9 ticks.
        axis: ``"y"`` or ``"x"``.

    Returns:
        The tick positions set. Minor tick labels are removed (the minor ticks stay).
    """
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    a = ax.yaxis if axis == "y" else ax.xaxis
    if ticks is None:
        lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
        ticks = _nice_log_ticks(lo, hi)
    ticks = [float(t) for t in ticks]
    lim = ax.get_ylim() if axis == "y" else ax.get_xlim()
    a.set_ticks(ticks)
    a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a.set_minor_formatter(NullFormatter())
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lim)  # set_ticks may widen the limits
    return ticks


# ----------------------------------------------------------------------------------------------
# internal helpers


def _scale_text(scale: str | None) -> str:
    return config.scale() if scale is None else str(scale)


def _new_figure(width: float, height: float) -> Figure:
    if width > 8.5:
        raise ValueError(f"figure width {width} in exceeds the page width (8.5 in)")
    return plt.figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _finish(fig: Figure) -> Figure:
    """Fix tick label sizes on every axes (ticks are created lazily, after the rc context)."""
    for ax in fig.axes:
        ax.tick_params(axis="both", which="both", labelsize=TICK_SIZE)
    return fig


def _arr(name: str, x, ndim: int = 1) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {a.shape}")
    return a


def _same_len(**arrays) -> int:
    sizes = {k: np.shape(v)[0] for k, v in arrays.items() if v is not None}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"arrays must have the same length, got {sizes}")
    return next(iter(sizes.values()))


def _yerr(sd, n: int) -> np.ndarray | None:
    """Error-bar half-widths 2 sd, or None when there is no spread (one seed)."""
    if sd is None:
        return None
    sd = _arr("sd", sd)
    if sd.shape != (n,):
        raise ValueError(f"standard deviations must have shape ({n},), got {sd.shape}")
    return 2 * sd if np.any(sd > 0) else None


def _colors(keys, colors: Mapping | None) -> dict:
    keys = sorted(keys)
    if colors is not None:
        missing = [k for k in keys if k not in colors]
        if missing:
            raise ValueError(f"colors has no entry for {missing}")
        return {k: colors[k] for k in keys}
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def _w2_label(s2: float) -> str:
    return f"$\\|w_\\star\\|^2 = {s2:g}$"


def _vec_text(w) -> str:
    """(2, 2, 2) / (2, ..., 2) / 0 for a vector with equal entries, else its squared norm."""
    w = np.asarray(w, dtype=float).ravel()
    if np.all(w == 0):
        return "$w_\\star = 0$"
    if np.all(w == w[0]):
        v = f"{w[0]:g}"
        inner = ", ".join([v] * w.size) if w.size <= 3 else f"{v}, \\dots, {v}"
        return f"$w_\\star = ({inner})$"
    return f"$\\|w_\\star\\|^2 = {float(w @ w):g}$"


def _dc_text(d: int, C: int) -> str:
    return f"$d = C = {d}$" if d == C else f"$d = {d}$, $C = {C}$"


def _legend_right(ax, **kw):
    return ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), borderaxespad=0.0, **kw)


def _legend_below(ax, ncol: int = 1, **kw):
    return ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.2), borderaxespad=0.0, ncol=ncol, **kw
    )


def _gd_line(ax, gd_risk: float, label: str | None = None):
    return ax.axhline(float(gd_risk), label=label or "_nolegend_", **GD_STYLE)


def _curve_ylim(curves, extra, ylim):
    if ylim is not None:
        return tuple(ylim)
    vals = np.concatenate([np.ravel(c) for c in curves] + [np.ravel(extra)])
    vals = vals[np.isfinite(vals) & (vals > 0)]
    return 0.93 * vals.min(), 1.07 * vals.max()


# ----------------------------------------------------------------------------------------------
# shared_setting


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
    step with the optimal step size. Replaces cell [13] of ``shared_setting.ipynb``.

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
    if set(losses) != set(evaluation):
        raise ValueError(f"losses and evaluation need the same runs: {list(losses)}, {evaluation}")
    with style():
        fig = _new_figure(6.5, 4.4)
        ax = fig.add_subplot()
        colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
        curves = []
        for i, (name, loss) in enumerate(losses.items()):
            loss = _arr(f"losses[{name!r}]", loss)
            y, x = smooth(loss, window)
            curves.append(y)
            col = colors[i % len(colors)]
            ax.plot(x, y, color=col, label=f"LSA, {name} (train, {window}-step mean)")
            ev, se = evaluation[name]
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


def heads_optimum(
    heads, risk, exact, floor: float, gd_risk: float, *, d: int, C: int, w_star
) -> Figure:
    """Optimal risk of H-head LSA against H (multihead_theory, Theorem 1, in Fig. 2's setting).

    Open markers: the subspace search of :func:`iclgd.exact.best_lsa` (H < d, exact up to solver
    precision); filled markers: the exact optimum (constructions, H >= d); dotted line: the floor
    over all H; dashed red: one GD step from w*. Replaces cell [13] of
    ``part1/multihead_theory.ipynb``.

    Args:
        heads: head counts H, shape (n,), increasing.
        risk: best risk found for each H, shape (n,).
        exact: bool, shape (n,): True where ``risk`` comes from a construction, False where it
            comes from the subspace search (``exact.best_lsa``).
        floor: the best risk over all multi-head LSA (``exact.best_multihead_lsa(...).risk``).
        gd_risk: exact risk of one GD step from w* with the optimal step.
        d, C: dimension and context length (title, and the vertical line at H = d).
        w_star: the prior mean, shape (d,) (title).
    """
    heads = _arr("heads", heads)
    risk = _arr("risk", risk)
    exact = np.asarray(exact, dtype=bool)
    _same_len(heads=heads, risk=risk, exact=exact)
    with style():
        fig = _new_figure(6.5, 4.4)
        ax = fig.add_subplot()
        ax.plot(heads, risk, "-", color="tab:blue", alpha=0.4, label="_nolegend_")
        ax.plot(
            heads[~exact],
            risk[~exact],
            "o",
            mfc="none",
            color="tab:blue",
            ms=8,
            label="optimum by subspace search",
        )
        ax.plot(
            heads[exact],
            risk[exact],
            "o",
            color="tab:blue",
            ms=8,
            label="exact optimum (construction)",
        )
        ax.axhline(float(floor), color="tab:blue", ls=":", lw=1.2, label="floor: best over all $H$")
        _gd_line(ax, gd_risk, "one GD step from $w_\\star$ (exact)")
        ax.axvline(d, color="gray", lw=0.8)
        ax.text(
            d + 0.05, 0.97, "$H = d$", color="gray", va="top", transform=ax.get_xaxis_transform()
        )
        ax.set(
            xlabel="number of heads $H$",
            ylabel="optimal ICL risk",
            xticks=heads,
            title=f"$d = {d}$, $C = {C}$, {_vec_text(w_star)}, $y_q = 0$",
        )
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        _legend_below(ax, ncol=2)
        return _finish(fig)


def gd_gap(
    contexts,
    risk_lsa,
    risk_gd,
    *,
    d: int,
    w2: float,
    gaps: Mapping[int, tuple[np.ndarray, np.ndarray]],
    gaps_C: int,
) -> Figure:
    """The gap between the best multi-head LSA and one GD step (multihead_theory, Theorem 2).

    (a) top, full width: against the context length C (log-log), the gap with the formula
    2‖w*‖²/(Cd+2) and the two risks; (b) bottom left: the ratio LSA / GD with its limit
    1 + 2‖w*‖²/(d²(d+1)); (c) bottom right: the gap against ‖w*‖² at fixed C for several d, with
    the formula lines 2‖w*‖²/(Cd+2). Replaces cell [36] of ``part1/multihead_theory.ipynb``.

    Args:
        contexts: context lengths C, shape (n,).
        risk_lsa: exact risk of the best multi-head LSA (H >= d) at each C, shape (n,).
        risk_gd: exact risk of one GD step from w* (optimal step) at each C, shape (n,).
        d: dimension of panels (a) and (b).
        w2: ‖w*‖² of panels (a) and (b).
        gaps: dimension d' -> ``(w2_values, gap_values)``, each shape (m,): best LSA risk minus
            one GD step at C = ``gaps_C`` (panel c).
        gaps_C: the context length of panel (c).
    """
    contexts = _arr("contexts", contexts)
    risk_lsa, risk_gd = _arr("risk_lsa", risk_lsa), _arr("risk_gd", risk_gd)
    _same_len(contexts=contexts, risk_lsa=risk_lsa, risk_gd=risk_gd)
    with style():
        fig = _new_figure(8.0, 7.6)
        gs = fig.add_gridspec(2, 2, height_ratios=[1.1, 1])
        ax_a = fig.add_subplot(gs[0, :])
        ax_b, ax_c = fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[1, 1])

        Cf = np.geomspace(contexts.min(), contexts.max(), 200)
        ax = ax_a
        ax.plot(contexts, risk_lsa - risk_gd, "o", color="tab:blue", label="gap, exact optima")
        ax.plot(
            Cf,
            2 * w2 / (Cf * d + 2),
            "-",
            color="tab:blue",
            alpha=0.5,
            label="$2\\|w_\\star\\|^2/(Cd+2)$",
        )
        ax.plot(contexts, risk_gd, "s", color=GD_COLOR, mfc="none", label="risk of one GD step")
        ax.plot(contexts, risk_lsa, "^", color="black", mfc="none", label="risk of the best LSA")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="context length $C$",
            ylabel="risk",
            title=f"(a) $d = {d}$, $\\|w_\\star\\|^2 = {w2:g}$, $y_q = 0$, $H \\geq d$",
        )
        _legend_right(ax)

        ax = ax_b
        limit = 1 + 2 * w2 / (d**2 * (d + 1))
        ax.plot(contexts, risk_lsa / risk_gd, "o-", color="black", label="best LSA / one GD step")
        ax.axhline(limit, color="gray", ls=":", lw=1.5, label="$1 + 2\\|w_\\star\\|^2/(d^2(d+1))$")
        ax.set(
            xscale="log",
            xlabel="context length $C$",
            ylabel="best LSA risk / one GD step",
            title="(b) the relative gap persists",
        )
        _legend_below(ax)

        ax = ax_c
        dcolors = ["tab:orange", "tab:blue", "tab:green", "tab:purple"]
        for i, (dd, (s2, gap)) in enumerate(sorted(gaps.items())):
            s2, gap = _arr("w2_values", s2), _arr("gap_values", gap)
            _same_len(w2_values=s2, gap_values=gap)
            col = dcolors[i % len(dcolors)]
            ax.plot(s2, gap, "o", color=col, label=f"$d = {dd}$")
            s2f = np.linspace(0.0, s2.max(), 100)
            ax.plot(s2f, 2 * s2f / (gaps_C * dd + 2), "-", color=col, alpha=0.5, label="_nolegend_")
        ax.set(
            xlabel="$\\|w_\\star\\|^2$",
            ylabel="best LSA risk $-$ one GD step",
            title=f"(c) $C = {gaps_C}$, $y_q = 0$",
        )
        _legend_below(ax, ncol=2, title="dots: exact; lines: $2\\|w_\\star\\|^2/(Cd+2)$")
        return _finish(fig)


# ----------------------------------------------------------------------------------------------
# part1/multihead_experiments


def _trained_points(ax, x, mean, sd, exact, *, steps: int, exact_steps: int):
    """Trained models: sampled (squares, 2 sd bars over seeds) and exact-gradient twins (x)."""
    ax.errorbar(
        x,
        mean,
        yerr=_yerr(sd, len(x)),
        fmt="s",
        color="tab:blue",
        mfc="none",
        ms=8,
        capsize=3,
        label=f"trained, {steps} sampled steps (exact risk)",
    )
    ax.plot(
        x,
        exact,
        "x",
        color="tab:orange",
        ms=8,
        mew=2,
        label=f"trained, {exact_steps} exact-gradient steps",
    )


def _trained_order(ax) -> tuple[list, list]:
    """Legend entries of ``ax`` with the sampled-trained errorbars before the exact-gradient twins.

    (matplotlib lists errorbar containers after all lines.)"""
    handles, labels = ax.get_legend_handles_labels()
    pairs = list(zip(handles, labels, strict=True))
    sampled = [p for p in pairs if "sampled steps" in p[1]]
    rest = [p for p in pairs if "sampled steps" not in p[1]]
    at = next((i for i, p in enumerate(rest) if "exact-gradient" in p[1]), len(rest))
    pairs = rest[:at] + sampled + rest[at:]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def fig2_heads(
    heads,
    optimum: Mapping[int, float],
    risk_sampled,
    risk_exact,
    risk_checkpoint,
    losses_sampled: Mapping[int, np.ndarray],
    losses_exact: Mapping[int, np.ndarray],
    *,
    floor: float,
    gd_risk: float,
    d: int,
    risk_sampled_sd=None,
    checkpoint: int = 2000,
    show: Sequence[int] | None = None,
    scale: str | None = None,
    ylim: tuple[float, float] | None = None,
    window: int = 50,
) -> Figure:
    """Fig. 2 of Xie et al. (multihead_experiments): the number of heads, w* = (2, ..., 2), y_q = 0.

    (a) top, full width: training curves of the runs ``show``, sampled prompts (solid, smoothed)
    and exact gradient (dotted), with the optimum for H >= d and one GD step; (b) bottom left: the
    final exact risk against H, the exact optimum of each H (line), the sampled-trained models
    (squares, bars of 2 sd over seeds) and their exact-gradient twins (x); (c) bottom right: a
    zoom near saturation (H >= d - 2) with the twins at ``checkpoint`` and at the end. One shared
    legend for (b) and (c) below them. Replaces cell [20] of ``part1/multihead_experiments.ipynb``.

    Args:
        heads: head counts H that were trained, shape (n,).
        optimum: H -> exact optimal risk over H-head LSA, for H = 1 ... max(heads) (``opt_H``).
        risk_sampled: mean over seeds of the exact risk of the sampled-trained models, shape (n,).
        risk_exact: exact risk of the exact-gradient twins at the end of training, shape (n,).
        risk_checkpoint: the same after ``checkpoint`` exact-gradient steps, shape (n,).
        losses_sampled: H -> per-step minibatch loss of one sampled run, shape (steps,); at least
            the heads in ``show``.
        losses_exact: H -> exact risk before each exact-gradient step, shape (exact_steps,).
        floor: the optimum for H >= d (``exact.best_multihead_lsa(...).risk``).
        gd_risk: exact risk of one GD step from w* with the optimal step.
        d: dimension (the line at H = d, the default ``show``, the zoom).
        risk_sampled_sd: standard deviation over seeds, shape (n,), or None (one seed: no bars).
        checkpoint: the exact-gradient step of ``risk_checkpoint`` (labels).
        show: the heads whose training curves panel (a) draws; default (1, 2, 5, d, d + 1), those
            present in ``losses_sampled``.
        scale: ``"ci"`` or ``"paper"`` (title); ``None`` reads ``iclgd.scale()``.
        ylim: y-limits of panel (a); default: the range of the drawn curves.
        window: moving-average window of the sampled curves.
    """
    heads = np.asarray(heads, dtype=int)
    risk_sampled, risk_exact = (_arr("risk_sampled", risk_sampled), _arr("risk_exact", risk_exact))
    risk_checkpoint = _arr("risk_checkpoint", risk_checkpoint)
    n = _same_len(
        heads=heads, risk_sampled=risk_sampled, risk_exact=risk_exact, risk_ckpt=risk_checkpoint
    )
    if show is None:
        show = [H for H in (1, 2, 5, d, d + 1) if H in losses_sampled and H in losses_exact]
    steps = len(next(iter(losses_sampled.values())))
    exact_steps = len(next(iter(losses_exact.values())))
    with style():
        fig = _new_figure(8.0, 8.6)
        gs = fig.add_gridspec(2, 2, height_ratios=[1, 1.05], width_ratios=[1.25, 1])
        ax_a = fig.add_subplot(gs[0, :])
        ax_b, ax_c = fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[1, 1])

        ax = ax_a
        curves = []
        for H, col in zip(show, plt.cm.viridis(np.linspace(0, 0.9, len(show))), strict=True):
            y, x = smooth(_arr(f"losses_sampled[{H}]", losses_sampled[H]), window)
            ye = _arr(f"losses_exact[{H}]", losses_exact[H])
            ax.plot(x, y, color=col, lw=1.3, label=f"$H = {H}$")
            ax.plot(np.arange(ye.size), ye, color=col, lw=1.2, ls=":", label="_nolegend_")
            curves += [y, ye]
        ax.axhline(float(floor), color="black", lw=1.0, ls="-.", label="exact optimum, $H \\geq d$")
        _gd_line(ax, gd_risk, "one GD step from $w_\\star$")
        ax.set(
            yscale="log",
            xlabel="training step",
            ylabel="ICL risk",
            title="(a) training: sampled prompts (solid), exact gradient (dotted)",
        )
        ax.set_ylim(_curve_ylim(curves, [gd_risk], ylim))
        log_ticks(ax)
        _legend_right(ax)

        ax = ax_b
        opt_label = "exact optimum over $H$-head LSA"
        Hall = np.array(sorted(optimum))
        ax.plot(Hall, [optimum[H] for H in Hall], "-o", color="black", ms=4, label=opt_label)
        _trained_points(
            ax,
            heads,
            risk_sampled,
            risk_sampled_sd,
            risk_exact,
            steps=steps,
            exact_steps=exact_steps,
        )
        ax.plot([], [], "^", color="tab:green", mfc="none", ms=8, label="ckpt")
        _gd_line(ax, gd_risk, "one GD step from $w_\\star$ (exact)")
        ax.axvline(d, color="gray", lw=0.8)
        ax.text(
            d + 0.15, 0.97, "$H = d$", color="gray", va="top", transform=ax.get_xaxis_transform()
        )
        ax.set(
            yscale="log",
            xlabel="number of heads $H$",
            ylabel="final ICL risk",
            title="(b) final risk, $w_\\star = (2, \\dots, 2)$\n"
            f"$y_q = 0$ ({_scale_text(scale)} scale)",
        )
        ax.set_xticks(Hall if Hall.size <= 14 else Hall[::2])
        log_ticks(ax)

        ax = ax_c
        near = [i for i in range(n) if heads[i] >= d - 2]
        Hn = heads[near]
        ax.plot(Hn, [optimum[H] for H in Hn], "-o", color="black", ms=4, label="_nolegend_")
        ax.plot(Hn, risk_sampled[near], "s", color="tab:blue", mfc="none", ms=8, label="_nolegend_")
        ax.plot(
            Hn, risk_checkpoint[near], "^", color="tab:green", mfc="none", ms=8, label="_nolegend_"
        )
        ax.plot(Hn, risk_exact[near], "x", color="tab:orange", ms=8, mew=2, label="_nolegend_")
        ax.axvline(d, color="gray", lw=0.8)
        ax.set(
            xlabel="number of heads $H$",
            ylabel="final ICL risk",
            xticks=Hn,
            title="(c) near saturation:\n$H = d$ converges last",
        )

        by_label = dict(zip(*ax_b.get_legend_handles_labels()[::-1], strict=True))
        order = [
            opt_label,
            f"trained, {steps} sampled steps (exact risk)",
            "ckpt",
            f"trained, {exact_steps} exact-gradient steps",
            "one GD step from $w_\\star$ (exact)",
        ]
        labels = [
            f"trained, {checkpoint} exact-gradient steps" if k == "ckpt" else k for k in order
        ]
        fig.legend([by_label[k] for k in order], labels, loc="outside lower center", ncol=2)
        return _finish(fig)


def fig3_prior_mean(
    w2_grid,
    losses: Mapping[float, np.ndarray],
    w2_fine,
    optimum_fine,
    risk_sampled,
    risk_exact,
    *,
    gd_risk: float,
    H: int,
    d: int,
    C: int,
    risk_sampled_sd=None,
    exact_steps: int = 5000,
    scale: str | None = None,
    ylim: tuple[float, float] | None = None,
    window: int = 50,
) -> Figure:
    """Fig. 3 of Xie et al. (multihead_experiments): the prior mean, H = d + 1 heads, y_q = 0.

    (a) left: sampled training curves for each ‖w*‖² (smoothed) and one GD step; (b) right: the
    final exact risk against ‖w*‖², the exact optimum (a line of slope 2/(Cd+2) from one GD
    step), the sampled-trained models (squares, bars of 2 sd over seeds) and the exact-gradient
    twins (x). Legends below the panels. Replaces cell [26] of
    ``part1/multihead_experiments.ipynb``.

    Args:
        w2_grid: the trained ‖w*‖² values, shape (m,).
        losses: ‖w*‖² -> per-step minibatch loss of one sampled run, shape (steps,), for every
            value of ``w2_grid``.
        w2_fine: ‖w*‖² values where the optimum was solved, shape (k,).
        optimum_fine: exact optimum (H >= d) at ``w2_fine``, shape (k,).
        risk_sampled: mean over seeds of the exact risk of the sampled-trained models, shape (m,).
        risk_exact: exact risk of the exact-gradient twins, shape (m,).
        gd_risk: exact risk of one GD step from w* (the same for every w*).
        H, d, C: heads, dimension and context length (titles).
        risk_sampled_sd: standard deviation over seeds, shape (m,), or None (one seed).
        exact_steps: number of exact-gradient steps of the twins (label).
        scale: ``"ci"`` or ``"paper"``; ``None`` reads ``iclgd.scale()``.
        ylim: y-limits of panel (a); default: the range of the drawn curves.
        window: moving-average window.
    """
    w2_grid = _arr("w2_grid", w2_grid)
    risk_sampled, risk_exact = (_arr("risk_sampled", risk_sampled), _arr("risk_exact", risk_exact))
    m = _same_len(w2_grid=w2_grid, risk_sampled=risk_sampled, risk_exact=risk_exact)
    w2_fine, optimum_fine = _arr("w2_fine", w2_fine), _arr("optimum_fine", optimum_fine)
    _same_len(w2_fine=w2_fine, optimum_fine=optimum_fine)
    steps = len(next(iter(losses.values())))
    with style():
        fig = _new_figure(8.0, 5.6)
        ax_a, ax_b = fig.subplots(1, 2)

        ax = ax_a
        curves = []
        for w2, col in zip(w2_grid, plt.cm.plasma(np.linspace(0, 0.85, m)), strict=True):
            y, x = smooth(_arr(f"losses[{w2:g}]", losses[float(w2)]), window)
            ax.plot(x, y, color=col, lw=1.3, label=f"{w2:g}")
            curves.append(y)
        _gd_line(ax, gd_risk, "one GD step")
        ax.set(
            yscale="log",
            xlabel="training step",
            ylabel=f"ICL risk ({window}-step mean)",
            title=f"(a) sampled training\n$H = {H}$, $y_q = 0$",
        )
        ax.set_ylim(_curve_ylim(curves, [gd_risk], ylim))
        log_ticks(ax)
        _legend_below(ax, ncol=3, title="$\\|w_\\star\\|^2$")

        ax = ax_b
        ax.plot(w2_fine, optimum_fine, "-", color="black", label="exact optimum, $H \\geq d$")
        _gd_line(ax, gd_risk, "one GD step from $w_\\star$ (exact)")
        _trained_points(
            ax,
            w2_grid,
            risk_sampled,
            risk_sampled_sd,
            risk_exact,
            steps=steps,
            exact_steps=exact_steps,
        )
        slope = f"1/{(C * d + 2) / 2:g}"
        ax.set(
            xlabel="$\\|w_\\star\\|^2$",
            ylabel="final ICL risk",
            title=f"(b) slope $2/(Cd+2)$ = {slope}, {_dc_text(d, C)}\n({_scale_text(scale)} scale)",
        )
        _legend_below(ax, handles=(hl := _trained_order(ax))[0], labels=hl[1])
        return _finish(fig)


def fig4_initial_guess(
    s_grid,
    losses_bias: Mapping[float, np.ndarray],
    losses_guess: Mapping[float, np.ndarray],
    s_fine,
    optimum_bias,
    optimum_guess,
    risk_bias,
    risk_guess,
    exact_bias,
    exact_guess,
    *,
    gd_risk: float,
    H: int,
    d: int,
    C: int,
    risk_bias_sd=None,
    risk_guess_sd=None,
    exact_steps: int = 5000,
    scale: str | None = None,
    ylim: tuple[float, float] | None = None,
    window: int = 50,
) -> Figure:
    """Fig. 4 of Xie et al. (multihead_experiments): the initial guess, H = d + 1, w* = 0.

    (a) top, full width: sampled training curves for y_q = c (blues, by c^2) and y_q = x_q^T g
    (oranges, by ‖g‖²); (b) bottom left: final exact risk against c^2; (c) bottom right: against
    ‖g‖² -- each with the exact optimum (a line of slope 2/(Cd+2) from one GD step), the
    sampled-trained models (squares, bars of 2 sd over seeds) and the exact-gradient twins (x),
    and one legend below. Replaces cell [32] of ``part1/multihead_experiments.ipynb``.

    Args:
        s_grid: the trained values s = c^2 = ‖g‖² (both sweeps share it, 0 included), shape (m,).
        losses_bias: c^2 -> per-step minibatch loss of the sampled run with y_q = c, shape (steps,).
        losses_guess: ‖g‖² -> the same with y_q = x_q^T g. A key 0 in both dicts is the same run
            (y_q = 0) and is drawn once, in the blues (``c^2 = 0``).
        s_fine: values where the optima were solved, shape (k,).
        optimum_bias, optimum_guess: exact optimum (H >= d + 1) at ``s_fine``, shape (k,) each.
        risk_bias, risk_guess: mean over seeds of the exact risk of the sampled-trained models at
            ``s_grid``, shape (m,) each.
        exact_bias, exact_guess: exact risk of the exact-gradient twins, shape (m,) each.
        gd_risk: exact risk of one GD step from 0.
        H, d, C: heads, dimension and context length (titles).
        risk_bias_sd, risk_guess_sd: standard deviations over seeds, shape (m,), or None.
        exact_steps: number of exact-gradient steps of the twins (label).
        scale: ``"ci"`` or ``"paper"``; ``None`` reads ``iclgd.scale()``.
        ylim: y-limits of panel (a); default: the range of the drawn curves.
        window: moving-average window.
    """
    s_grid = _arr("s_grid", s_grid)
    arrays = {
        "risk_bias": risk_bias,
        "risk_guess": risk_guess,
        "exact_bias": exact_bias,
        "exact_guess": exact_guess,
    }
    arrays = {k: _arr(k, v) for k, v in arrays.items()}
    _same_len(s_grid=s_grid, **arrays)
    s_fine = _arr("s_fine", s_fine)
    _same_len(s_fine=s_fine, optimum_bias=optimum_bias, optimum_guess=optimum_guess)
    steps = len(next(iter(losses_bias.values())))
    scale = _scale_text(scale)
    slope = f"1/{(C * d + 2) / 2:g}"
    with style():
        fig = _new_figure(8.0, 8.4)
        gs = fig.add_gridspec(2, 2, height_ratios=[1, 1.05])
        ax_a = fig.add_subplot(gs[0, :])
        ax_b = fig.add_subplot(gs[1, 0])
        ax_c = fig.add_subplot(gs[1, 1], sharey=ax_b)

        ax = ax_a
        curves = []
        for losses, name, cmap, skip in (
            (losses_bias, "c^2", plt.cm.Blues, ()),
            (losses_guess, "\\|g\\|^2", plt.cm.Oranges, (0.0,) if 0.0 in losses_bias else ()),
        ):
            keys = [s for s in sorted(losses) if s not in skip]
            for s, col in zip(keys, cmap(np.linspace(0.45, 0.95, len(keys))), strict=True):
                y, x = smooth(_arr("losses", losses[s]), window)
                ax.plot(x, y, color=col, lw=1.3, label=f"${name} = {s:g}$")
                curves.append(y)
        _gd_line(ax, gd_risk, "one GD step from 0")
        ax.set(
            yscale="log",
            xlabel="training step",
            ylabel=f"ICL risk ({window}-step mean)",
            title=f"(a) sampled training, $H = {H}$, $w_\\star = 0$",
        )
        ax.set_ylim(_curve_ylim(curves, [gd_risk], ylim))
        log_ticks(ax)
        _legend_right(ax, ncol=2 if len(curves) > 7 else 1)

        for ax, opt, mean, sd, ex, xl, tl in (
            (
                ax_b,
                optimum_bias,
                arrays["risk_bias"],
                risk_bias_sd,
                arrays["exact_bias"],
                "$c^2 = y_{q\\_bias}^2$",
                "(b) $y_q = c$",
            ),
            (
                ax_c,
                optimum_guess,
                arrays["risk_guess"],
                risk_guess_sd,
                arrays["exact_guess"],
                "$\\|g\\|^2 = \\|y_{q\\_guess}\\|^2$",
                "(c) $y_q = x_q^\\top g$",
            ),
        ):
            ax.plot(
                s_fine,
                _arr("optimum", opt),
                "-",
                color="black",
                label="exact optimum, $H \\geq d + 1$",
            )
            _gd_line(ax, gd_risk, "one GD step from 0 (exact)")
            _trained_points(ax, s_grid, mean, sd, ex, steps=steps, exact_steps=exact_steps)
            ax.set(xlabel=xl, title=f"{tl}, slope {slope}\n({scale} scale)")
        ax_b.set_ylabel("final ICL risk")
        ax_c.tick_params(labelleft=False)
        handles, labels = _trained_order(ax_b)
        fig.legend(handles, labels, loc="outside lower center", ncol=2)
        return _finish(fig)


# ----------------------------------------------------------------------------------------------
# part1/yq_lsa


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
    below. Replaces cell [22] of ``part1/yq_lsa.ipynb``.

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
    cols = _colors(set(sampled) | set(exact), colors)
    steps = len(next(iter(sampled.values()))[0])
    exact_steps = len(next(iter(exact.values())))
    with style():
        fig = _new_figure(8.0, 5.0)
        ax1, ax2 = fig.subplots(1, 2, sharey=True)
        curves = []
        for s2, (loss, r_exact) in sorted(sampled.items()):
            y, x = smooth(_arr("losses", loss), window)
            ax1.plot(x, y, color=cols[s2], lw=1.2, label="_nolegend_")
            ax1.plot([len(loss)], [r_exact], "o", color=cols[s2], mec="k", ms=8, zorder=3)
            curves.append(y)
        for s2, curve in sorted(exact.items()):
            curve = _arr("exact", curve)
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
            Line2D([], [], **GD_STYLE),
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
    true weights filled. One legend below. Replaces cell [28] of ``part1/yq_lsa.ipynb``.

    Args:
        metrics: ‖w*‖² -> dict with ``"pred_diff"`` (n,), ``"pred_scale"`` (float),
            ``"grad_diff"`` (n,), ``"grad_scale"`` (float), ``"cos"`` (n,) and ``"cos_ref"``
            (n,), as computed in the notebook (cell [27]).
        colors: ‖w*‖² -> colour; default :data:`PALETTE` in increasing order of ‖w*‖².
        bins: number of bins of panels (a) and (b).
        log_bins: bin edges of panel (c); default ``np.logspace(-6, 0, 61)``.
    """
    keys = ("pred_diff", "pred_scale", "grad_diff", "grad_scale", "cos", "cos_ref")
    for s2, m in metrics.items():
        missing = [k for k in keys if k not in m]
        if missing:
            raise ValueError(f"metrics[{s2!r}] lacks {missing}")
    cols = _colors(metrics, colors)
    log_bins = np.logspace(-6, 0, 61) if log_bins is None else np.asarray(log_bins)
    with style():
        fig = _new_figure(8.0, 7.0)
        gs = fig.add_gridspec(2, 2)
        ax_a, ax_b = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])
        ax_c = fig.add_subplot(gs[1, :])
        for s2 in cols:
            m, c = metrics[s2], cols[s2]
            pred_rel = _arr("pred_diff", m["pred_diff"]) / float(m["pred_scale"])
            grad_rel = _arr("grad_diff", m["grad_diff"]) / float(m["grad_scale"])
            ax_a.hist(pred_rel, bins=bins, histtype="step", color=c, lw=1.4)
            ax_b.hist(grad_rel, bins=bins, histtype="step", color=c, lw=1.4)
            ax_c.hist(1 - _arr("cos", m["cos"]), bins=log_bins, histtype="step", color=c, lw=1.4)
            ax_c.hist(
                1 - _arr("cos_ref", m["cos_ref"]),
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
