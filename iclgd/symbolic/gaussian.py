"""Exact expectations of polynomials in jointly Gaussian symbols (sympy).

:func:`gaussian_expectation` (one jointly Gaussian block, any mean and covariance, both may be
symbolic), :func:`expect_independent` (several independent blocks; the moment of every monomial
factorises over blocks, the fast path), :func:`expect_nested` (iterated/conditional expectation,
innermost stage first), :func:`expect_product` (``E[a b]`` as a bilinear form, much cheaper than
expanding ``a*b``) and :func:`symbolic_risk` (``E[(pred - target)^2]``). Moments are computed with
Stein's identity ``E[x_a f(x)] = mu_a E[f] + sum_b Sigma_ab E[d_b f]`` (Isserlis/Wick with a mean
shift), memoised per monomial, in a sympy polynomial domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from typing import Any, Union

import numpy as np
import sympy as sp
from sympy.polys.constructor import construct_domain
from sympy.polys.polyerrors import CoercionFailed, GeneratorsError, PolynomialError
from sympy.polys.polyutils import dict_from_expr

from .core import as_expr, as_matrix, as_symbols, as_vector

__all__ = [
    "GaussianBlock",
    "GroupLike",
    "gaussian_block",
    "gaussian_expectation",
    "expect_independent",
    "expect_nested",
    "expect_product",
    "symbolic_risk",
]

GroupLike = Union["GaussianBlock", Sequence[Any]]


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


def gaussian_block(
    variables: Any, mean: Any = None, cov: Any = None, *, name: str = ""
) -> GaussianBlock:
    """Validate and build a :class:`GaussianBlock` ``variables ~ N(mean, cov)``.

    Args:
        variables: ``n`` distinct sympy Symbols (list, tuple or sympy Matrix).
        mean: length-``n`` list/Matrix of expressions; ``None`` means zero.
        cov: ``(n, n)`` symmetric sympy Matrix / nested list / numpy array (may be symbolic, may be
            singular); ``None`` means the identity. A numeric ``cov`` must be positive
            semi-definite.
        name: prefix for error messages (e.g. ``"groups[1]"``).

    Raises:
        ValueError: bad types or shapes, non-symmetric or (numeric) indefinite ``cov``, or a
            ``mean``/``cov`` that depends on the block's own variables.

    Example::

        >>> from iclgd.symbolic.core import gaussian_vector
        >>> x = gaussian_vector("x", 2)
        >>> gaussian_block(x, mean=[1, 0], cov=None).mean
        (1, 0)
    """
    pre = f"{name} " if name else ""
    syms = as_symbols(f"{pre}variables", variables)
    n = len(syms)
    mu = (
        [sp.Integer(0)] * n
        if mean is None
        else as_vector(f"{pre}mean", mean, n, " (one entry per variable)")
    )
    cv: sp.ImmutableMatrix | None = None
    if cov is not None:
        m = as_matrix(f"{pre}cov", cov)
        if m.shape != (n, n):
            raise ValueError(
                f"{pre}cov must be a square matrix of shape ({n}, {n}) (one row per variable), "
                f"got shape {m.shape}"
            )
        for i in range(n):
            for j in range(i + 1, n):
                if sp.expand(m[i, j] - m[j, i]) != 0:
                    raise ValueError(
                        f"{pre}cov must be symmetric; entries ({i},{j}) and ({j},{i}) differ"
                    )
        if all(e.is_number for e in m):
            try:
                a = np.array(m.tolist(), dtype=float)
            except TypeError:
                raise ValueError(f"{pre}cov must be real") from None
            eig = np.linalg.eigvalsh(a)
            if eig.min() < -1e-10 * max(1.0, float(np.abs(eig).max())):
                raise ValueError(
                    f"{pre}cov must be positive semi-definite; smallest eigenvalue {eig.min():.3g}"
                )
        if m != sp.eye(n):
            cv = sp.ImmutableMatrix(m)
    own = set(syms)
    dep = set().union(*(e.free_symbols for e in mu)) | (
        cv.free_symbols if cv is not None else set()
    )
    if own & dep:
        raise ValueError(
            f"{pre}mean/cov must not depend on the block's own variables "
            f"{sorted(map(str, own & dep))}"
        )
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
        elif (
            isinstance(g, (list, tuple))
            and len(g) >= 2
            and all(isinstance(v, sp.Symbol) for v in g)
        ):
            raise ValueError(
                f"groups[{k}] must be a tuple (symbols, mean, cov), got a bare sequence of "
                f"Symbols {g!r}; "
                f"write ({list(g)!r},) for a standard normal group"
            )
        elif isinstance(g, (list, tuple)) and 1 <= len(g) <= 3:
            blocks.append(gaussian_block(*g, name=f"groups[{k}]"))
        else:
            raise ValueError(
                f"groups[{k}] must be a GaussianBlock or a tuple (symbols, mean, cov) with "
                f"mean/cov optional, got {g!r}"
            )
    seen: set[sp.Symbol] = set()
    for b in blocks:
        dup = seen & set(b.symbols)
        if dup:
            raise ValueError(
                f"groups must be disjoint; {sorted(map(str, dup))} appear in more than one group"
            )
        seen |= set(b.symbols)
    for k, b in enumerate(blocks):
        dep = set().union(*(e.free_symbols for e in b.mean)) | (
            b.cov.free_symbols if b.cov is not None else set()
        )
        if dep & seen:
            raise ValueError(
                f"groups[{k}] mean/cov depends on integrated variables "
                f"{sorted(map(str, dep & seen))}; "
                "the groups would not be jointly Gaussian. Integrate in stages with expect_nested"
            )
    return blocks


def _double_factorial_odd(j: int) -> int:
    """(j-1)!! for even j >= 0: E[z^j] for z ~ N(0, 1)."""
    out = 1
    for k in range(j - 1, 0, -2):
        out *= k
    return out


class _Engine:
    """Expectations of polynomials under independent Gaussian blocks (sympy polynomial domain)."""

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
        e = as_expr(name, expr) if not isinstance(expr, sp.Basic) else expr
        if isinstance(e, sp.MatrixBase) or not isinstance(e, sp.Expr):
            raise ValueError(f"{name} must be a scalar sympy expression, got {type(e).__name__}")
        try:
            terms, _ = dict_from_expr(e, gens=self.gens)
        except (PolynomialError, GeneratorsError, CoercionFailed):
            names = ", ".join(map(str, self.gens[:6])) + (", ..." if len(self.gens) > 6 else "")
            raise ValueError(
                f"{name} must be a polynomial in the Gaussian variables ({names}); "
                f"got {str(e)[:120]}"
            ) from None
        return terms

    def set_domain(self, polys: list[dict]) -> list[dict]:
        """One coefficient domain for ``polys`` and the means/covariances; return native dicts."""
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
                    m = self.moment(tuple(x + y for x, y in zip(mi, mj, strict=True)))
                    if m:
                        lin = lin + (m * cj if j == i else (m + m) * cj)
                if lin:
                    acc = acc + ci * lin
        else:
            for mi, ci in ta:
                lin = dom.zero
                for mj, cj in tb:
                    m = self.moment(tuple(x + y for x, y in zip(mi, mj, strict=True)))
                    if m:
                        lin = lin + m * cj
                if lin:
                    acc = acc + ci * lin
        return dom.to_sympy(acc)


def _expect(expr: Any, blocks: list[GaussianBlock], name: str = "expr"):
    eng = _Engine(blocks)
    if isinstance(expr, sp.MatrixBase):
        polys = [
            eng.poly(expr[i, j], f"{name}[{i},{j}]")
            for i in range(expr.rows)
            for j in range(expr.cols)
        ]
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

        >>> from iclgd.symbolic.core import gaussian_vector
        >>> w = sp.Symbol("w"); z = gaussian_vector("z", 2)
        >>> inner = [(z, None, sp.Matrix([[1, w], [w, w**2]]))]
        >>> expect_nested(z[0] * z[1], [inner, [([w], [2], None)]])
        2
    """
    if isinstance(stages, GaussianBlock) or not isinstance(stages, (list, tuple)) or not stages:
        raise ValueError("stages must be a non-empty list of group lists (innermost first)")
    blocks = [_as_blocks(stage) for stage in stages]
    done: dict[sp.Symbol, int] = {}  # variable -> the stage integrating it
    for k, stage in enumerate(blocks):
        mine = {x for b in stage for x in b.symbols}
        again = sorted((str(x) for x in mine if x in done), key=str)
        if again:
            raise ValueError(f"stages[{k}] integrates {again} again (an earlier stage did)")
        dep = set().union(*(e.free_symbols for b in stage for e in b.mean))
        dep |= set().union(*(b.cov.free_symbols for b in stage if b.cov is not None))
        early = sorted({str(x) for x in dep if x in done})
        if early:
            j = min(done[x] for x in dep if x in done)
            raise ValueError(
                f"stages must be ordered innermost first: the law of stages[{k}] depends on "
                f"{early}, integrated by the earlier stages[{j}]; put stages[{k}] before it"
            )
        done.update(dict.fromkeys(mine, k))
    out = expr
    for k, stage in enumerate(blocks):
        out = _expect(out, stage, "expr" if k == 0 else f"stage {k - 1} result")
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

        >>> from iclgd.symbolic.models import linear_regression_task
        >>> t = linear_regression_task(1, 1)
        >>> symbolic_risk(0, t.target, t.groups)   # E[(w x_q)^2] with w ~ N(0, 1)
        1
    """
    eng = _Engine(_as_blocks(groups))
    pred, target = as_expr("pred", pred), as_expr("target", target)
    r = eng.poly(pred - target, "pred - target")
    (dr,) = eng.set_domain([r])
    return eng.expect_bilinear(dr, dr)
