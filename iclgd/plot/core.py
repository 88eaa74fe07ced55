"""Shared style, helpers and layout primitives of :mod:`iclgd.plot`.

Public (re-exported by :mod:`iclgd.plot`): the page constants :data:`DPI`, :data:`MAX_WIDTH`,
:data:`STYLE`, :data:`PALETTE` and the helpers :func:`style`, :func:`smooth`, :func:`log_ticks`.
Everything else here (``_new_figure``, ``_finish``, ``_legend_below``, argument checks, ...) is the
private page layout of the figure functions: no chapter calls it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from .. import checks as v
from .. import config

__all__ = ["DPI", "MAX_WIDTH", "STYLE", "PALETTE", "style", "smooth", "log_ticks", "retina_inline"]

DPI = 100
"""Dots per inch of every figure: the notebook's inline PNG is shown at this resolution."""

MAX_WIDTH = 8.0
"""Width of the widest figure, in inches (8 in at 100 dpi = 800 px: the book's content column)."""

_TICK_SIZE = 10.0
"""Font size of tick labels, in points."""

STYLE: dict = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "font.size": 11.0,
    "axes.titlesize": 11.0,
    "axes.labelsize": 11.0,
    "xtick.labelsize": _TICK_SIZE,
    "ytick.labelsize": _TICK_SIZE,
    "legend.fontsize": 9.5,
    "legend.framealpha": 0.9,
    "lines.linewidth": 1.5,
    "lines.markersize": 7.0,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "figure.constrained_layout.use": True,
    "mathtext.fontset": "stixsans",  # DejaVu's subscript star is a dot: w_\\star read "w ."
    "text.usetex": False,
}
"""The rcParams every figure is drawn with (see :func:`style`)."""

_GD_COLOR = "red"
_GD_STYLE = {"color": _GD_COLOR, "ls": "--", "lw": 1.4}
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


def retina_inline() -> bool:
    """Under IPython, have the inline backend draw PNGs at twice their pixel density.

    The PNG of a figure of ``w`` inches is then ``2 * DPI * w`` pixels wide and carries its display
    width (``DPI * w``) in its metadata, so it is shown at the same size, sharper. Outside IPython
    (scripts, tests) nothing changes.

    Returns:
        Whether the format was set (``False`` outside an IPython shell).
    """
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
        from matplotlib_inline.config import InlineBackend
    except ImportError:
        return False
    if get_ipython() is None:
        return False
    InlineBackend.instance().figure_formats = {"retina"}  # kept if the backend starts later
    set_matplotlib_formats("retina")  # and now, if it has started
    return True


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
    if not all(hasattr(ax, f) for f in ("yaxis", "xaxis", "get_ylim", "set_ylim")):
        raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    a = ax.yaxis if axis == "y" else ax.xaxis
    if ticks is None:
        lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
        ticks = _nice_log_ticks(lo, hi)
    ticks = _as_array("ticks", ticks) if len(ticks) else np.zeros(0)
    if np.any(~np.isfinite(ticks)) or np.any(ticks <= 0):
        raise ValueError(
            f"ticks must be finite and > 0 (a log axis has no tick at or below 0), got {ticks}"
        )
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
        ax.tick_params(axis="both", which="both", labelsize=_TICK_SIZE)
    return fig


def _as_array(name: str, x, ndim: int = 1) -> np.ndarray:
    """``x`` as a float array of ``ndim`` dimensions, none of them empty (nothing to draw)."""
    if isinstance(x, (str, bytes)) or np.asarray(x).dtype.kind not in "fiu":
        kind = np.asarray(x).dtype if not isinstance(x, (str, bytes)) else "a string"
        raise TypeError(f"{name} must be a real array, got {kind}")
    a = np.asarray(x, dtype=float)
    if a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} must not be empty (nothing to draw), got shape {a.shape}")
    return a


def _nonempty(**mappings) -> None:
    """Raise ``ValueError`` naming the first argument that is empty (a figure of nothing would be
    blank), ``TypeError`` for one that is not a mapping (a dict)."""
    for name, m in mappings.items():
        if not isinstance(m, Mapping):
            raise TypeError(f"{name} must be a mapping (a dict), got {type(m).__name__}")
        if len(m) == 0:
            raise ValueError(f"{name} must not be empty (nothing to draw)")


