"""Figures of Part III (Ahn et al. 2023): the single layer, the multi-layer transformer, and the
training runs of Figs. 1-4 (distances to the identity against iteration, weight heat maps)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from .. import checks as v
from .core import _as_array, _finish, _legend_below, _new_figure, _nonempty, log_ticks, style

__all__ = [
    "single_layer_regulariser",
    "multilayer_scalars",
    "training_dists",
    "weight_heatmaps",
    "gd_baselines",
]


def single_layer_regulariser(
    ns,
    steps: np.ndarray,
    exact_ns,
    exact_steps: np.ndarray,
    lam,
    risks: Mapping[str, np.ndarray],
) -> Figure:
    """Theorem 1's preconditioner against ``n`` (``book/part3/single_layer``).

    (a) The step that eq. 8 takes along each eigenvector of ``Sigma``, ``lambda_i |A_ii|``
    (1 = Newton's step), lines from eq. 8 and dots from the exact optimum; (b) the exact risk of
    the optimum beside preconditioners without the ``(1/n) sum_k lambda_k`` term.

    Args:
        ns: ``(m,)`` context lengths of the curves.
        steps: ``(m, d)`` values ``lambda_i |A_ii|`` from eq. 8.
        exact_ns: ``(q,)`` context lengths of the dots.
        exact_steps: ``(q, d)`` the same from the exact optimum.
        lam: ``(d,)`` eigenvalues of ``Sigma`` (legend).
        risks: label -> ``(m,)`` exact risks against ``ns``.
    """
    _nonempty(risks=risks)
    ns = _as_array("ns", ns)
    steps = _as_array("steps", steps, 2)
    exact_ns = _as_array("exact_ns", exact_ns)
    exact_steps = _as_array("exact_steps", exact_steps, 2)
    lam = _as_array("lam", lam)
    if steps.shape != (ns.size, lam.size) or exact_steps.shape != (exact_ns.size, lam.size):
        raise ValueError(
            f"steps must be (len(ns), d) = ({ns.size}, {lam.size}) and exact_steps "
            f"(len(exact_ns), d); got {steps.shape} and {exact_steps.shape}"
        )
    with style():
        fig = _new_figure(8.0, 3.9)
        ax1, ax2 = fig.subplots(1, 2)
        order = np.unique(np.round(lam, 12), return_index=True)[1]
        for k, i in enumerate(sorted(order)):
            c = f"C{k}"
            ax1.plot(ns, steps[:, i], color=c, label=rf"$\lambda = {lam[i]:.3g}$ (eq. 8)")
            ax1.plot(exact_ns, exact_steps[:, i], "o", color=c, ms=5, mfc="none")
        ax1.plot([], [], "ko", mfc="none", label="exact optimum")
        ax1.axhline(1.0, color="0.5", ls="--", lw=1, label="Newton")
        ax1.set_xscale("log")
        ax1.set_xlabel("$n$")
        ax1.set_ylabel(r"step along eigenvector, $\lambda_i |A_{ii}|$")
        ax1.set_title("(a) eq. 8 shrinks low-variance directions")
        _legend_below(ax1, ncol=2)
        for k, (name, r) in enumerate(risks.items()):
            r = _as_array(f"risks[{name!r}]", r)
            ax2.plot(ns, r, color=f"C{k + 4}", ls=["-", "--", ":"][k % 3], label=name)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlabel("$n$")
        ax2.set_ylabel("exact in-context loss")
        ax2.set_title("(b) the regulariser pays at small $n$")
        _legend_below(ax2)
    return _finish(fig)


def multilayer_scalars(
    Ls, risks_exact, a_exact, risks_trained, d: int, n: int, *, risks_unconstrained=None
) -> Figure:
    """The optimum on Theorem 4's set against the number of layers (``part3/multi_layer``).

    Args:
        Ls: ``(m,)`` numbers of layers.
        risks_exact: ``(m,)`` exact minimal loss on the set ``S``.
        a_exact: list of ``m`` arrays, the optimal scalars ``a_l`` for each ``L``.
        risks_trained: ``(m,)`` loss reached by training unconstrained ``A_l`` (NaN where no model
            was trained): trained models only.
        d, n: sizes (title).
        risks_unconstrained: optional ``(m,)`` exact optimum over unconstrained ``A_l`` where it is
            known (NaN elsewhere), drawn apart from the trained models.
    """
    d, n = v.positive_int("d", d), v.positive_int("n", n)
    Ls = _as_array("Ls", Ls)
    risks_exact = _as_array("risks_exact", risks_exact)
    risks_trained = _as_array("risks_trained", risks_trained)
    extra = {"risks_exact": risks_exact, "risks_trained": risks_trained}
    if risks_unconstrained is not None:
        extra["risks_unconstrained"] = _as_array("risks_unconstrained", risks_unconstrained)
    for name, vals in extra.items():
        if vals.shape != Ls.shape:
            raise ValueError(f"{name} must have the shape of Ls, {Ls.shape}, got {vals.shape}")
    with style():
        fig = _new_figure(8.0, 3.6)
        ax1, ax2 = fig.subplots(1, 2)
        ax1.plot(Ls, risks_exact, "o-", label="exact optimum on $S$")
        if risks_unconstrained is not None:
            ax1.plot(
                Ls,
                extra["risks_unconstrained"],
                "s",
                ms=10,
                mfc="none",
                color="C2",
                label="exact optimum, unconstrained $A_l$",
            )
        ax1.plot(Ls, risks_trained, "x", ms=9, color="C3", label="trained, unconstrained $A_l$")
        ax1.set_yscale("log")
        ax1.set_xticks(Ls)
        ax1.set_xlabel("layers $L$")
        ax1.set_ylabel("in-context loss")
        ax1.set_title(f"(a) loss, $d = {d}$, $n = {n}$")
        _legend_below(ax1)
        for L, a in zip(Ls, a_exact, strict=True):
            a = _as_array("a_exact[i]", a)
            ax2.plot(np.full(a.size, L), -a, "o", color="C0")
        ax2.set_xticks(Ls)
        ax2.set_xlabel("layers $L$")
        ax2.set_ylabel(r"$-a_l$ (step along $\Sigma^{-1}$)")
        ax2.set_title("(b) optimal scalars $a_l$ on $S$")
    return _finish(fig)


def training_dists(
    steps,
    panels: Mapping[str, Mapping[str, np.ndarray]],
    losses: np.ndarray,
    loss_refs: Mapping[str, float] | None = None,
    *,
    loss_title: str = "loss",
    loss_at: int = 3,
    ncols: int = 2,
    extra_loss: Mapping[str, np.ndarray] | None = None,
) -> Figure:
    """Figs. 1 and 3 of Ahn et al.: ``Dist(., I)`` per layer against iteration, and the loss.

    Each Dist panel draws, per curve, the mean over seeds (thick) and every seed (thin).

    Args:
        steps: ``(R,)`` iterations of the recorded parameters.
        panels: panel title -> {curve label -> ``(S, R)`` Dist values}, in panel order.
        losses: ``(S, T)`` training loss of each seed at every iteration.
        loss_refs: label -> value, horizontal reference lines on the loss panel.
        loss_title: title of the loss panel.
        loss_at: position of the loss panel among all panels (0-based).
        ncols: panels per row.
        extra_loss: label -> ``(S,)`` values drawn as points at the last iteration (e.g. the exact
            population loss of each trained seed).
    """
    _nonempty(panels=panels)
    steps = _as_array("steps", steps)
    losses = _as_array("losses", losses, 2)
    seeds = losses.shape[0]  # every array of seeds must have the same S: one row per seed
    for name, curves in panels.items():
        for lab, vals in curves.items():
            vals = _as_array(f"panels[{name!r}][{lab!r}]", vals, 2)
            if vals.shape != (seeds, steps.size):
                raise ValueError(
                    f"panels[{name!r}][{lab!r}] must be (S, R) = ({seeds}, {steps.size}) "
                    f"(S seeds as in losses, R steps), got {vals.shape}"
                )
    for lab, vals in (extra_loss or {}).items():
        vals = _as_array(f"extra_loss[{lab!r}]", vals)
        if vals.shape != (seeds,):
            raise ValueError(
                f"extra_loss[{lab!r}] must be (S,) = ({seeds},) (S seeds as in losses), "
                f"got {vals.shape}"
            )
    names = list(panels)
    total = len(names) + 1
    ncols = v.positive_int("ncols", ncols)
    loss_at = v.positive_int("loss_at", loss_at, minimum=0)
    if not 0 <= loss_at < total:
        raise ValueError(f"loss_at must be in 0..{total - 1}, got {loss_at}")
    nrows = -(-total // ncols)
    with style():
        fig = _new_figure(8.0, 2.5 * nrows)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax in axes[total:]:
            ax.set_visible(False)
        order = names[:loss_at] + [None] + names[loss_at:]
        colors = {"blue": "C0", "red": "C3"}
        for k, (ax, name) in enumerate(zip(axes, order, strict=False)):
            tag = f"({chr(97 + k)}) "
            if name is None:
                T = losses.shape[1]
                it = np.arange(T)
                for s in losses:
                    ax.plot(it, s, color="C2", lw=0.6, alpha=0.5)
                ax.plot(it, np.nanmean(losses, 0), color="C2", lw=2, label="training loss (mean)")
                for j, (lab, val) in enumerate((loss_refs or {}).items()):
                    ax.axhline(
                        float(val), color="0.3", ls=["--", ":", "-."][j % 3], lw=1, label=lab
                    )
                for j, (lab, vals) in enumerate((extra_loss or {}).items()):
                    vals = _as_array(f"extra_loss[{lab!r}]", vals)
                    ax.plot(
                        np.full(vals.size, T - 1),
                        vals,
                        "o",
                        ms=4,
                        mfc="none",
                        color=f"C{4 + j}",
                        label=lab,
                    )
                ax.set_yscale("log")
                ax.set_xlabel("L-BFGS iteration")
                ax.set_title(tag + loss_title)
                _legend_below(ax, y=-0.3, fontsize=9)  # below the x label: markers at the right
                continue
            for j, (lab, vals) in enumerate(panels[name].items()):
                vals = _as_array(f"panels[{name!r}][{lab!r}]", vals, 2)
                if vals.shape[1] != steps.size:
                    raise ValueError(
                        f"panels[{name!r}][{lab!r}] must be (S, {steps.size}), got {vals.shape}"
                    )
                c = list(colors.values())[j % 2] if j < 2 else f"C{j}"
                for s in vals:
                    ax.plot(steps, s, color=c, lw=0.6, alpha=0.4)
                ax.plot(steps, vals.mean(0), color=c, lw=2, label=lab)
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("L-BFGS iteration")
            ax.set_ylabel(r"Dist$(\cdot, I)$")
            ax.set_title(tag + name)
            ax.legend(loc="best", fontsize=9)
    return _finish(fig)


def weight_heatmaps(mats: Mapping[str, np.ndarray], ncols: int = 3) -> Figure:
    """Figs. 2 and 4 of Ahn et al.: heat maps of trained weight matrices.

    Args:
        mats: panel title -> ``(d, d)`` matrix; each panel has its own symmetric colour scale.
        ncols: panels per row.
    """
    names = list(mats)
    if not names:
        raise ValueError("mats must hold at least one matrix")
    nrows = -(-len(names) // ncols)
    with style():
        fig = _new_figure(8.0, 2.5 * nrows)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax in axes[len(names) :]:
            ax.set_visible(False)
        for k, (ax, name) in enumerate(zip(axes, names, strict=False)):
            M = _as_array(f"mats[{name!r}]", mats[name], 2)
            lim = float(np.abs(M).max()) or 1.0
            im = ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks(range(M.shape[1]))
            ax.set_yticks(range(M.shape[0]))
            ax.set_title(f"({chr(97 + k)}) {name}", fontsize=9)
            fig.colorbar(im, ax=ax, shrink=0.8)
    return _finish(fig)


def gd_baselines(
    ks,
    curves: Mapping[str, np.ndarray],
    points: Mapping[str, np.ndarray] | None = None,
    floor_label: str | None = None,
) -> Figure:
    """Exact loss of ``k``-step GD baselines and of trained transformers against ``k``
    (``book/part3/baselines``).

    (a) The losses on a log scale: one line per baseline, one marker per trained seed. (b) Each
    loss divided by the reference curve (the first, or ``curves[floor_label]``), so that the gaps
    are read off directly.

    Args:
        ks: ``(K,)`` numbers of steps (layers).
        curves: label -> ``(K,)`` exact losses of a baseline.
        points: label -> ``(K, S)`` losses of ``S`` trained models at each ``k``.
        floor_label: the curve the ratios of panel (b) are taken to (default the first).
    """
    ks = _as_array("ks", ks)
    if not curves:
        raise ValueError("curves must hold at least one baseline")
    vals = {lab: _as_array(f"curves[{lab!r}]", c) for lab, c in curves.items()}
    pts = {lab: _as_array(f"points[{lab!r}]", p, 2) for lab, p in (points or {}).items()}
    for lab, c in list(vals.items()) + list(pts.items()):
        if c.shape[0] != ks.size:
            raise ValueError(f"{lab!r} must have {ks.size} rows (one per k), got shape {c.shape}")
    ref_label = next(iter(vals)) if floor_label is None else floor_label
    if ref_label not in vals:
        raise ValueError(f"floor_label must be one of {list(vals)}, got {floor_label!r}")
    ref = vals[ref_label]
    with style():
        fig = _new_figure(8.0, 3.6)
        ax1, ax2 = fig.subplots(1, 2)
        styles = ["-", "--", ":", "-."]
        for j, (lab, c) in enumerate(vals.items()):
            kw = dict(color=f"C{j}", ls=styles[j % 4], marker="o", ms=4, label=lab)
            ax1.plot(ks, c, **kw)
            ax2.plot(ks, c / ref, **kw)
        for j, (lab, p) in enumerate(pts.items()):
            x = np.repeat(ks[:, None], p.shape[1], 1)
            kw = dict(color=f"C{len(vals) + j}", marker="x", ls="none", ms=6, label=lab)
            ax1.plot(x.ravel(), p.ravel(), **kw)
            ax2.plot(x.ravel(), (p / ref[:, None]).ravel(), **kw)
        ax1.set_ylabel("exact in-context loss")
        ax1.set_title("(a) loss against the number of steps")
        ax2.set_ylabel("loss ratio")
        ax2.set_title("(b) divided by the reference curve")
        for ax in (ax1, ax2):
            ax.set_yscale("log")
            log_ticks(ax)
            ax.set_xticks(ks)
            ax.set_xlabel("steps = layers $k$")
        _legend_below(ax1, ncol=2)
    return _finish(fig)
