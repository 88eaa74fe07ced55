"""Symbolic checks of y_q-LSA (Xie et al. Definition 3): Theorem 4, the global optimum, Lemma 3.

Everything here is built from the model's definition with :mod:`iclgd.symbolic` (exact Gaussian
expectations, symbolic prior mean ``w*`` and step ``eta``), for the book's chapter on y_q-LSA
(``book/part1/yq_lsa.ipynb``):

* :func:`theorem4_gradient` -- the gradient of the y_q-LSA risk at the GD point that the chapter
  proves, in the reduced parameters ``(u, Q, w)``; :func:`yq_lsa_gd_point_gradient` computes the
  exact gradient from the model (all four matrices of eq. 3 or the reduced ``(u, Q)``) and returns
  it beside the theorem's.
* :func:`linear_class_gradient` -- the exact gradient of the risk of the whole linear class
  ``f = sum_k (g_k + <G, B_k>) x_{q,k}`` (which contains every multi-head y_q-LSA) at one GD step:
  zero at ``eta* = C / (C + d + 1)``, so one GD step is its global optimum.
* :func:`ltb_prediction_expr` -- the linear transformer block of Xie et al. eq. 30 (Lemma 3),
  literally; its numeric twin is :func:`iclgd.models.lsa.ltb_predict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import sympy as sp

from ..checks import boolean, positive_int
from .calculus import gradient
from .core import (
    ExprLike,
    as_expr,
    as_matrix,
    as_vector,
    flatten_params,
    gaussian_vector,
    weight_matrix,
)
from .models import linear_regression_task, lsa_prediction_expr, lsa_prediction_uq_expr

__all__ = [
    "GDPointGradient",
    "LinearClassGradient",
    "theorem4_kappa",
    "theorem4_gradient",
    "yq_lsa_gd_point_gradient",
    "linear_class_gradient",
    "ltb_prediction_expr",
]

ETA = sp.Symbol("eta", positive=True)


class GDPointGradient(NamedTuple):
    """The y_q-LSA risk and its exact gradient at the GD point (:func:`yq_lsa_gd_point_gradient`).

    Attributes:
        risk: the exact risk, a polynomial in ``params`` and the prior mean ``w_1..w_d``.
        params: the parameter symbols, flattened (``W^P, W^V, W^K, W^Q, v`` or ``u, Q, v``; ``v`` is
            the trainable guess ``w`` of Definition 3, the ``w_i`` are the prior mean ``w*``).
        point: ``{symbol: value}`` of the GD point (values contain ``eta`` and ``w*``).
        grad: the gradient of ``risk`` at ``point``, expanded, in the order of ``params``.
        expected: :func:`theorem4_gradient` in the same parameters (the chain rule for the full
            matrices), expanded, in the order of ``params``.
        kappa: ``1 - eta (C + d + 1) / C`` (:func:`theorem4_kappa`).
    """

    risk: sp.Expr
    params: list
    point: dict
    grad: list
    expected: list
    kappa: sp.Expr


class LinearClassGradient(NamedTuple):
    """The risk of the linear class at one GD step and its exact gradient there.

    Attributes:
        risk: the risk at the GD predictor (a function of ``w*`` and ``eta``; at ``eta*`` it is
            ``d (d+1) / (C+d+1)``).
        grad: the gradient in ``(g, B_1, ..., B_d)`` at the GD predictor, expanded.
        n_params: ``d + d (d+1)^2``.
    """

    risk: sp.Expr
    grad: list
    n_params: int


def theorem4_kappa(d: int, C: int, eta: ExprLike = ETA) -> sp.Expr:
    """The residual factor ``kappa = 1 - eta (C + d + 1) / C = E[S - eta S^2]`` (per unit of ``I``).

    Example::

        >>> theorem4_kappa(1, 1, 1)
        -2
    """
    d, C = positive_int("d", d), positive_int("C", C)
    return 1 - as_expr("eta", eta) * sp.Rational(C + d + 1, C)


def theorem4_gradient(
    d: int, C: int, w_star: Any, eta: ExprLike = ETA
) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """The gradient of the y_q-LSA risk at the GD point, as the chapter's Theorem 4 states it.

    At ``u = eta (-w*, 1)``, ``Q = diag(I_d, 0)``, ``w = w*`` (one GD step from ``w*``)::

        grad_u = -2 d kappa e_{d+1},  grad_Q = -2 eta kappa P P^T,  grad_w = 0,
        P = [I_d; w*^T],  kappa = 1 - eta (C + d + 1) / C.

    Args:
        d, C: input dimension and context length.
        w_star: the prior mean, a length-``d`` vector (symbols or numbers).
        eta: the step (a symbol by default).

    Returns:
        ``(g_u (d+1, 1), g_Q (d+1, d+1), g_w (d, 1))``.
    """
    kappa = theorem4_kappa(d, C, eta)
    ws = sp.Matrix(d, 1, as_vector("w_star", w_star, d, f" (d = {d})"))
    P = sp.Matrix.vstack(sp.eye(d), ws.T)
    g_u = sp.zeros(d + 1, 1)
    g_u[d] = -2 * d * kappa
    return g_u, -2 * as_expr("eta", eta) * kappa * P * P.T, sp.zeros(d, 1)


def yq_lsa_gd_point_gradient(d: int, C: int, *, full: bool, eta: ExprLike = ETA) -> GDPointGradient:
    """Exact y_q-LSA risk (symbolic ``w*``) and its gradient at the GD point, beside the theorem's.

    The risk is built from the model (:func:`~iclgd.symbolic.lsa_prediction_expr` on the embedding
    with ``y_q = v^T x_q``, ``v`` the trainable guess). ``full=True`` differentiates with respect to
    all four matrices ``W^P, W^V, W^K, W^Q`` of eq. 3 and ``v`` (affordable for ``d = 1``), at
    ``W^P = -eta I``, ``W^V = [[0, 0], [w*^T, -1]]``, ``W^K = W^Q = diag(I_d, 0)``, ``v = w*``; the
    theorem's gradient is mapped by the chain rule ``d/dW^P_{d+1,:} = W^V grad_u``,
    ``d/dW^V = W^P_{d+1,:}^T grad_u^T``, ``d/dW^K = W^Q grad_Q^T``, ``d/dW^Q = W^K grad_Q``.
    ``full=False`` uses the reduced ``(u, Q)`` (:func:`~iclgd.symbolic.lsa_prediction_uq_expr`) at
    ``u = eta (-w*, 1)``, ``Q = diag(I_d, 0)``.

    Returns:
        :class:`GDPointGradient`; ``grad == expected`` term by term if the theorem holds.
    """
    d, C = positive_int("d", d), positive_int("C", C)
    full = boolean("full", full)
    eta = as_expr("eta", eta)
    v = gaussian_vector("v", d)
    t = linear_regression_task(d, C, w_star="w", y_q=lambda x_q, ws: (v.T * x_q)[0, 0])
    D, ws = d + 1, t.w_star
    W_V = sp.zeros(D, D)
    W_V[d, :d], W_V[d, d] = ws.T, -1
    W_K = sp.diag(*([1] * d + [0]))
    g_u, g_Q, g_w = theorem4_gradient(d, C, ws, eta)
    if full:
        WP, WV, WK, WQ = (weight_matrix(n, D) for n in ("P", "V", "K", "Q"))
        risk = t.risk(lsa_prediction_expr((WP, WV, WK, WQ), t.E))
        params = flatten_params(WP, WV, WK, WQ, v)
        point = [-eta * sp.eye(D), W_V, W_K, W_K, ws]
        gP = sp.zeros(D, D)
        gP[d, :] = (W_V * g_u).T
        gV = (-eta * sp.eye(D))[d, :].T * g_u.T
        expected = [gP, gV, W_K * g_Q.T, W_K * g_Q, g_w]
    else:
        u, Q = gaussian_vector("u", D), weight_matrix("Q", D)
        risk = t.risk(lsa_prediction_uq_expr((u, Q), t.E))
        params = flatten_params(u, Q, v)
        point = [eta * sp.Matrix.vstack(-ws, sp.Matrix([1])), W_K, ws]
        expected = [g_u, g_Q, g_w]
    subs = dict(zip(params, [e for m in point for e in m], strict=True))
    grad = [sp.expand(g.xreplace(subs)) for g in gradient(risk, params)]
    expected = [sp.expand(e) for m in expected for e in m]
    return GDPointGradient(risk, params, subs, grad, expected, theorem4_kappa(d, C, eta))


def linear_class_gradient(d: int, C: int, eta: ExprLike | None = None) -> LinearClassGradient:
    """Exact risk gradient of the linear class ``f = sum_k (g_k + <G, B_k>) x_{q,k}`` at a GD step.

    ``G = (1/C) sum_i z_i z_i^T`` with ``z_i = (x_i, y_i)``; the class contains every multi-head
    y_q-LSA. One GD step from ``w*`` with step ``eta`` is the member ``g = w*``,
    ``B_k[k, d+1] = eta``, ``B_k[k, n] = -eta w*_n`` (``n <= d``), all else 0. The risk is a convex
    quadratic in ``(g, B)``, so a zero gradient there makes that step its global minimum.

    Args:
        d, C: input dimension and context length (the prior mean ``w*`` is symbolic).
        eta: the step; default ``eta* = C / (C + d + 1)``.

    Returns:
        :class:`LinearClassGradient`.
    """
    d, C = positive_int("d", d), positive_int("C", C)
    eta = sp.Rational(C, C + d + 1) if eta is None else as_expr("eta", eta)
    t = linear_regression_task(d, C, w_star="w")
    D, ws = d + 1, t.w_star
    Z = t.E[:, :C]
    G = Z * Z.T / C
    g = gaussian_vector("g", d)
    B = [weight_matrix(f"B{k + 1}", D) for k in range(d)]
    f = sum(
        (g[k] + sum(G[m, n] * B[k][m, n] for m in range(D) for n in range(D))) * t.x_q[k]
        for k in range(d)
    )
    risk = t.risk(f)
    params = flatten_params(g, *B)
    point = {s: ws[k] for k, s in enumerate(g)}
    for k in range(d):
        for m in range(D):
            for n in range(D):
                point[B[k][m, n]] = 0
        point[B[k][k, d]] = eta
        for n in range(d):
            point[B[k][k, n]] = -eta * ws[n]
    grad = [sp.expand(gr.xreplace(point)) for gr in gradient(risk, params)]
    return LinearClassGradient(risk.xreplace(point), grad, len(params))


def ltb_prediction_expr(params: Sequence[Any], E: Any) -> sp.Expr:
    """Linear transformer block, Xie et al. eq. 30, literally (Lemma 3; Zhang et al. 2024).

    ``f(E) = [W_2^T W_1 (E + (1/C) W^P W^V E W^M E^T (W^K)^T W^Q E)]_{-1,-1}``.

    Args:
        params: ``(W_1, W_2, W_P, W_V, W_K, W_Q)``, each ``(d+1, d+1)``.
        E: ``(d+1, C+1)`` embedding (:func:`~iclgd.symbolic.embedding`).

    Example::

        >>> E = sp.Matrix([[1, 3], [2, 0]]); I = sp.eye(2)
        >>> ltb_prediction_expr((I, I, I, I, I, I), E)     # = LSA: y_q + (1/C) y (x x_q) = 2 * 3
        6
    """
    if not isinstance(params, (list, tuple)) or len(params) != 6:
        raise ValueError(
            f"params must be a tuple (W_1, W_2, W_P, W_V, W_K, W_Q), got {type(params).__name__}"
        )
    E = as_matrix("E", E)
    if E.rows < 2 or E.cols < 2:
        raise ValueError(f"E must have shape (d+1, C+1) with d, C >= 1, got {E.shape}")
    names = ("W_1", "W_2", "W_P", "W_V", "W_K", "W_Q")
    mats = [as_matrix(n, w) for n, w in zip(names, params, strict=True)]
    for n, m in zip(names, mats, strict=True):
        if m.shape != (E.rows, E.rows):
            raise ValueError(
                f"{n} must have shape ({E.rows}, {E.rows}) to match E of shape {E.shape}, "
                f"got {m.shape}"
            )
    W1, W2, WP, WV, WK, WQ = mats
    C = E.cols - 1
    M = sp.diag(*([1] * C + [0]))
    return (W2.T * W1 * (E + WP * WV * E * M * E.T * WK.T * WQ * E / C))[-1, -1]