def _same_len(**arrays) -> int:
    sizes = {k: np.shape(v)[0] for k, v in arrays.items() if v is not None}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"arrays must have the same length, got {sizes}")
    return next(iter(sizes.values()))


def _yerr(sd, n: int, name: str = "sd") -> np.ndarray | None:
    """Error-bar half-widths 2 sd, or None when there is no spread (one seed)."""
    if sd is None:
        return None
    sd = _as_array(name, sd)
    if sd.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {sd.shape}")
    _spread(name, sd)
    return 2 * sd if np.any(sd > 0) else None


def _spread(name: str, sd) -> np.ndarray:
    """Standard deviations or errors: finite and >= 0 (a NaN bar would be drawn as nothing)."""
    sd = np.asarray(sd, dtype=float)
    if not np.all(np.isfinite(sd)) or np.any(sd < 0):
        raise ValueError(f"{name} must be finite and >= 0 (a standard deviation), got {sd}")
    return sd


def _mean_se(name: str, pair) -> tuple[float, float]:
    """``(mean, standard error)``: two finite numbers, the error >= 0."""
    try:
        a = np.asarray(pair, dtype=float) if np.ndim(pair) == 1 else np.zeros(0)
    except (TypeError, ValueError):
        a = np.zeros(0)
    if a.shape != (2,) or not np.isfinite(a[0]):
        want = "a pair (mean, standard error) of finite numbers"
        raise ValueError(f"{name} must be {want}, got {pair!r}")
    _spread(f"{name}'s standard error", a[1])
    return float(a[0]), float(a[1])


def _colors_for(keys, colors: Mapping | None) -> dict:
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


def _legend_below(ax, ncol: int = 1, y: float = -0.2, **kw):
    """A legend under ``ax``, its top at ``y`` (axes fraction): lower it below an x label."""
    return ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, y), borderaxespad=0.0, ncol=ncol, **kw
    )


def _gd_line(ax, gd_risk: float, label: str | None = None):
    gd_risk = _positive("gd_risk", gd_risk)
    return ax.axhline(gd_risk, label=label or "_nolegend_", **_GD_STYLE)


def _positive(name: str, x) -> float:
    """A finite number > 0: a risk or loss drawn on a log axis (NaN, 0 or less: not drawn)."""
    x = v.finite_float(name, x)
    if x <= 0:
        raise ValueError(f"{name} must be > 0 (it is drawn on a log axis), got {x!r}")
    return x


def _mark_heads_equal_d(ax, d: int, dx: float = 0.1):
    """A grey vertical line at ``H = d`` on a plot against the number of heads, labelled."""
    ax.axvline(d, color="gray", lw=0.8)
    ax.text(d + dx, 0.97, "$H = d$", color="gray", va="top", transform=ax.get_xaxis_transform())


def _curve_ylim(curves, extra, ylim):
    if ylim is not None:
        return tuple(ylim)
    vals = np.concatenate([np.ravel(c) for c in curves] + [np.ravel(extra)])
    vals = vals[np.isfinite(vals) & (vals > 0)]
    return 0.93 * vals.min(), 1.07 * vals.max()


# ----------------------------------------------------------------------------------------------
# shared_setting


def _trained_points(
    ax, x, mean, sd, exact, *, steps: int, exact_steps: int, sd_name: str = "risk_sampled_sd"
):
    """Trained models: sampled (squares, 2 sd bars over seeds) and exact-gradient twins (x)."""
    ax.errorbar(
        x,
        mean,
        yerr=_yerr(sd, len(x), sd_name),
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


def _smoothed_training_axes(ax, curves, gd_risk: float, gd_label: str, title: str, window, ylim):
    """Finish a panel of smoothed training curves: the GD line, log scale, labels, limits, ticks."""
    _gd_line(ax, gd_risk, gd_label)
    ax.set(
        yscale="log",
        xlabel="training step",
        ylabel=f"ICL risk ({window}-step mean)",
        title=title,
    )
    ax.set_ylim(_curve_ylim(curves, [gd_risk], ylim))
    log_ticks(ax)
