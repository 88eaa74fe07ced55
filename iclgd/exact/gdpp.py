r"""GD++ on the set of Theorem 5, exactly (Ahn, Cheng, Daneshmand, Sra 2023, Sec. 6, eq. 13).

With ``A_l = a_l Sigma^{-1}`` and ``B_l = b_l I`` everything whitens (:func:`gdpp_residual`): the
prediction error is a polynomial ``q`` of the whitened context Gram matrix, and the loss
``E sum_i q(lam_i)^2`` is a polynomial in ``(a, b)`` with exact rational Wishart-moment
coefficients (:func:`gdpp_risk_expr`, :mod:`iclgd.exact.wishart`). :func:`gdpp_risk` evaluates it
and its gradient at any precision; :func:`gdpp_critical_point(s)` find its stationary points, and
:func:`gdpp_gradient_on_S` projects a full-parameter gradient on the set. The sparse
preconditioned-GD risks are :mod:`iclgd.exact.pgd`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import sympy as sp

from .. import checks as v
from .pgd import optimal_scalars
from .wishart import (
    wishart_power_moments,
)

__all__ = [
    "gdpp_residual",
    "gdpp_gram_eigenvalues",
    "gdpp_risk_expr",
    "gdpp_risk",
    "gdpp_gradient_on_S",
    "GDppCritical",
    "gdpp_critical_point",
    "GDppSearch",
    "gdpp_critical_points",
    "gdpp_multistart",
    "gdpp_lowest",
]


def gdpp_residual(a, b, lam) -> np.ndarray:
    """Residual polynomial of GD++ on Theorem 5's set, one value per eigenvalue (Sec. 6, eq. 13).

    With ``A_l = a_l Sigma^{-1}``, ``B_l = b_l I``, ``x ~ N(0, Sigma)``, ``w* ~ N(0, Sigma^{-1})``
    everything whitens: the covariates follow ``X_{l+1} = F_{l+1} X_0`` with
    ``F_{l+1} = (I + a_l b_l F_l^2 G) F_l`` and ``G = X_c X_c^T / n`` (whitened context Gram
    matrix), the context labels ``v_l^T X_c`` with ``v_{l+1} = (I + a_l G F_l^2) v_l``, and the
    query's telescoping sum leaves the prediction error ``-w_bar^T q(G) x_bar`` with

        q(lam) = prod_l (1 + a_l lam f_l(lam)^2),  f_0 = 1,  f_{l+1} = f_l (1 + a_l b_l lam f_l^2).

    The loss is ``E sum_i q(lam_i)^2`` over the eigenvalues ``lam_i`` of ``G``; ``b = 0`` gives
    preconditioned GD, ``q = prod_l (1 + a_l lam)``. The last ``b`` does not enter.

    Args:
        a: ``(L,)`` scalars of ``A_l``.
        b: ``(L,)`` scalars of ``B_l``.
        lam: ``(...)`` eigenvalues of ``G``.

    Returns:
        ``(...)`` values ``q(lam)`` (float64).
    """
    g = gdpp_gram_eigenvalues(a, b, lam)  # (L, ...): lam f_l(lam)^2, the arguments checked there
    a = np.asarray(a, dtype=np.float64).reshape((-1,) + (1,) * (g.ndim - 1))
    return np.prod(1 + a * g, axis=0)


def gdpp_gram_eigenvalues(a, b, lam) -> np.ndarray:
    """``(L, ...)`` eigenvalues ``lam f_l(lam)^2`` of the Gram matrix of ``X_l = F_l X_0``, the
    covariates GD++ layer ``l`` steps on, on Theorem 5's set (whitened as in
    :func:`gdpp_residual`; ``a``, ``b``: ``(L,)``; ``lam``: ``(...)`` eigenvalues of ``G``). Their
    spread is what Sec. 6.1 compares: "``X_2`` is better-conditioned compared to ``X_1``".

    >>> gdpp_gram_eigenvalues([-1.0, -2.0], [0.5, 0.0], [1.0, 2.0]).tolist()
    [[1.0, 2.0], [0.25, 0.0]]
    """
    a = np.asarray(v.array("a", a, "L"), dtype=np.float64)
    b = np.asarray(v.array("b", b, (a.shape[0],), what="like a"), dtype=np.float64)
    lam = np.asarray(v.array("lam", lam), dtype=np.float64)
    f, out = np.ones_like(lam), []
    for al, bl in zip(a, b, strict=True):
        out.append(lam * f**2)
        f = f * (1 + al * bl * out[-1])  # f_{l+1} = f_l (1 + a_l b_l lam f_l^2)
    return np.stack(out)


def _check_gdpp_L(L) -> int:
    L = v.positive_int("L", L)
    if L > 3:
        raise ValueError(f"L must be at most 3 (moments up to E tr S^(3^L - 1)), got {L}")
    return L


@functools.cache  # sympy's expansion of q(s)^2 is the slow part: once per size
def _gdpp_poly(L: int, n: int, d: int) -> tuple[sp.Poly, tuple, tuple]:
    a = sp.symbols(f"a_0:{L}", real=True)
    b = sp.symbols(f"b_0:{L - 1}", real=True) if L > 1 else ()
    s = sp.Symbol("s")
    gens = (*a, *b, s)
    one = sp.Poly(1, *gens, domain=sp.QQ)
    A = [sp.Poly(x, *gens, domain=sp.QQ) for x in a]
    B = [sp.Poly(x, *gens, domain=sp.QQ) for x in b]
    S = sp.Poly(s, *gens, domain=sp.QQ)
    f, q = one, one
    for l in range(L):
        q = q * (one + A[l] * S * f**2)
        if l < L - 1:
            f = f * (one + A[l] * B[l] * S * f**2)
    q2 = q**2
    m = wishart_power_moments(q2.degree(s), n, d)
    terms: dict = {}
    for mon, c in q2.terms():
        k = mon[-1]
        key = mon[:-1]
        terms[key] = terms.get(key, 0) + c * sp.Rational(m[k], n**k)
    return sp.Poly.from_dict(terms, *gens[:-1], domain=sp.QQ), a, b


def gdpp_risk_expr(L: int, n: int, d: int) -> tuple[sp.Expr, tuple, tuple]:
    """Exact loss of GD++ on Theorem 5's set, a polynomial in its scalars (Sec. 6, eq. 13).

    On ``S = {A_l = a_l Sigma^-1, B_l = b_l I}`` with ``x ~ N(0, Sigma)``, ``w* ~ N(0, Sigma^-1)``
    the prediction error is ``-w_bar^T q(G) x_bar`` (:func:`gdpp_residual`), so

        f(a, b) = E tr q(G)^2 = sum_k [s^k] q(s)^2 * E tr S^k / n^k,

    ``G = S/n`` with ``S`` a white Wishart matrix. ``q`` has degree ``(3^L - 1)/2`` in ``s`` (13 for
    three layers), so the loss needs ``E tr S^k`` up to ``k = 3^L - 1`` (26), beyond the Wick
    matchings; the loop equations give them exactly
    (:func:`~iclgd.exact.wishart.wishart_power_moments`). The coefficients are exact
    rationals. The last ``b`` does not enter.

    Args:
        L: number of layers, ``1 <= L <= 3``.
        n: number of context examples; d: dimension (positive integers).

    Returns:
        ``(f, a, b)``: the sympy polynomial, the ``L`` symbols ``a_0..`` and the ``L - 1`` symbols
        ``b_0..b_{L-2}``.
    """
    L = _check_gdpp_L(L)
    P, a, b = _gdpp_poly(L, v.positive_int("n", n), v.positive_int("d", d))
    return P.as_expr(), a, b


class _PolyEval:
    """Value, gradient and Hessian of a multivariate polynomial, in float64 or mpmath.

    The mpmath path (:meth:`mp`) is exact before its one rounding: a point of mpmath numbers is a
    point of dyadic rationals, so every monomial is an exact integer over a power of two, and the
    sum over the monomials (exact rational coefficients on a common denominator) is rounded once
    to the working precision.
    """

    def __init__(self, P: sp.Poly):
        mons, coefs = zip(*P.terms(), strict=True)
        self.E = np.array(mons, dtype=np.int64)  # (T, V) exponents
        self.q = [sp.Rational(c) for c in coefs]  # exact coefficients
        self.c64 = np.array([float(c) for c in self.q])
        self.den = int(functools.reduce(sp.ilcm, (int(c.q) for c in self.q), 1))
        self._derived: dict = {}  # variables differentiated -> (coefficients, exponents, shifts)

    def f64(self, x):
        return float(self.c64 @ np.prod(np.asarray(x, float) ** self.E, axis=1))

    def fg64(self, x):
        """``(f, grad f)`` in float64, vectorised over the monomials (prefix/suffix products)."""
        x = np.asarray(x, float)
        P = x[None, :] ** self.E  # (T, V)
        pre, suf = np.ones_like(P), np.ones_like(P)
        for j in range(1, P.shape[1]):
            pre[:, j] = pre[:, j - 1] * P[:, j - 1]
            suf[:, -1 - j] = suf[:, -j] * P[:, -j]
        D = self.E * x[None, :] ** np.maximum(self.E - 1, 0)  # d/dx_j of x_j^E_j
        return float(self.c64 @ (pre[:, -1] * P[:, -1])), (self.c64[:, None] * pre * suf * D).sum(0)

    def g64(self, x):
        x = np.asarray(x, float)
        out = np.empty(x.shape[0])
        for j in range(x.shape[0]):
            E = self.E.copy()
            e = E[:, j].copy()
            E[:, j] = np.maximum(e - 1, 0)
            out[j] = (self.c64 * e) @ np.prod(x**E, axis=1)
        return out

    def _terms(self, skip: tuple) -> tuple:
        """The derivative of the polynomial in the variables ``skip`` (times ``den``): its integer
        coefficients (object array), exponents ``(T', V)`` and the shifts ``top - degree``;
        cached."""
        if skip not in self._derived:
            K, E = [], []
            for c, e in zip(self.q, self.E.tolist(), strict=True):
                k = int(c.p) * (self.den // int(c.q))
                for j in skip:
                    k *= e[j]
                    e[j] -= 1
                if k:
                    K.append(k)
                    E.append(e)
            E = np.array(E, dtype=np.int64).reshape(len(K), self.E.shape[1])
            top = int(self.E.sum(1).max())
            self._derived[skip] = (np.array(K, dtype=object), E, top - E.sum(1))
        return self._derived[skip]

    def _eval(self, skip: tuple, pw: list, shift: int):
        """The derivative ``skip`` at ``x_j = M_j 2^shift`` (``pw[j] = [M_j^0, M_j^1, ...]``, object
        arrays), correctly rounded to mpmath's working precision."""
        K, E, rest = self._terms(skip)
        t = K.copy()
        for j, row in enumerate(pw):
            t *= row[E[:, j]]
        top = int(self.E.sum(1).max())
        if shift >= 0:  # x^e = M^e 2^(shift |e|)
            num, den = int(np.sum(t << (shift * (top - rest)).astype(object))), self.den
        else:  # over the common denominator 2^(-shift top)
            num = int(np.sum(t << (-shift * rest).astype(object)))
            den = self.den << (-shift * top)
        return mpmath.mpf(mpmath.libmp.from_rational(num, den, mpmath.mp.prec, "n"))

    def mp(self, x, order: int):
        """``f`` (order 0), its gradient (1) or Hessian (2) at ``x`` (mpmath numbers, or floats),
        exact up to one rounding to the current precision."""
        V = len(x)
        x = [mpmath.mpf(t) for t in x]
        if not all(mpmath.isfinite(t) for t in x):  # as the arithmetic would: NaN throughout
            nan = mpmath.mpf("nan")
            return nan if order == 0 else [nan] * V if order == 1 else mpmath.matrix(V, V) * nan
        raw = [t._mpf_ for t in x]  # (sign, mantissa, exponent, bits)
        shift = min((r[2] for r in raw if r[1]), default=0)
        M = [(-1) ** r[0] * (r[1] << (r[2] - shift)) if r[1] else 0 for r in raw]
        pw = []
        for j in range(V):
            row = [1]
            for _ in range(int(self.E[:, j].max())):
                row.append(row[-1] * M[j])
            pw.append(np.array(row, dtype=object))
        if order == 0:
            return self._eval((), pw, shift)
        if order == 1:
            return [self._eval((j,), pw, shift) for j in range(V)]
        H = mpmath.matrix(V, V)
        for i in range(V):
            for j in range(i, V):
                H[i, j] = H[j, i] = self._eval((i, j), pw, shift)
        return H


@functools.cache
def _gdpp_functions(L: int, n: int, d: int) -> _PolyEval:
    """Evaluator of :func:`gdpp_risk_expr`'s polynomial (cached per size)."""
    return _PolyEval(_gdpp_poly(L, n, d)[0])


def _gdpp_point(L, a, b, names=("a", "b")) -> np.ndarray:
    """``(a, b[:L-1])`` as one float64 vector; ``names``: the arguments as the caller calls them."""
    what = f"the {L} scalars of A_l"
    a = np.asarray(v.array(names[0], a, (L,), what=what), dtype=np.float64)
    if b is None:
        b = np.zeros(L)
    b = np.asarray(v.array(names[1], b, (L,), what=f"the {L} scalars of B_l"), dtype=np.float64)
    return np.concatenate([a, b[: L - 1]])


def gdpp_risk(L: int, n: int, d: int, a, b, *, dps: int = 50) -> tuple[float, np.ndarray]:
    """Exact GD++ loss on Theorem 5's set and its gradient in the scalars, in ``dps`` digits.

    The polynomial's coefficients are large and alternate (``E tr S^26`` at ``n = 10, d = 5`` is
    about ``1e40``), so float64 loses about five digits to cancellation: evaluate in ``mpmath``.
    By rotation invariance the gradient of the full loss at a point of ``S`` is
    ``grad_{A_l} f = (df/da_l / d) Sigma`` and ``grad_{B_l} f = (df/db_l / d) I``.

    Args:
        L, n, d: as in :func:`gdpp_risk_expr`.
        a: ``(L,)`` scalars of ``A_l = a_l Sigma^-1``; b: ``(L,)`` scalars of ``B_l = b_l I``.
        dps: decimal digits of the arithmetic.

    Returns:
        ``(risk, grad)``: the loss and the ``(2L,)`` derivatives ``(df/da_l, df/db_l)`` (the last
        ``df/db`` is 0: that ``b`` does not enter), rounded to float64.
    """
    L = _check_gdpp_L(L)
    fn = _gdpp_functions(L, v.positive_int("n", n), v.positive_int("d", d))
    dps = _check_dps(dps)
    x = _gdpp_point(L, a, b)
    with mpmath.workdps(dps):
        xm = [mpmath.mpf(float(t)) for t in x]
        risk, g = float(fn.mp(xm, 0)), np.array([float(t) for t in fn.mp(xm, 1)])
    return risk, np.concatenate([g[:L], g[L:], [0.0]])


def _check_dps(dps) -> int:
    dps = v.positive_int("dps", dps)
    if dps < 20:
        raise ValueError(f"dps must be at least 20 digits (float64 cancels ~5), got {dps}")
    return dps


def gdpp_gradient_on_S(grad, Sigma) -> dict:
    """Gradient of the full GD++ loss at a point of Theorem 5's set, from the scalar gradient.

    In whitened coordinates the law of the prompts is rotation invariant, so at
    ``A_l = a_l Sigma^-1``, ``B_l = b_l I`` the gradient in each matrix commutes with every
    rotation and is a multiple of ``I``; back in the original coordinates
    ``grad_{A_l} f = (df/da_l / d) Sigma`` and ``grad_{B_l} f = (df/db_l / d) I``.

    Args:
        grad: ``(2L,)`` derivatives ``(df/da_l, df/db_l)`` (as :func:`gdpp_risk` returns them).
        Sigma: ``(d, d)`` covariance of ``x``.

    Returns:
        ``{"A": (L, d, d), "B": (L, d, d)}``, the parameter layout of the GD++ model.
    """
    Sigma = jnp.asarray(v.spd_matrix("Sigma", Sigma))
    grad = jnp.asarray(v.array("grad", grad, "M"))
    if grad.shape[0] % 2:
        raise ValueError(f"grad must hold 2L derivatives (a_l then b_l), got {grad.shape[0]}")
    L, d = grad.shape[0] // 2, Sigma.shape[0]
    return {
        "A": grad[:L, None, None] / d * Sigma,
        "B": grad[L:, None, None] / d * jnp.eye(d, dtype=Sigma.dtype),
    }


class GDppCritical(NamedTuple):
    """A critical point of the exact GD++ loss on Theorem 5's set (:func:`gdpp_critical_point`).

    Attributes:
        a: ``(L,)`` scalars of ``A_l = a_l Sigma^-1``.
        b: ``(L,)`` scalars of ``B_l = b_l I`` (the last is 0: it does not enter).
        risk: the exact loss there.
        grad_norm: ``|grad f|`` over the scalars, in ``dps``-digit arithmetic (after Newton).
        hess_eigs: eigenvalues of the Hessian over the ``2L - 1`` scalars that enter (all
            ``> 0``: a strict local minimum on ``S``).
        newton_steps: Newton iterations used.
    """

    a: np.ndarray
    b: np.ndarray
    risk: float
    grad_norm: float
    hess_eigs: np.ndarray
    newton_steps: int


def gdpp_critical_point(
    L: int, n: int, d: int, a0, b0=None, *, dps: int = 50, tol: float = 1e-25, max_newton: int = 30
) -> GDppCritical:
    """A critical point of the exact GD++ loss on Theorem 5's set, from a start ``(a0, b0)``.

    BFGS on the float64 loss (which loses about five digits to cancellation, enough to find a
    basin) ends near a critical point; Newton's method in ``dps``-digit arithmetic then drives the
    exact gradient below ``tol`` (quadratic convergence). By rotation invariance
    (:func:`gdpp_risk`) such a point is a critical point of the full loss over all ``A_l, B_l``:
    Theorem 5's infimum of the gradient norm on ``S`` is attained there.

    Args:
        L, n, d: as in :func:`gdpp_risk_expr`.
        a0: ``(L,)`` start for the ``a_l``; b0: ``(L,)`` start for the ``b_l`` (default 0).
        dps: decimal digits of Newton's arithmetic (``>= 20``).
        tol: gradient norm at which Newton stops, ``> 0``.
        max_newton: most Newton iterations.

    Returns:
        :class:`GDppCritical`.

    Raises:
        ValueError: if Newton does not reach ``tol`` (no critical point near the BFGS end point).
    """
    import scipy.optimize as so

    L = _check_gdpp_L(L)
    fn = _gdpp_functions(L, v.positive_int("n", n), v.positive_int("d", d))
    dps = _check_dps(dps)
    tol = v.positive_float("tol", tol)
    max_newton = v.positive_int("max_newton", max_newton)
    x0 = _gdpp_point(L, a0, b0, names=("a0", "b0"))
    res = so.minimize(
        fn.f64,
        x0,
        jac=fn.g64,
        method="BFGS",
        options={"gtol": 1e-9, "maxiter": 1000},
    )
    if not np.all(np.isfinite(res.x)) or np.abs(res.x).max() > 1e3:
        raise ValueError(
            f"BFGS from a0={a0}, b0={b0} ran off to infinity (|x| > 1e3): a valley of S, "
            "no critical point"
        )
    with mpmath.workdps(dps):
        x = mpmath.matrix([mpmath.mpf(float(t)) for t in res.x])
        for it in range(max_newton + 1):
            g = mpmath.matrix(fn.mp(list(x), 1))
            gn = mpmath.norm(g)
            if gn < tol:
                break
            if it == max_newton:
                raise ValueError(
                    f"Newton did not converge from a0={a0}, b0={b0}: |grad| = {float(gn):.3g} "
                    f"after {max_newton} steps"
                )
            x = x - mpmath.lu_solve(fn.mp(list(x), 2), g)
        H = fn.mp(list(x), 2)
        eigs = np.sort([float(e) for e in mpmath.eigsy(H)[0]])
        xs = np.array([float(t) for t in x])
        risk = float(fn.mp(list(x), 0))
    return GDppCritical(xs[:L], np.concatenate([xs[L:], [0.0]]), risk, float(gn), eigs, it)


class GDppSearch(NamedTuple):
    """Critical points of the exact GD++ loss on Theorem 5's set from several starts.

    Attributes:
        points: the distinct :class:`GDppCritical` found, lowest loss first.
        failed: starts from which no critical point was reached (BFGS ran off along a valley
            of ``S`` or Newton did not converge).
        starts: number of starts.
    """

    points: list
    failed: int
    starts: int


def gdpp_critical_points(
    L: int,
    n: int,
    d: int,
    key: jax.Array,
    starts: int,
    *,
    spread: float = 0.3,
    inits=(),
    dps: int = 50,
) -> GDppSearch:
    """Multistart :func:`gdpp_critical_point`: first the given ``inits``, then ``starts`` starts
    of which the first is the optimum with ``B = 0`` (:func:`optimal_scalars`, ``b = 0``) and
    the others perturb it by ``spread * N(0, 1)`` in every scalar (drawn from ``key``). Points
    closer than ``1e-6`` are merged.

    Args:
        L, n, d: as in :func:`gdpp_risk_expr`.
        key: PRNG key of the perturbations.
        starts: number of starts, ``>= 1``.
        spread: standard deviation of the perturbations, ``>= 0``.
        inits: sequence of ``(a0, b0)`` starts (``(L,)`` each) tried first.
        dps: decimal digits of Newton's arithmetic.

    Returns:
        :class:`GDppSearch` (``starts`` counts the ``inits`` too).
    """
    L = _check_gdpp_L(L)
    key = v.prng_key("key", key)
    starts = v.positive_int("starts", starts)
    spread = v.nonneg_float("spread", spread)
    a_opt = optimal_scalars(L, n, d).a
    z = spread * np.asarray(jax.random.normal(key, (starts, 2 * L)), np.float64)
    z[0] = 0.0
    if isinstance(inits, (str, bytes)) or not hasattr(inits, "__iter__"):
        raise v.ArgumentTypeError(f"inits must be a sequence of (a0, b0) pairs, got {inits!r}")
    inits = [tuple(p) for p in inits]
    if any(len(p) != 2 for p in inits):
        raise ValueError("inits must be a sequence of (a0, b0) pairs")
    todo = inits + [(a_opt + z[i, :L], z[i, L:]) for i in range(starts)]
    return _refined_search(L, n, d, todo, dps, len(todo))


def _refined_search(L: int, n: int, d: int, starts, dps: int, tried: int) -> GDppSearch:
    """Newton-refine each ``(a, b)`` of ``starts`` (:func:`gdpp_critical_point`), keep the distinct
    critical points (max-norm apart by more than 1e-6), sorted by loss; a start whose refinement
    fails counts as failed."""
    points, failed = [], 0
    for a0, b0 in starts:
        try:
            c = gdpp_critical_point(L, n, d, a0, b0, dps=dps)
        except ValueError:
            failed += 1
            continue
        x = np.concatenate([c.a, c.b])
        if all(np.abs(x - np.concatenate([p.a, p.b])).max() > 1e-6 for p in points):
            points.append(c)
    return GDppSearch(sorted(points, key=lambda p: p.risk), failed, tried)


def gdpp_multistart(
    L: int,
    n: int,
    d: int,
    key: jax.Array,
    starts: int,
    *,
    scale: float = 0.7,
    b_scale: float = 0.5,
    refine: int = 3,
    dps: int = 50,
) -> GDppSearch:
    """A broad search for the lowest critical point of the exact GD++ loss on Theorem 5's set.

    Many cheap float64 BFGS runs (value and gradient vectorised over the polynomial's monomials),
    from ``a_l = a*_l exp(scale z)`` (``a*`` the ``B = 0`` optimum, :func:`optimal_scalars`) and
    ``b_l = b_scale z'`` with ``z, z' ~ N(0, 1)`` drawn from ``key``; the ``refine`` lowest
    distinct end points (closer than ``1e-3`` merged) are then driven to critical points by
    :func:`gdpp_critical_point` (Newton in ``dps`` digits). The loss has many local minima on
    ``S``, so the lowest point found is an upper bound on ``min_S f``, not the minimum.

    Args:
        L, n, d: as in :func:`gdpp_risk_expr`.
        key: PRNG key of the starts.
        starts: number of BFGS starts, ``>= 1``.
        scale: spread of ``log(a_l / a*_l)``, ``>= 0``; b_scale: spread of the ``b_l``, ``>= 0``.
        refine: end points refined in ``dps`` digits, ``>= 1``.
        dps: decimal digits of Newton's arithmetic.

    Returns:
        :class:`GDppSearch`: the refined critical points, lowest loss first; ``failed`` counts the
        starts whose BFGS ran off along a valley of ``S`` (``|x| > 1e3``) plus refinements that
        did not converge.
    """
    import scipy.optimize as so

    L = _check_gdpp_L(L)
    fn = _gdpp_functions(L, v.positive_int("n", n), v.positive_int("d", d))
    key = v.prng_key("key", key)
    starts = v.positive_int("starts", starts)
    scale = v.nonneg_float("scale", scale)
    b_scale = v.nonneg_float("b_scale", b_scale)
    refine = v.positive_int("refine", refine)
    dps = _check_dps(dps)
    a_opt = np.asarray(optimal_scalars(L, n, d).a, np.float64)
    z = np.asarray(jax.random.normal(key, (starts, 2 * L - 1)), np.float64)
    ends, failed = [], 0
    for zi in z:
        x0 = np.concatenate([a_opt * np.exp(scale * zi[:L]), b_scale * zi[L:]])
        with np.errstate(all="ignore"):  # a run along a valley overflows before it is dropped
            res = so.minimize(fn.fg64, x0, jac=True, method="BFGS", options={"gtol": 1e-9})
        if not np.all(np.isfinite(res.x)) or np.abs(res.x).max() > 1e3:
            failed += 1
            continue
        ends.append((float(res.fun), res.x))
    ends.sort(key=lambda e: e[0])
    distinct = []
    for f, x in ends:
        if all(np.abs(x - y).max() > 1e-3 for _, y in distinct):
            distinct.append((f, x))
    todo = [(x[:L], np.r_[x[L:], 0.0]) for _, x in distinct[:refine]]
    search = _refined_search(L, n, d, todo, dps, starts)
    return search._replace(failed=search.failed + failed)


# The lowest strict local minima of the GD++ loss on S that gdpp_multistart found, per (L, n, d):
# gdpp_multistart(L, n, d, jax.random.key(key), starts) with its default spreads, and the lowest
# point's scalars (a, b without the last b) to 4 digits (2026-11-26). Newton (gdpp_lowest)
# restores the critical point from them; tests/test_exact_gdpp.py checks that a new, smaller
# search at (2, 10, 5) finds nothing lower, and multi_layer/baselines that theirs do not.
_LOWEST_FOUND: dict = {
    (3, 10, 5): {"key": 0, "starts": 300, "point": ([-0.539, -1.5704, -11.781], [0.297, 0.9482])},
    (2, 10, 5): {"key": 0, "starts": 300, "point": ([-0.3738, -3.0163], [0.9229])},
    (2, 20, 5): {"key": 0, "starts": 300, "point": ([-0.5168, -3.4747], [0.8685])},
    (3, 20, 5): {"key": 0, "starts": 300, "point": ([-0.3383, -2.0908, -8.5681], [0.8776, 0.5782])},
    (2, 3, 5): {"key": 0, "starts": 300, "point": ([-0.3218, -1.4179], [0.3589])},
    (3, 3, 5): {"key": 0, "starts": 300, "point": ([-0.5071, -0.3955, -5.292], [0.1132, 1.5451])},
}


@functools.cache
def gdpp_lowest(L: int, n: int, d: int) -> GDppCritical:
    """The lowest critical point of the GD++ loss on Theorem 5's set that this library has found.

    One value per ``(L, n, d)`` for every chapter: the point that :func:`gdpp_multistart` found
    lowest (its search is recorded in the module's table ``_LOWEST_FOUND``: key and number of
    starts), driven back to a critical point by :func:`gdpp_critical_point` (Newton in 50
    digits) and checked to be a strict local minimum. Its loss is an upper bound on the minimum
    of the loss over ``S`` (the loss has many local minima; none is proved global).

    Args:
        L, n, d: as in :func:`gdpp_risk_expr`; ``(L, n, d)`` must be in the table.

    Returns:
        :class:`GDppCritical`.

    Raises:
        ValueError: if ``(L, n, d)`` has not been searched (run :func:`gdpp_multistart`).
    """
    L = _check_gdpp_L(L)
    n, d = v.positive_int("n", n), v.positive_int("d", d)
    if (L, n, d) not in _LOWEST_FOUND:
        known = ", ".join(map(str, sorted(_LOWEST_FOUND)))
        raise ValueError(f"(L, n, d) = {(L, n, d)} has not been searched; searched: {known}")
    a, b = _LOWEST_FOUND[L, n, d]["point"]
    c = gdpp_critical_point(L, n, d, np.asarray(a, float), np.r_[np.asarray(b, float), 0.0])
    if c.hess_eigs.min() <= 0:
        raise ValueError(f"the stored point for {(L, n, d)} is no strict local minimum")
    return c
