r"""Part III (Ahn, Cheng, Daneshmand, Sra 2023) symbolically: the one-layer loss and Lemma 2.

Everything starts from the literal layer of eq. 4, ``Z_1 = Z_0 + (1/n) P Z_0 M (Z_0^T Q Z_0)``
with the zero-query embedding of eq. 1, in sympy:

* :func:`single_layer_expr` -- the literal one-layer output with fully symbolic ``P, Q`` and a
  symbolic prompt, beside the reduced form of eq. 15, ``b^T C A x^(n+1)`` with ``b`` the last row
  of ``P``, ``A`` the first ``d`` columns of ``Q`` and ``C = (1/n) sum_i z^(i) z^(i)T``. Their
  difference expands to zero: the loss depends on ``(P, Q)`` only through ``(b, A)`` (eq. 7).
* :func:`single_layer_risk_expr` -- the in-context loss (eq. 6) of the reduced model as an exact
  polynomial in ``b``, ``A`` and the eigenvalues ``lambda_i`` of a diagonal ``Sigma``, with the
  number of examples ``n`` a *symbol*: given ``(w*, x^(n+1))`` the ``n`` context terms of ``C`` are
  i.i.d., so ``E[(mean of u_i)^2 | w*, x_q] = m_2/n + (1 - 1/n) m_1^2`` with ``m_r = E[u^r | w*,
  x_q]``; the remaining expectations are Gaussian moments (:mod:`iclgd.symbolic.gaussian`).
* :func:`component_risk_expr` -- the per-coordinate objective ``f_j(X) = E[(<C, X> + w*_j)^2]``
  of App. A.2/A.3 (Lemmas 6-7), with ``X`` a symbolic ``(d+1) x (d+1)`` matrix.
* :func:`lemma2_expr` -- ``L`` literal layers of eq. 4 under the sparse parameters of eq. 9
  (symmetric symbolic ``A_l``) beside ``L`` steps of preconditioned GD (eq. 10-11) from
  ``w_0 = 0``, for symbolic inputs and *arbitrary* labels.

Example::

    >>> s = single_layer_expr(1, 2)
    >>> sp.expand(s.out - s.eq15)
    0
"""

from __future__ import annotations

from typing import NamedTuple

import sympy as sp

from ..checks import ArgumentTypeError, positive_int
from .gaussian import expect_independent, gaussian_expectation

__all__ = [
    "SingleLayer",
    "SingleLayerRisk",
    "Lemma2",
    "single_layer_expr",
    "single_layer_risk_expr",
    "component_risk_expr",
    "lemma2_expr",
]


def _mat(name: str, r: int, c: int, sym: bool = False) -> sp.Matrix:
    if sym:
        return sp.Matrix(
            r, c, lambda i, j: sp.Symbol(f"{name}_{min(i, j) + 1}{max(i, j) + 1}", real=True)
        )
    return sp.Matrix(r, c, lambda i, j: sp.Symbol(f"{name}_{i + 1}{j + 1}", real=True))


def _check_lam(lam, d: int) -> tuple:
    """The ``d`` eigenvalues of the diagonal ``Sigma`` as sympy expressions (default the positive
    symbols ``lambda_i``); numbers must be real, finite and ``> 0``, symbols not known to be
    non-positive."""
    if lam is None:
        return tuple(sp.Symbol(f"lambda_{i + 1}", positive=True) for i in range(d))
    if isinstance(lam, (str, bytes)) or not hasattr(lam, "__len__"):
        raise ArgumentTypeError(
            f"lam must be a sequence of d = {d} eigenvalues, got {type(lam).__name__}"
        )
    if len(lam) != d:
        raise ValueError(f"lam must have d = {d} entries, got {len(lam)}")
    out = []
    for i, x in enumerate(lam):
        try:
            e = sp.sympify(x)
        except (sp.SympifyError, TypeError, ValueError):
            raise ArgumentTypeError(
                f"lam[{i}] must be a number or a sympy expression, got {x!r}"
            ) from None
        if not isinstance(e, sp.Expr) or e.is_positive is False or e.has(sp.nan, sp.zoo, sp.oo):
            raise ValueError(
                f"lam[{i}] must be a positive eigenvalue of Sigma (a number > 0 or a positive "
                f"symbol), got {x!r}"
            )
        out.append(e)
    return tuple(out)


def _vec(name: str, r: int) -> sp.Matrix:
    return sp.Matrix(r, 1, lambda i, _: sp.Symbol(f"{name}_{i + 1}", real=True))


