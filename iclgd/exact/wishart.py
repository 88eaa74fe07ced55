r"""Exact trace moments of Gaussian sample second-moment matrices (Wick pairings) -- Part III.

For ``x_1, ..., x_n ~ N(0, Sigma)`` i.i.d. in ``R^d`` let ``S = sum_{i<=n} x_i x_i^T`` (a Wishart
matrix, *not* divided by ``n``). Every risk of Part III's multi-layer linear transformers on the
sets of Theorems 4 and 5 is a combination of expectations

    E tr(S M_1 S M_2 ... S M_k)
        = sum_{i_1..i_k} E prod_j x_{i_j}^T M_j x_{i_{j+1}}          (i_{k+1} = i_1),

which Isserlis/Wick's theorem turns into a finite sum over the ``(2k-1)!!`` perfect matchings of
the ``2k`` vector slots (``x_{i_j}`` left of ``M_j``, ``x_{i_{j+1}}`` right of it). A matched pair
forces equal sample indices and contributes ``Sigma``; a matching leaves ``c`` free sample indices
(a factor ``n^c``) and closes the ``M``'s and ``Sigma``'s into cycles, each a trace:

    E tr(S M_1 ... S M_k) = sum_matchings n^c prod_cycles tr(prod (M_j or M_j^T) Sigma).

Nothing else is used, so the result is exact for numeric, symbolic (sympy) or traced (jax)
matrices. With every ``M_j = I`` and ``Sigma = I`` it gives the polynomials ``E tr(S^k)`` in ``n``
and ``d`` (:func:`wishart_trace_moment`), e.g. ``E tr S^2 = nd(n+d+1)``.

Cost: ``(2k-1)!!`` matchings (105 at ``k = 4``, 10395 at ``k = 6``); the structures are cached per
``k``. Words up to ``k = 6`` are cheap for scalars; general matrices are practical to ``k = 4``.

* :func:`matching_structures` -- the cached ``(c, cycles)`` of every matching for ``k``.
* :func:`wishart_trace_moment` -- ``E tr(S^k)`` as a sympy polynomial in ``n, d``.
* :func:`expect_trace` -- ``E tr(S M_1 ... S M_k)`` for given matrices.
* :func:`expect_trace_word` -- ``E tr(w)`` for a word of ``"S"`` tokens and matrices.
* :func:`wishart_power_moments` -- ``E tr(S^k)`` for every ``k`` up to a high order (loop
  equations; no matchings), for the high-degree polynomials of GD++ (Theorem 5).

**High orders: the loop equations.** For ``Sigma = I`` the powers alone do not need the
``(2k-1)!!`` matchings. Write ``S = X^T X`` with ``X`` the ``n x d`` matrix of samples and apply
Gaussian integration by parts, ``E X_ij F(X) = E dF/dX_ij``, to ``tr S^(k+1) = sum_ij X_ij
(X S^k)_ij`` times any product ``P = prod_r tr S^(a_r)``; ``dS/dX_ij = e_j x_i^T + x_i e_j^T``
gives, for the real (``beta = 1``) Wishart law,

    E tr S^(k+1) P = (n + k) E tr S^k P + sum_{m<k} E tr S^(m+1) tr S^(k-1-m) P
                     + sum_r 2 a_r E tr S^(k + a_r) P / tr S^(a_r),

with ``tr S^0 = d``. Every term has total degree one lower, so the products of traces of total
degree ``<= K`` close under the recursion (:func:`wishart_power_moments`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import sympy as sp

from .. import checks as v

__all__ = [
    "count_arg",
    "matching_structures",
    "wishart_trace_moment",
    "expect_trace",
    "expect_trace_word",
    "wishart_power_moments",
]

MAX_POWER = 40

MAX_K = 7


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1 or k > MAX_K:
        raise ValueError(f"k must be an integer in 1..{MAX_K} (number of S factors), got {k!r}")
    return k


def count_arg(name: str, x: Any, default: str | None = None) -> sp.Expr:
    """A size (``n``, ``d``) as a sympy expression: ``None`` is the positive symbol ``default``
    (``name`` if not given), a symbolic expression is kept, and a number must be an integer
    ``>= 1`` (``ValueError`` otherwise: ``n = 0`` would give ``nan``, ``n < 0`` a meaningless
    polynomial)."""
    if x is None:
        return sp.Symbol(default or name, positive=True)
    if isinstance(x, sp.Basic) and not x.is_number:
        return x
    if isinstance(x, sp.Basic):
        if not (x.is_Integer and x >= 1):
            raise ValueError(f"{name} must be an integer >= 1 (a count) or a symbol, got {x}")
        return sp.Integer(int(x))
    return sp.Integer(v.positive_int(name, x))


def _check_numeric(mats: list, n: Any, Sigma: Any) -> tuple[list, Any, Any]:
    """Numeric (non-sympy) input: real finite matrices, ``n`` a count, ``Sigma`` finite,
    symmetric and positive semi-definite (batched: every matrix)."""
    if isinstance(n, sp.Basic):
        count_arg("n", n)
    if any(isinstance(x, (sp.Basic, sp.MatrixBase)) for x in (*mats, n, Sigma)):
        return mats, n, Sigma
    mats = [v.array(f"mats[{i}]", m) for i, m in enumerate(mats)]
    n = v.positive_int("n", n)
    if Sigma is not None:
        Sigma = v.array("Sigma", Sigma)
        if not v.is_tracer(Sigma) and Sigma.ndim >= 2 and Sigma.shape[-1] == Sigma.shape[-2]:
            S = np.asarray(Sigma, np.float64)
            scale = max(float(np.abs(S).max(initial=0.0)), np.finfo(float).tiny)
            if np.abs(S - np.swapaxes(S, -1, -2)).max(initial=0.0) > 1e-6 * scale:
                raise ValueError("Sigma must be symmetric (a covariance)")
            lam = np.linalg.eigvalsh((S + np.swapaxes(S, -1, -2)) / 2)
            if lam.size and lam.min() < -S.shape[-1] * 1e-6 * scale:
                raise ValueError(
                    "Sigma must be positive semi-definite (a covariance); smallest eigenvalue "
                    f"{lam.min():.3g}"
                )
    return mats, n, Sigma


def _matchings(slots: tuple[int, ...]):
    if not slots:
        yield ()
        return
    a, rest = slots[0], slots[1:]
    for i, b in enumerate(rest):
        for m in _matchings(rest[:i] + rest[i + 1 :]):
            yield ((a, b),) + m


@functools.cache
def matching_structures(k: int) -> tuple[tuple[int, tuple[tuple[tuple[int, bool], ...], ...]], ...]:
    """Structure of every Wick matching of ``E tr(S M_1 ... S M_k)``.

    Slot ``2j`` is the vector left of ``M_j`` (sample index ``i_j``), slot ``2j+1`` the vector
    right of it (sample index ``i_{j+1}``, cyclically).

    Args:
        k: number of ``S`` factors, ``1 <= k <= 7``.

    Returns:
        A tuple with one ``(c, cycles)`` per matching: ``c`` the number of free sample indices and
        ``cycles`` a tuple of cycles, each a tuple of ``(j, transposed)``; the cycle's trace is
        ``tr(prod_{(j, t)} (M_j^T if t else M_j) Sigma)``.
    """
    k = _check_k(k)
    out = []
    for m in _matchings(tuple(range(2 * k))):
        partner = {}
        for a, b in m:
            partner[a], partner[b] = b, a
        parent = list(range(k))

        def find(u, parent=parent):
            while parent[u] != u:
                parent[u] = parent[parent[u]]
                u = parent[u]
            return u

        for a, b in m:
            sa = a // 2 if a % 2 == 0 else (a // 2 + 1) % k
            sb = b // 2 if b % 2 == 0 else (b // 2 + 1) % k
            parent[find(sa)] = find(sb)
        c = len({find(u) for u in range(k)})
        seen: set[int] = set()
        cycles = []
        for start in range(2 * k):
            if start in seen:
                continue
            cyc, u = [], start
            while u not in seen:
                j, is_right = u // 2, u % 2 == 1
                v = 2 * j + (0 if is_right else 1)  # across M_j
                seen.update((u, v))
                cyc.append((j, is_right))  # entering at the right slot: M_j^T
                u = partner[v]
            cycles.append(tuple(cyc))
        out.append((c, tuple(cycles)))
    return tuple(out)


def wishart_trace_moment(k: int, n: Any = None, d: Any = None) -> sp.Expr:
    """``E tr(S^k)`` for ``S = sum_{i<=n} x_i x_i^T``, ``x_i ~ N(0, I_d)`` (polynomial in n, d).

    Computed by counting: each matching contributes ``n^c d^(number of cycles)``.

    Args:
        k: power, ``1 <= k <= 7``.
        n: number of samples (a sympy expression or integer ``>= 1``); default the symbol ``n``.
        d: dimension (likewise); default the symbol ``d``.

    Returns:
        sympy expression ``sum_matchings n^c d^(number of cycles)``, expanded.

    Example::

        >>> sp.factor(wishart_trace_moment(2))
        d*n*(d + n + 1)
    """
    n, d = count_arg("n", n), count_arg("d", d)
    counts = Counter((c, len(cyc)) for c, cyc in matching_structures(_check_k(k)))
    return sp.expand(sum(m * n**c * d**r for (c, r), m in counts.items()))


def _trace(m):
    """Trace over the last two axes (sympy matrices: their ``.trace()``)."""
    if getattr(m, "ndim", 2) > 2:
        return m.trace(axis1=-2, axis2=-1)
    return m.trace()


def _transpose(m):
    """Transpose of the last two axes (batched numpy/jax arrays keep their leading axes)."""
    if getattr(m, "ndim", 2) > 2:
        return m.swapaxes(-1, -2)
    return m.T


def expect_trace(mats: Sequence[Any], n: Any, Sigma: Any = None):
    """``E tr(S M_1 S M_2 ... S M_k)`` exactly, ``S = sum_{i<=n} x_i x_i^T``, ``x_i ~ N(0, Sigma)``.

    Args:
        mats: ``k`` square matrices of one type (numpy, jax or sympy), ``1 <= k <= 7``; they
            need ``@``, ``.T`` and ``.trace()``. Numpy/jax arrays may carry leading batch axes
            ``(..., d, d)`` (broadcast against each other and ``Sigma``); the result then has
            the broadcast batch shape.
        n: number of samples (number or sympy expression).
        Sigma: ``(d, d)`` covariance of the same type; ``None`` is the identity.

    Returns:
        A scalar of the matrices' type (a sympy expression for sympy input).
    """
    mats, n, Sigma = _check_numeric(list(mats), n, Sigma)
    k = _check_k(len(mats))
    shapes = {tuple(m.shape)[-2:] for m in mats}
    sq = shapes.pop() if len(shapes) == 1 else None
    if sq is None or len(sq) != 2 or sq[0] != sq[1]:
        raise ValueError(
            f"mats must be square (..., d, d) matrices of one size, got shapes "
            f"{[tuple(m.shape) for m in mats]}"
        )
    if Sigma is not None and tuple(Sigma.shape)[-2:] != sq:
        raise ValueError(f"Sigma must have shape (..., {sq[0]}, {sq[1]}), got {tuple(Sigma.shape)}")
    left = [m if Sigma is None else m @ Sigma for m in mats]
    right = [_transpose(m) if Sigma is None else _transpose(m) @ Sigma for m in mats]
    total = 0
    cache: dict = {}
    for c, cycles in matching_structures(k):
        term = n**c
        for cyc in cycles:
            if cyc not in cache:
                prod = None
                for j, t in cyc:
                    f = right[j] if t else left[j]
                    prod = f if prod is None else prod @ f
                cache[cyc] = _trace(prod)
            term = term * cache[cyc]
        total = total + term
    return total


def expect_trace_word(word: Sequence[Any], n: Any, Sigma: Any = None, eye: Any = None):
    """``E tr(word)`` for a product of ``"S"`` tokens and constant matrices.

    The word is rotated to start with ``S``, adjacent matrices are multiplied and an identity is
    put between adjacent ``S``'s, giving :func:`expect_trace`'s form. A word without ``S`` is a
    plain trace.

    Args:
        word: sequence of the string ``"S"`` and ``(d, d)`` matrices.
        n: number of samples.
        Sigma: covariance of the ``x_i`` (``None``: identity).
        eye: the ``(d, d)`` identity of the matrices' type, needed when two ``S`` are adjacent or
            the word is only ``S``'s.
    """
    if isinstance(word, (str, bytes)) or not hasattr(word, "__iter__"):
        raise v.ArgumentTypeError(
            f"word must be a list of 'S' tokens and (..., d, d) matrices, got {word!r:.60}"
        )
    word = list(word)
    if not word:
        raise ValueError("word must hold at least one token")
    for i, t in enumerate(word):
        if isinstance(t, str):
            if t != "S":
                raise ValueError(f"word[{i}] must be 'S' or a (d, d) matrix, got {t!r}")
        elif len(getattr(t, "shape", ())) < 2 or t.shape[-1] != t.shape[-2]:
            shape = getattr(t, "shape", None)
            what = f"shape {tuple(shape)}" if shape is not None else type(t).__name__
            raise v.ArgumentTypeError(f"word[{i}] must be 'S' or a (..., d, d) matrix, got {what}")
    if all(not (isinstance(t, str) and t == "S") for t in word):
        prod = word[0]
        for m in word[1:]:
            prod = prod @ m
        return _trace(prod)
    first = next(i for i, t in enumerate(word) if isinstance(t, str) and t == "S")
    word = word[first:] + word[:first]
    mats, cur = [], None
    for t in word[1:] + ["S"]:
        if isinstance(t, str):
            if t != "S":
                raise ValueError(f"word tokens must be 'S' or matrices, got {t!r}")
            if cur is None:
                if eye is None:
                    raise ValueError("eye is required when two S are adjacent")
                cur = eye
            mats.append(cur)
            cur = None
        else:
            cur = t if cur is None else cur @ t
    return expect_trace(mats, n, Sigma)


def wishart_power_moments(k_max: int, n: Any = None, d: Any = None) -> tuple:
    """``E tr(S^k)`` for ``k = 0, ..., k_max``, ``S = sum_{i<=n} x_i x_i^T``, ``x_i ~ N(0, I_d)``.

    Exact, from the loop equations of the real Wishart law (module docstring): a recursion over
    the products of traces of total degree ``<= k_max`` (a few thousand at ``k_max = 26``), in
    integer arithmetic for integer ``n, d`` and polynomial arithmetic for symbols. It agrees with
    :func:`wishart_trace_moment` (the matchings) where both apply, ``k <= 7``.

    Args:
        k_max: highest power, ``0 <= k_max <= 40``.
        n: number of samples (positive integer) or ``None`` for the symbol ``n``.
        d: dimension (positive integer) or ``None`` for the symbol ``d``.

    Returns:
        tuple of ``k_max + 1`` values: Python ints for integer ``n, d``, sympy polynomials in
        ``n, d`` otherwise. ``E tr S^0 = d``.

    Example::

        >>> wishart_power_moments(2, 20, 5)
        (5, 100, 2600)
    """
    if isinstance(k_max, bool) or not isinstance(k_max, int) or not 0 <= k_max <= MAX_POWER:
        raise ValueError(f"k_max must be an integer in 0..{MAX_POWER}, got {k_max!r}")
    symbolic = n is None or d is None
    if symbolic:
        if n is not None or d is not None:
            raise ValueError("give both n and d as integers, or neither (symbols n, d)")
        R, n_, d_ = sp.ring([sp.Symbol("n", positive=True), sp.Symbol("d", positive=True)], sp.ZZ)
    else:
        n_, d_ = v.positive_int("n", n), v.positive_int("d", d)
    memo: dict = {(): 1}

    def norm(exps):
        """Drop ``tr S^0 = d`` factors: ``(factor, sorted key)``."""
        zeros = sum(1 for e in exps if e == 0)
        return d_**zeros, tuple(sorted((e for e in exps if e > 0), reverse=True))

    def moment(key):
        if key in memo:
            return memo[key]
        k, rest = key[0] - 1, key[1:]
        terms = [((n_ + k), (k, *rest))]
        terms += [(1, (m + 1, k - 1 - m, *rest)) for m in range(k)]
        terms += [(2 * a, (k + a, *rest[:r], *rest[r + 1 :])) for r, a in enumerate(rest)]
        total = 0
        for c, exps in terms:
            f, sub = norm(exps)
            total = total + c * f * moment(sub)
        memo[key] = total
        return total

    out = [d_]
    for k in range(1, k_max + 1):
        for j in range(1, k):  # warm the memo degree by degree (bounded recursion depth)
            moment((j,))
        out.append(moment((k,)))
    if symbolic:
        return tuple(sp.expand(R(x).as_expr()) if x != 1 else sp.Integer(1) for x in out)
    return tuple(int(x) for x in out)
