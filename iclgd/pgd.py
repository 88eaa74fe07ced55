r"""Part III helpers (Ahn, Cheng, Daneshmand, Sra 2023): exact risks of the sparse multi-layer
linear transformer, the optimum on the sets of Theorems 4-5, and the measures of Figs. 1-4.

**The sparse risk, exactly (eq. 9, App. B.2 eq. 22-23).** With ``P_l = [[0, 0], [0, 1]]`` and
``Q_l = [[A_l, 0], [0, 0]]`` the covariate rows never change and the label row follows
``Y_{l+1} = Y_l (I + (1/n) M X^T A_l X)``. Starting from the *true* query label (App. C.1, Lemma 9:
the residual of eq. 5 is the final query entry) and using ``Xc (I + Xc^T A Xc / n) = (I + S A / n)
Xc`` (``Xc`` the ``n`` context columns, ``S = Xc Xc^T``), the residual is

    [Z_L]_{d+1,n+1} + w*^T x^(n+1) = w*^T T x^(n+1),
    T = (I + S A_0/n)(I + S A_1/n) ... (I + S A_{L-1}/n),

so for ``x ~ N(0, Sigma)``, ``w* ~ N(0, Omega)`` the loss is ``f = E tr(Omega T Sigma T^T)``: a
sum of Wishart trace moments that :mod:`iclgd.exact.wishart` evaluates exactly
(:func:`sparse_risk_exact`).

**On the set S of Theorem 4** (``A_l = a_l Sigma^{-1}``, ``Omega = Sigma^{-1}``) write
``x = Sigma^{1/2} x_bar``: ``T`` becomes ``p(S_bar / n)`` with the scalar polynomial
``p(s) = prod_l (1 + a_l s)`` of a white Wishart matrix, and ``f = E tr p(S_bar/n)^2`` depends on
``Sigma`` not at all (:func:`scalar_risk_expr`). Writing ``p(s) = 1 + sum_k c_k s^k`` the loss is a
convex quadratic in ``c`` with exact rational coefficients ``E tr S_bar^j / n^j``; its minimiser
is exact and the optimal ``a_l = -1/s_l`` come from the roots ``s_l`` of ``p``
(:func:`optimal_scalars`).

**Measures of Figs. 1-4.** :func:`dist_to_identity` (``Dist(M, I)`` of Sec. 5.3) and
:func:`paper_sigma` (``Sigma = U^T D^2 U`` with ``U`` Haar-distributed).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import sympy as sp

from . import checks as v
from .exact.wishart import (
    _transpose,
    count_arg,
    expect_trace_word,
    wishart_power_moments,
    wishart_trace_moment,
)
from .metrics import safe_scale

__all__ = [
    "dist_to_identity",
    "haar_orthogonal",
    "paper_sigma",
    "PaperPrompts",
    "paper_prompts",
    "sparse_risk_exact",
    "scalar_risk_expr",
    "OptimalScalars",
    "optimal_scalars",
    "quadratic_min",
    "GradStats",
    "gradient_stats",
    "TunedGD",
    "tuned_gd",
    "gdpp_residual",
    "gdpp_risk_expr",
    "GDppCritical",
    "gdpp_risk",
    "gdpp_critical_point",
    "gdpp_gradient_on_S",
    "GDppSearch",
    "gdpp_critical_points",
]


def dist_to_identity(M) -> jax.Array:
    """``Dist(M, I) = min_alpha ||M - alpha I||_F / ||M||_F`` (Sec. 5.3), batched over leading axes.

    The minimiser is ``alpha = tr(M) / d``, so ``Dist^2 = 1 - tr(M)^2 / (d ||M||_F^2)``.

    Args:
        M: ``(..., d, d)`` array, no matrix identically zero.

    Returns:
        ``(...)`` values in ``[0, 1]``.
    """
    M = v.array("M", M, "... d d")
    if not v.is_tracer(M) and np.any(np.abs(np.asarray(M)).max(axis=(-2, -1)) == 0):
        raise ValueError("M must hold no matrix that is identically zero (Dist is 0/0 there)")
    M = jnp.asarray(M)
    M = M / safe_scale(M, (-2, -1))  # Dist is scale-invariant; no overflow in ||M||^2
    d = M.shape[-1]
    alpha = jnp.trace(M, axis1=-2, axis2=-1) / d
    R = M - alpha[..., None, None] * jnp.eye(d, dtype=M.dtype)
    return jnp.linalg.norm(R, axis=(-2, -1)) / jnp.linalg.norm(M, axis=(-2, -1))


def haar_orthogonal(key: jax.Array, d: int) -> jax.Array:
    """A Haar-distributed ``(d, d)`` orthogonal matrix (QR of a Gaussian matrix, signs fixed by
    the diagonal of ``R``, so that the law is uniform)."""
    v.prng_key("key", key)
    d = v.positive_int("d", d)
    G = jax.random.normal(key, (d, d))
    Qm, R = jnp.linalg.qr(G)
    return Qm * jnp.sign(jnp.diag(R))[None, :]


def paper_sigma(key: jax.Array, diag=(1.0, 1.0, 0.5, 0.25, 1.0)) -> jax.Array:
    """``Sigma = U^T D^2 U`` of Secs. 5.3 and 6.1, ``U`` Haar, ``D = diag(diag)`` (the paper's
    ``(1, 1, 0.5, 0.25, 1)`` by default)."""
    D = _diag(diag)
    U = haar_orthogonal(key, D.shape[0])
    S = U.T @ (D[:, None] ** 2 * U)
    return (S + S.T) / 2


def _diag(diag) -> jax.Array:
    """Check the diagonal of ``D`` (a non-empty vector of finite positive numbers)."""
    D = v.array("diag", diag, "d")
    if not v.is_tracer(D) and not np.all(np.asarray(D) > 0):
        raise ValueError(f"diag must be a vector of positive numbers, got {diag!r}")
    return jnp.asarray(D, dtype=float)


class PaperPrompts(NamedTuple):
    """Prompts of Secs. 5.3 and 6.1 (:func:`paper_prompts`).

    Attributes:
        Sigma: ``(d, d)`` the covariance ``U^T D^2 U`` of this key.
        Z0: ``(B, d+1, n+1)`` embeddings of eq. 1 (query label 0).
        y: ``(B,)`` query labels ``<w*, x^(n+1)>``.
    """

    Sigma: jax.Array
    Z0: jax.Array
    y: jax.Array


def paper_prompts(
    key: jax.Array, n: int, batch: int, draw=0, diag=(1.0, 1.0, 0.5, 0.25, 1.0)
) -> PaperPrompts:
    """``Sigma`` and ``batch`` prompts of Secs. 5.3 / 6.1, all drawn from one key (jittable).

    ``Sigma = U^T D^2 U`` with ``U`` Haar from ``fold_in(key, 0)`` (as :func:`paper_sigma`), then
    ``x = Sigma^{1/2} x_bar``, ``w* = Sigma^{-1/2} w_bar`` with ``x_bar, w_bar`` standard normal
    from ``fold_in(key, 1 + draw)`` (``draw = 0``: the training batch; other values: fresh prompts
    of the same ``Sigma``), so ``x ~ N(0, Sigma)``, ``w* ~ N(0, Sigma^{-1})`` and
    ``y = <x_bar, w_bar>``. Under ``jit``/``vmap`` over keys, every key gets its own ``Sigma``
    (the paper's "each time we sample a different Sigma").

    Args:
        key: a PRNG key; n: context examples; batch: prompts; draw: which batch (an integer,
        may be traced); diag: the diagonal of ``D``.

    Returns:
        :class:`PaperPrompts`.
    """
    v.prng_key("key", key)
    n = v.positive_int("n", n)
    batch = v.positive_int("batch", batch)
    if not v.is_tracer(draw):
        v.positive_int("draw", draw, minimum=0)
    D = _diag(diag)
    d = D.shape[0]
    k0, k1 = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1 + draw)
    U = haar_orthogonal(k0, d)
    root = U.T @ (D[:, None] * U)  # Sigma^{1/2}
    Sigma = root @ root
    z = jax.random.normal(k1, (batch, n + 2, d))  # rows 0..n: x_bar, row n+1: w_bar
    xb, wb = z[:, : n + 1], z[:, n + 1]
    X = xb @ root  # (B, n+1, d), rows x^(i)T
    yy = jnp.einsum("bcd,bd->bc", xb, wb)  # (B, n+1)
    top = jnp.swapaxes(X, 1, 2)  # (B, d, n+1)
    bottom = yy.at[:, n].set(0.0)[:, None, :]
    return PaperPrompts((Sigma + Sigma.T) / 2, jnp.concatenate([top, bottom], 1), yy[:, n])


def _words(As, n) -> list[tuple[Any, list]]:
    """``T = prod_l (I + S A_l / n)`` as ``(coefficient, tokens)`` words."""
    out = []
    for r in range(len(As) + 1):
        for sub in itertools.combinations(range(len(As)), r):
            toks: list = []
            for l in sub:
                toks += ["S", As[l]]
            out.append((1 / n**r, toks))
    return out


def sparse_risk_exact(A_list, n, Sigma=None, Omega=None):
    """Exact loss (eq. 5) of the ``L``-layer eq. 9 transformer, ``f = E tr(Omega T Sigma T^T)``.

    Works for numpy, jax (differentiable, jittable) and sympy matrices; the cost grows like
    ``(4L - 1)!!`` matchings. Under jax, ``L <= 2`` (tracing ``L = 3`` takes minutes); in numpy
    float64, ``L = 3`` takes about half a second, and numpy matrices with leading batch axes
    ``(..., d, d)`` evaluate many points at once (the result has the batch shape).

    Args:
        A_list: sequence of ``L`` ``(d, d)`` (or ``(..., d, d)``) matrices ``A_l`` (any, not only
            symmetric).
        n: number of context examples.
        Sigma: covariance of ``x`` (default identity).
        Omega: covariance of ``w*`` (default identity; Theorems 4-5 use ``Sigma^{-1}``).
    """
    if isinstance(A_list, (str, bytes, dict)) or not hasattr(A_list, "__iter__"):
        raise v.ArgumentTypeError(
            f"A_list must be a sequence of (d, d) matrices, got {type(A_list).__name__}"
        )
    As = list(A_list)
    if not As:
        raise ValueError("A_list must hold at least one (d, d) matrix")
    is_sym = isinstance(As[0], sp.MatrixBase)
    if not is_sym:  # numbers: shapes agree, values finite, n a count, covariances PSD
        dims = v.Dims()
        As = [v.array(f"A_list[{i}]", A, "... d d", dims) for i, A in enumerate(As)]
        n = v.positive_int("n", n)
        for name, C in (("Sigma", Sigma), ("Omega", Omega)):
            if C is not None:
                v.spd_matrix(name, C, dims["d"], psd=True, dtype=np.float64)
    d = As[0].shape[-1]
    if is_sym:
        eye = sp.eye(d)
    else:
        eye = jnp.eye(d, dtype=jnp.result_type(*As)) if isinstance(As[0], jax.Array) else np.eye(d)
    Sig = eye if Sigma is None else Sigma
    Om = eye if Omega is None else Omega
    words = _words(As, sp.sympify(n) if is_sym else float(n))
    total = 0
    for (c1, w1), (c2, w2) in itertools.product(words, words):
        w2t = [t if isinstance(t, str) else _transpose(t) for t in reversed(w2)]
        word = [Om] + w1 + [Sig] + w2t
        total = total + c1 * c2 * expect_trace_word(word, n, Sigma, eye=eye)
    return total


def scalar_risk_expr(L: int, n=None, d=None) -> tuple[sp.Expr, tuple]:
    """Loss on Theorem 4's set, ``f(a) = E tr prod_l (I + a_l S/n)^2`` for white Wishart ``S``.

    Args:
        L: number of layers, ``1 <= L <= 3``.
        n, d: sizes (integers ``>= 1`` or sympy expressions) or ``None`` for the symbols ``n``,
            ``d``.

    Returns:
        ``(f, a)`` with ``a`` the ``L`` symbols ``a_0..a_{L-1}``.
    """
    L = v.positive_int("L", L)
    if L > 3:
        raise ValueError(f"L must be at most 3 (moments up to E tr S^6), got {L}")
    n, d = count_arg("n", n), count_arg("d", d)
    a = sp.symbols(f"a_0:{L}", real=True)
    s = sp.Symbol("s")
    p2 = sp.Poly(sp.expand(sp.prod([1 + ai * s / n for ai in a]) ** 2), s)
    mom = {0: d, **{k: wishart_trace_moment(k, n, d) for k in range(1, 2 * L + 1)}}
    f = sum(coef * mom[k] for (k,), coef in p2.terms())
    return sp.expand(f), a


class OptimalScalars(NamedTuple):
    """The optimum of the loss on Theorem 4's set (:func:`optimal_scalars`).

    Attributes:
        c: exact coefficients of ``p(s) = 1 + sum_k c_k s^k`` (``s`` an eigenvalue of ``S/n``).
        risk: exact minimal loss (sympy Rational for numeric ``n, d``).
        a: the ``L`` optimal scalars ``a_l = -1/s_l`` (floats, increasing).
        roots: the roots ``s_l`` of ``p`` (floats).
    """

    c: tuple
    risk: sp.Expr
    a: np.ndarray
    roots: np.ndarray


def optimal_scalars(L: int, n: int, d: int) -> OptimalScalars:
    """Exact minimiser of ``E tr p(S/n)^2`` over polynomials ``p(0) = 1`` of degree ``L``.

    The loss is ``d + 2 g^T c + c^T H c`` with ``g_k = m_k``, ``H_jk = m_{j+k}``,
    ``m_k = E tr S^k / n^k`` (exact rationals), so ``c = -H^{-1} g``. Real ``a_l`` exist iff
    ``p`` has real roots; the roots are checked to be real.

    Args:
        L: number of layers, ``1 <= L <= 3``; n, d: positive integers.
    """
    L = v.positive_int("L", L)
    if L > 3:
        raise ValueError(f"L must be at most 3 (moments up to E tr S^6), got {L}")
    n = v.positive_int("n", n)
    d = v.positive_int("d", d)
    m = {k: wishart_trace_moment(k, n, d) / sp.Integer(n) ** k for k in range(1, 2 * L + 1)}
    H = sp.Matrix(L, L, lambda i, j: m[i + j + 2])
    g = sp.Matrix([m[k + 1] for k in range(L)])
    c = -H.LUsolve(g)
    risk = sp.nsimplify(d + (g.T * c)[0, 0])
    s = sp.Symbol("s")
    p = 1 + sum(c[k] * s ** (k + 1) for k in range(L))
    roots = np.array([complex(r) for r in sp.Poly(p, s).nroots(n=30)])
    if np.abs(roots.imag).max() > 1e-12:
        raise ValueError(f"the optimal polynomial has complex roots {roots}")
    roots = np.sort(roots.real)
    a = np.sort(-1.0 / roots)
    return OptimalScalars(tuple(c), risk, a, roots)


def quadratic_min(f) -> tuple[float, float]:
    """Minimiser and minimum over ``gamma`` of a convex quadratic ``f(gamma)`` (e.g. an exact risk
    along a fixed direction), from ``f(-1), f(0), f(1)``.

    Args:
        f: callable ``gamma -> float``, a quadratic with positive curvature.

    Returns:
        ``(gamma*, f(gamma*))``.
    """
    v.function("f", f, "a function gamma -> float (a convex quadratic)")
    fm, f0, fp = (float(f(g)) for g in (-1.0, 0.0, 1.0))
    if not np.all(np.isfinite([fm, f0, fp])):
        raise ValueError(f"f must be finite at gamma = -1, 0, 1, got {fm}, {f0}, {fp}")
    curv = (fp + fm) / 2 - f0
    if not curv > 0:
        raise ValueError(f"f must be a convex quadratic in gamma; curvature {curv:.3g}")
    g = -(fp - fm) / 2 / (2 * curv)
    return g, float(f(g))


class GradStats(NamedTuple):
    """Sample gradient of a mean loss and its standard error (:func:`gradient_stats`).

    Attributes:
        grad: pytree like ``params``, the gradient of the sample mean loss.
        se: pytree like ``params``, the standard error of each entry (per-prompt spread / sqrt N).
        z2: ``||grad||^2 / sum(se^2)``: about 1 when the population gradient is 0 (pure noise),
            much larger when it is not.
    """

    grad: Any
    se: Any
    z2: float

    def z2_against(self, target) -> float:
        """``||grad - target||^2 / sum(se^2)``: about 1 when ``target`` is the population gradient.

        Args:
            target: pytree like ``grad`` (e.g. an exact gradient).
        """
        diff = jax.tree_util.tree_map(lambda g, t: g - jnp.asarray(t), self.grad, target)
        num = sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(diff))
        return num / sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(self.se))


def gradient_stats(per_prompt_loss, params, *data, chunk: int = 2000) -> GradStats:
    """Gradient of ``mean_i loss_i`` on a fixed sample, with per-entry standard errors.

    Args:
        per_prompt_loss: ``(params, *data) -> (N,)`` losses of the ``N`` prompts in ``data``
            (each array of ``data`` has a leading axis ``N``).
        params: pytree of parameters.
        data: arrays with a leading prompt axis.
        chunk: prompts per vectorised gradient evaluation.

    Returns:
        :class:`GradStats`.
    """
    v.function("per_prompt_loss", per_prompt_loss, "a function (params, *data) -> (N,) losses")
    chunk = v.positive_int("chunk", chunk)
    if not data:
        raise ValueError("data must hold at least one array with a leading prompt axis")
    data = tuple(v.array(f"data[{i}]", x) for i, x in enumerate(data))
    if any(x.ndim < 1 for x in data):
        raise ValueError("every array of data must have a leading (prompt) axis")
    N = int(data[0].shape[0])
    if N < 2:
        raise ValueError(f"data must hold at least 2 prompts (a standard error needs 2), got {N}")
    if any(int(x.shape[0]) != N for x in data):
        raise ValueError("every array of data must have the same leading (prompt) axis")
    one = lambda p, *xs: per_prompt_loss(p, *(x[None] for x in xs))[0]  # noqa: E731
    g1 = jax.jit(jax.vmap(jax.grad(one), in_axes=(None,) + (0,) * len(data)))
    s1 = s2 = None
    for i in range(0, N, chunk):
        g = g1(params, *(x[i : i + chunk] for x in data))
        a = jax.tree_util.tree_map(lambda x: jnp.sum(x, 0), g)
        b = jax.tree_util.tree_map(lambda x: jnp.sum(x**2, 0), g)
        s1 = a if s1 is None else jax.tree_util.tree_map(jnp.add, s1, a)
        s2 = b if s2 is None else jax.tree_util.tree_map(jnp.add, s2, b)
    mean = jax.tree_util.tree_map(lambda x: x / N, s1)
    se = jax.tree_util.tree_map(
        lambda m, q: jnp.sqrt(jnp.maximum(q / N - m**2, 0.0) / (N - 1)), mean, s2
    )
    num = sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(mean))
    den = sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(se))
    return GradStats(mean, se, num / den)


class TunedGD(NamedTuple):
    """The best step sizes of ``k``-step preconditioned GD (:func:`tuned_gd`).

    Attributes:
        steps: ``(k,)`` step sizes ``gamma_l`` (increasing; the loss does not depend on their
            order), or ``(1,)`` the one step size of every step when ``shared``.
        risk: the exact population loss (eq. 5) at these steps.
        c: ``(k,)`` coefficients of ``p(s) = prod_l (1 - gamma_l s) = 1 + sum_j c_j s^j``.

    When the loss does not depend on the steps (``P = 0`` or ``Omega = 0``) every step is optimal
    and the steps returned are 0; when the optimal ``p`` has degree ``< k`` (a singular ``P``),
    the missing steps are 0.
    """

    steps: np.ndarray
    risk: float
    c: np.ndarray


def _gd_moments(L: int, n: int, Sigma, P, Omega) -> np.ndarray:
    """``M_jk = E tr(Omega (S P)^j Sigma (P S)^k) / n^(j+k)``, ``0 <= j, k <= L`` (symmetric)."""
    eye = np.eye(Sigma.shape[0])
    M = np.empty((L + 1, L + 1))
    for j in range(L + 1):
        for k in range(j, L + 1):
            word = [Omega] + ["S", P] * j + [Sigma] + [P, "S"] * k
            M[j, k] = M[k, j] = float(expect_trace_word(word, n, Sigma, eye=eye)) / n ** (j + k)
    return M


def tuned_gd(k: int, n: int, Sigma, P=None, Omega=None, shared: bool = False) -> TunedGD:
    """Exact best step sizes of ``k`` steps of preconditioned GD from ``w_0 = 0`` (Sec. 5).

    ``w_{l+1} = w_l - gamma_l P grad R(w_l)`` with ``R(w) = (1/2n) sum_i (w^T x_i - y_i)^2`` over
    all ``n`` context examples gives ``w_k - w* = -p(P S / n) w*`` with
    ``p(s) = prod_l (1 - gamma_l s)`` and ``S = sum_i x_i x_i^T``: the eq. 9 transformer with
    ``A_l = -gamma_l P`` (Lemma 2). Its loss ``E tr(Omega p(SP/n) Sigma p(SP/n)^T)`` is the
    convex quadratic ``sum_jk c_j c_k M_jk`` (``c_0 = 1``) in the coefficients of ``p``, with
    ``M_jk`` exact Wishart trace moments (:mod:`iclgd.exact.wishart`, float64); its minimiser
    is exact, and the steps are the inverse roots of ``p`` (checked real). With ``shared``, one
    step size ``gamma`` for every step (the public code's baseline): the loss is a polynomial of
    degree ``2k`` in ``gamma``, minimised over its real critical points. ``P = Sigma^{-1}`` and
    ``Omega = Sigma^{-1}`` give the optimum on Theorem 4's set (:func:`optimal_scalars`).

    Args:
        k: number of steps, ``1 <= k <= 3``.
        n: number of context examples used by GD.
        Sigma: ``(d, d)`` covariance of ``x`` (symmetric positive definite).
        P: ``(d, d)`` symmetric preconditioner (default identity: plain GD).
        Omega: ``(d, d)`` covariance of ``w*`` (default ``Sigma^{-1}``, the law of Theorems 4-5).
        shared: one step size for all steps.

    Returns:
        :class:`TunedGD`.
    """
    k = v.positive_int("k", k)
    if k > 3:
        raise ValueError(f"k must be at most 3 (moments up to E tr S^6), got {k}")
    n = v.positive_int("n", n)
    Sigma = np.asarray(v.spd_matrix("Sigma", Sigma, dtype=np.float64), dtype=np.float64)
    d = Sigma.shape[0]
    P = np.eye(d) if P is None else np.asarray(v.array("P", P, (d, d)), dtype=np.float64)
    if np.abs(P - P.T).max() > 1e-12 * max(np.abs(P).max(), 1.0):
        raise ValueError("P must be a symmetric (d, d) matrix")
    if Omega is None:
        Omega = np.linalg.inv(Sigma)
    Omega = np.asarray(v.spd_matrix("Omega", Omega, d, psd=True, dtype=np.float64), float)
    M = _gd_moments(k, n, Sigma, P, Omega)
    if np.abs(M[1:, :]).max() <= 1e-14 * max(np.abs(M).max(), np.finfo(float).tiny):
        # the loss does not depend on the steps (P = 0 or Omega = 0): every step is optimal; no
        # step (gamma = 0) is the minimiser of least magnitude
        return TunedGD(np.zeros(1 if shared else k), float(M[0, 0]), np.zeros(k))
    if shared:
        binom = np.array([sp.binomial(k, j) * (-1) ** j for j in range(k + 1)], float)
        loss = np.polynomial.Polynomial([0.0])
        for i in range(k + 1):
            for j in range(k + 1):
                loss = loss + M[i, j] * binom[i] * binom[j] * np.polynomial.Polynomial.basis(i + j)
        crit = loss.deriv().roots()
        crit = crit[np.abs(crit.imag) < 1e-9].real
        g = float(crit[np.argmin(loss(crit))])
        return TunedGD(np.array([g]), float(loss(g)), binom[1:] * g ** np.arange(1, k + 1))
    H, gvec = M[1:, 1:], M[1:, 0]
    # least squares of least norm: H is singular for a singular P (some powers of S P coincide)
    c = -np.linalg.lstsq(H, gvec, rcond=1e-13)[0]
    poly = np.polynomial.Polynomial(np.concatenate([[1.0], c])).trim(1e-13 * np.abs(c).max())
    roots = poly.roots()
    if roots.size and np.abs(roots.imag).max() > 1e-9 * np.abs(roots).max():
        raise ValueError(f"the optimal polynomial has complex roots {roots}: no real step sizes")
    steps = np.concatenate([np.zeros(k - roots.size), 1.0 / roots.real])  # degree < k: no step
    return TunedGD(np.sort(steps), float(M[0, 0] + gvec @ c), c)


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
    a = np.asarray(v.array("a", a, "L"), dtype=np.float64)
    b = np.asarray(v.array("b", b, (a.shape[0],), what="like a"), dtype=np.float64)
    lam = np.asarray(v.array("lam", lam), dtype=np.float64)
    f, out = np.ones_like(lam), np.ones_like(lam)
    for al, bl in zip(a, b, strict=True):
        out = out * (1 + al * lam * f**2)
        f = f * (1 + al * bl * lam * f**2)
    return out


def _check_gdpp_L(L) -> int:
    L = v.positive_int("L", L)
    if L > 3:
        raise ValueError(f"L must be at most 3 (moments up to E tr S^(3^L - 1)), got {L}")
    return L


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
    """Value, gradient and Hessian of a multivariate polynomial, in float64 or mpmath."""

    def __init__(self, P: sp.Poly):
        mons, coefs = zip(*P.terms(), strict=True)
        self.E = np.array(mons, dtype=np.int64)  # (T, V) exponents
        self.q = [sp.Rational(c) for c in coefs]  # exact coefficients
        self.c64 = np.array([float(c) for c in self.q])

    def _mp(self):
        return [mpmath.mpf(c.p) / c.q for c in self.q]

    def f64(self, x):
        return float(self.c64 @ np.prod(np.asarray(x, float) ** self.E, axis=1))

    def g64(self, x):
        x = np.asarray(x, float)
        out = np.empty(x.shape[0])
        for j in range(x.shape[0]):
            E = self.E.copy()
            e = E[:, j].copy()
            E[:, j] = np.maximum(e - 1, 0)
            out[j] = (self.c64 * e) @ np.prod(x**E, axis=1)
        return out

    def mp(self, x, order: int):
        """``f`` (order 0), its gradient (1) or Hessian (2) at ``x`` in the current precision."""
        V = len(x)
        c = self._mp()
        pw = [[mpmath.mpf(1)] + [None] * int(self.E[:, j].max()) for j in range(V)]
        for j in range(V):
            for k in range(1, len(pw[j])):
                pw[j][k] = pw[j][k - 1] * x[j]

        def mono(t, skip):  # prod_j x_j^(E_tj - skip_j), times the falling factors
            val = c[t]
            for j in range(V):
                e = int(self.E[t, j])
                s_ = skip.count(j)
                if e < s_:
                    return 0
                for r in range(s_):
                    val *= e - r
                val *= pw[j][e - s_]
            return val

        T = len(c)
        if order == 0:
            return mpmath.fsum(mono(t, []) for t in range(T))
        if order == 1:
            return [mpmath.fsum(mono(t, [j]) for t in range(T)) for j in range(V)]
        H = mpmath.matrix(V, V)
        for i in range(V):
            for j in range(i, V):
                H[i, j] = H[j, i] = mpmath.fsum(mono(t, [i, j]) for t in range(T))
        return H


@functools.cache
def _gdpp_functions(L: int, n: int, d: int) -> _PolyEval:
    """Evaluator of :func:`gdpp_risk_expr`'s polynomial (cached per size)."""
    return _PolyEval(_gdpp_poly(L, n, d)[0])


def _gdpp_point(L, a, b) -> np.ndarray:
    a = np.asarray(v.array("a", a, (L,), what=f"the {L} scalars of A_l"), dtype=np.float64)
    if b is None:
        b = np.zeros(L)
    b = np.asarray(v.array("b", b, (L,), what=f"the {L} scalars of B_l"), dtype=np.float64)
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
    x0 = _gdpp_point(L, a0, b0)
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
    points, failed = [], 0
    for a0, b0 in todo:
        try:
            c = gdpp_critical_point(L, n, d, a0, b0, dps=dps)
        except ValueError:
            failed += 1
            continue
        x = np.concatenate([c.a, c.b])
        if all(np.abs(x - np.concatenate([p.a, p.b])).max() > 1e-6 for p in points):
            points.append(c)
    return GDppSearch(sorted(points, key=lambda p: p.risk), failed, len(todo))