def _embedding(X: sp.Matrix, y: sp.Matrix, x_q: sp.Matrix) -> sp.Matrix:
    """Eq. 1: columns ``(x^(i), y^(i))`` and the query ``(x^(n+1), 0)``; shape ``(d+1, n+1)``."""
    top = X.T.row_join(x_q)
    return top.col_join(y.T.row_join(sp.zeros(1, 1)))


def _layer(Z: sp.Matrix, P: sp.Matrix, Q: sp.Matrix, n: int) -> sp.Matrix:
    """Eq. 4 literally: ``Z + (1/n) P Z M (Z^T Q Z)``."""
    M = sp.diag(*([1] * n + [0]))
    return (Z + P * Z * M * (Z.T * Q * Z) / n).applyfunc(sp.expand)


class SingleLayer(NamedTuple):
    """One literal layer of eq. 4 and its reduced form eq. 15 (:func:`single_layer_expr`).

    Shapes: ``X (n, d)`` (row ``i`` is ``x^(i)``), ``w (d, 1)``, ``x_q (d, 1)``,
    ``P, Q (d+1, d+1)``, ``b (d+1, 1)``, ``A (d+1, d)``, ``C (d+1, d+1)``.
    """

    X: sp.Matrix
    w: sp.Matrix
    x_q: sp.Matrix
    P: sp.Matrix
    Q: sp.Matrix
    Z0: sp.Matrix
    out: sp.Expr
    b: sp.Matrix
    A: sp.Matrix
    C: sp.Matrix
    eq15: sp.Expr


def single_layer_expr(d: int, n: int) -> SingleLayer:
    """``[Z_1]_{d+1, n+1}`` of one literal layer with symbolic ``P, Q`` and prompt, and eq. 15.

    Labels are ``y^(i) = <w*, x^(i)>`` with a symbolic ``w*`` and the query label is 0 (eq. 1).

    Args:
        d: input dimension, ``>= 1``.
        n: number of context examples, ``>= 1``.
    """
    d = positive_int("d", d)
    n = positive_int("n", n)
    X = _mat("x", n, d)
    w = _vec("w", d)
    x_q = _vec("q", d)
    P = _mat("P", d + 1, d + 1)
    Q = _mat("Q", d + 1, d + 1)
    Z0 = _embedding(X, X * w, x_q)
    out = _layer(Z0, P, Q, n)[d, n]
    b = P[d, :].T
    A = Q[:, :d]
    Zc = Z0[:, :n]
    C = Zc * Zc.T / n
    eq15 = sp.expand((b.T * C * A * x_q)[0, 0])
    return SingleLayer(X, w, x_q, P, Q, Z0, out, b, A, C, eq15)


class SingleLayerRisk(NamedTuple):
    """The exact one-layer loss of eq. 6 / 15 (:func:`single_layer_risk_expr`).

    Attributes:
        f: ``E[(b^T C A x_q + w*^T x_q)^2]``, a polynomial in ``b``, ``A``, ``lam`` and ``1/n``.
        b: ``(d+1, 1)`` symbols ``b_1..b_{d+1}``.
        A: ``(d+1, d)`` symbols ``A_ij``.
        lam: the ``d`` eigenvalues (symbols unless given).
        n: the symbol ``n``.
    """

    f: sp.Expr
    b: sp.Matrix
    A: sp.Matrix
    lam: tuple
    n: sp.Symbol


def single_layer_risk_expr(d: int, lam=None) -> SingleLayerRisk:
    """Exact in-context loss of the reduced one-layer model for ``x ~ N(0, diag(lam))``,
    ``w* ~ N(0, I_d)`` (Theorem 1's prior in the eigenbasis of ``Sigma``), ``n`` symbolic.

    ``u = (b^T z)(z^T A x_q)`` with ``z = (x, <w*, x>)`` is one context term of ``b^T C A x_q``;
    given ``(w*, x_q)`` the ``n`` terms are i.i.d., so
    ``E[r^2 | w*, x_q] = m_2/n + (1 - 1/n) m_1^2 + 2 v m_1 + v^2`` with ``v = w*^T x_q``.

    Args:
        d: input dimension, ``>= 1``.
        lam: ``d`` positive eigenvalues (numbers or expressions); default symbols ``lambda_i``.
    """
    d = positive_int("d", d)
    lam = _check_lam(lam, d)
    n = sp.Symbol("n", positive=True)
    b = _vec("b", d + 1)
    A = _mat("A", d + 1, d)
    x = _vec("x", d)
    w = _vec("w", d)
    x_q = _vec("q", d)
    z = x.col_join(sp.Matrix([[(w.T * x)[0, 0]]]))
    u = sp.expand((b.T * z)[0, 0] * (z.T * A * x_q)[0, 0])
    cov = sp.diag(*lam)
    m1 = gaussian_expectation(u, list(x), cov=cov)
    m2 = gaussian_expectation(sp.expand(u**2), list(x), cov=cov)
    v = (w.T * x_q)[0, 0]
    inner = sp.expand(m2 / n + (1 - 1 / n) * m1**2 + 2 * v * m1 + v**2)
    f = expect_independent(inner, [(list(w), None, None), (list(x_q), None, cov)])
    return SingleLayerRisk(sp.expand(f), b, A, lam, n)


