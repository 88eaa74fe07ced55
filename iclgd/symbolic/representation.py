r"""Lemmas 4 and 5 of Yang et al. (2024), derived symbolically from the data model (Part II).

* :func:`lemma4_expr` -- ``E_eps[(1/2N) sum_i (y_i - lambda^T (f(v_i) + eps_i))^2]`` (eq. 24, 32)
  computed with exact Gaussian moments, for the noise variance ``tau`` of eq. 1 and for ``tau^2``
  (the variance App. D.3 writes), beside the right-hand side of eq. 32.
* :func:`lemma5_expr` -- the population loss eq. 9 of any predictor ``y_hat_k = <y, a_k>`` (the
  model of eq. 8 is one, with ``a_k = sum_h w_{h,k} softmax(V^T Q_h v_k)``, eq. 35), computed from
  eq. 1 with ``lambda ~ N(0, I_m)`` (Assumption 1) and ``eps_k ~ N(0, tau I_m)``; every feature
  ``z_k = f(v_k)`` and every ``a_k`` entry is a free symbol.
  With ``lam_var`` the law of ``lambda`` is any isotropic one, ``E[lambda lambda^T] = lam_var I_m``.
* :func:`lemma5_minimum` -- at a numeric (rational) feature matrix, the minimiser of that loss over
  ``A_hat`` (a linear solve, exact) and its minimum ``L*`` as a rational function of ``tau``, beside
  ``L*`` as printed in Lemma 5 (:func:`lemma5_printed_L_star`) and eq. 34's ``A``.
* :func:`theorem2_penalty` -- Theorem 2 from that minimiser: the prediction ``y^T A_min`` of the
  loss-minimising model is the ridge regression ``(y, (Z^Q)^T lambda_rho)`` for exactly one penalty
  ``rho``, solved for (the paper's answer is ``m tau / N``, eq. 20).

Example::

    >>> lem = lemma5_expr(1, 1, 2)
    >>> mini = lemma5_minimum(lem, [[1, 2]])
    >>> sp.simplify(mini.L_star - mini.L_star_printed)      # (K - N) m tau / (2K)
    tau/4
"""

from __future__ import annotations

from typing import Any, NamedTuple

import sympy as sp

from ..checks import positive_int
from .core import as_matrix
from .gaussian import expect_independent

__all__ = [
    "Lemma4",
    "Lemma5",
    "Lemma5Minimum",
    "Theorem2Penalty",
    "lemma4_expr",
    "lemma5_expr",
    "lemma5_minimum",
    "lemma5_printed_L_star",
    "theorem2_penalty",
]


class Lemma4(NamedTuple):
    """Symbols and expressions of Lemma 4 (:func:`lemma4_expr`).

    Attributes:
        tau: the noise-variance symbol of eq. 1.
        lam: ``(m, 1)`` the task coefficients (constants here).
        F: ``(m, N)`` the features ``f(v_i)``.
        y: ``(N, 1)`` the prompt labels (constants: eq. 24 averages over fresh noise).
        lhs: ``E_eps[...]`` of eq. 32 with ``eps_i ~ N(0, tau I_m)`` (eq. 1).
        lhs_tau2: the same with ``eps_i ~ N(0, tau^2 I_m)`` (App. D.3's wording).
        rhs: ``(1/2N) sum_i (y_i - lambda^T f(v_i))^2 + (tau/2) ||lambda||^2``, eq. 32's right side.
    """

    tau: sp.Symbol
    lam: sp.Matrix
    F: sp.Matrix
    y: sp.Matrix
    lhs: sp.Expr
    lhs_tau2: sp.Expr
    rhs: sp.Expr


def _noise(m: int, n: int) -> sp.Matrix:
    return sp.Matrix(m, n, lambda i, j: sp.Symbol(f"eps_{i}_{j}", real=True))


def lemma4_expr(m: int, N: int) -> Lemma4:
    """Lemma 4 (eq. 32) at ``m`` features and ``N`` prompt tokens, from exact Gaussian moments.

    Args:
        m: number of basis functions, ``>= 1``.
        N: prompt length, ``>= 1``.
    """
    m, N = positive_int("m", m), positive_int("N", N)
    tau = sp.Symbol("tau", positive=True)
    lam = sp.Matrix(m, 1, lambda i, _: sp.Symbol(f"lambda_{i}", real=True))
    F = sp.Matrix(m, N, lambda i, j: sp.Symbol(f"f_{i}_{j}", real=True))
    y = sp.Matrix(N, 1, lambda i, _: sp.Symbol(f"y_{i}", real=True))
    eps = _noise(m, N)
    inner = sum(((y[i] - (lam.T * (F[:, i] + eps[:, i]))[0]) ** 2 for i in range(N)), sp.S.Zero)
    obj = inner / (2 * N)
    lhs, lhs2 = (
        sp.expand(expect_independent(obj, [(list(eps), None, var * sp.eye(m * N))]))
        for var in (tau, tau**2)
    )
    fit = sum(((y[i] - (lam.T * F[:, i])[0]) ** 2 for i in range(N)), sp.S.Zero) / (2 * N)
    rhs = sp.expand(fit + tau / 2 * (lam.T * lam)[0])
    return Lemma4(tau, lam, F, y, lhs, lhs2, rhs)


