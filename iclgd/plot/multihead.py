"""Figures of Part I's multi-head LSA chapters: Xie et al. Figs. 2-4, the optimum against H and the
gap to one GD step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .. import checks as v
from .core import (
    _GD_COLOR,
    _as_array,
    _curve_ylim,
    _dc_text,
    _finish,
    _gd_line,
    _legend_below,
    _legend_right,
    _mark_heads_equal_d,
    _new_figure,
    _nonempty,
    _same_len,
    _scale_text,
    _smoothed_training_axes,
    _trained_order,
    _trained_points,
    _vec_text,
    log_ticks,
    smooth,
    style,
)


def heads_optimum(
    heads, risk, exact, floor: float, gd_risk: float, *, d: int, C: int, w_star
) -> Figure:
    """Optimal risk of H-head LSA against H (multihead_theory, Theorem 1, in Fig. 2's setting).

    Open markers: the subspace search of :func:`iclgd.exact.lsa_search` (H < d, exact up to solver
    precision); filled markers: the exact optimum (constructions, H >= d); dotted line: the floor
    over all H; dashed red: one GD step from w*. Drawn in
    ``part1/multihead_theory.ipynb``.

    Args:
        heads: head counts H, shape (n,), increasing.
        risk: best risk found for each H, shape (n,).
        exact: bool, shape (n,): True where ``risk`` comes from a construction, False where it
            comes from the subspace search (``exact.lsa_search``).
        floor: the best risk over all multi-head LSA (``exact.lsa_optimum(...).risk``).
        gd_risk: exact risk of one GD step from w* with the optimal step.
        d, C: dimension and context length (title, and the vertical line at H = d).
        w_star: the prior mean, shape (d,) (title).
    """
    d, C = v.positive_int("d", d), v.positive_int("C", C)
    heads = _as_array("heads", heads)
    risk = _as_array("risk", risk)
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
        _mark_heads_equal_d(ax, d, 0.05)
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
    the formula lines 2‖w*‖²/(Cd+2). Drawn in ``part1/multihead_theory.ipynb``.

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
    d, gaps_C = v.positive_int("d", d), v.positive_int("gaps_C", gaps_C)
    _nonempty(gaps=gaps)
    contexts = _as_array("contexts", contexts)
    risk_lsa, risk_gd = _as_array("risk_lsa", risk_lsa), _as_array("risk_gd", risk_gd)
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
        ax.plot(contexts, risk_gd, "s", color=_GD_COLOR, mfc="none", label="risk of one GD step")
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
            s2, gap = _as_array("w2_values", s2), _as_array("gap_values", gap)
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
    legend for (b) and (c) below them. Drawn in ``part1/multihead_experiments.ipynb``.

    Args:
        heads: head counts H that were trained, shape (n,).
        optimum: H -> exact optimal risk over H-head LSA, for H = 1 ... max(heads) (``opt_H``).
        risk_sampled: mean over seeds of the exact risk of the sampled-trained models, shape (n,).
        risk_exact: exact risk of the exact-gradient twins at the end of training, shape (n,).
        risk_checkpoint: the same after ``checkpoint`` exact-gradient steps, shape (n,).
        losses_sampled: H -> per-step minibatch loss of one sampled run, shape (steps,); at least
            the heads in ``show``.
        losses_exact: H -> exact risk before each exact-gradient step, shape (exact_steps,).
        floor: the optimum for H >= d (``exact.lsa_optimum(...).risk``).
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
    d = v.positive_int("d", d)
    _nonempty(losses_sampled=losses_sampled, losses_exact=losses_exact)
    heads = np.asarray(heads, dtype=int)
    risk_sampled, risk_exact = (
        _as_array("risk_sampled", risk_sampled),
        _as_array("risk_exact", risk_exact),
    )
    risk_checkpoint = _as_array("risk_checkpoint", risk_checkpoint)
    n = _same_len(
        heads=heads, risk_sampled=risk_sampled, risk_exact=risk_exact, risk_ckpt=risk_checkpoint
    )
    if show is None:
        show = [H for H in (1, 2, 5, d, d + 1) if H in losses_sampled and H in losses_exact]
    elif isinstance(show, (str, bytes)) or not hasattr(show, "__iter__"):
        raise TypeError(f"show must be a list of head counts, got {show!r}")
    show = list(show)
    for where, m in (("losses_sampled", losses_sampled), ("losses_exact", losses_exact)):
        missing = [H for H in show if H not in m]
        if missing:
            raise ValueError(
                f"show must name heads that {where} has ({sorted(m)}), got {missing} not there"
            )
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
            y, x = smooth(_as_array(f"losses_sampled[{H}]", losses_sampled[H]), window)
            ye = _as_array(f"losses_exact[{H}]", losses_exact[H])
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
        _mark_heads_equal_d(ax, d, 0.15)
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
    twins (x). Legends below the panels. Drawn in
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
    H, d, C = v.positive_int("H", H), v.positive_int("d", d), v.positive_int("C", C)
    _nonempty(losses=losses)
    w2_grid = _as_array("w2_grid", w2_grid)
    risk_sampled, risk_exact = (
        _as_array("risk_sampled", risk_sampled),
        _as_array("risk_exact", risk_exact),
    )
    m = _same_len(w2_grid=w2_grid, risk_sampled=risk_sampled, risk_exact=risk_exact)
    w2_fine, optimum_fine = _as_array("w2_fine", w2_fine), _as_array("optimum_fine", optimum_fine)
    _same_len(w2_fine=w2_fine, optimum_fine=optimum_fine)
    missing = [float(w2) for w2 in w2_grid if float(w2) not in losses]
    if missing:
        raise ValueError(
            f"losses must have a curve for every value of w2_grid; no key {missing} among "
            f"{sorted(losses)}"
        )
    steps = len(next(iter(losses.values())))
    with style():
        fig = _new_figure(8.0, 5.6)
        ax_a, ax_b = fig.subplots(1, 2)

        ax = ax_a
        curves = []
        for w2, col in zip(w2_grid, plt.cm.plasma(np.linspace(0, 0.85, m)), strict=True):
            y, x = smooth(_as_array(f"losses[{w2:g}]", losses[float(w2)]), window)
            ax.plot(x, y, color=col, lw=1.3, label=f"{w2:g}")
            curves.append(y)
        _smoothed_training_axes(
            ax, curves, gd_risk, "one GD step", f"(a) sampled training\n$H = {H}$, $y_q = 0$",
            window, ylim,
        )  # fmt: skip
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
    and one legend below. Drawn in ``part1/multihead_experiments.ipynb``.

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
    H, d, C = v.positive_int("H", H), v.positive_int("d", d), v.positive_int("C", C)
    _nonempty(losses_bias=losses_bias, losses_guess=losses_guess)
    s_grid = _as_array("s_grid", s_grid)
    arrays = {
        "risk_bias": risk_bias,
        "risk_guess": risk_guess,
        "exact_bias": exact_bias,
        "exact_guess": exact_guess,
    }
    arrays = {k: _as_array(k, v) for k, v in arrays.items()}
    _same_len(s_grid=s_grid, **arrays)
    s_fine = _as_array("s_fine", s_fine)
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
        for losses, arg, name, cmap, skip in (
            (losses_bias, "losses_bias", "c^2", plt.cm.Blues, ()),
            (
                losses_guess,
                "losses_guess",
                "\\|g\\|^2",
                plt.cm.Oranges,
                (0.0,) if 0.0 in losses_bias else (),
            ),
        ):
            keys = [s for s in sorted(losses) if s not in skip]
            for s, col in zip(keys, cmap(np.linspace(0.45, 0.95, len(keys))), strict=True):
                y, x = smooth(_as_array(f"{arg}[{s:g}]", losses[s]), window)
                ax.plot(x, y, color=col, lw=1.3, label=f"${name} = {s:g}$")
                curves.append(y)
        _smoothed_training_axes(
            ax, curves, gd_risk, "one GD step from 0",
            f"(a) sampled training, $H = {H}$, $w_\\star = 0$", window, ylim,
        )  # fmt: skip
        _legend_right(ax, ncol=2 if len(curves) > 7 else 1)

        for ax, which, opt, mean, sd, ex, xl, tl in (
            (
                ax_b,
                "bias",
                optimum_bias,
                arrays["risk_bias"],
                risk_bias_sd,
                arrays["exact_bias"],
                "$c^2 = y_{q\\_bias}^2$",
                "(b) $y_q = c$",
            ),
            (
                ax_c,
                "guess",
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
                _as_array(f"optimum_{which}", opt),
                "-",
                color="black",
                label="exact optimum, $H \\geq d + 1$",
            )
            _gd_line(ax, gd_risk, "one GD step from 0 (exact)")
            _trained_points(
                ax, s_grid, mean, sd, ex, steps=steps, exact_steps=exact_steps,
                sd_name=f"risk_{which}_sd",
            )  # fmt: skip
            ax.set(xlabel=xl, title=f"{tl}, slope {slope}\n({scale} scale)")
        ax_b.set_ylabel("final ICL risk")
        ax_c.tick_params(labelleft=False)
        handles, labels = _trained_order(ax_b)
        fig.legend(handles, labels, loc="outside lower center", ncol=2)
        return _finish(fig)


# ----------------------------------------------------------------------------------------------
# part1/yq_lsa