def component_risk_expr(d: int, j: int, lam=None) -> tuple[sp.Expr, sp.Matrix, sp.Symbol]:
    """``f_j(X) = E[(<C, X> + w*_j)^2]`` of App. A.2-A.3 with ``X`` symbolic, ``n`` symbolic.

    Args:
        d: input dimension.
        j: coordinate, ``0 <= j < d`` (0-based; the paper's ``j`` is ``j + 1``).
        lam: eigenvalues of the diagonal ``Sigma`` (default symbols).

    Returns:
        ``(f_j, X, n)`` with ``X`` a ``(d+1, d+1)`` matrix of symbols.
    """
    d = positive_int("d", d)
    if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < d:
        raise ValueError(f"j must be an integer in 0..{d - 1}, got {j!r}")
    lam = _check_lam(lam, d)
    n = sp.Symbol("n", positive=True)
    Xm = _mat("X", d + 1, d + 1)
    x = _vec("x", d)
    w = _vec("w", d)
    z = x.col_join(sp.Matrix([[(w.T * x)[0, 0]]]))
    u = sp.expand((z.T * Xm * z)[0, 0])  # <z z^T, X>
    cov = sp.diag(*lam)
    m1 = gaussian_expectation(u, list(x), cov=cov)
    m2 = gaussian_expectation(sp.expand(u**2), list(x), cov=cov)
    inner = sp.expand(m2 / n + (1 - 1 / n) * m1**2 + 2 * w[j] * m1 + w[j] ** 2)
    f = expect_independent(inner, [(list(w), None, None)])
    return sp.expand(f), Xm, n


class Lemma2(NamedTuple):
    """``L`` sparse layers (eq. 9) and ``L`` preconditioned GD steps (:func:`lemma2_expr`).

    Attributes:
        A: the ``L`` symmetric ``(d, d)`` symbol matrices.
        X, y, x_q: the symbolic prompt (``y`` arbitrary symbols).
        transformer: ``-[Z_l]_{d+1, n+1}`` after ``l = 1..L`` literal layers.
        gd: ``<w_l, x_q>`` after ``l = 1..L`` steps ``w_{l+1} = w_l + A_l grad R(w_l)``.
    """

    A: list
    X: sp.Matrix
    y: sp.Matrix
    x_q: sp.Matrix
    transformer: list
    gd: list


def lemma2_expr(d: int, n: int, L: int) -> Lemma2:
    """Lemma 2 symbolically: eq. 4 with ``P_l = [[0, 0], [0, 1]]``, ``Q_l = [[A_l, 0], [0, 0]]``.

    Args:
        d: input dimension; n: context length; L: number of layers (all ``>= 1``).
    """
    d = positive_int("d", d)
    n = positive_int("n", n)
    L = positive_int("L", L)
    X = _mat("x", n, d)
    y = _vec("y", n)
    x_q = _vec("q", d)
    As = [_mat(f"a{l}", d, d, sym=True) for l in range(L)]
    Z = _embedding(X, y, x_q)
    P = sp.zeros(d + 1, d + 1)
    P[d, d] = 1
    w = sp.zeros(d, 1)
    tf, gd = [], []
    for A in As:
        Q = sp.zeros(d + 1, d + 1)
        Q[:d, :d] = A
        Z = _layer(Z, P, Q, n)
        tf.append(-Z[d, n])
        grad = X.T * (X * w - y) / n  # grad R(w), eq. 10
        w = (w + A * grad).applyfunc(sp.expand)
        gd.append(sp.expand((w.T * x_q)[0, 0]))
    return Lemma2(As, X, y, x_q, tf, gd)