class Lemma5(NamedTuple):
    """Symbols and expressions of Lemma 5 (:func:`lemma5_expr`).

    Attributes:
        tau: the noise-variance symbol of eq. 1.
        m, N, K: the sizes.
        Z_hat: ``(m, K)`` feature symbols ``z_k = f(v_k)`` (``Z = Z_hat[:, :N]``).
        A_hat: ``(N, K)`` symbols ``a_k`` of the predictor ``y_hat_k = <y, a_k>`` (eq. 35).
        loss: eq. 9, ``(1/2K) sum_k E_{lambda, eps} (y^T a_k - y_k)^2``, noise variance ``tau``.
        loss_tau2: the same with noise variance ``tau^2`` (App. D.3's wording).
        eq77: eq. 75 with eq. 76-77 as printed, ``(1/2K) sum_k [||Z a_k - z_k||^2
            + m tau (||a_k||^2 + 1) - 2 m tau a_kk 1{k <= N}]`` (Assumption 1, whatever
            ``lam_var``).
        lam_var: ``E[lambda lambda^T] = lam_var I_m`` used for ``loss`` and ``loss_tau2`` (1:
            Assumption 1).
    """

    tau: sp.Symbol
    m: int
    N: int
    K: int
    Z_hat: sp.Matrix
    A_hat: sp.Matrix
    loss: sp.Expr
    loss_tau2: sp.Expr
    eq77: sp.Expr
    lam_var: sp.Expr = sp.S.One


def lemma5_expr(m: int, N: int, K: int, lam_var: Any = 1) -> Lemma5:
    """The population loss eq. 9 of ``y_hat_k = <y, a_k>`` from eq. 1, by exact Gaussian moments.

    Labels ``y_k = lambda^T (z_k + eps_k)`` for all ``K`` tokens, the prompt ``y = (y_1..y_N)``;
    ``lambda ~ N(0, lam_var I_m)`` (Assumption 1: ``lam_var = 1``), ``eps_k ~ N(0, tau I_m)``
    independent. The loss is quadratic in ``lambda``, so only ``E[lambda lambda^T]`` enters it: the
    result holds for every law of ``lambda`` with mean 0 and that second moment. Cost grows fast:
    keep ``m K <= 12``.

    Args:
        m: number of basis functions, ``>= 1``.
        N: prompt length, ``>= 1``.
        K: dictionary size, ``> N``.
        lam_var: the variance of each ``lambda_i``, a positive number or sympy expression (e.g. a
            positive symbol ``s**2``).
    """
    m, N, K = positive_int("m", m), positive_int("N", N), positive_int("K", K, 2)
    if N >= K:
        raise ValueError(f"N must satisfy 1 <= N < K = {K}, got {N}")
    lam_var = sp.sympify(lam_var)
    if lam_var.is_positive is not True:
        raise ValueError(f"lam_var must be a positive number or expression, got {lam_var}")
    tau = sp.Symbol("tau", positive=True)
    Zh = sp.Matrix(m, K, lambda i, k: sp.Symbol(f"z_{i}_{k}", real=True))
    A = sp.Matrix(N, K, lambda i, k: sp.Symbol(f"a_{i}_{k}", real=True))
    lam = sp.Matrix(m, 1, lambda i, _: sp.Symbol(f"lambda_{i}", real=True))
    eps = _noise(m, K)
    y_all = (Zh + eps).T * lam  # (K, 1), eq. 1
    y = y_all[:N, :]
    sq = sum((((y.T * A[:, k])[0] - y_all[k]) ** 2 for k in range(K)), sp.S.Zero) / (2 * K)
    losses = []
    for var in (tau, tau**2):
        groups = [(list(eps), None, var * sp.eye(m * K)), (list(lam), None, lam_var * sp.eye(m))]
        losses.append(sp.expand(expect_independent(sq, groups)))
    Z = Zh[:, :N]
    eq77 = sum(
        (
            ((Z * A[:, k] - Zh[:, k]).T * (Z * A[:, k] - Zh[:, k]))[0]
            + m * tau * ((A[:, k].T * A[:, k])[0] + 1)
            - (2 * m * tau * A[k, k] if k < N else 0)
            for k in range(K)
        ),
        sp.S.Zero,
    ) / (2 * K)
    return Lemma5(tau, m, N, K, Zh, A, losses[0], losses[1], sp.expand(eq77), lam_var)


