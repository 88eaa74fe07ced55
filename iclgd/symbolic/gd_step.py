r"""One LSA layer as one step of gradient descent, symbolically (Xie et al. eq. 7-9).

With ``W^V = [[0, 0], [w0^T, -1]]``, ``W^K = W^Q = diag(I_d, 0)`` and ``W^P = -eta I``, the LSA
prediction (Part I eq. 3) is ``y_q - (eta/C) (w0^T X^T - y^T) X x_q`` (eq. 8), which at the initial
guess ``y_q = w0^T x_q`` is the prediction ``w1^T x_q`` of one GD step
``w1 = w0 - (eta/C) X^T (X w0 - y)`` on ``(1/2C) ||X w - y||^2`` (eq. 9). Eq. 7 of the paper prints
``W^P = -(eta/C) I``; since eq. 3 already divides by ``C``, those weights take a step of ``eta/C``.

* :func:`gd_weights_expr` -- the weights of eq. 7 (the sympy twin of
  :func:`iclgd.models.lsa.gd_weights`).
* :func:`gd_construction_expr` -- everything the book's chapter *The shared setting* compares,
  for fully symbolic inputs, labels, ``w0``, ``y_q`` and ``eta``: the LSA prediction at the
  printed and at the corrected weights, the right-hand side of eq. 8 and the GD prediction of
  eq. 9.

Example::

    >>> g = gd_construction_expr(1, 2)
    >>> sp.expand(g.f_fixed - g.eq8)
    0
    >>> sp.expand(g.f_fixed.subs(g.y_q, g.y_q_prior) - g.gd_step)
    0
    >>> sp.cancel((g.f_printed - g.y_q) / (g.eq8 - g.y_q))     # the printed eq. 7: step eta/C
    1/2
"""

from __future__ import annotations

from typing import Any, NamedTuple

import sympy as sp

from ..checks import positive_int
from .core import ExprLike, as_expr, as_vector, gaussian_vector
from .models import embedding, lsa_prediction_expr

__all__ = ["GDConstruction", "gd_weights_expr", "gd_construction_expr"]


class GDConstruction(NamedTuple):
    """Symbols and expressions of the one-step-GD construction (:func:`gd_construction_expr`).

    Shapes: ``X (C, d)``, ``y (C, 1)``, ``x_q (d, 1)``, ``w0 (d, 1)``, ``E (d+1, C+1)``; each weight
    ``(d+1, d+1)``.

    Attributes:
        eta: the step-size symbol.
        X, y, x_q, w0, y_q: the symbolic prompt (any labels ``y``), GD start and initial guess.
        E: the embedding ``[[X^T, x_q], [y^T, y_q]]`` (Part I eq. 2).
        weights_printed: ``(W_P, W_V, W_K, W_Q)`` of eq. 7 as printed, ``W^P = -(eta/C) I``.
        weights_fixed: the same with ``W^P = -eta I``.
        f_printed: the LSA prediction (eq. 3) at ``weights_printed``.
        f_fixed: the LSA prediction at ``weights_fixed``.
        eq8: ``y_q - (eta/C) (w0^T X^T - y^T) X x_q``, the right-hand side of eq. 8.
        gd_step: ``(w0 - (eta/C) X^T (X w0 - y))^T x_q``, the one-step-GD prediction (eq. 9).
        y_q_prior: ``w0^T x_q``, the initial guess under which eq. 8 is eq. 9.
    """

    eta: sp.Symbol
    X: sp.Matrix
    y: sp.Matrix
    x_q: sp.Matrix
    w0: sp.Matrix
    y_q: sp.Symbol
    E: sp.Matrix
    weights_printed: tuple[sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix]
    weights_fixed: tuple[sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix]
    f_printed: sp.Expr
    f_fixed: sp.Expr
    eq8: sp.Expr
    gd_step: sp.Expr
    y_q_prior: sp.Expr


def gd_weights_expr(w0: Any, eta: ExprLike) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix]:
    """LSA weights ``(W_P, W_V, W_K, W_Q)`` of one GD step from ``w0`` with step ``eta`` (eq. 7).

    ``W^P = -eta I_{d+1}``, ``W^V = [[0, 0], [w0^T, -1]]``, ``W^K = W^Q = diag(I_d, 0)``: the
    construction of :func:`iclgd.models.lsa.gd_weights`, as sympy matrices. The paper's printed
    ``W^P = -(eta/C) I`` is ``gd_weights_expr(w0, eta / C)``.

    Args:
        w0: length-``d`` GD start (numbers or expressions).
        eta: step size (number or expression).

    Example::

        >>> [W.tolist() for W in gd_weights_expr([2], 1)]
        [[[-1, 0], [0, -1]], [[0, 0], [2, -1]], [[1, 0], [0, 0]], [[1, 0], [0, 0]]]
    """
    w = as_vector("w0", w0, None)
    if not w:
        raise ValueError("w0 must have at least one entry")
    eta = as_expr("eta", eta)
    d = len(w)
    W_V = sp.zeros(d + 1, d + 1)
    W_V[d, :d] = sp.Matrix(1, d, w)
    W_V[d, d] = -1
    W_KQ = sp.diag(sp.eye(d), sp.Integer(0))
    return -eta * sp.eye(d + 1), W_V, W_KQ, sp.Matrix(W_KQ)


def gd_construction_expr(d: int, C: int) -> GDConstruction:
    """The LSA prediction at the weights of eq. 7, eq. 8 and the GD step of eq. 9, symbolically.

    Every input ``x_{i,j}``, label ``y_i``, query entry ``x_{q,j}``, start ``w0_j``, the guess
    ``y_q`` and the step ``eta`` is a free real symbol, so an identity between the returned
    expressions (a zero after ``sp.expand``) holds for every prompt. The book checks three:
    ``f_fixed == eq8`` (eq. 8 with ``W^P = -eta I``), ``f_fixed == gd_step`` at
    ``y_q = y_q_prior`` (eq. 9), and ``(f_printed - y_q) / (eq8 - y_q) == 1/C`` (the printed
    eq. 7 takes a step ``eta/C``).

    Args:
        d: input dimension, ``>= 1``.
        C: context length, ``>= 1``.

    Returns:
        A :class:`GDConstruction`.
    """
    d = positive_int("d", d)
    C = positive_int("C", C)
    eta = sp.Symbol("eta", real=True)
    y_q = sp.Symbol("y_q", real=True)
    X = sp.Matrix(C, d, lambda i, j: sp.Symbol(f"x_{{{i + 1},{j + 1}}}", real=True))
    y = gaussian_vector("y", C)  # any labels: nothing assumes y = X w
    x_q = sp.Matrix(d, 1, [sp.Symbol(f"x_{{q,{j + 1}}}", real=True) for j in range(d)])
    w0 = gaussian_vector("w0", d)
    E = embedding(X, y, x_q, y_q)
    printed = gd_weights_expr(w0, eta / C)
    fixed = gd_weights_expr(w0, eta)
    eq8 = y_q - eta / C * ((w0.T * X.T - y.T) * X * x_q)[0, 0]
    gd_step = ((w0 - eta / C * X.T * (X * w0 - y)).T * x_q)[0, 0]
    return GDConstruction(
        eta=eta,
        X=X,
        y=y,
        x_q=x_q,
        w0=w0,
        y_q=y_q,
        E=E,
        weights_printed=printed,
        weights_fixed=fixed,
        f_printed=lsa_prediction_expr(printed, E),
        f_fixed=lsa_prediction_expr(fixed, E),
        eq8=eq8,
        gd_step=gd_step,
        y_q_prior=(w0.T * x_q)[0, 0],
    )
