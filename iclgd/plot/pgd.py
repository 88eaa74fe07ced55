"""Figures of Part III (Ahn et al. 2023): the single layer and the multi-layer transformer."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from .core import as_array, finish, legend_below, new_figure, style

__all__ = ["single_layer_regulariser", "multilayer_scalars"]


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
    ns = as_array("ns", ns)
    steps = as_array("steps", steps, 2)
    exact_ns = as_array("exact_ns", exact_ns)
    exact_steps = as_array("exact_steps", exact_steps, 2)
    lam = as_array("lam", lam)
    if steps.shape != (ns.size, lam.size) or exact_steps.shape != (exact_ns.size, lam.size):
        raise ValueError(
            f"steps must be (len(ns), d) = ({ns.size}, {lam.size}) and exact_steps "
            f"(len(exact_ns), d); got {steps.shape} and {exact_steps.shape}"
        )
    with style():
        fig = new_figure(8.0, 3.9)
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
        legend_below(ax1, ncol=2, fontsize=8.5)
        for k, (name, r) in enumerate(risks.items()):
            r = as_array(f"risks[{name!r}]", r)
            ax2.plot(ns, r, color=f"C{k + 4}", ls=["-", "--", ":"][k % 3], label=name)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlabel("$n$")
        ax2.set_ylabel("exact in-context loss")
        ax2.set_title("(b) the regulariser pays at small $n$")
        legend_below(ax2, fontsize=8.5)
    return finish(fig)


def multilayer_scalars(Ls, risks_exact, a_exact, risks_trained, d: int, n: int) -> Figure:
    """The optimum on Theorem 4's set against the number of layers (``part3/multi_layer``).

    Args:
        Ls: ``(m,)`` numbers of layers.
        risks_exact: ``(m,)`` exact minimal loss on the set ``S``.
        a_exact: list of ``m`` arrays, the optimal scalars ``a_l`` for each ``L``.
        risks_trained: ``(m,)`` loss reached by training unconstrained ``A_l`` (or NaN).
        d, n: sizes (title).
    """
    Ls = as_array("Ls", Ls)
    risks_exact = as_array("risks_exact", risks_exact)
    risks_trained = as_array("risks_trained", risks_trained)
    with style():
        fig = new_figure(8.0, 3.6)
        ax1, ax2 = fig.subplots(1, 2)
        ax1.plot(Ls, risks_exact, "o-", label="exact optimum on $S$")
        ax1.plot(Ls, risks_trained, "x", ms=9, color="C3", label="trained, unconstrained $A_l$")
        ax1.set_yscale("log")
        ax1.set_xticks(Ls)
        ax1.set_xlabel("layers $L$")
        ax1.set_ylabel("in-context loss")
        ax1.set_title(f"(a) loss, $d = {d}$, $n = {n}$")
        legend_below(ax1, fontsize=8.5)
        for L, a in zip(Ls, a_exact, strict=True):
            a = as_array("a_exact[i]", a)
            ax2.plot(np.full(a.size, L), -a, "o", color="C0")
        ax2.set_xticks(Ls)
        ax2.set_xlabel("layers $L$")
        ax2.set_ylabel(r"$-a_l$ (step along $\Sigma^{-1}$)")
        ax2.set_title("(b) optimal scalars $a_l$ on $S$")
    return finish(fig)
