"""Matrix helpers, symbolic gradients and compiled (jax/numpy) risks and gradients.

:func:`gradient`, :func:`lambdify_risk` and :func:`lambdify_gradient` turn a sympy risk into a jax
(or numpy) callable, so that the book can compare a sympy gradient with ``jax.grad`` of a Monte
Carlo risk. Polynomials are read from their sparse exponent table (no expression building), which is
what makes 10^4-term risks tractable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy as sp
from sympy.polys.polyerrors import PolynomialError
from sympy.polys.polyutils import dict_from_expr

from ..checks import boolean, finite_array
from .core import as_expr, as_matrix, flatten_params

__all__ = ["frobenius", "bottom_right", "gradient", "lambdify_risk", "lambdify_gradient"]


def frobenius(A: sp.MatrixBase, B: sp.MatrixBase) -> sp.Expr:
    """Frobenius inner product ``<A, B> = tr(A^T B) = sum_ij A_ij B_ij`` of equal-shape matrices.

    Example::

        >>> frobenius(sp.eye(2), sp.Matrix([[1, 2], [3, 4]]))
        5
    """
    A, B = as_matrix("A", A), as_matrix("B", B)
    if A.shape != B.shape:
        raise ValueError(f"A and B must have the same shape, got {A.shape} and {B.shape}")
    return sp.Add(*[a * b for a, b in zip(A, B, strict=True)])


def bottom_right(M: sp.MatrixBase) -> sp.Expr:
    """Return ``M[-1, -1]``, the ``[.]_{-1,-1}`` of Part I eq. 3 (the query prediction).

    Example::

        >>> bottom_right(sp.Matrix([[1, 2], [3, 4]]))
        4
    """
    M = as_matrix("M", M)
    if M.rows == 0 or M.cols == 0:
        raise ValueError(f"M must be a non-empty matrix, got shape {M.shape}")
    return M[M.rows - 1, M.cols - 1]


def _poly_terms(
    expr: sp.Expr, params: Sequence[sp.Symbol]
) -> dict[tuple[int, ...], sp.Expr] | None:
    """Sparse ``{exponents: coefficient}`` of ``expr`` in ``params``; ``None`` if not polynomial.

    Tries without expansion first (risks from :func:`symbolic_risk` are already expanded; expanding
    a 10^4-term polynomial again costs far more than reading it).
    """
    for expand in (False, True):
        try:
            terms, _ = dict_from_expr(expr, gens=tuple(params), expand=expand)
        except PolynomialError:
            continue
        return terms
    return None


def gradient(expr: Any, params: Any) -> list[sp.Expr]:
    """Symbolic gradient ``[d expr / d p for p in params]``.

    Polynomials in ``params`` are differentiated term by term on their sparse exponent
    representation (fast for risks with 10^4 terms); other expressions use ``sympy.diff``.

    Args:
        expr: scalar sympy expression (e.g. a risk from :func:`symbolic_risk`).
        params: Symbols and/or sympy matrices of Symbols (flattened row-major, see
            :func:`flatten_params`).

    Example::

        >>> a, b = sp.symbols("a b"); gradient(a**2 * b, [a, b])
        [2*a*b, a**2]
    """
    ps = flatten_params(params)
    e = as_expr("expr", expr)
    terms = _poly_terms(e, ps)
    if terms is None:
        return [sp.diff(e, p) for p in ps]
    out = []
    for k in range(len(ps)):
        acc = []
        for mon, c in terms.items():
            ek = mon[k]
            if ek:
                acc.append(
                    ek
                    * c
                    * sp.Mul(
                        *[
                            q**j
                            for q, j in zip(ps, mon[:k] + (ek - 1,) + mon[k + 1 :], strict=True)
                            if j
                        ]
                    )
                )
        out.append(sp.Add(*acc))
    return out


def _constants_map(constants: dict | None) -> dict:
    if not constants:
        return {}
    if not isinstance(constants, dict):
        raise ValueError(
            f"constants must be a dict {{Symbol: value}}, got {type(constants).__name__}"
        )
    sub = {}
    for k, v in constants.items():
        if not isinstance(k, sp.Symbol):
            raise ValueError(f"constants keys must be sympy Symbols, got {k!r}")
        sub[k] = as_expr(f"constants[{k}]", v)
    return sub


def _check_free(name: str, free: set, ps: Sequence[sp.Symbol]) -> None:
    free = set(free) - set(ps)
    if free:
        raise ValueError(
            f"{name} has free symbols {sorted(map(str, free))} that are neither params nor "
            "constants; "
            "pass their values with constants={symbol: value}"
        )


def _backend_module(backend: str):
    if backend == "jax":
        try:
            import jax.numpy as jnp

            return "jax", jnp
        except ImportError:  # pragma: no cover - jax is a project dependency
            return "numpy", np
    if backend == "numpy":
        return "numpy", np
    raise ValueError(f"backend must be 'jax' or 'numpy', got {backend!r}")


class _PolyEvaluator:
    """Evaluate ``sum_m c_m prod_j theta_j^{e_mj}`` and its exact gradient (numpy or jax)."""

    def __init__(self, terms: dict[tuple[int, ...], sp.Expr], n: int):
        self.n = n
        keys = list(terms)
        self.exps = np.array(keys, dtype=np.int64).reshape(len(keys), n)
        self.coeffs = np.array([float(terms[k]) for k in keys], dtype=np.float64)
        self.kmax = int(self.exps.max()) if self.exps.size else 0
        self.cols = np.arange(n)[None, :]

    def _factors(self, xp, t):
        pw = [xp.ones_like(t)]
        for _ in range(self.kmax):
            pw.append(pw[-1] * t)
        pw = xp.stack(pw, axis=1)  # (P, kmax + 1): pw[j, k] = t_j^k
        return pw, pw[self.cols, self.exps]  # (M, P): t_j^{e_mj}

    def value(self, xp, t):
        if not self.coeffs.size:
            return xp.zeros((), t.dtype)
        _, F = self._factors(xp, t)
        return xp.sum(xp.asarray(self.coeffs, dtype=t.dtype) * xp.prod(F, axis=1))

    def grad(self, xp, t):
        if not self.coeffs.size or not self.n:
            return xp.zeros((self.n,), t.dtype)
        pw, F = self._factors(xp, t)
        M = F.shape[0]
        one = xp.ones((M, 1), t.dtype)
        pre = xp.cumprod(xp.concatenate([one, F[:, :-1]], axis=1), axis=1)  # prod_{j<k}
        suf = xp.cumprod(xp.concatenate([one, F[:, :0:-1]], axis=1), axis=1)[:, ::-1]  # prod_{j>k}
        dF = xp.asarray(self.exps, dtype=t.dtype) * pw[self.cols, np.maximum(self.exps - 1, 0)]
        return xp.asarray(self.coeffs, dtype=t.dtype) @ (dF * pre * suf)


def _compile(
    risk: Any, params: Any, constants: dict | None, backend: str, cse: bool, want_grad: bool
) -> Callable:
    mod, xp = _backend_module(backend)
    ps = flatten_params(params)
    e = as_expr("risk", risk)
    sub = _constants_map(constants)
    n = len(ps)
    terms = _poly_terms(e, ps)
    raw = None
    if (
        terms is not None
    ):  # substitute constants coefficient by coefficient (cheap), not in the whole sum
        terms = {
            k: (c.xreplace(sub) if sub and isinstance(c, sp.Basic) else c) for k, c in terms.items()
        }
        _check_free("risk", set().union(*(sp.sympify(c).free_symbols for c in terms.values())), ps)
        ev = _PolyEvaluator(terms, n)
    else:
        e = e.xreplace(sub) if sub else e
        _check_free("risk", e.free_symbols, ps)
        exprs = gradient(e, ps) if want_grad else e
        raw = sp.lambdify(ps, exprs, modules=mod, cse=cse)

    def f(theta):
        t = xp.asarray(theta)
        if not xp.issubdtype(t.dtype, xp.floating):
            t = t.astype(xp.result_type(float))
        if t.shape != (n,):
            raise ValueError(
                f"theta must have shape ({n},) (one entry per parameter), "
                f"got shape {tuple(t.shape)}"
            )
        finite_array("theta", t)
        if raw is None:
            return ev.grad(xp, t) if want_grad else ev.value(xp, t)
        out = raw(*[t[i] for i in range(n)])
        if want_grad:
            return xp.stack([xp.asarray(v, dtype=t.dtype) for v in out])
        return xp.asarray(out, dtype=t.dtype)

    f.__name__ = "gradient" if want_grad else "risk"
    f.params = ps  # type: ignore[attr-defined]
    return f


def lambdify_risk(
    risk: Any,
    params: Any,
    *,
    constants: dict | None = None,
    backend: str = "jax",
    cse: bool = False,
) -> Callable:
    """Compile a scalar sympy risk into ``f(theta) -> scalar`` (jax by default, numpy fallback).

    Polynomials in ``params`` (every risk of this module) are evaluated from their sparse exponent
    table, which builds in milliseconds even for 10^4 terms; other expressions go through
    ``sympy.lambdify``.

    Args:
        risk: scalar sympy expression.
        params: Symbols/matrices (flattened row-major); ``theta`` holds their values in that order
            (also available as ``f.params``).
        constants: values for any other free symbols (e.g. ``w_star``), ``{Symbol: value}``.
        backend: ``"jax"`` (differentiable, jit-able; float32 unless x64 is enabled) or ``"numpy"``.
        cse: common-subexpression elimination in ``sympy.lambdify`` (non-polynomial fallback only).

    Returns:
        ``f(theta)`` with ``theta`` of shape ``(P,)``; with jax, ``jax.grad(f)`` works.

    Example::

        >>> a = sp.Symbol("a"); f = lambdify_risk((a - 1) ** 2, [a], backend="numpy")
        >>> float(f([3.0]))
        4.0
    """
    return _compile(risk, params, constants, backend, boolean("cse", cse), want_grad=False)


def lambdify_gradient(
    risk: Any,
    params: Any,
    *,
    constants: dict | None = None,
    backend: str = "jax",
    cse: bool = False,
) -> Callable:
    """Compile the symbolic gradient of ``risk`` into ``g(theta) -> (P,)`` array.

    Same arguments as :func:`lambdify_risk`. The gradient is exact symbolic differentiation
    (term by term on the exponent table for polynomials, :func:`gradient` otherwise), taken after
    substituting ``constants``; it does not use automatic differentiation.

    Example::

        >>> a, b = sp.symbols("a b"); g = lambdify_gradient(a**2 * b, [a, b], backend="numpy")
        >>> g([1.0, 2.0]).tolist()
        [4.0, 1.0]
    """
    return _compile(risk, params, constants, backend, boolean("cse", cse), want_grad=True)
