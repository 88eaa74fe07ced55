r"""Multi-head LSA in the reduced parameters ``M_i`` (Xie et al. section 3 and App. A), in sympy.

With ``b_h`` the last row of ``W^P_h W^V_h`` and ``A_h = (W^K_h)^T W^Q_h`` (columns ``a^h_i``), the
multi-head LSA prediction is ``y_q + sum_i <G, M_i> z_{q,i}`` with ``M_i = sum_h b_h (a^h_i)^T`` and
``G = (1/C) sum_j z_j z_j^T`` (Part I, eq. 6). This module gives, as exact sympy objects:

* :func:`construction_heads` -- the App. A.1 construction: ``D = d+1`` heads realising any tuple
  ``(M_1 .. M_D)`` (the weights of :func:`iclgd.exact.lsa_params_from_M`, symbolically);
* :func:`gram_moments_expr` -- the moments of ``G`` that the risk needs, from the data model
  (``w_hat ~ N(w_star, I)``, ``x ~ N(0, I)``, noise-free labels), at a symbolic ``C``: the exact
  ``E[G_mn G_pq] = P + (T - P) / C`` with ``T`` the fourth moment of one column and ``P`` that of
  two columns sharing ``w_hat``, together with ``E[G]`` and ``E[w_hat_i G]`` and the paper's ``M``
  (eq. 22);
* :func:`head_risk_expr` -- ``L_i(M_i) = E[(<G, M_i> - w_hat_i)^2]`` (eq. 18) from those moments;
* :func:`closed_form_M_expr` -- the minimiser ``M_i^*`` of the book's closed form (for ``y_q = 0``),
  the symbolic twin of :func:`iclgd.exact.multihead_lsa_closed_form`.

Cost (2-core CI machine): :func:`gram_moments_expr` takes about 0.2 s at ``d = 2`` (``3^4`` index
tuples, two fourth moments each) and 0.5 s at ``d = 3``, with symbolic ``C`` and ``w_star``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import sympy as sp

from ..checks import positive_int
from .core import as_expr, as_matrix, as_size, as_vector, gaussian_vector
from .gaussian import expect_independent

__all__ = [
    "GramMoments",
    "construction_heads",
    "gram_moments_expr",
    "head_risk_expr",
    "closed_form_M_expr",
]


class GramMoments(NamedTuple):
    """Exact moments of ``G = (1/C) sum_j z_j z_j^T``, ``z_j = (x_j, w_hat^T x_j)`` (``D = d+1``).

    Dicts are keyed by index tuples ``(m, n, p, q)`` in ``range(D)^4`` (0-based).

    Attributes:
        d: input dimension.
        C: context length (a number or a sympy symbol).
        w_star: ``(d, 1)`` prior mean of ``w_hat``.
        w_hat: ``(d, 1)`` the task symbols (``what_1 .. what_d``, as in
            :func:`~iclgd.symbolic.linear_regression_task`).
        EGG: ``E[G_mn G_pq] = P + (T - P) / C``, exact at every ``C``.
        T4: ``E[z_1m z_1n z_1p z_1q]`` (one context column).
        P4: ``E[z_1m z_1n z_2p z_2q]`` (two columns sharing ``w_hat``; the limit of ``EGG``).
        EG: ``(D, D)`` ``E[G] = E[z z^T]``.
        EwG: list of ``d`` ``(D, D)`` matrices ``E[w_hat_i G]``.
        M_paper: ``(D, D)`` the paper's ``M = [[I, w*], [w*^T, |w*|^2 + d]]`` (eq. 22).
    """

    d: int
    C: Any
    w_star: sp.Matrix
    w_hat: sp.Matrix
    EGG: dict
    T4: dict
    P4: dict
    EG: sp.Matrix
    EwG: list
    M_paper: sp.Matrix


def _square(name: str, M: Any, D: int | None = None) -> sp.Matrix:
    M = as_matrix(name, M)
    if M.rows != M.cols or (D is not None and M.rows != D):
        want = "square" if D is None else f"({D}, {D})"
        raise ValueError(f"{name} must be a {want} matrix, got shape {M.shape}")
    return M


def construction_heads(Ms: Sequence[Any]) -> list[tuple[sp.Matrix, ...]]:
    """Xie et al. App. A.1 as weights: ``D`` heads whose reduced parameters are ``(M_1 .. M_D)``.

    Head ``h`` (1-based) has ``W^P = e_D e_h^T``, ``W^V = I`` (so ``b_h = e_h``), ``W^K = I`` and
    ``W^Q = A_h`` with ``A_h[n, i] = M_i[h, n]``, so that ``sum_h b_h (a^h_i)^T = M_i``. Same
    weights as :func:`iclgd.exact.lsa_params_from_M` (which takes the stack ``M[:, :, i] = M_i``).

    Args:
        Ms: ``D`` matrices ``M_1 .. M_D``, each ``(D, D)`` (sympy, numbers or symbols).

    Returns:
        A list of ``D`` tuples ``(W_P, W_V, W_K, W_Q)``, the input of
        :func:`~iclgd.symbolic.multihead_lsa_prediction_expr`.

    Example::

        >>> heads = construction_heads([sp.Matrix([[1, 2], [3, 4]]), sp.zeros(2, 2)])
        >>> heads[0][3]
        Matrix([
        [1, 0],
        [2, 0]])
    """
    if not isinstance(Ms, (list, tuple)) or not Ms:
        raise ValueError(f"Ms must be a non-empty list of (D, D) matrices, got {Ms!r}")
    D = len(Ms)
    Ms = [_square(f"Ms[{i}]", M, D) for i, M in enumerate(Ms)]
    heads = []
    for h in range(D):
        W_P = sp.zeros(D, D)
        W_P[D - 1, h] = 1
        A_h = sp.Matrix(D, D, lambda n, i, h=h: Ms[i][h, n])
        heads.append((W_P, sp.eye(D), sp.eye(D), A_h))
    return heads


def gram_moments_expr(d: int, C: Any, w_star: Any) -> GramMoments:
    """Exact moments of the context Gram matrix ``G`` for Part I's data model, by Gaussian algebra.

    The columns ``z_j = (x_j, w_hat^T x_j)`` are independent given ``w_hat`` but share it, so
    splitting the double sum of ``G_mn G_pq`` into ``j = k`` and ``j != k`` gives, exactly,
    ``E[G_mn G_pq] = P_mnpq + (T_mnpq - P_mnpq) / C``. The paper's eq. 27 replaces ``P`` by
    ``M (x) M`` with ``M = E[z z^T]``.

    Args:
        d: input dimension.
        C: context length, a positive number or a sympy symbol.
        w_star: prior mean, ``d`` expressions (e.g. ``linear_regression_task(d, C,
            w_star="w").w_star``).

    Returns:
        :class:`GramMoments`.
    """
    d = positive_int("d", d)
    C = as_expr("C", C)
    if C.is_number and not C.is_positive:
        raise ValueError(f"C must be positive, got {C}")
    ws = sp.Matrix(as_vector("w_star", w_star, d, f" (d = {d})"))
    D = d + 1
    wh = gaussian_vector("what", d)
    x1, x2 = gaussian_vector("u", d), gaussian_vector("v", d)  # two context inputs
    z1 = x1.col_join(sp.Matrix([[(wh.T * x1)[0, 0]]]))
    z2 = x2.col_join(sp.Matrix([[(wh.T * x2)[0, 0]]]))
    groups = [(wh, list(ws), None), (x1,), (x2,)]
    idx = list(itertools.product(range(D), repeat=4))
    t4 = expect_independent([z1[m] * z1[n] * z1[p] * z1[q] for m, n, p, q in idx], groups)
    p4 = expect_independent([z1[m] * z1[n] * z2[p] * z2[q] for m, n, p, q in idx], groups)
    T4, P4 = dict(zip(idx, t4)), dict(zip(idx, p4))
    EGG = {k: sp.expand(P4[k] + (T4[k] - P4[k]) / C) for k in idx}
    EG = sp.Matrix(expect_independent(z1 * z1.T, groups))
    EwG = [sp.Matrix(expect_independent(wh[i] * z1 * z1.T, groups)) for i in range(d)]
    wn2 = (ws.T * ws)[0, 0]
    M_paper = sp.Matrix(sp.BlockMatrix([[sp.eye(d), ws], [ws.T, sp.Matrix([[wn2 + d]])]]))
    return GramMoments(d, C, ws, wh, EGG, T4, P4, EG, EwG, M_paper)


def head_risk_expr(Mi: Any, i: int, moments: GramMoments) -> sp.Expr:
    """``L_i(M_i) = E[(<G, M_i> - w_hat_i)^2]``, the ``i``-th term of Xie et al. eq. 18.

    Expanded from the moments: ``sum M_mn M_pq E[G_mn G_pq] - 2 sum M_mn E[w_hat_i G_mn] +
    E[w_hat_i^2]``, with ``E[w_hat_i^2] = w*_i^2 + 1``. Pass ``moments._replace(EGG=...)`` to use
    other second moments (e.g. their ``C -> oo`` limit).

    Args:
        Mi: ``(D, D)`` matrix (symbols or numbers).
        i: 0-based index of the input coordinate, ``0 <= i < d``.
        moments: :func:`gram_moments_expr`'s output.

    Returns:
        The expanded sympy expression.
    """
    if not isinstance(moments, GramMoments):
        raise ValueError(f"moments must be a GramMoments, got {type(moments).__name__}")
    d = moments.d
    D = d + 1
    Mi = _square("Mi", Mi, D)
    i = positive_int("i", i, 0)
    if i >= d:
        raise ValueError(f"i must be < d = {d}, got {i}")
    quad = sum(Mi[m, n] * Mi[p, q] * moments.EGG[(m, n, p, q)] for m, n, p, q in moments.EGG)
    lin = sum(Mi[m, n] * moments.EwG[i][m, n] for m in range(D) for n in range(D))
    return sp.expand(quad - 2 * lin + moments.w_star[i] ** 2 + 1)


def closed_form_M_expr(i: int, C: Any, w_star: Any) -> sp.Matrix:
    """The optimal ``M_i^*`` of multi-head LSA with ``y_q = 0`` (``H >= d``), symbolically.

    ``M_i^* = kappa w*_i diag(I_d, 0) + (eta / 2) (e_i v^T + v e_i^T)`` with ``v = (-w*, 1)``,
    ``kappa = C / (C d + 2)``, ``eta = C / (C + d + 1)`` (``i < d``), and ``M_D^* = 0``: the
    symbolic twin of :func:`iclgd.exact.multihead_lsa_closed_form` (``M[:, :, i]``).

    Args:
        i: 0-based index, ``0 <= i <= d``.
        C: context length, an integer ``>= 1`` or a sympy symbol.
        w_star: ``d`` expressions, the prior mean.

    Returns:
        ``(D, D)`` sympy Matrix.
    """
    ws = as_vector("w_star", w_star, None)
    d = len(ws)
    if d < 1:
        raise ValueError("w_star must have length >= 1")
    D = d + 1
    i = positive_int("i", i, 0)
    if i > d:
        raise ValueError(f"i must be <= d = {d}, got {i}")
    C = as_size("C", C)
    if i == d:
        return sp.zeros(D, D)
    kappa, eta = C / (C * d + 2), C / (C + d + 1)
    v = sp.Matrix([-w for w in ws] + [1])
    e = sp.eye(D)[:, i]
    return kappa * ws[i] * sp.diag(*([1] * d + [0])) + eta / 2 * (e * v.T + v * e.T)
