"""Exact Gaussian expectations and symbolic linear-self-attention risks (sympy).

The book derives stationary-point gradients and closed-form risks *from the model definitions*:
the prediction of a linear self-attention (LSA) model is a polynomial in jointly Gaussian data
(``x_i``, ``x_q``, ``w_hat``, label noise), so its risk is a finite sum of Gaussian moments, which
this module evaluates exactly. Nothing here retypes a paper's closed form.

Three layers:

1. **Gaussian moments.** :func:`gaussian_expectation` (one jointly Gaussian block, any mean and
   covariance, both may be symbolic), :func:`expect_independent` (several independent blocks; the
   moment of every monomial factorises over blocks, the fast path), :func:`expect_nested`
   (iterated/conditional expectation, innermost stage first) and :func:`expect_product`
   (``E[a b]`` as a bilinear form, much cheaper than expanding ``a*b``). Moments are computed with
   Stein's identity ``E[x_a f(x)] = mu_a E[f] + sum_b Sigma_ab E[d_b f]`` (Isserlis/Wick with a
   mean shift), memoised per monomial, in a sympy polynomial domain.
2. **Models.** :func:`embedding` (Part I eq. 2), :func:`attention_head` (eq. 5),
   :func:`lsa_prediction` (eq. 3), :func:`multihead_lsa_prediction` (eq. 6),
   :func:`linear_regression_task` (the data model of Part I section 2) and
   :func:`symbolic_risk` (eq. 4).
3. **Numerics.** :func:`gradient`, :func:`lambdify_risk`, :func:`lambdify_gradient` turn a sympy
   risk into a jax (or numpy) callable so that the book can compare a sympy gradient with
   ``jax.grad`` of a Monte Carlo risk.

Example::

    >>> import sympy as sp
    >>> x, y = sp.symbols("x y", real=True)
    >>> rho = sp.Symbol("rho", real=True)
    >>> gaussian_expectation(x**2 * y**2, [x, y], cov=sp.Matrix([[1, rho], [rho, 1]]))
    2*rho**2 + 1

Tractability (CPU seconds on the 2-core CI machine; ``symbolic_risk`` / ``lambdify_gradient``):

* reduced parameters ``u = (W^P W^V)[-1, :]``, ``Q = (W^K)^T W^Q`` (:func:`lsa_prediction_uq`,
  risk of degree 4): ``d=2, C=2`` 0.1-0.2 s; ``d=3, C=3..5`` with symbolic ``w_star`` 1-2 s.
* fully symbolic ``W^P, W^V, W^K, W^Q`` (degree 8): ``d=1`` under 1 s (also with 2 heads and a
  symbolic ``w_star``); ``d=2, C=2`` 1 s with a numeric ``w_star`` (1171 terms, 36 weights) but
  ~7 s with a symbolic ``w_star`` (21259 terms) and ~7 s for 3 heads (108 weights), most of it
  spent building the sympy expression; :func:`gradient` as sympy expressions then costs ~30 s,
  while :func:`lambdify_gradient` (sparse exponent table, no expression building) takes ~2 s.
  The cost does not grow with ``C`` (``C`` only enters through moment values).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Any, Callable, Sequence, Union

import numpy as np
import sympy as sp
from sympy.polys.constructor import construct_domain
from sympy.polys.polyerrors import CoercionFailed, GeneratorsError, PolynomialError
from sympy.polys.polyutils import dict_from_expr

from ._validate import positive_int

__all__ = [
    "GaussianBlock",
    "RegressionTask",
    "attention_head",
    "bottom_right",
    "embedding",
    "expect_independent",
    "expect_nested",
    "expect_product",
    "flatten_params",
    "frobenius",
    "gaussian_block",
    "gaussian_expectation",
    "gaussian_vector",
    "gradient",
    "lambdify_gradient",
    "lambdify_risk",
    "linear_regression_task",
    "lsa_output",
    "lsa_prediction",
    "lsa_prediction_uq",
    "mask_matrix",
    "multihead_lsa_prediction",
    "symbolic_risk",
    "weight_matrix",
]

ExprLike = Union[sp.Expr, int, float]
GroupLike = Union["GaussianBlock", Sequence[Any]]


# --------------------------------------------------------------------------------------------
# Symbols
# --------------------------------------------------------------------------------------------


def gaussian_vector(name: str, d: int) -> sp.Matrix:
    """Return a ``(d, 1)`` column of real symbols ``name_1, ..., name_d`` (1-based, as in the papers).

    The symbols carry ``real=True``; sympy treats ``Symbol("x_1")`` (no assumption) as a *different*
    symbol, so reuse the returned objects rather than re-creating them by name.

    Example::

        >>> gaussian_vector("x", 2).T
        Matrix([[x_1, x_2]])
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    d = positive_int("d", d)
    return sp.Matrix(d, 1, [sp.Symbol(f"{name}_{i + 1}", real=True) for i in range(d)])


