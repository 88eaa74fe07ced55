r"""Part III's exact risks (Ahn, Cheng, Daneshmand, Sra 2023): the sparse multi-layer linear
transformer of eq. 9, its optimum on the set of Theorem 4, tuned preconditioned GD, Theorem 1.

**The sparse risk, exactly (eq. 9, App. B.2 eq. 22-23).** With ``P_l = [[0, 0], [0, 1]]`` and
``Q_l = [[A_l, 0], [0, 0]]`` the covariate rows never change and the label row follows
``Y_{l+1} = Y_l (I + (1/n) M X^T A_l X)``. Starting from the *true* query label (App. C.1, Lemma 9:
the residual of eq. 5 is the final query entry) and using ``Xc (I + Xc^T A Xc / n) = (I + S A / n)
Xc`` (``Xc`` the ``n`` context columns, ``S = Xc Xc^T``), the residual is

    [Z_L]_{d+1,n+1} + w*^T x^(n+1) = w*^T T x^(n+1),
    T = (I + S A_0/n)(I + S A_1/n) ... (I + S A_{L-1}/n),

so for ``x ~ N(0, Sigma)``, ``w* ~ N(0, Omega)`` the loss is ``f = E tr(Omega T Sigma T^T)``: a
sum of Wishart trace moments that :mod:`iclgd.exact.wishart` evaluates exactly
(:func:`pgd_risk`).

**On the set S of Theorem 4** (``A_l = a_l Sigma^{-1}``, ``Omega = Sigma^{-1}``) write
``x = Sigma^{1/2} x_bar``: ``T`` becomes ``p(S_bar / n)`` with the scalar polynomial
``p(s) = prod_l (1 + a_l s)`` of a white Wishart matrix, and ``f = E tr p(S_bar/n)^2`` depends on
``Sigma`` not at all (:func:`scalar_risk_expr`). Writing ``p(s) = 1 + sum_k c_k s^k`` the loss is a
convex quadratic in ``c`` with exact rational coefficients ``E tr S_bar^j / n^j``; its minimiser
is exact and the optimal ``a_l = -1/s_l`` come from the roots ``s_l`` of ``p``
(:func:`optimal_scalars`).

GD++ (eq. 13) on the set of Theorem 5 is :mod:`iclgd.exact.gdpp`; the prompts of Secs. 5.3 and
6.1 are :func:`iclgd.tasks.sample_paper_prompts`; ``Dist(M, I)`` is
:func:`iclgd.metrics.dist_to_identity`.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from .. import checks as v
from .wishart import (
    _transpose,
    count_arg,
    expect_trace_word,
    wishart_trace_moment,
)

__all__ = [
    "pgd_risk",
    "pgd_loss",
    "scalar_risk_expr",
    "OptimalScalars",
    "optimal_scalars",
    "TunedGD",
    "tuned_gd",
    "theorem1_optimal_A",
]


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


def pgd_risk(A_list, n, Sigma=None, Omega=None):
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


def pgd_loss(n: int, Sigma=None, Omega=None, *, symmetrize: bool = False):
    """The exact loss of the eq. 9 model as a training objective, ``loss(params, key) -> ()``.

    ``loss(params, key) = pgd_risk(list(params["A"]), n, Sigma, Omega)`` (the key is ignored), for
    the parameters ``{"A": (L, d, d)}`` of ``iclgd.models.linear_transformer_model(d, L,
    form="pgd")``; ``symmetrize=True`` evaluates the model of ``symmetrize=True``, whose layers act
    with ``(A_l + A_l^T) / 2`` (:func:`iclgd.models.linear_transformer.symmetrize`). Under jax,
    ``L <= 2`` (see :func:`pgd_risk`).

    Args:
        n: context examples; Sigma, Omega: as in :func:`pgd_risk`; symmetrize: see above.

    Returns:
        ``loss(params, key) -> ()``, for :func:`iclgd.train` / :func:`iclgd.train_seeds`.
    """
    n = v.positive_int("n", n)
    if not isinstance(symmetrize, bool):
        raise v.ArgumentTypeError(f"symmetrize must be True or False, got {symmetrize!r}")
    for name, C in (("Sigma", Sigma), ("Omega", Omega)):
        if C is not None:
            v.spd_matrix(name, C, np.shape(C)[-1], psd=True, dtype=np.float64)
    from ..models.linear_transformer import symmetrize as _symmetrize

    def loss(params, key):
        v.param_dict("params", params, ("A",), 'a dict {"A": (L, d, d)} (form="pgd")')
        A = _symmetrize(params)["A"] if symmetrize else params["A"]
        return pgd_risk(list(A), n, Sigma, Omega)

    return loss


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
    risk = sp.Rational(d + (g.T * c)[0, 0])  # exact (nsimplify moved it to a nearby surd)
    s = sp.Symbol("s")
    p = 1 + sum(c[k] * s ** (k + 1) for k in range(L))
    roots = np.array([complex(r) for r in sp.Poly(p, s).nroots(n=30)])
    if np.abs(roots.imag).max() > 1e-12:
        raise ValueError(f"the optimal polynomial has complex roots {roots}")
    roots = np.sort(roots.real)
    a = np.sort(-1.0 / roots)
    return OptimalScalars(tuple(c), risk, a, roots)


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
    shared = v.boolean("shared", shared)
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


def theorem1_optimal_A(Sigma, n: int, w_cov: str = "identity") -> jax.Array:
    """Single-layer global optimum of Theorem 1 (eq. 8), as the ``A_0`` of eq. 9.

    **This is the paper's formula, transcribed; a later issue verifies it exactly.**

    With ``b = e_{d+1}`` (i.e. ``P_0 = [[0, 0], [0, 1]]``) and ``Q_0 = [[A, 0], [0, 0]]``:

    * ``w_cov="identity"`` (Theorem 1: ``x ~ N(0, Sigma)``, ``w* ~ N(0, I_d)``,
      ``Sigma = U Lambda U^T``)::

          A = -U diag( 1 / ((n+1)/n * lambda_i + (1/n) sum_k lambda_k) ) U^T        (eq. 8)

      which for ``Sigma = I`` is ``-1 / ((n-1)/n + (d+2)/n) I = -n/(n+d+1) I``.
    * ``w_cov="inverse_sigma"`` (``w* ~ N(0, Sigma^{-1})``, the setting of Theorems 4-5): the paper
      states no Theorem-1 formula for this prior. Writing ``x = Sigma^{1/2} x_bar``,
      ``w* = Sigma^{-1/2} w_bar`` (Sec. 5.2's "distorted view") maps it to the isotropic case, whose
      optimum ``-n/(n+d+1) I`` transforms to ``A = -n/(n+d+1) Sigma^{-1}`` (derived here, not stated
      in the paper).

    The optimum is unique only up to ``b <- gamma b``, ``A <- A / gamma``; ``-A`` is the
    preconditioner of the one GD step (Lemma 2) and ``sparse_predict({"A": A[None]}, Z0)`` is the
    optimal predictor.

    Args:
        Sigma: ``(d, d)`` symmetric positive-definite input covariance.
        n: number of context examples, ``n >= 1``.
        w_cov: ``"identity"`` or ``"inverse_sigma"``, the covariance of ``w*``.

    Returns:
        ``(d, d)`` symmetric negative-definite ``A``.
    """
    v.spd_matrix("Sigma", Sigma)
    Sigma = v.floating(Sigma, np.float64)  # float16 / integers: promoted before the linear algebra
    n = v.positive_int("n", n)
    if w_cov not in ("identity", "inverse_sigma"):
        raise ValueError(f"w_cov must be 'identity' or 'inverse_sigma', got {w_cov!r}")
    S = jnp.asarray(Sigma)
    S = (S + S.T) / 2
    d = S.shape[0]
    lam, U = jnp.linalg.eigh(S)
    if w_cov == "identity":
        diag = 1.0 / ((n + 1) / n * lam + jnp.sum(lam) / n)
    else:
        diag = (n / (n + d + 1)) / lam
    A = -(U * diag) @ U.T
    return (A + A.T) / 2