class Lemma5Minimum(NamedTuple):
    """The minimum of Lemma 5's loss at numeric features (:func:`lemma5_minimum`).

    Attributes:
        A_min: ``(N, K)`` the minimiser of ``loss`` over ``A_hat`` (entries rational in ``tau``).
        A_eq34: ``(N, K)`` eq. 34, ``(Z^T Z + m tau I)^{-1} (Z^T Z_hat + (m tau I_N, 0))``.
        L_star: the minimum of ``loss``.
        L_star_printed: Lemma 5's ``L*`` as printed (no ``m tau`` for the query tokens).
        loss: ``loss`` at these features, a quadratic in ``A_hat``.
    """

    A_min: sp.Matrix
    A_eq34: sp.Matrix
    L_star: sp.Expr
    L_star_printed: sp.Expr
    loss: sp.Expr


def lemma5_minimum(lem: Lemma5, Z_hat: Any) -> Lemma5Minimum:
    """Minimise ``lem.loss`` over ``A_hat`` at the numeric features ``Z_hat`` ``(m, K)``.

    The loss is a convex quadratic in the entries of ``A_hat``: its stationarity conditions are a
    linear system, solved exactly. ``tau`` stays a symbol.
    """
    if not isinstance(lem, Lemma5):
        raise TypeError(f"lem must be a Lemma5 (from lemma5_expr), got {type(lem).__name__}")
    Zv = as_matrix("Z_hat", Z_hat)
    if Zv.shape != (lem.m, lem.K) or not all(e.is_number for e in Zv):
        raise ValueError(f"Z_hat must be a numeric ({lem.m}, {lem.K}) matrix, got {Zv.shape}")
    Zv = Zv.applyfunc(sp.nsimplify)
    loss = sp.expand(lem.loss.subs(dict(zip(lem.Z_hat, Zv, strict=True))))
    a = list(lem.A_hat)
    sol = sp.solve([sp.diff(loss, s) for s in a], a, dict=True)
    if len(sol) != 1 or len(sol[0]) != len(a):
        raise ValueError("Z_hat gives no unique minimiser (Z^T Z + m tau I must be invertible)")
    A_min = lem.A_hat.subs(sol[0]).applyfunc(sp.cancel)
    L_star = sp.cancel(loss.subs(sol[0]))
    m, N, K, tau = lem.m, lem.N, lem.K, lem.tau
    Z = Zv[:, :N]
    G = Z.T * Z + m * tau * sp.eye(N)
    E = sp.eye(N).row_join(sp.zeros(N, K - N))
    A34 = (G.inv() * (Z.T * Zv + m * tau * E)).applyfunc(sp.cancel)
    printed = lemma5_printed_L_star(Zv, N, tau)
    return Lemma5Minimum(A_min, A34, L_star, printed, loss)


def lemma5_printed_L_star(Z_hat: Any, N: int, tau: Any) -> sp.Expr:
    """Lemma 5's constant ``L*`` (eq. 36) exactly as printed, at numeric features.

    ``L* = 1/(2K) [sum_{k<=N} c_k + sum_{k>N} c'_k]`` with (eq. 78-79)
    ``c_k = ||z_k||^2 + m tau - r_k^T G^{-1} r_k``, ``r_k = Z^T z_k + m tau e_k`` and
    ``c'_k = ||z_k||^2 - (Z^T z_k)^T G^{-1} Z^T z_k``, ``G = Z^T Z + m tau I_N``: the query tokens'
    ``c'_k`` has no ``+ m tau`` (their label noise), unlike the minimum of the loss. Floats are
    converted to exact rationals (``sp.Rational``), so the value is exact at those features.

    Args:
        Z_hat: numeric ``(m, K)`` features (``Z = Z_hat[:, :N]``).
        N: prompt length, ``1 <= N < K``.
        tau: noise variance, a number ``> 0`` or a positive symbol.

    Returns:
        a sympy expression (a number if ``tau`` is one).
    """
    Zv = as_matrix("Z_hat", Z_hat)
    if not all(e.is_number for e in Zv):
        raise ValueError(f"Z_hat must be a numeric (m, K) matrix, got symbols in {Zv.shape}")
    Zv = Zv.applyfunc(lambda e: sp.Rational(e) if isinstance(e, sp.Float) else sp.nsimplify(e))
    m, K = Zv.shape
    N = positive_int("N", N)
    if N >= K:
        raise ValueError(f"N must satisfy 1 <= N < K = {K}, got {N}")
    tau = sp.Rational(tau) if isinstance(tau, float) else sp.sympify(tau)
    if tau.is_positive is not True:
        raise ValueError(f"tau must be positive, got {tau}")
    Z = Zv[:, :N]
    Gi = (Z.T * Z + m * tau * sp.eye(N)).inv()
    total = sp.S.Zero
    for k in range(K):
        r = Z.T * Zv[:, k] + (m * tau * sp.eye(N)[:, k] if k < N else sp.zeros(N, 1))
        total += (Zv[:, k].T * Zv[:, k])[0] - (r.T * Gi * r)[0] + (m * tau if k < N else 0)
    return sp.cancel(total / (2 * K))