def weight_matrix(name: str, rows: int, cols: int | None = None) -> sp.Matrix:
    """Return a ``(rows, cols)`` matrix of real symbols ``name_{i,j}`` (1-based; ``cols`` defaults to ``rows``).

    Example::

        >>> weight_matrix("W^Q", 2).tolist()
        [[W^Q_{1,1}, W^Q_{1,2}], [W^Q_{2,1}, W^Q_{2,2}]]
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    rows = positive_int("rows", rows)
    cols = rows if cols is None else positive_int("cols", cols)
    return sp.Matrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{{{i + 1},{j + 1}}}", real=True))


def flatten_params(*params: sp.Symbol | sp.MatrixBase | Sequence[sp.Symbol]) -> list[sp.Symbol]:
    """Flatten Symbols, sympy matrices (row-major) and sequences of Symbols into one list.

    Example::

        >>> a = sp.Symbol("a"); flatten_params(a, sp.Matrix([[sp.Symbol("b"), sp.Symbol("c")]]))
        [a, b, c]
    """
    out: list[sp.Symbol] = []
    for p in params:
        if isinstance(p, sp.MatrixBase):
            out.extend(list(p))
        elif isinstance(p, sp.Basic):
            out.append(p)
        elif isinstance(p, (list, tuple)):
            out.extend(flatten_params(*p))
        else:
            raise ValueError(f"params must be sympy Symbols or matrices of Symbols, got {type(p).__name__}")
    for s in out:
        if not isinstance(s, sp.Symbol):
            raise ValueError(f"params must be sympy Symbols or matrices of Symbols, got {s!r}")
    if len(set(out)) != len(out):
        raise ValueError("params must not contain the same symbol twice")
    return out


# --------------------------------------------------------------------------------------------
# Gaussian blocks and validation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GaussianBlock:
    """A jointly Gaussian vector of symbols: ``symbols ~ N(mean, cov)``.

    Attributes:
        symbols: ``n`` distinct sympy Symbols.
        mean: ``n`` sympy expressions (may be symbolic).
        cov: ``(n, n)`` symmetric sympy Matrix, or ``None`` for the identity (independent unit
            variances; the fastest path).

    Build one with :func:`gaussian_block`, which validates its input.
    """

    symbols: tuple[sp.Symbol, ...]
    mean: tuple[sp.Expr, ...]
    cov: sp.ImmutableMatrix | None


def _as_symbols(name: str, variables: Any) -> tuple[sp.Symbol, ...]:
    if isinstance(variables, sp.Symbol):
        seq = [variables]
    elif isinstance(variables, sp.MatrixBase):
        seq = list(variables)
    elif isinstance(variables, (list, tuple)):
        seq = []
        for v in variables:
            seq.extend(list(v) if isinstance(v, sp.MatrixBase) else [v])
    else:
        raise ValueError(
            f"{name} must be a sympy Symbol, a list of Symbols or a sympy Matrix of Symbols, "
            f"got {type(variables).__name__}"
        )
    if not seq:
        raise ValueError(f"{name} must contain at least one Symbol")
    bad = [v for v in seq if not isinstance(v, sp.Symbol)]
    if bad:
        raise ValueError(f"{name} must contain only sympy Symbols, got {bad[0]!r} of type {type(bad[0]).__name__}")
    if len(set(seq)) != len(seq):
        raise ValueError(f"{name} must not contain the same Symbol twice")
    return tuple(seq)


def _sympify(name: str, value: Any) -> sp.Expr:
    try:
        e = sp.sympify(value, strict=True) if not isinstance(value, sp.Basic) else value
    except (sp.SympifyError, TypeError):
        raise ValueError(f"{name} must be a number or a sympy expression, got {value!r}") from None
    if isinstance(e, sp.MatrixBase) or not isinstance(e, sp.Expr):
        raise ValueError(f"{name} must be a scalar number or sympy expression, got {value!r}")
    return e


def _as_vector(name: str, value: Any, n: int | None, what: str = "") -> list[sp.Expr]:
    if isinstance(value, sp.MatrixBase):
        if min(value.shape) > 1:
            raise ValueError(f"{name} must be a vector{what}, got a matrix of shape {value.shape}")
        seq = list(value)
    elif isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ValueError(f"{name} must be a 1-D vector{what}, got an array of shape {value.shape}")
        seq = value.tolist()
    elif isinstance(value, (list, tuple)):
        seq = list(value)
    else:
        raise ValueError(f"{name} must be a list, tuple or sympy Matrix{what}, got {type(value).__name__}")
    if n is not None and len(seq) != n:
        raise ValueError(f"{name} must have length {n}{what}, got length {len(seq)}")
    return [_sympify(f"{name}[{i}]", v) for i, v in enumerate(seq)]


def _as_matrix(name: str, value: Any) -> sp.Matrix:
    if isinstance(value, sp.MatrixBase):
        return sp.Matrix(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = np.asarray(value, dtype=object)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got an array with {arr.ndim} dimension(s)")
        return sp.Matrix([[_sympify(f"{name}[{i},{j}]", v) for j, v in enumerate(row)] for i, row in enumerate(arr)])
    raise ValueError(f"{name} must be a sympy Matrix or a nested list (2-D), got {type(value).__name__}")


def gaussian_block(variables: Any, mean: Any = None, cov: Any = None, *, name: str = "") -> GaussianBlock:
    """Validate and build a :class:`GaussianBlock` ``variables ~ N(mean, cov)``.

    Args:
        variables: ``n`` distinct sympy Symbols (list, tuple or sympy Matrix).
        mean: length-``n`` list/Matrix of expressions; ``None`` means zero.
        cov: ``(n, n)`` symmetric sympy Matrix / nested list / numpy array (may be symbolic, may be
            singular); ``None`` means the identity. A numeric ``cov`` must be positive semi-definite.
        name: prefix for error messages (e.g. ``"groups[1]"``).

    Raises:
        ValueError: bad types or shapes, non-symmetric or (numeric) indefinite ``cov``, or a
            ``mean``/``cov`` that depends on the block's own variables.

    Example::

        >>> x = gaussian_vector("x", 2)
        >>> gaussian_block(x, mean=[1, 0], cov=None).mean
        (1, 0)
    """
    pre = f"{name} " if name else ""
    syms = _as_symbols(f"{pre}variables", variables)
    n = len(syms)
    mu = [sp.Integer(0)] * n if mean is None else _as_vector(f"{pre}mean", mean, n, " (one entry per variable)")
    cv: sp.ImmutableMatrix | None = None
    if cov is not None:
        m = _as_matrix(f"{pre}cov", cov)
        if m.shape != (n, n):
            raise ValueError(
                f"{pre}cov must be a square matrix of shape ({n}, {n}) (one row per variable), got shape {m.shape}"
            )
        for i in range(n):
            for j in range(i + 1, n):
                if sp.expand(m[i, j] - m[j, i]) != 0:
                    raise ValueError(f"{pre}cov must be symmetric; entries ({i},{j}) and ({j},{i}) differ")
        if all(e.is_number for e in m):
            try:
                a = np.array(m.tolist(), dtype=float)
            except TypeError:
                raise ValueError(f"{pre}cov must be real") from None
            eig = np.linalg.eigvalsh(a)
            if eig.min() < -1e-10 * max(1.0, float(np.abs(eig).max())):
                raise ValueError(f"{pre}cov must be positive semi-definite; smallest eigenvalue {eig.min():.3g}")
        if m != sp.eye(n):
            cv = sp.ImmutableMatrix(m)
    own = set(syms)
    dep = set().union(*(e.free_symbols for e in mu)) | (cv.free_symbols if cv is not None else set())
    if own & dep:
        raise ValueError(f"{pre}mean/cov must not depend on the block's own variables {sorted(map(str, own & dep))}")
    return GaussianBlock(syms, tuple(mu), cv)


def _as_blocks(groups: Any) -> list[GaussianBlock]:
    if isinstance(groups, GaussianBlock):
        groups = [groups]
    if not isinstance(groups, (list, tuple)) or not groups:
        raise ValueError(
            "groups must be a non-empty list of GaussianBlock or (symbols, mean, cov) tuples, "
            f"got {groups!r}"
        )
    blocks = []
    for k, g in enumerate(groups):
        if isinstance(g, GaussianBlock):
            blocks.append(g)
        elif isinstance(g, (list, tuple)) and len(g) >= 2 and all(isinstance(v, sp.Symbol) for v in g):
            raise ValueError(
                f"groups[{k}] must be a tuple (symbols, mean, cov), got a bare sequence of Symbols {g!r}; "
                f"write ({list(g)!r},) for a standard normal group"
            )
        elif isinstance(g, (list, tuple)) and 1 <= len(g) <= 3:
            blocks.append(gaussian_block(*g, name=f"groups[{k}]"))
        else:
            raise ValueError(
                f"groups[{k}] must be a GaussianBlock or a tuple (symbols, mean, cov) with mean/cov "
                f"optional, got {g!r}"
            )
    seen: set[sp.Symbol] = set()
    for k, b in enumerate(blocks):
        dup = seen & set(b.symbols)
        if dup:
            raise ValueError(f"groups must be disjoint; {sorted(map(str, dup))} appear in more than one group")
        seen |= set(b.symbols)
    for k, b in enumerate(blocks):
        dep = set().union(*(e.free_symbols for e in b.mean)) | (b.cov.free_symbols if b.cov is not None else set())
        if dep & seen:
            raise ValueError(
                f"groups[{k}] mean/cov depends on integrated variables {sorted(map(str, dep & seen))}; "
                "the groups would not be jointly Gaussian. Integrate in stages with expect_nested"
            )
    return blocks


# --------------------------------------------------------------------------------------------
# The moment engine
# --------------------------------------------------------------------------------------------


def _double_factorial_odd(j: int) -> int:
    """(j-1)!! for even j >= 0: E[z^j] for z ~ N(0, 1)."""
    out = 1
    for k in range(j - 1, 0, -2):
        out *= k
    return out


class _Engine:
    """Expectation of polynomials under independent Gaussian blocks, in a sympy polynomial domain."""

    def __init__(self, blocks: list[GaussianBlock]):
        self.blocks = blocks
        self.gens = tuple(s for b in blocks for s in b.symbols)
        self.slices = []
        i = 0
        for b in blocks:
            self.slices.append((i, i + len(b.symbols)))
            i += len(b.symbols)
        self.aux = [e for b in blocks for e in b.mean] + [
            e for b in blocks if b.cov is not None for e in b.cov
        ]
        self.dom = None

    # ---- polynomials -------------------------------------------------------------------------

    def poly(self, expr: Any, name: str) -> dict[tuple[int, ...], sp.Expr]:
        """Sparse ``{exponents: coefficient}`` of ``expr`` in the Gaussian variables (validated)."""
        e = _sympify(name, expr) if not isinstance(expr, sp.Basic) else expr
        if isinstance(e, sp.MatrixBase) or not isinstance(e, sp.Expr):
            raise ValueError(f"{name} must be a scalar sympy expression, got {type(e).__name__}")
        try:
            terms, _ = dict_from_expr(e, gens=self.gens)
        except (PolynomialError, GeneratorsError, CoercionFailed):
            names = ", ".join(map(str, self.gens[:6])) + (", ..." if len(self.gens) > 6 else "")
            raise ValueError(
                f"{name} must be a polynomial in the Gaussian variables ({names}); got {str(e)[:120]}"
            ) from None
        return terms

    def set_domain(self, polys: list[dict]) -> list[dict]:
        """Build one coefficient domain for ``polys`` and the means/covariances; return native dicts."""
        coeffs = [c for p in polys for c in p.values()]
        dom, elems = construct_domain(self.aux + coeffs) if self.aux or coeffs else (sp.ZZ, [])
        self.dom = dom
        conv, native = elems[: len(self.aux)], iter(elems[len(self.aux) :])
        k = 0
        self.means, self.covs = [], []
        for b in self.blocks:
            n = len(b.symbols)
            self.means.append(conv[k : k + n])
            k += n
        for b in self.blocks:
            n = len(b.symbols)
            if b.cov is None:
                self.covs.append(None)
            else:
                flat = conv[k : k + n * n]
                self.covs.append([flat[i * n : (i + 1) * n] for i in range(n)])
                k += n * n
        self.memos = [dict() for _ in self.blocks]
        self.joint_memo: dict[tuple, Any] = {}
        return [{m: next(native) for m in p} for p in polys]

    # ---- moments -----------------------------------------------------------------------------

    def _block_moment(self, k: int, m: tuple[int, ...]):
        memo = self.memos[k]
        hit = memo.get(m)
        if hit is not None:
            return hit
        dom = self.dom
        mu = self.means[k]
        cov = self.covs[k]
        if not any(m):
            val = dom.one
        elif cov is None:
            val = dom.one
            for i, e in enumerate(m):
                if e:
                    val = val * self._univariate(k, i, e)
                    if not val:
                        break
        else:
            if all(not x for x in mu) and sum(m) % 2:
                val = dom.zero
            else:
                a = next(i for i, e in enumerate(m) if e)
                m1 = list(m)
                m1[a] -= 1
                val = dom.zero
                if mu[a]:
                    val = mu[a] * self._block_moment(k, tuple(m1))
                row = cov[a]
                for b, eb in enumerate(m1):
                    if eb and row[b]:
                        m2 = list(m1)
                        m2[b] -= 1
                        val = val + row[b] * eb * self._block_moment(k, tuple(m2))
        memo[m] = val
        return val

    def _univariate(self, k: int, i: int, e: int):
        key = ("u", i, e)
        memo = self.memos[k]
        hit = memo.get(key)
        if hit is not None:
            return hit
        dom = self.dom
        mu = self.means[k][i]
        if not mu:
            val = dom(_double_factorial_odd(e)) if e % 2 == 0 else dom.zero
        else:
            val = dom.zero
            for j in range(0, e + 1, 2):
                val = val + dom(comb(e, j) * _double_factorial_odd(j)) * mu ** (e - j)
        memo[key] = val
        return val

    def moment(self, monom: tuple[int, ...]):
        hit = self.joint_memo.get(monom)
        if hit is not None:
            return hit
        val = self.dom.one
        for k, (a, b) in enumerate(self.slices):
            sub = monom[a:b]
            if any(sub):
                val = val * self._block_moment(k, sub)
                if not val:
                    break
        self.joint_memo[monom] = val
        return val

    # ---- expectations --------------------------------------------------------------------------

    def expect_dicts(self, dicts: list[dict]) -> list[sp.Expr]:
        dom = self.dom
        out = []
        for d in dicts:
            acc = dom.zero
            for monom, c in d.items():
                m = self.moment(monom)
                if m:
                    acc = acc + c * m
            out.append(dom.to_sympy(acc))
        return out

    def expect_bilinear(self, da: dict, db: dict) -> sp.Expr:
        """E[a b] = sum_ij a_i b_j M(m_i + m_j) without expanding the product a*b."""
        dom = self.dom
        ta = list(da.items())
        tb = list(db.items())
        acc = dom.zero
        if da is db:  # symmetric: E[a^2]
            for i, (mi, ci) in enumerate(ta):
                lin = dom.zero
                for j in range(i, len(ta)):
                    mj, cj = ta[j]
                    m = self.moment(tuple(x + y for x, y in zip(mi, mj)))
                    if m:
                        lin = lin + (m * cj if j == i else (m + m) * cj)
                if lin:
                    acc = acc + ci * lin
        else:
            for mi, ci in ta:
                lin = dom.zero
                for mj, cj in tb:
                    m = self.moment(tuple(x + y for x, y in zip(mi, mj)))
                    if m:
                        lin = lin + m * cj
                if lin:
                    acc = acc + ci * lin
        return dom.to_sympy(acc)


def _expect(expr: Any, blocks: list[GaussianBlock], name: str = "expr"):
    eng = _Engine(blocks)
    if isinstance(expr, sp.MatrixBase):
        polys = [eng.poly(expr[i, j], f"{name}[{i},{j}]") for i in range(expr.rows) for j in range(expr.cols)]
        vals = eng.expect_dicts(eng.set_domain(polys))
        return sp.Matrix(expr.rows, expr.cols, vals)
    if isinstance(expr, (list, tuple)):
        polys = [eng.poly(e, f"{name}[{i}]") for i, e in enumerate(expr)]
        return eng.expect_dicts(eng.set_domain(polys))
    p = eng.poly(expr, name)
    return eng.expect_dicts(eng.set_domain([p]))[0]


def gaussian_expectation(expr: Any, variables: Any, mean: Any = None, cov: Any = None):
    """Exact ``E[expr]`` for ``variables ~ N(mean, cov)`` jointly Gaussian.

    Args:
        expr: sympy expression polynomial in ``variables`` (coefficients may contain any other
            symbols), or a sympy Matrix / list of such expressions (taken elementwise).
        variables: ``n`` distinct sympy Symbols (list or sympy Matrix).
        mean: length-``n`` vector of expressions (may be symbolic); ``None`` = zero.
        cov: ``(n, n)`` symmetric sympy Matrix (may be symbolic or singular); ``None`` = identity.

    Returns:
        A sympy expression (polynomial in the entries of ``mean`` and ``cov``), or a Matrix/list
        matching ``expr``.

    Raises:
        ValueError: if ``expr`` is not polynomial in ``variables`` or ``mean``/``cov`` have the
            wrong shape/type (see :func:`gaussian_block`).

    Example::

        >>> x = sp.Symbol("x"); mu, s = sp.symbols("mu sigma")
        >>> sp.expand(gaussian_expectation(x**3, [x], [mu], sp.Matrix([[s**2]])))
        mu**3 + 3*mu*sigma**2
    """
    return _expect(expr, _as_blocks([gaussian_block(variables, mean, cov)]), "expr")


def expect_independent(expr: Any, groups: Sequence[GroupLike] | GaussianBlock):
    """Exact ``E[expr]`` over independent Gaussian groups (moments factorise per group: fast path).

    Args:
        expr: expression polynomial in all the groups' symbols (or a Matrix/list of them). Symbols
            not in any group are treated as constants, so ``expect_independent(f, [x-groups])``
            is the conditional expectation ``E[f | everything else]``.
        groups: list of :class:`GaussianBlock` or tuples ``(symbols, mean, cov)`` with ``mean``
            (``None`` = 0) and ``cov`` (``None`` = identity) optional. Groups must be disjoint and
            their means/covariances must not involve any integrated symbol (use
            :func:`expect_nested` for conditional structure).

    Example (Part I data model, ``d = 1``, ``C = 1``)::

        >>> w, x = sp.symbols("w x"); ws = sp.Symbol("w_star")
        >>> sp.expand(expect_independent((w * x) ** 2, [([w], [ws], None), ([x], None, None)]))
        w_star**2 + 1
    """
    return _expect(expr, _as_blocks(groups), "expr")


def expect_nested(expr: Any, stages: Sequence[Sequence[GroupLike] | GaussianBlock]):
    """Iterated expectation ``E_{stage_last}[ ... E_{stage_0}[expr | ...] ... ]`` (innermost first).

    Each stage is a group list as in :func:`expect_independent`. A stage's means/covariances may
    depend on the variables of *later* (outer) stages: this expresses conditional Gaussians, e.g.
    ``z_i = (x_i, w^T x_i)`` is Gaussian given ``w`` with covariance ``[[I, w], [w^T, w^T w]]``
    and the ``z_i`` are independent given ``w`` but not unconditionally.

    Example::

        >>> w = sp.Symbol("w"); z = gaussian_vector("z", 2)
        >>> inner = [(z, None, sp.Matrix([[1, w], [w, w**2]]))]
        >>> expect_nested(z[0] * z[1], [inner, [([w], [2], None)]])
        2
    """
    if isinstance(stages, GaussianBlock) or not isinstance(stages, (list, tuple)) or not stages:
        raise ValueError("stages must be a non-empty list of group lists (innermost first)")
    out = expr
    for k, stage in enumerate(stages):
        out = _expect(out, _as_blocks(stage), "expr" if k == 0 else f"stage {k - 1} result")
    return out


def expect_product(a: Any, b: Any, groups: Sequence[GroupLike] | GaussianBlock) -> sp.Expr:
    """Exact ``E[a b]`` computed as the bilinear form ``sum_ij a_i b_j E[m_i m_j]`` over monomials.

    Much cheaper than ``expect_independent(a*b, groups)`` when ``a``/``b`` have many monomials with
    large symbolic coefficients (e.g. an LSA prediction with symbolic weights): the product of
    coefficients is formed once per monomial of ``a`` instead of once per pair.

    Example::

        >>> x = sp.Symbol("x"); c = sp.Symbol("c")
        >>> expect_product(x + c, x - c, [([x], None, None)])
        1 - c**2
    """
    eng = _Engine(_as_blocks(groups))
    pa, pb = eng.poly(a, "a"), eng.poly(b, "b")
    da, db = eng.set_domain([pa, pb])
    if pa == pb:  # E[a^2]: use the symmetric half of the bilinear form
        db = da
    return eng.expect_bilinear(da, db)


def symbolic_risk(pred: Any, target: Any, groups: Sequence[GroupLike] | GaussianBlock) -> sp.Expr:
    """Exact ICL risk ``E[(pred - target)^2]`` (Part I eq. 4) over independent Gaussian groups.

    Args:
        pred: model prediction, polynomial in the groups' symbols (weights may be symbolic).
        target: the label ``y`` (e.g. ``w_hat^T x_q``), polynomial in the groups' symbols.
        groups: as in :func:`expect_independent` (e.g. :attr:`RegressionTask.groups`).

    Returns:
        The risk as an expanded sympy polynomial in the remaining symbols (weights, ``w_star`` ...).

    Example::

        >>> t = linear_regression_task(1, 1)
        >>> symbolic_risk(0, t.target, t.groups)   # E[(w x_q)^2] with w ~ N(0, 1)
        1
    """
    eng = _Engine(_as_blocks(groups))
    r = eng.poly(sp.sympify(pred) - sp.sympify(target), "pred - target")
    (dr,) = eng.set_domain([r])
    return eng.expect_bilinear(dr, dr)


# --------------------------------------------------------------------------------------------
# Matrix helpers and models (Part I eqs. 2, 3, 5, 6)
# --------------------------------------------------------------------------------------------


def frobenius(A: sp.MatrixBase, B: sp.MatrixBase) -> sp.Expr:
    """Frobenius inner product ``<A, B> = tr(A^T B) = sum_ij A_ij B_ij`` of equal-shape matrices.

    Example::

        >>> frobenius(sp.eye(2), sp.Matrix([[1, 2], [3, 4]]))
        5
    """
    A, B = _as_matrix("A", A), _as_matrix("B", B)
    if A.shape != B.shape:
        raise ValueError(f"A and B must have the same shape, got {A.shape} and {B.shape}")
    return sp.Add(*[a * b for a, b in zip(A, B)])


def bottom_right(M: sp.MatrixBase) -> sp.Expr:
    """Return ``M[-1, -1]``, the ``[.]_{-1,-1}`` of Part I eq. 3 (the query prediction).

    Example::

        >>> bottom_right(sp.Matrix([[1, 2], [3, 4]]))
        4
    """
    M = _as_matrix("M", M)
    if M.rows == 0 or M.cols == 0:
        raise ValueError(f"M must be a non-empty matrix, got shape {M.shape}")
    return M[M.rows - 1, M.cols - 1]


def mask_matrix(C: int) -> sp.Matrix:
    """The mask ``W^M = diag(I_C, 0)`` of shape ``(C+1, C+1)`` (Part I eq. 3).

    Example::

        >>> mask_matrix(1).tolist()
        [[1, 0], [0, 0]]
    """
    C = positive_int("C", C)
    return sp.diag(sp.eye(C), sp.Integer(0))


def embedding(X: Any, y: Any, x_q: Any, y_q: ExprLike) -> sp.Matrix:
    """The embedding ``E = [[X^T, x_q], [y^T, y_q]]`` of shape ``(d+1, C+1)`` (Part I eq. 2).

    Args:
        X: ``(C, d)`` sympy Matrix whose rows are the context inputs ``x_i^T``.
        y: length-``C`` vector of context labels.
        x_q: length-``d`` query input.
        y_q: scalar initial guess for the query label (``0``, ``w_star^T x_q``, ...).

    Example::

        >>> embedding(sp.Matrix([[1, 2]]), [3], [4, 5], 0).tolist()
        [[1, 4], [2, 5], [3, 0]]
    """
    X = _as_matrix("X", X)
    C, d = X.shape
    if C < 1 or d < 1:
        raise ValueError(f"X must have shape (C, d) with C, d >= 1, got {X.shape}")
    yv = _as_vector("y", y, C, f" (C = {C} context labels, X has shape {X.shape})")
    xq = _as_vector("x_q", x_q, d, f" (d = {d} features, X has shape {X.shape})")
    yq = _sympify("y_q", y_q)
    top = X.T.row_join(sp.Matrix(d, 1, xq))
    bottom = sp.Matrix(1, C, yv).row_join(sp.Matrix([[yq]]))
    return top.col_join(bottom)


def _check_weights(E: sp.MatrixBase, weights: Sequence[Any], names: Sequence[str]) -> list[sp.Matrix]:
    n = E.rows
    out = []
    for w, nm in zip(weights, names):
        m = _as_matrix(nm, w)
        if m.shape != (n, n):
            raise ValueError(
                f"{nm} must have shape ({n}, {n}) = (d+1, d+1) to match E of shape {E.shape}, got {m.shape}"
            )
        out.append(m)
    return out


def _check_E(E: Any) -> sp.Matrix:
    E = _as_matrix("E", E)
    if E.rows < 2 or E.cols < 2:
        raise ValueError(f"E must have shape (d+1, C+1) with d, C >= 1, got {E.shape}")
    return E


def attention_head(E: Any, W_P: Any, W_V: Any, W_K: Any, W_Q: Any) -> sp.Matrix:
    """One LSA head ``(1/C) W^P W^V E W^M (E^T (W^K)^T W^Q E)`` of shape ``(d+1, C+1)`` (Part I eq. 5).

    All weights are ``(d+1, d+1)``; ``E`` is ``(d+1, C+1)``. For display; predictions use the cheaper
    :func:`lsa_prediction`.

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [1], [1], 0); I = sp.eye(2)
        >>> attention_head(E, I, I, I, I).tolist()
        [[2, 1], [2, 1]]
    """
    E = _check_E(E)
    P, V, K, Q = _check_weights(E, (W_P, W_V, W_K, W_Q), ("W_P", "W_V", "W_K", "W_Q"))
    C = E.cols - 1
    return (P * V * E * mask_matrix(C)) * (E.T * K.T * Q * E) / C


def lsa_output(E: Any, heads: Sequence[Sequence[Any]]) -> sp.Matrix:
    """The full output matrix ``E + sum_h head_h(E)`` of multi-head LSA (Part I eq. 6 before ``[.]_{-1,-1}``).

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [1], [1], 0); Z = sp.zeros(2)
        >>> lsa_output(E, [(Z, Z, Z, Z)]) == E
        True
    """
    E = _check_E(E)
    out = sp.Matrix(E)
    for w in _check_heads(heads):
        out += attention_head(E, *w)
    return out


def _check_heads(heads: Any) -> list[tuple]:
    if not isinstance(heads, (list, tuple)) or not heads:
        raise ValueError("heads must be a non-empty list of (W_P, W_V, W_K, W_Q) tuples")
    for h, w in enumerate(heads):
        if not isinstance(w, (list, tuple)) or len(w) != 4:
            raise ValueError(f"heads[{h}] must be a tuple (W_P, W_V, W_K, W_Q), got {type(w).__name__}")
    return [tuple(w) for w in heads]


def lsa_prediction_uq(E: Any, u: Any, Q: Any) -> sp.Expr:
    """LSA prediction ``E[-1,-1] + (1/C) u^T (E W^M E^T) Q E[:, -1]``, the reduced form of eq. 3.

    Only ``u^T = (W^P W^V)[-1, :]`` (length ``d+1``) and ``Q = (W^K)^T W^Q`` (``(d+1, d+1)``) enter
    the prediction, so the risk is a polynomial of degree 4 (not 8) in these parameters.

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [2], [3], 0)
        >>> lsa_prediction_uq(E, [0, 1], sp.Matrix([[1, 0], [0, 0]]))   # (1/C) y x x_q
        6
    """
    E = _check_E(E)
    n, C = E.rows, E.cols - 1
    uv = _as_vector("u", u, n, f" (d+1 = {n}, E has shape {E.shape})")
    (Qm,) = _check_weights(E, (Q,), ("Q",))
    ctx = E[:, :C]
    A = ctx * ctx.T  # = E W^M E^T
    row = sp.Matrix(1, n, uv) * A * Qm * E[:, C]
    return E[n - 1, C] + row[0, 0] / C


def lsa_prediction(E: Any, W_P: Any, W_V: Any, W_K: Any, W_Q: Any) -> sp.Expr:
    """Single-head LSA prediction ``[E + (1/C) W^P W^V E W^M E^T (W^K)^T W^Q E]_{-1,-1}`` (Part I eq. 3).

    Args:
        E: ``(d+1, C+1)`` embedding (see :func:`embedding`).
        W_P, W_V, W_K, W_Q: ``(d+1, d+1)`` sympy matrices (symbolic or numeric).

    Returns:
        A scalar sympy expression (computed as a vector chain; only the last row of ``W^P W^V``
        is formed).

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [2], [3], 0); I = sp.eye(2)
        >>> lsa_prediction(E, I, I, I, I)      # y_q + (1/C) y (x x_q + y y_q) = 0 + 2 * 3
        6
    """
    return multihead_lsa_prediction(E, [(W_P, W_V, W_K, W_Q)])


def multihead_lsa_prediction(E: Any, heads: Sequence[Sequence[Any]]) -> sp.Expr:
    """Multi-head LSA prediction ``[E + sum_h head_h(E)]_{-1,-1}`` (Part I eqs. 5-6).

    Args:
        E: ``(d+1, C+1)`` embedding.
        heads: list of ``(W_P, W_V, W_K, W_Q)`` tuples of ``(d+1, d+1)`` matrices, one per head.

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [2], [3], 0); I = sp.eye(2)
        >>> multihead_lsa_prediction(E, [(I, I, I, I), (I, I, I, I)])
        12
    """
    E = _check_E(E)
    n, C = E.rows, E.cols - 1
    ctx = E[:, :C]
    A = ctx * ctx.T
    col = E[:, C]
    out = E[n - 1, C]
    for h, w in enumerate(_check_heads(heads)):
        P, V, K, Q = _check_weights(E, w, (f"heads[{h}] W_P", f"heads[{h}] W_V", f"heads[{h}] W_K", f"heads[{h}] W_Q"))
        u = P[n - 1, :] * V
        out += ((u * A) * (K.T * (Q * col)))[0, 0] / C
    return out


# --------------------------------------------------------------------------------------------
# The data model (Part I section 2)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegressionTask:
    """Symbols of one in-context linear-regression prompt (Part I section 2).

    ``w_hat ~ N(w_star, I_d)``, ``x_1..x_C, x_q ~ N(0, I_d)`` i.i.d., ``y_i = w_hat^T x_i (+ s eps_i)``,
    target ``y = w_hat^T x_q (+ s eps_q)``. Shapes: ``X (C, d)``, ``x_q, w_hat, w_star (d, 1)``,
    ``y (C, 1)``, ``E (d+1, C+1)``.

    Attributes:
        groups: all independent Gaussian groups (``w_hat``, each ``x_i``, ``x_q``, noise) for
            :func:`symbolic_risk` / :func:`expect_independent`.
        data_groups: the groups of ``x_i``, ``x_q`` and noise only (expectation given ``w_hat``).
        task_groups: the ``w_hat`` group only.
    """

    d: int
    C: int
    X: sp.Matrix
    x_q: sp.Matrix
    w_hat: sp.Matrix
    w_star: sp.Matrix
    y: sp.Matrix
    y_q: sp.Expr
    target: sp.Expr
    E: sp.Matrix
    noise: sp.Matrix | None
    noise_q: sp.Symbol | None
    groups: tuple[GaussianBlock, ...]
    data_groups: tuple[GaussianBlock, ...]
    task_groups: tuple[GaussianBlock, ...]

    def risk(self, pred: Any) -> sp.Expr:
        """``E[(pred - y)^2]`` over all groups (:func:`symbolic_risk`)."""
        return symbolic_risk(pred, self.target, self.groups)


def linear_regression_task(
    d: int,
    C: int,
    *,
    w_star: Any = None,
    y_q: Any = 0,
    noise_std: Any = None,
) -> RegressionTask:
    """Build the symbolic prompt ``E`` and its Gaussian groups for Part I's linear-regression task.

    Args:
        d: feature dimension; C: number of context examples.
        w_star: prior mean of ``w_hat``: ``None`` (zero), a string prefix (symbols ``prefix_1..d``)
            or a length-``d`` vector of expressions.
        y_q: initial guess in ``E``: a number/expression, ``"prior"`` for ``w_star^T x_q``
            (Part I eq. 11), or a callable ``(x_q, w_star) -> expr``.
        noise_std: ``None`` (noise-free, the paper's setting) or a scale ``s`` (number or symbol):
            adds ``s * eps_i`` to each context label and ``s * eps_q`` to the target,
            ``eps ~ N(0, 1)`` independent.

    Example::

        >>> t = linear_regression_task(1, 2)
        >>> t.E.shape, t.target
        ((2, 3), what_1*x_{q,1})
    """
    d = positive_int("d", d)
    C = positive_int("C", C)
    X = sp.Matrix(C, d, lambda i, j: sp.Symbol(f"x_{{{i + 1},{j + 1}}}", real=True))
    x_q = sp.Matrix(d, 1, [sp.Symbol(f"x_{{q,{j + 1}}}", real=True) for j in range(d)])
    w_hat = gaussian_vector("what", d)
    if w_star is None:
        ws = sp.zeros(d, 1)
    elif isinstance(w_star, str):
        ws = sp.Matrix(d, 1, [sp.Symbol(f"{w_star}_{j + 1}", real=True) for j in range(d)])
    else:
        ws = sp.Matrix(d, 1, _as_vector("w_star", w_star, d, f" (d = {d})"))
    if isinstance(y_q, str):
        if y_q != "prior":
            raise ValueError(f"y_q must be a number, an expression, 'prior' or a callable, got {y_q!r}")
        yq = (ws.T * x_q)[0, 0]
    elif callable(y_q):
        yq = _sympify("y_q", y_q(x_q, ws))
    else:
        yq = _sympify("y_q", y_q)
    y = X * w_hat
    target = (w_hat.T * x_q)[0, 0]
    noise = noise_q = None
    extra: list[GaussianBlock] = []
    if noise_std is not None:
        s = _sympify("noise_std", noise_std)
        noise = gaussian_vector("eps", C)
        noise_q = sp.Symbol("eps_q", real=True)
        y = y + s * noise
        target = target + s * noise_q
        extra = [gaussian_block(noise, name="noise"), gaussian_block([noise_q], name="noise_q")]
    E = embedding(X, y, x_q, yq)
    task = (gaussian_block(w_hat, ws, None, name="w_hat"),)
    data = tuple(gaussian_block(X[i, :], name=f"x_{i + 1}") for i in range(C)) + (
        gaussian_block(x_q, name="x_q"),
    ) + tuple(extra)
    return RegressionTask(d, C, X, x_q, w_hat, ws, y, yq, target, E, noise, noise_q, task + data, data, task)


# --------------------------------------------------------------------------------------------
# Gradients and lambdify
# --------------------------------------------------------------------------------------------


def _poly_terms(expr: sp.Expr, params: Sequence[sp.Symbol]) -> dict[tuple[int, ...], sp.Expr] | None:
    """Sparse ``{exponents: coefficient}`` of ``expr`` as a polynomial in ``params``; ``None`` if not polynomial.

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
        params: Symbols and/or sympy matrices of Symbols (flattened row-major, see :func:`flatten_params`).

    Example::

        >>> a, b = sp.symbols("a b"); gradient(a**2 * b, [a, b])
        [2*a*b, a**2]
    """
    ps = flatten_params(params)
    e = _sympify("expr", expr)
    terms = _poly_terms(e, ps)
    if terms is None:
        return [sp.diff(e, p) for p in ps]
    out = []
    for k, p in enumerate(ps):
        acc = []
        for mon, c in terms.items():
            ek = mon[k]
            if ek:
                acc.append(ek * c * sp.Mul(*[q**j for q, j in zip(ps, mon[:k] + (ek - 1,) + mon[k + 1 :]) if j]))
        out.append(sp.Add(*acc))
    return out


def _constants_map(constants: dict | None) -> dict:
    if not constants:
        return {}
    if not isinstance(constants, dict):
        raise ValueError(f"constants must be a dict {{Symbol: value}}, got {type(constants).__name__}")
    sub = {}
    for k, v in constants.items():
        if not isinstance(k, sp.Symbol):
            raise ValueError(f"constants keys must be sympy Symbols, got {k!r}")
        sub[k] = _sympify(f"constants[{k}]", v)
    return sub


def _check_free(name: str, free: set, ps: Sequence[sp.Symbol]) -> None:
    free = set(free) - set(ps)
    if free:
        raise ValueError(
            f"{name} has free symbols {sorted(map(str, free))} that are neither params nor constants; "
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
    """Evaluate ``sum_m c_m prod_j theta_j^{e_mj}`` and its exact gradient, vectorised (numpy or jax)."""

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


def _compile(risk: Any, params: Any, constants: dict | None, backend: str, cse: bool, want_grad: bool) -> Callable:
    mod, xp = _backend_module(backend)
    ps = flatten_params(params)
    e = _sympify("risk", risk)
    sub = _constants_map(constants)
    n = len(ps)
    terms = _poly_terms(e, ps)
    raw = None
    if terms is not None:  # substitute constants coefficient by coefficient (cheap), not in the whole sum
        terms = {k: (c.xreplace(sub) if sub and isinstance(c, sp.Basic) else c) for k, c in terms.items()}
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
            raise ValueError(f"theta must have shape ({n},) (one entry per parameter), got shape {tuple(t.shape)}")
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
    risk: Any, params: Any, *, constants: dict | None = None, backend: str = "jax", cse: bool = False
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

        >>> a = sp.Symbol("a"); f = lambdify_risk((a - 1) ** 2, [a], backend="numpy"); float(f([3.0]))
        4.0
    """
    return _compile(risk, params, constants, backend, cse, want_grad=False)


def lambdify_gradient(
    risk: Any, params: Any, *, constants: dict | None = None, backend: str = "jax", cse: bool = False
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
    return _compile(risk, params, constants, backend, cse, want_grad=True)