class Theorem2Penalty(NamedTuple):
    """Theorem 2 at numeric features (:func:`theorem2_penalty`).

    Attributes:
        rho: the penalty symbol of the ridge objective
            ``1/(2N) sum_i (y_i - lambda^T z_i)^2 + rho/2 ||lambda||^2``.
        y: ``(N, 1)`` prompt-label symbols.
        y_model: ``(1, K)`` ``y^T A_min``, the prediction of the loss-minimising model (eq. 27).
        y_ridge: ``(1, K)`` ``(y^T, lambda_rho^T Z^Q)`` with ``lambda_rho`` the ridge solution,
            solved from its stationarity conditions (entries rational in ``rho``).
        solutions: every ``rho`` (in terms of ``tau``) with ``y_model = y_ridge`` for all ``y``.
        copies_prompt: ``A_min[:, :N] == I_N`` (the model returns the given labels).
    """

    rho: sp.Symbol
    y: sp.Matrix
    y_model: sp.Matrix
    y_ridge: sp.Matrix
    solutions: list
    copies_prompt: bool


def theorem2_penalty(lem: Lemma5, Z_hat: Any) -> Theorem2Penalty:
    """Which ridge regression the loss-minimising model implements (Theorem 2, eq. 20-22, 27).

    At the numeric features ``Z_hat`` ``(m, K)``, :func:`lemma5_minimum` gives the minimiser
    ``A_min`` of the population loss eq. 9, derived from eq. 1 and eq. 8. Its prediction on a
    prompt with symbolic labels ``y`` is compared with ``(y, (Z^Q)^T lambda_rho)``, where
    ``lambda_rho`` minimises the ridge objective with a symbolic penalty ``rho``; matching the
    coefficients of every ``y_i`` in every query column gives equations in ``rho`` and ``tau``,
    solved for ``rho``.

    Args:
        lem: from :func:`lemma5_expr`.
        Z_hat: numeric ``(m, K)`` features.
    """
    mini = lemma5_minimum(lem, Z_hat)
    m, N, K = lem.m, lem.N, lem.K
    Zv = as_matrix("Z_hat", Z_hat).applyfunc(sp.nsimplify)
    rho = sp.Symbol("rho", positive=True)
    y = sp.Matrix(N, 1, lambda i, _: sp.Symbol(f"y_{i}", real=True))
    lam = sp.Matrix(m, 1, lambda i, _: sp.Symbol(f"l_{i}", real=True))
    Z, ZQ = Zv[:, :N], Zv[:, N:]
    obj = sum(((y[i] - (lam.T * Z[:, i])[0]) ** 2 for i in range(N)), sp.S.Zero) / (2 * N)
    obj += rho / 2 * (lam.T * lam)[0]
    sol = sp.solve([sp.diff(obj, s) for s in lam], list(lam), dict=True)
    lam_rho = lam.subs(sol[0]).applyfunc(sp.cancel)
    y_model = (y.T * mini.A_min).applyfunc(sp.cancel)
    y_ridge = y.T.row_join(lam_rho.T * ZQ).applyfunc(sp.cancel)
    eqs = []
    for k in range(N, K):
        num = sp.numer(sp.together(y_model[k] - y_ridge[k]))
        eqs += [c for c in sp.Poly(sp.expand(num), *y).coeffs() if c != 0]
    solutions = sp.solve(eqs, rho, dict=True) if eqs else []
    copies = (mini.A_min[:, :N] - sp.eye(N)).applyfunc(sp.cancel) == sp.zeros(N, N)
    return Theorem2Penalty(rho, y, y_model, y_ridge, [s[rho] for s in solutions], bool(copies))
