r"""Exact population risks of one-layer linear attention at finite context length.

Monte Carlo losses cannot settle the papers' finite-context claims: the effects are of order ``1/C``
and ``||w*||^2 / C``, below the sampling noise of a training curve. But the prediction of every
one-layer linear-attention model of Parts I and III is a polynomial in Gaussian data, so its risk is
a polynomial in the parameters whose coefficients are Gaussian moments. This module computes those
moments exactly, for any ``d``, ``C``, prior mean ``mu``, task covariance ``Omega``, input
covariance ``Sigma`` and label noise ``sigma``, and builds from them exact, differentiable, jittable
risks, their exact optima, and losses for :func:`iclgd.train`.

**1. Moments of the context Gram matrix.** With ``z_i = (x_i, y_i)``, ``y_i = w^T x_i + eps_i``,
``G = (1/C) sum_{i<=C} z_i z_i^T`` (``D = d+1``). Write ``omega = (w, 1)`` and ``u_i = (x_i, eps_i)
~ N(0, S)``, ``S = diag(Sigma, sigma^2)``. Then ``z_i = W(omega) u_i`` with ``W = diag(I_d, 0) +
e_D omega^T``, so *given* ``w`` the ``z_i`` are i.i.d. ``N(0, K(w))`` with::

    K(w) = W S W^T = [[Sigma,        Sigma w              ],
                      [w^T Sigma,    w^T Sigma w + sigma^2]],

and the Wishart moments give ``E[G | w] = K`` and
``E[G_mn G_pq | w] = K_mn K_pq + (K_mp K_nq + K_mq K_np) / C``. The context columns are independent
only given ``w``: they share the task, so the expectation over ``w ~ N(mu, Omega)`` is taken last::

    E[G]           = E_w[K],
    E[w_k G]       = E_w[w_k K],
    E[G_mn G_pq]   = E_w[K_mn K_pq] + (E_w[K_mp K_nq] + E_w[K_mq K_np]) / C.

``K`` is quadratic in ``omega``, ``K_mn = sum_{ab} c_{mnab} omega_a omega_b`` with
``c_{mnab} = sum_{a'b'} F_{ma'a} S_{a'b'} F_{nb'b}``, ``F_{ma'a} = [m=a'<D][a=D] + [m=D][a'=a]``, so
these are moments of the non-central Gaussian ``omega ~ N((mu, 1), diag(Omega, 0))`` up to order 4,
given by Isserlis' theorem with a mean shift (:func:`omega_moments`).

*Note on Xie et al. Appendix A.3, eq. 27.* The paper writes
``E[G_mn G_pq] = (1 - 1/C) M_mn M_pq + (1/C) T_mnpq`` with ``M = E[z z^T]``, treating ``z_j`` and
``z_k`` (``j != k``) as independent. They are not: they share ``w``, and
``E[z_j z_j^T (x) z_k z_k^T] = E_w[K (x) K] != M (x) M``. Hence ``E[G (x) G] -> E_w[K (x) K]`` (not
``M (x) M``) as ``C -> infinity``; the tests check the correct form against Monte Carlo.

**2. Risk of any G-linear predictor.** Every model here predicts
``f = <G (x) x~_q, Mt> + v^T x~_q`` with ``x~_q = (x_q, 1)``, a coefficient tensor ``Mt`` of shape
``(D, D, D)`` and a vector ``v`` of shape ``(D,)``. For the multi-head LSA of Xie et al. with
``y_q = x_q^T g + c``, the query column is ``z_q = P~ x~_q`` with ``P~ = [[I_d, 0], [g^T, c]]`` and
``f = y_q + sum_h b_h^T G A_h z_q`` (``b_h`` the last row of ``W^P_h W^V_h``, ``A_h = W^K_h^T W^Q_h``),
so::

    M_{mni} = sum_h b_{h,m} A_{h,ni}   (Xie et al.'s M_i = sum_h b_h a_i^{hT}),
    Mt      = M x_3 P~^T,   Mt_{mnk} = sum_i M_{mni} P~_{ik},     v = (g, c).

The error is ``f - y = x~_q^T phi - eps_q`` with ``phi_k = <G, Mt_k> + v_k - w~_k``,
``w~ = (w, 0)``. Since ``x_q ~ N(0, Sigma)`` is independent of ``(G, w)`` (but the target shares ``w``
with ``G``), ``E_{x_q}`` gives ``E[x~ x~^T] = S~ = diag(Sigma, 1)`` and::

    R = E[phi^T S~ phi] + sigma^2 = tr(Pi^T Gamma Pi S~) + sigma^2,

where ``phi = Pi^T u`` for the data vector ``u = (vech G, w, 1)`` (``vech``: the ``D(D+1)/2`` upper
triangle entries; ``G`` is symmetric, so only ``Mt_k + Mt_k^T`` matters) and
``Gamma = E[u u^T]`` holds all the moments of part 1. The module evaluates it as a sum of squares,
``R = ||F Pi F_S||_F^2 + sigma^2`` with ``F^T F = Gamma`` and ``F_S F_S^T = S~`` factored once in
float64: no cancellation between large terms, so the risk stays accurate in float32 training.

* One GD step from ``w0`` with step ``eta``: ``Mt_{k,n,k} = -eta w0_n`` (``n <= d``),
  ``Mt_{k,D,k} = eta``, ``v = (w0, 0)``. The risk is quadratic in ``eta``; it equals
  :func:`iclgd.baselines.gd_one_step_risk` (tested).
* Part III (Ahn et al. eq. 5-7), one layer, zero query label: ``f = -b^T G A x_q`` with ``b`` the last
  row of ``P`` and ``A = Q[:, :d]``: ``Mt_{mnk} = -b_m A_{nk}`` (``k <= d``), ``v = 0``.

**3. Exact optima.** For fixed ``(g, c)`` the risk is a convex quadratic in ``Mt``: the best multi-head
LSA with ``H >= d+1`` heads (every ``M`` is reachable, Xie et al. Theorem 1) is the least-squares
regression, for each free column ``k``, of the target ``w~_k - v_k`` on ``vech G``::

    beta_k = T^+ E[vech G (w~_k - v_k)],   T = E[vech G vech G^T],

computed with a pseudo-inverse (eigenvalues below ``1e-12 * max`` dropped; ``T`` is positive definite
for a non-degenerate prior, the ``vech`` basis already removes the null space that the symmetry of
``G`` gives). The free columns are ``k <= d`` when ``c = 0`` (then ``P~`` is singular and
``Mt_D = 0``), all ``D`` when ``c != 0``. Because ``T`` does not depend on ``g``, the best risk is a
quadratic in ``g`` too, minimised in closed form (:func:`best_multihead_yq_lsa`). The best single-head
models are not linear in their parameters; :func:`best_yq_lsa` and :func:`best_lsa` minimise the exact
risk with optax's L-BFGS (zoom line search, the optimiser of ``iclgd.train(..., optimizer="lbfgs")``)
from the GD point or random restarts, all starts in one compiled solver. Part III's Theorem 1 is
solved exactly by :func:`best_linear_transformer`. The Bayes posterior mean's risk is
:func:`bayes_risk` (closed form where one exists, otherwise a Rao-Blackwellised Monte Carlo value).

**4. Training on the exact risk.** :func:`lsa_loss`, :func:`yq_lsa_loss` and
:func:`linear_transformer_loss` return ``loss(params, key)`` that ignores the key, for
:func:`iclgd.train`::

    import jax, jax.numpy as jnp, iclgd
    from iclgd import exact
    prior = iclgd.make_prior(10, mu=jnp.ones(10))            # Part I, ||w*||^2 = 10
    ex = exact.prepare(prior, C=10)                          # moments, once (float64)
    p0 = iclgd.init_lsa(jax.random.key(0), 10, H=1)
    sampled = iclgd.train(iclgd.sampled_loss(lambda p, t: iclgd.lsa_predict(p, iclgd.embed(t)),
                                             prior, 10, 2048), p0, jax.random.key(1), steps=2000)
    exact_run = iclgd.train(exact.lsa_loss(ex), p0, jax.random.key(1), steps=2000)
    # exact_run.losses is the population risk along the exact-gradient path;
    # exact.lsa_risk(sampled.params, ex) is the true risk of the sampled run's final weights.
    # exact.best_multihead_lsa(ex).risk is the floor that H >= d+1 heads can reach.

**5. What the exact risks show** (Part I setting ``Sigma = Omega = I``, noise-free; each item is a
test in ``tests/test_exact.py``, exact to ~1e-12):

* *y_q-LSA and one GD step coincide at every finite C.* With the finite-``C`` optimal step
  ``eta* = C / (C + d + 1)``, Xie et al.'s construction (eq. 7, ``w = w*``) has zero gradient, and its
  risk ``d (d+1) / (C + d + 1)`` equals the best multi-head y_q-LSA (any ``H``, trainable ``g``), a
  lower bound for y_q-LSA: it is the global optimum, not only asymptotically (Theorem 4, App. A.3).
* *Multi-head LSA with y_q = 0 stays above one GD step, by exactly* ``2 ||w*||^2 / (d C + 2)``
  (found numerically to 1e-12 over many ``(d, C, w*)``; not derived here). The gap vanishes as
  ``C -> infinity``, at the same ``1/C`` rate as both risks (ratio ``-> 2 ||w*||^2 / (d^2 (d+1))``).
* *Theorem 2 (no stationary point as C -> infinity) does not hold for the true risk.* At every ``C``
  the risk is a strictly convex quadratic in (the symmetric parts of) ``M_i``, so its minimiser is a
  stationary point of the ``H >= d+1``-head model; and as ``C -> infinity`` the risk tends to
  ``E[(sum_i x_{q,i} <K(w), M_i> - w^T x_q)^2]``, which ``M_i = e_D (Sigma^{-1} e_i, 0)^T`` (read
  ``w = Sigma^{-1} G_{xy}``) drives to 0. The proof's ``E[G (x) G] = M (x) M`` (eq. 23, 27) drops the
  fluctuation of ``K(w)`` across tasks, the same independence error as in part 1.

**Precision.** :func:`prepare` and the ``best_*`` solvers compute in float64 (inside
``jax.enable_x64``) and return NumPy float64 arrays / Python floats, whatever the global setting. The
``*_risk`` and ``*_loss`` functions are pure ``jnp`` functions in the ambient precision (float32 by
default), jittable and differentiable in the parameters; enable x64 globally for float64 risks.
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _validate as v
from .tasks import Prior, _standard_normal

__all__ = [
    "Moments",
    "Exact",
    "BestLSA",
    "BestTrained",
    "BayesRisk",
    "omega_moments",
    "gaussian_moments",
    "moments",
    "prepare",
    "predictor_risk",
    "lsa_risk_reduced",
    "lsa_risk",
    "yq_lsa_risk",
    "linear_transformer_risk",
    "gd_risk",
    "gd_optimal",
    "lsa_loss",
    "yq_lsa_loss",
    "linear_transformer_loss",
    "best_multihead_lsa",
    "best_multihead_yq_lsa",
    "best_linear_transformer",
    "best_yq_lsa",
    "best_lsa",
    "bayes_risk",
    "lsa_params_from_M",
    "reduced_to_lsa_params",
]


# ----------------------------------------------------------------------------------------------
# Containers
# ----------------------------------------------------------------------------------------------


class Moments(NamedTuple):
    """Exact moments of one prompt (a pytree of arrays; ``D = d + 1``).

    Attributes:
        EG: ``(D, D)`` ``E[G]``.
        EGG: ``(D, D, D, D)`` ``E[G_mn G_pq]``.
        EwG: ``(d, D, D)`` ``E[w_k G_mn]``.
        Ew: ``(d,)`` ``E[w] = mu``.
        Eww: ``(d, d)`` ``E[w w^T] = Omega + mu mu^T``.
        Sigma: ``(d, d)`` ``E[x_q x_q^T]``.
        noise_var: ``()`` label-noise variance ``sigma^2``.
    """

    EG: jax.Array
    EGG: jax.Array
    EwG: jax.Array
    Ew: jax.Array
    Eww: jax.Array
    Sigma: jax.Array
    noise_var: jax.Array


class Exact(NamedTuple):
    """Everything the exact risks need, precomputed once by :func:`prepare` (NumPy float64).

    Attributes:
        C: context length.
        moments: the :class:`Moments`.
        gram: ``(n_u, n_u)`` ``Gamma = E[u u^T]`` for ``u = (vech G, w, 1)``,
            ``n_u = D(D+1)/2 + d + 1``.
        gram_factor: ``(r, n_u)`` ``F`` with ``F^T F = Gamma`` (eigenvalues below ``1e-14 * max``
            dropped, so ``r <= n_u``).
        x_factor: ``(D, D)`` ``F_S`` with ``F_S F_S^T = diag(Sigma, 1)``.
        noise_var: label-noise variance ``sigma^2``.
        prior: the :class:`~iclgd.tasks.Prior`.
    """

    C: int
    moments: Moments
    gram: np.ndarray
    gram_factor: np.ndarray
    x_factor: np.ndarray
    noise_var: float
    prior: Prior

    @property
    def d(self) -> int:
        """Input dimension ``d``."""
        return int(self.moments.Ew.shape[-1])


class BestLSA(NamedTuple):
    """An exact optimum of a model class that is linear in its features.

    Attributes:
        risk: the minimal risk.
        M: ``(D, D, D)`` Xie et al.'s matrices, ``M[:, :, i] = M_i = sum_h b_h a_i^{hT}``
            (for :func:`best_linear_transformer`: ``Mt``, the coefficients of ``G (x) x~_q``).
        params: model parameters realising it (LSA params with ``H = D`` heads, or Part III's
            ``{"P", "Q"}`` with ``L = 1``).
        y_q_guess: ``(d,)`` the ``g`` of ``y_q = x_q^T g + c`` used.
        y_q_bias: the ``c`` used.
        rank: rank of ``T = E[vech G vech G^T]`` kept by the pseudo-inverse, and its size.
    """

    risk: float
    M: np.ndarray
    params: dict
    y_q_guess: np.ndarray
    y_q_bias: float
    rank: tuple


class BestTrained(NamedTuple):
    """Result of minimising an exact risk with L-BFGS (:func:`best_yq_lsa`, :func:`best_lsa`).

    Attributes:
        risk: the best exact risk found.
        reduced: the reduced parameters ``{"b": (H, D), "A": (H, D, D)[, "w": (d,)]}``.
        params: the same as LSA parameters (``{"attn": ..., "w": ...}`` for y_q-LSA).
        grad_norm: Euclidean norm of the exact gradient in the reduced parameters at the end.
        risks: the final risk of every start (first: the GD point, if used).
        losses: the loss curve of the best start.
    """

    risk: float
    reduced: dict
    params: dict
    grad_norm: float
    risks: np.ndarray
    losses: np.ndarray


class BayesRisk(NamedTuple):
    """Risk of the Bayes posterior mean.

    Attributes:
        risk: the value.
        stderr: its standard error (0 for a closed form).
        method: ``"closed form"`` or ``"monte carlo"`` (see :func:`bayes_risk`).
    """

    risk: float
    stderr: float
    method: str


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _enable_x64():
    """Context manager enabling float64 locally (``jax.enable_x64`` or the older experimental one)."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is not None:
        try:
            return ctx(True)
        except TypeError:  # pragma: no cover
            pass
    try:  # pragma: no cover - older JAX
        from jax.experimental import enable_x64

        return enable_x64()
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()


def _check_prior(prior) -> Prior:
    if not isinstance(prior, Prior):
        raise ValueError(f"prior must be an iclgd.tasks.Prior (use make_prior), got {type(prior).__name__}")
    return prior


def _check_exact(ex) -> "Exact":
    if not isinstance(ex, Exact):
        raise ValueError(f"ex must be an iclgd.exact.Exact (use exact.prepare(prior, C)), got {type(ex).__name__}")
    return ex


def _vech_index(D: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(D)


def _psd_factor_rows(m: np.ndarray, rtol: float) -> np.ndarray:
    """``F`` with ``F^T F = m`` (rows: eigenvectors scaled by sqrt of kept eigenvalues)."""
    m = (m + m.T) / 2
    lam, vec = np.linalg.eigh(m)
    keep = lam > rtol * max(float(lam.max()), 0.0)
    return (vec[:, keep] * np.sqrt(lam[keep])).T


def _pinv_psd(m: np.ndarray, rtol: float = 1e-12) -> tuple[np.ndarray, int]:
    m = (m + m.T) / 2
    lam, vec = np.linalg.eigh(m)
    keep = lam > rtol * max(float(lam.max()), 0.0)
    return (vec[:, keep] / lam[keep]) @ vec[:, keep].T, int(keep.sum())


def _to_np(tree):
    return jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float64), tree)


# ----------------------------------------------------------------------------------------------
# 1. Moments
# ----------------------------------------------------------------------------------------------


def omega_moments(mean: jax.Array, cov: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Raw moments of order 2, 3, 4 of a (non-central) Gaussian vector, by Isserlis' theorem.

    For ``omega = m + xi``, ``xi ~ N(0, V)``::

        E[o_a o_b]         = m_a m_b + V_ab
        E[o_a o_b o_c]     = m_a m_b m_c + m_a V_bc + m_b V_ac + m_c V_ab
        E[o_a o_b o_c o_e] = m_a m_b m_c m_e + (6 terms m m V) + V_ab V_ce + V_ac V_be + V_ae V_bc

    Args:
        mean: ``(n,)``.
        cov: ``(n, n)`` symmetric PSD (may be singular, e.g. ``diag(Omega, 0)``).

    Returns:
        ``(E2 (n, n), E3 (n, n, n), E4 (n, n, n, n))``.
    """
    m = jnp.asarray(mean)
    V = jnp.asarray(cov)
    mm = jnp.outer(m, m)
    E2 = mm + V
    E3 = (
        jnp.einsum("a,b,c->abc", m, m, m)
        + jnp.einsum("a,bc->abc", m, V)
        + jnp.einsum("b,ac->abc", m, V)
        + jnp.einsum("c,ab->abc", m, V)
    )
    E4 = (
        jnp.einsum("ab,ce->abce", mm, mm)
        + jnp.einsum("ab,ce->abce", mm, V)
        + jnp.einsum("ac,be->abce", mm, V)
        + jnp.einsum("ae,bc->abce", mm, V)
        + jnp.einsum("bc,ae->abce", mm, V)
        + jnp.einsum("be,ac->abce", mm, V)
        + jnp.einsum("ce,ab->abce", mm, V)
        + jnp.einsum("ab,ce->abce", V, V)
        + jnp.einsum("ac,be->abce", V, V)
        + jnp.einsum("ae,bc->abce", V, V)
    )
    return E2, E3, E4


def gaussian_moments(mu: jax.Array, Sigma: jax.Array, Omega: jax.Array, noise_std, C) -> Moments:
    r"""Exact moments of ``G`` (and its cross-moments with ``w``) at finite ``C``: pure ``jnp``.

    Jittable and differentiable in all arguments (``C`` may be traced: it only enters as ``1/C``);
    computes in the ambient precision (see :func:`moments` for float64 NumPy output). The derivation is
    in the module docstring, part 1. Cost ``O(D^6)``.

    Args:
        mu: ``(d,)`` prior mean of the task weights.
        Sigma: ``(d, d)`` input covariance.
        Omega: ``(d, d)`` task covariance (PSD).
        noise_std: label-noise standard deviation.
        C: context length (``>= 1``).

    Returns:
        :class:`Moments`.
    """
    mu = jnp.asarray(mu)
    d = mu.shape[0]
    D = d + 1
    Sigma = jnp.asarray(Sigma)
    Omega = jnp.asarray(Omega)
    s2 = jnp.asarray(noise_std) ** 2
    # omega = (w, 1) ~ N((mu, 1), diag(Omega, 0))
    m = jnp.concatenate([mu, jnp.ones((1,), mu.dtype)])
    V = jnp.zeros((D, D), mu.dtype).at[:d, :d].set(Omega)
    E2, E3, E4 = omega_moments(m, V)
    # S = diag(Sigma, sigma^2), F[m, a', a] = [m = a' < D][a = D] + [m = D][a' = a]
    S = jnp.zeros((D, D), mu.dtype).at[:d, :d].set(Sigma).at[d, d].set(s2)
    E0 = jnp.diag(jnp.concatenate([jnp.ones((d,), mu.dtype), jnp.zeros((1,), mu.dtype)]))
    eD = jnp.zeros((D,), mu.dtype).at[d].set(1.0)
    F = jnp.einsum("ij,a->ija", E0, eD) + jnp.einsum("i,ja->ija", eD, jnp.eye(D, dtype=mu.dtype))
    c = jnp.einsum("mia,ij,njb->mnab", F, S, F)  # K_mn = c_mnab omega_a omega_b
    EK = jnp.einsum("mnab,ab->mn", c, E2)
    EoK = jnp.einsum("mnab,kab->kmn", c, E3)  # E[omega_k K_mn]
    EKK = jnp.einsum("mnab,abce,pqce->mnpq", c, E4, c, optimize="optimal")  # E[K_mn K_pq]
    EGG = EKK + (jnp.einsum("mpnq->mnpq", EKK) + jnp.einsum("mqnp->mnpq", EKK)) / C
    return Moments(
        EG=EK,
        EGG=EGG,
        EwG=EoK[:d],
        Ew=mu,
        Eww=Omega + jnp.outer(mu, mu),
        Sigma=Sigma,
        noise_var=s2,
    )


_gaussian_moments_jit = jax.jit(gaussian_moments)


def moments(prior: Prior, C: int) -> Moments:
    """Exact moments for a :class:`~iclgd.tasks.Prior` and context length ``C``, in float64.

    Args:
        prior: task distribution (concrete, not traced).
        C: context length, ``C >= 1``.

    Returns:
        :class:`Moments` of NumPy float64 arrays (``EG (D, D)``, ``EGG (D, D, D, D)``,
        ``EwG (d, D, D)``, ``Ew (d,)``, ``Eww (d, d)``, ``Sigma (d, d)``, ``noise_var ()``).

    Example:
        >>> m = moments(make_prior(2), C=3)
        >>> m.EG            # [[I, mu], [mu^T, tr(Sigma Omega) + mu^T Sigma mu + sigma^2]]
    """
    _check_prior(prior)
    C = v.positive_int("C", C)
    with _enable_x64():
        f = lambda a: jnp.asarray(np.asarray(a, dtype=np.float64))
        out = _gaussian_moments_jit(
            f(prior.mu), f(prior.Sigma), f(prior.Omega), f(prior.noise_std), jnp.asarray(float(C))
        )
        return _to_np(out)


def _gram(mom: Moments) -> np.ndarray:
    """``Gamma = E[u u^T]`` for ``u = (vech G, w, 1)`` (NumPy float64)."""
    D = mom.EG.shape[0]
    d = D - 1
    iu = _vech_index(D)
    p = len(iu[0])
    n = p + d + 1
    T = mom.EGG[iu[0], iu[1]][:, iu[0], iu[1]]
    Gw = mom.EwG[:, iu[0], iu[1]].T  # (p, d)
    Gm = mom.EG[iu]
    g = np.zeros((n, n))
    g[:p, :p] = T
    g[:p, p : p + d] = Gw
    g[p : p + d, :p] = Gw.T
    g[:p, -1] = Gm
    g[-1, :p] = Gm
    g[p : p + d, p : p + d] = mom.Eww
    g[p : p + d, -1] = mom.Ew
    g[-1, p : p + d] = mom.Ew
    g[-1, -1] = 1.0
    return (g + g.T) / 2


def prepare(prior: Prior, C: int) -> Exact:
    """Precompute (float64, once) everything the exact risks of this module need.

    Args:
        prior: task distribution.
        C: context length, ``C >= 1``.

    Returns:
        An :class:`Exact` (NumPy arrays; safe to close over in jitted losses).
    """
    _check_prior(prior)
    C = v.positive_int("C", C)
    mom = moments(prior, C)
    gram = _gram(mom)
    F = _psd_factor_rows(gram, 1e-14)
    d = prior.d
    S = np.zeros((d + 1, d + 1))
    S[:d, :d] = np.asarray(prior.Sigma, dtype=np.float64)
    S[d, d] = 1.0
    FS = np.linalg.cholesky((S + S.T) / 2)
    return Exact(C, mom, gram, F, FS, float(mom.noise_var), prior)


# ----------------------------------------------------------------------------------------------
# 2. Risks
# ----------------------------------------------------------------------------------------------


def _coef_matrix(Mt: jax.Array, vq: jax.Array, d: int) -> jax.Array:
    """``Pi`` (n_u, D): ``phi = Pi^T u`` for ``u = (vech G, w, 1)``."""
    D = d + 1
    iu = _vech_index(D)
    sym = Mt + jnp.swapaxes(Mt, 0, 1)
    scale = np.where(iu[0] == iu[1], 0.5, 1.0)[:, None]
    top = sym[iu[0], iu[1], :] * scale  # (p, D)
    J = -np.eye(d, D)  # the -w~_k rows
    return jnp.concatenate([top, jnp.asarray(J, top.dtype), vq[None, :].astype(top.dtype)], axis=0)


def predictor_risk(Mt: jax.Array, vq: jax.Array, ex: Exact) -> jax.Array:
    r"""Exact risk of the G-linear predictor ``f = <G (x) x~_q, Mt> + vq^T x~_q``, ``x~_q = (x_q, 1)``.

    ``R = E[(f - y)^2] = ||F Pi F_S||_F^2 + sigma^2`` (module docstring, part 2). Pure ``jnp``.

    Args:
        Mt: ``(D, D, D)`` coefficients of ``G_mn x~_{q,k}``.
        vq: ``(D,)`` coefficients of ``x~_q`` (the query guess ``(g, c)``).
        ex: :func:`prepare`'s output.

    Returns:
        ``()`` the risk.
    """
    _check_exact(ex)
    d = ex.d
    D = d + 1
    v.shape("Mt", Mt, (D, D, D), f"({D}, {D}, {D})")
    v.shape("vq", vq, (D,), f"({D},)")
    Mt = jnp.asarray(Mt)
    dt = jnp.result_type(Mt.dtype, jnp.asarray(vq).dtype)
    return _risk_core(Mt.astype(dt), jnp.asarray(vq, dt), *_ex_arrays(ex, dt))


def _ex_arrays(ex: Exact, dt) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(F, F_S, sigma^2)`` as arrays of dtype ``dt`` (float32 unless x64 is enabled)."""
    return (jnp.asarray(ex.gram_factor, dt), jnp.asarray(ex.x_factor, dt), jnp.asarray(ex.noise_var, dt))


@jax.jit
def _risk_core(Mt, vq, F, FS, nv):
    Pi = _coef_matrix(Mt, vq, Mt.shape[0] - 1)
    Y = F @ Pi @ FS
    return jnp.sum(Y * Y) + nv


@jax.jit
def _lsa_risk_core(b, A, g, c, F, FS, nv):
    Mt = _lsa_Mt(b, A, g, c)
    return _risk_core(Mt, jnp.concatenate([g, c[None]]), F, FS, nv)


def _guess(ex: Exact, y_q_guess, y_q_bias) -> tuple[jax.Array, jax.Array]:
    d = ex.d
    if y_q_guess is None:
        g = jnp.zeros((d,))
    else:
        g = jnp.asarray(v.shape("y_q_guess", y_q_guess, (d,), f"({d},)"))
    c = jnp.asarray(y_q_bias)
    if c.ndim != 0:
        raise ValueError(f"y_q_bias must be a scalar, got shape {tuple(c.shape)}")
    return g, c


def _lsa_Mt(b, A, g, c):
    d = g.shape[0]
    D = d + 1
    Pt = jnp.zeros((D, D), A.dtype).at[:d, :d].set(jnp.eye(d, dtype=A.dtype)).at[d, :d].set(g).at[d, d].set(c)
    APt = A @ Pt  # (H, D, D)
    return jnp.einsum("hm,hnk->mnk", b, APt)


def lsa_risk_reduced(b: jax.Array, A: jax.Array, ex: Exact, y_q_guess=None, y_q_bias=0.0) -> jax.Array:
    """Exact risk of multi-head LSA in its reduced parameters, with ``y_q = x_q^T g + c``.

    The prediction is ``y_q + sum_h b_h^T G A_h z_q`` (:func:`iclgd.lsa.lsa_predict`); ``g`` and ``c``
    may be traced (so ``g`` can be trained: y_q-LSA).

    Args:
        b: ``(H, D)`` last rows of ``W^P_h W^V_h``.
        A: ``(H, D, D)`` ``W^K_h^T W^Q_h``.
        ex: :func:`prepare`'s output.
        y_q_guess: ``(d,)`` ``g``; default zeros.
        y_q_bias: scalar ``c``.

    Returns:
        ``()`` the exact risk ``E[(f - y)^2]``.
    """
    _check_exact(ex)
    D = ex.d + 1
    v.shape("b", b, (None, D), f"(H, {D})")
    H = b.shape[0]
    v.shape("A", A, (H, D, D), f"({H}, {D}, {D})")
    g, c = _guess(ex, y_q_guess, y_q_bias)
    A = jnp.asarray(A)
    dt = jnp.result_type(A.dtype, jnp.asarray(b).dtype, g.dtype)
    return _lsa_risk_core(jnp.asarray(b, dt), jnp.asarray(A, dt), jnp.asarray(g, dt), jnp.asarray(c, dt),
                          *_ex_arrays(ex, dt))


def _reduced(params: dict, D: int):
    keys = ("WK", "WQ", "WV", "WP")
    if not isinstance(params, dict) or any(k not in params for k in keys):
        raise ValueError(f"params must be a dict with keys {keys} (see iclgd.init_lsa), got {params!r:.80}")
    H = params["WK"].shape[0] if params["WK"].ndim == 3 else None
    for k in keys:
        v.shape(f"params[{k!r}]", params[k], (H, D, D), f"(H, {D}, {D})")
    b = jnp.einsum("hj,hjk->hk", params["WP"][:, -1, :], params["WV"])
    A = jnp.einsum("hji,hjk->hik", params["WK"], params["WQ"])
    return b, A


def lsa_risk(params: dict, ex: Exact, y_q_guess=None, y_q_bias=0.0) -> jax.Array:
    """Exact risk of multi-head LSA (Xie et al. eq. 6) with ``y_q = x_q^T g + c`` (Sec. 5.1.3).

    Args:
        params: ``{"WK", "WQ", "WV", "WP"}`` each ``(H, D, D)`` (:func:`iclgd.init_lsa`).
        ex: :func:`prepare`'s output.
        y_q_guess: ``(d,)`` ``g`` (``y_q_guess``); default zeros (``y_q = c``).
        y_q_bias: scalar ``c`` (``y_q_bias``); default 0.

    Returns:
        ``()`` the exact risk; equals the Monte Carlo limit of ``mse(lsa_predict(params, embed(t,
        y_q)), t.y_target)``.
    """
    _check_exact(ex)
    _reduced(params, ex.d + 1)  # validates
    g, c = _guess(ex, y_q_guess, y_q_bias)
    dt = jnp.result_type(*[jnp.asarray(params[k]).dtype for k in ("WK", "WQ", "WV", "WP")], g.dtype)
    p = {k: jnp.asarray(params[k], dt) for k in ("WK", "WQ", "WV", "WP")}
    return _lsa_params_risk_core(p, jnp.asarray(g, dt), jnp.asarray(c, dt), *_ex_arrays(ex, dt))


@jax.jit
def _lsa_params_risk_core(p, g, c, F, FS, nv):
    b = jnp.einsum("hj,hjk->hk", p["WP"][:, -1, :], p["WV"])
    A = jnp.einsum("hji,hjk->hik", p["WK"], p["WQ"])
    return _lsa_risk_core(b, A, g, c, F, FS, nv)


def yq_lsa_risk(params: dict, ex: Exact) -> jax.Array:
    """Exact risk of y_q-LSA (Xie et al. Definition 3): LSA with ``y_q = w^T x_q``, ``w`` trainable.

    Args:
        params: ``{"attn": LSA params, "w": (d,)}`` (:func:`iclgd.init_yq_lsa`).
        ex: :func:`prepare`'s output.

    Returns:
        ``()`` the exact risk.
    """
    if not isinstance(params, dict) or "attn" not in params or "w" not in params:
        raise ValueError("params must be a dict {'attn': LSA params, 'w': (d,)} (see iclgd.init_yq_lsa)")
    return lsa_risk(params["attn"], ex, y_q_guess=params["w"], y_q_bias=0.0)


def linear_transformer_risk(params: dict, ex: Exact) -> jax.Array:
    """Exact risk of Part III's one-layer linear transformer (Ahn et al. eq. 5-7), zero query label.

    The prediction is ``-[Z_1]_{d+1, n+1} = -b^T G A x_q`` with ``b = P[-1, :]``, ``A = Q[:, :d]``.

    Args:
        params: ``{"P": (1, D, D), "Q": (1, D, D)}`` (one layer of
            :func:`iclgd.linear_transformer.init_linear_transformer`), or the reduced
            ``{"b": (D,), "A": (D, d)}`` of eq. 7.
        ex: :func:`prepare`'s output.

    Returns:
        ``()`` the exact risk ``E[(-[Z_1]_{d+1,n+1} - y)^2]``.
    """
    _check_exact(ex)
    d = ex.d
    D = d + 1
    if isinstance(params, dict) and "b" in params and "A" in params:
        b = jnp.asarray(v.shape("params['b']", params["b"], (D,), f"({D},)"))
        A = jnp.asarray(v.shape("params['A']", params["A"], (D, d), f"({D}, {d})"))
    elif isinstance(params, dict) and "P" in params and "Q" in params:
        v.shape("params['P']", params["P"], (1, D, D), f"(1, {D}, {D}) (exact risks are for one layer)")
        v.shape("params['Q']", params["Q"], (1, D, D), f"(1, {D}, {D}) (exact risks are for one layer)")
        b = jnp.asarray(params["P"])[0, -1, :]
        A = jnp.asarray(params["Q"])[0, :, :d]
    else:
        raise ValueError("params must be {'P': (1, D, D), 'Q': (1, D, D)} or {'b': (D,), 'A': (D, d)}")
    dt = jnp.result_type(b.dtype, A.dtype)
    return _lt_risk_core(b.astype(dt), A.astype(dt), *_ex_arrays(ex, dt))


@jax.jit
def _lt_risk_core(b, A, F, FS, nv):
    D, d = A.shape
    Mt = jnp.concatenate([-jnp.einsum("m,nk->mnk", b, A), jnp.zeros((D, D, 1), A.dtype)], axis=2)
    return _risk_core(Mt, jnp.zeros((D,), A.dtype), F, FS, nv)


def _gd_M1(w0, xp=jnp):
    """``Mt`` per unit step of one GD step from ``w0``: ``f = w0^T x_q - eta (G_xx w0 - G_xy)^T x_q``,
    i.e. ``Mt[k, n, k] = -w0_n`` (``n <= d``), ``Mt[k, D, k] = 1``."""
    d = w0.shape[0]
    eye = xp.eye(d, dtype=w0.dtype)
    # rows m = k (one-hot e_k), columns n: (-w0, 1), third index k
    col = xp.concatenate([-w0, xp.ones((1,), w0.dtype)])  # (D,)
    top = xp.einsum("mk,n->mnk", eye, col)  # (d, D, d)
    M1 = xp.concatenate([top, xp.zeros((1, d + 1, d), w0.dtype)], axis=0)  # (D, D, d)
    return xp.concatenate([M1, xp.zeros((d + 1, d + 1, 1), w0.dtype)], axis=2)


@jax.jit
def _gd_risk_core(eta, w0, F, FS, nv):
    vq = jnp.concatenate([w0, jnp.zeros((1,), w0.dtype)])
    return _risk_core(eta * _gd_M1(w0), vq, F, FS, nv)


def gd_risk(ex: Exact, eta, w0=None) -> jax.Array:
    """Exact risk of one GD step ``w1 = w0 - (eta/C) X^T (X w0 - y)``, prediction ``w1^T x_q``.

    Computed from the moments as a G-linear predictor (independently of
    :func:`iclgd.baselines.gd_one_step_risk`, which it reproduces).

    Args:
        ex: :func:`prepare`'s output.
        eta: scalar step size (may be traced).
        w0: ``(d,)`` start; default the prior mean ``mu``.

    Returns:
        ``()`` the exact risk.
    """
    _check_exact(ex)
    d = ex.d
    w0 = jnp.asarray(ex.prior.mu if w0 is None else v.shape("w0", w0, (d,), f"({d},)"))
    eta = jnp.asarray(eta)
    if eta.ndim != 0:
        raise ValueError(f"eta must be a scalar, got shape {tuple(eta.shape)}")
    dt = jnp.result_type(w0.dtype, eta.dtype, float)
    return _gd_risk_core(eta.astype(dt), w0.astype(dt), *_ex_arrays(ex, dt))


def _coef_matrix_np(Mt: np.ndarray, vq: np.ndarray, d: int, with_w: bool = True) -> np.ndarray:
    D = d + 1
    iu = _vech_index(D)
    sym = Mt + np.swapaxes(Mt, 0, 1)
    top = sym[iu[0], iu[1], :] * np.where(iu[0] == iu[1], 0.5, 1.0)[:, None]
    J = -np.eye(d, D) if with_w else np.zeros((d, D))
    return np.concatenate([top, J, vq[None, :]], axis=0)


def gd_optimal(ex: Exact, w0=None) -> tuple[float, float]:
    """Optimal step of one GD step from ``w0`` and its risk, from the exact quadratic in ``eta``.

    With ``Y(eta) = Y0 + eta Y1`` (the sum-of-squares form, NumPy float64),
    ``eta* = -<Y0, Y1> / ||Y1||^2`` and ``R* = ||Y0||^2 + eta* <Y0, Y1> + sigma^2``.

    Returns:
        ``(eta_star, risk_star)`` as floats.
    """
    _check_exact(ex)
    d = ex.d
    w0 = np.asarray(ex.prior.mu if w0 is None else v.shape("w0", w0, (d,), f"({d},)"), np.float64)
    M1 = _gd_M1(w0, np)
    vq = np.concatenate([w0, [0.0]])
    F, FS = ex.gram_factor, ex.x_factor
    Y0 = F @ _coef_matrix_np(np.zeros_like(M1), vq, d) @ FS
    Y1 = F @ _coef_matrix_np(M1, np.zeros_like(vq), d, with_w=False) @ FS
    a1 = float(np.sum(Y0 * Y1))
    a2 = float(np.sum(Y1 * Y1))
    eta = -a1 / a2
    return eta, float(np.sum(Y0 * Y0)) + eta * a1 + ex.noise_var


def lsa_loss(ex: Exact, y_q_guess=None, y_q_bias=0.0) -> Callable:
    """``loss(params, key)`` = :func:`lsa_risk` (the key is ignored), for :func:`iclgd.train`."""
    _check_exact(ex)
    _guess(ex, y_q_guess, y_q_bias)
    return lambda params, key=None: lsa_risk(params, ex, y_q_guess, y_q_bias)


def yq_lsa_loss(ex: Exact) -> Callable:
    """``loss(params, key)`` = :func:`yq_lsa_risk` (the key is ignored), for :func:`iclgd.train`."""
    _check_exact(ex)
    return lambda params, key=None: yq_lsa_risk(params, ex)


def linear_transformer_loss(ex: Exact) -> Callable:
    """``loss(params, key)`` = :func:`linear_transformer_risk` (key ignored), for :func:`iclgd.train`."""
    _check_exact(ex)
    return lambda params, key=None: linear_transformer_risk(params, ex)


# ----------------------------------------------------------------------------------------------
# 3. Exact optima
# ----------------------------------------------------------------------------------------------


def _xp(*arrays):
    return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def lsa_params_from_M(M) -> dict:
    """LSA weights with ``H = D`` heads realising given matrices ``M_i`` (Xie et al. App. A.1).

    Head ``h`` has ``b_h = e_h`` (``W^V = I``, ``W^P = e_D e_h^T``) and ``A_h[n, i] = M_i[h, n]``
    (``W^K = I``, ``W^Q = A_h``), so ``sum_h b_h a_i^{hT} = M_i``.

    Args:
        M: ``(D, D, D)`` with ``M[:, :, i] = M_i`` (NumPy in, NumPy out; a JAX array gives JAX arrays).

    Returns:
        ``{"WK", "WQ", "WV", "WP"}`` each ``(D, D, D)``.
    """
    xp = _xp(M)
    M = xp.asarray(M)
    if M.ndim != 3 or not (M.shape[0] == M.shape[1] == M.shape[2]):
        raise ValueError(f"M must have shape (D, D, D), got shape {tuple(M.shape)}")
    D = M.shape[0]
    eye = xp.eye(D, dtype=M.dtype)
    eyes = xp.einsum("h,ij->hij", xp.ones(D, M.dtype), eye)
    WP = xp.einsum("i,hj->hij", eye[D - 1], eye)  # W^P_h = e_D e_h^T
    return {"WK": eyes, "WQ": M, "WV": eyes, "WP": WP}


def reduced_to_lsa_params(b, A) -> dict:
    """LSA weights with the given reduced parameters: ``W^V = I``, ``W^P = [[0], [b_h^T]]``, ``W^K = I``,
    ``W^Q = A_h``.

    Args:
        b: ``(H, D)``; A: ``(H, D, D)`` (NumPy in, NumPy out; JAX arrays give JAX arrays).

    Returns:
        ``{"WK", "WQ", "WV", "WP"}`` each ``(H, D, D)``.
    """
    xp = _xp(b, A)
    b = xp.asarray(b)
    v.shape("b", b, (None, None), "(H, D)")
    H, D = b.shape
    A = xp.asarray(v.shape("A", A, (H, D, D), f"({H}, {D}, {D})"))
    eyes = xp.einsum("h,ij->hij", xp.ones(H, A.dtype), xp.eye(D, dtype=A.dtype))
    WP = xp.einsum("i,hj->hij", xp.eye(D, dtype=b.dtype)[D - 1], b)
    return {"WK": eyes, "WQ": A, "WV": eyes, "WP": WP}


def _solve_columns(ex: Exact, g: np.ndarray, c: float, feat: np.ndarray | None = None):
    """Least squares of the targets ``w~_k - v_k`` on ``vech G`` (or a subset ``feat`` of it)."""
    gram = ex.gram
    d = ex.d
    D = d + 1
    iu = _vech_index(D)
    p = len(iu[0])
    feat = np.arange(p) if feat is None else np.asarray(feat)
    T = gram[np.ix_(feat, feat)]
    Tp, rank = _pinv_psd(T)
    vq = np.concatenate([g, [c]])
    cols = range(D) if c != 0.0 else range(d)
    beta = np.zeros((p, D))
    for k in cols:
        # E[vech G * (w~_k - v_k)]
        ew = gram[feat, p + k] if k < d else np.zeros(len(feat))
        r = ew - vq[k] * gram[feat, -1]
        beta[feat, k] = Tp @ r
    return beta, (rank, len(feat))


def _vech_to_sym(beta: np.ndarray, D: int) -> np.ndarray:
    """Coefficients on ``vech G`` (p, K) -> symmetric ``Mt`` (D, D, K) with the same ``<G, Mt_k>``."""
    iu = _vech_index(D)
    K = beta.shape[1]
    Mt = np.zeros((D, D, K))
    off = iu[0] != iu[1]
    Mt[iu[0], iu[1], :] = np.where(off[:, None], beta / 2, beta)
    Mt[iu[1], iu[0], :] = np.where(off[:, None], beta / 2, beta)
    return Mt


def _risk64(fn, *args) -> float:
    with _enable_x64():
        args = jax.tree_util.tree_map(lambda a: jnp.asarray(np.asarray(a, np.float64)), args)
        return float(fn(*args))


def best_multihead_lsa(ex: Exact, y_q_guess=None, y_q_bias: float = 0.0) -> BestLSA:
    """The best multi-head LSA with ``H >= d+1`` heads and ``y_q = x_q^T g + c``: exact least squares.

    With ``H >= d+1`` every tuple ``(M_1 .. M_D)`` is reachable (Xie et al. Theorem 1), and the risk is
    a convex quadratic in it, minimised column by column (module docstring, part 3). ``T`` is
    inverted with a pseudo-inverse (eigenvalues below ``1e-12 * max`` dropped; the kept rank is
    returned); the antisymmetric part of each ``M_i`` does not affect the prediction and is set to 0.

    Args:
        ex: :func:`prepare`'s output.
        y_q_guess: ``(d,)`` ``g``; default zeros (``y_q = 0`` when also ``c = 0``: Xie et al. Sec. 3).
        y_q_bias: scalar ``c``.

    Returns:
        :class:`BestLSA` with the risk, ``M``, and LSA params with ``H = D`` heads realising it.
    """
    _check_exact(ex)
    d = ex.d
    D = d + 1
    g = np.zeros(d) if y_q_guess is None else np.asarray(v.shape("y_q_guess", y_q_guess, (d,), f"({d},)"), np.float64)
    c = v.finite_float("y_q_bias", y_q_bias)
    beta, rank = _solve_columns(ex, g, c)
    Mt = _vech_to_sym(beta, D)
    # Mt = M x_3 P~^T; invert P~ (c != 0) or use M_D = 0 (c = 0).
    M = np.zeros((D, D, D))
    if c != 0.0:
        M[:, :, d] = Mt[:, :, d] / c
        M[:, :, :d] = Mt[:, :, :d] - M[:, :, d : d + 1] * g[None, None, :]
    else:
        M[:, :, :d] = Mt[:, :, :d]
    params = _to_np(lsa_params_from_M(M))
    risk = _risk64(lambda p, gg: lsa_risk(p, ex, gg, c), params, g)
    return BestLSA(risk, M, params, g, c, rank)


def best_multihead_yq_lsa(ex: Exact) -> BestLSA:
    """The best multi-head LSA (``H >= d+1``) when the guess ``y_q = x_q^T g`` is trained too.

    ``T`` does not depend on ``g`` and the targets ``w_k - g_k`` are affine in ``g``, so the best risk
    over ``M`` is a convex quadratic in ``g``, ``rho g^T Sigma g - 2 g^T Sigma (mu - nu) + const`` with
    ``rho = 1 - E[vech G]^T T^+ E[vech G]`` and ``nu_k = E[vech G]^T T^+ E[vech G w_k]``; its minimiser
    is ``g* = (mu - nu) / rho``. (A bias ``c != 0`` only adds ``rho c^2``, so ``c = 0`` is optimal.)
    This is a lower bound for y_q-LSA with any number of heads.

    Returns:
        :class:`BestLSA` at ``g = g*``.
    """
    _check_exact(ex)
    d = ex.d
    gram = ex.gram
    p = gram.shape[0] - d - 1
    Tp, _ = _pinv_psd(gram[:p, :p])
    m = gram[:p, -1]
    rho = 1.0 - m @ Tp @ m
    nu = gram[:p, p : p + d].T @ Tp @ m
    g = (np.asarray(ex.moments.Ew) - nu) / rho
    return best_multihead_lsa(ex, g, 0.0)


def best_linear_transformer(ex: Exact) -> BestLSA:
    """Part III Theorem 1 solved exactly: the best ``A`` of Ahn et al. eq. 7 for ``b = e_{d+1}``.

    With ``b = e_{d+1}`` the prediction ``-G[d+1, :] A x_q`` is linear in ``A`` (``(D, d)``), so the
    exact risk is minimised by least squares on the features ``G[d+1, n] = (1/C) sum_i y_i z_{i,n}``.
    For ``mu = 0`` (Theorem 1's prior) the best multi-head LSA uses only these features (the risk is
    even in ``w``), so this is the global optimum over all ``(b, A)`` -- and over all ``H`` -- up to
    the rescaling ``b -> gamma b``, ``A -> A / gamma``; the tests check it against
    :func:`best_multihead_lsa` and Theorem 1's formula
    (:func:`iclgd.linear_transformer.theorem1_optimal_A`). For ``mu != 0`` it is the best model in the
    slice ``b = e_{d+1}`` only (polish with L-BFGS on :func:`linear_transformer_risk`).

    Returns:
        :class:`BestLSA` whose ``params`` are ``{"P": (1, D, D), "Q": (1, D, D)}`` (``P = e_D e_D^T``,
        ``Q = [A, 0]``), and ``M`` the coefficient tensor ``Mt``.
    """
    _check_exact(ex)
    d = ex.d
    D = d + 1
    iu = _vech_index(D)
    pos = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(*iu))}
    feat = np.array([pos[(min(n, d), max(n, d))] for n in range(D)])  # G[n, D] for n = 0..d
    beta, rank = _solve_columns(ex, np.zeros(d), 0.0, feat)
    # f = <G, Mt_k> x_k with Mt[D, n, k] = -A[n, k]: coefficient of vech entry (n, D) is -A[n, k].
    A = -beta[feat, :d]
    P = np.zeros((1, D, D))
    P[0, d, d] = 1.0
    Q = np.zeros((1, D, D))
    Q[0, :, :d] = A
    params = {"P": P, "Q": Q}
    Mt = np.zeros((D, D, D))
    Mt[d, :, :d] = -A
    risk = _risk64(lambda pp: linear_transformer_risk(pp, ex), params)
    return BestLSA(risk, Mt, params, np.zeros(d), 0.0, rank)


@partial(jax.jit, static_argnames=("steps",))
def _lbfgs_lsa(starts: dict, F, FS, nv, g, c, train_w, *, steps: int):
    """optax L-BFGS (zoom line search) on the exact LSA risk from every start (``lax.map``).

    ``starts`` is ``{"b": (S, H, D), "A": (S, H, D, D), "w": (S, d)}``; the guess is ``w`` when
    ``train_w`` else the fixed ``g``. One compilation per shape serves every prior and model class.

    Returns:
        ``(final params, final risks (S,), risk curves (S, steps))``.
    """
    import optax

    def loss(p):
        w = jnp.where(train_w, p["w"], g)
        return _lsa_risk_core(p["b"], p["A"], w, c, F, FS, nv)

    opt = optax.lbfgs()
    vg = optax.value_and_grad_from_state(loss)

    def run(p0):
        def step(carry, _):
            p, st = carry
            val, gr = vg(p, state=st)
            upd, st2 = opt.update(gr, st, p, value=val, grad=gr, value_fn=loss)
            p2 = optax.apply_updates(p, upd)
            ok = jnp.isfinite(val) & jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(p2)]))
            keep = lambda a, b: jax.tree_util.tree_map(lambda x, y: jnp.where(ok, x, y), a, b)
            return (keep(p2, p), keep(st2, st)), val

        (p, _), vals = jax.lax.scan(step, (p0, opt.init(p0)), None, length=steps)
        return p, loss(p), vals

    return jax.lax.map(run, starts)  # sequential: compiles faster than vmap, same speed on CPU


def _run_lbfgs(ex: Exact, starts: list, g, c, train_w: bool, steps: int):
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.asarray(np.stack(xs)), *starts)
    dt = stacked["A"].dtype
    p, final, curves = _lbfgs_lsa(stacked, *_ex_arrays(ex, dt), jnp.asarray(g, dt), jnp.asarray(c, dt),
                                  jnp.asarray(train_w), steps=steps)
    final = np.asarray(final)
    risks = np.where(np.isfinite(final), final, np.inf)
    i = int(np.argmin(risks))
    best = jax.tree_util.tree_map(lambda x: x[i], p)
    wfix = best["w"] if train_w else jnp.asarray(g, dt)
    gr = jax.jit(jax.grad(lambda q: lsa_risk_reduced(q["b"], q["A"], ex, q["w"] if train_w else wfix, c)))(best)
    if not train_w:
        gr = {"b": gr["b"], "A": gr["A"]}
    gnorm = float(np.sqrt(sum(float(jnp.sum(x * x)) for x in jax.tree_util.tree_leaves(gr))))
    return _to_np(best), float(risks[i]), gnorm, risks, np.asarray(curves)[i]


def best_yq_lsa(ex: Exact, *, steps: int = 500, restarts: int = 0, key: jax.Array | None = None,
                init_std: float = 0.3) -> BestTrained:
    """Best single-head y_q-LSA found by L-BFGS on the exact risk, starting from the GD point.

    The start is Xie et al.'s construction (eq. 7 with ``w = w*``): ``b = eta* (-w*, 1)``,
    ``A = diag(I_d, 0)``, ``w = w*``, with the exact finite-``C`` optimal step ``eta*`` of one GD step
    from ``w*``. For ``Sigma = Omega = I`` (Part I) this point is exactly stationary at every ``C`` and
    its risk equals the lower bound :func:`best_multihead_yq_lsa` (tested), so it is the global
    optimum; for other priors (e.g. non-isotropic ``Sigma``) L-BFGS moves to a better, preconditioned
    step. ``restarts`` extra starts perturb it with ``N(0, init_std^2)`` noise. The risk is non-convex
    (Lemma 2): in general the result is the best local minimum found; compare it with the bound.

    Args:
        ex: :func:`prepare`'s output.
        steps: L-BFGS iterations per start.
        restarts: number of perturbed extra starts.
        key: PRNG key for the perturbations.
        init_std: perturbation scale.

    Returns:
        :class:`BestTrained` (reduced params ``{"b": (1, D), "A": (1, D, D), "w": (d,)}``).
    """
    _check_exact(ex)
    steps = v.positive_int("steps", steps)
    restarts = v.positive_int("restarts", restarts, 0)
    d = ex.d
    D = d + 1
    mu = np.asarray(ex.prior.mu, np.float64)
    eta, _ = gd_optimal(ex)
    b0 = (eta * np.concatenate([-mu, [1.0]]))[None]
    A0 = np.zeros((1, D, D))
    A0[0, :d, :d] = np.eye(d)
    start = {"b": b0, "A": A0, "w": mu}
    starts = [start]
    key = jax.random.key(0) if key is None else key
    with _enable_x64():
        for k in jax.random.split(key, restarts) if restarts else []:
            noise = np.asarray(_standard_normal(k, (D + D * D + d,)))
            starts.append({"b": b0 + init_std * noise[:D].reshape(1, D),
                           "A": A0 + init_std * noise[D:D + D * D].reshape(1, D, D),
                           "w": mu + init_std * noise[D + D * D:]})
    with _enable_x64():
        red, risk, gnorm, risks, curve = _run_lbfgs(ex, starts, np.zeros(d), 0.0, True, steps)
    params = {"attn": reduced_to_lsa_params(red["b"], red["A"]), "w": red["w"]}
    return BestTrained(risk, red, params, gnorm, risks, curve)


def best_lsa(ex: Exact, H: int = 1, *, restarts: int = 8, steps: int = 500, key: jax.Array | None = None,
             init_std: float = 0.3, y_q_guess=None, y_q_bias: float = 0.0, include_gd: bool = True) -> BestTrained:
    """Best ``H``-head LSA (fixed ``y_q = x_q^T g + c``) by L-BFGS restarts on the exact risk.

    Non-convex for ``H <= d`` (Xie et al. Lemma 1): the best of ``restarts`` random starts (entries
    ``N(0, init_std^2)``) and, if ``include_gd``, the GD-from-0 point ``b = eta e_D``,
    ``A = diag(I_d, 0)``. For ``H >= d+1`` use the exact :func:`best_multihead_lsa` instead.

    Returns:
        :class:`BestTrained` (reduced params ``{"b": (H, D), "A": (H, D, D)}``).
    """
    _check_exact(ex)
    H = v.positive_int("H", H)
    steps = v.positive_int("steps", steps)
    restarts = v.positive_int("restarts", restarts, 0)
    d = ex.d
    D = d + 1
    g = None if y_q_guess is None else np.asarray(y_q_guess, np.float64)
    c = v.finite_float("y_q_bias", y_q_bias)
    starts = []
    if include_gd:
        eta, _ = gd_optimal(ex, np.zeros(d))
        b0 = np.zeros((H, D))
        b0[0, d] = eta
        A0 = np.zeros((H, D, D))
        A0[0, :d, :d] = np.eye(d)
        if H > 1:
            b0[1:] = 1e-3
            A0[1:] = 1e-3
        starts.append({"b": b0, "A": A0})
    key = jax.random.key(0) if key is None else key
    with _enable_x64():
        for k in jax.random.split(key, restarts) if restarts else []:
            noise = np.asarray(_standard_normal(k, (H * D + H * D * D,)))
            starts.append({"b": init_std * noise[: H * D].reshape(H, D),
                           "A": init_std * noise[H * D:].reshape(H, D, D)})
    if not starts:
        raise ValueError("restarts must be >= 1 when include_gd is False")
    gg = np.zeros(d) if g is None else g
    for st in starts:
        st["w"] = gg
    with _enable_x64():
        red, risk, gnorm, risks, curve = _run_lbfgs(ex, starts, gg, c, False, steps)
    red = {"b": red["b"], "A": red["A"]}
    return BestTrained(risk, red, reduced_to_lsa_params(red["b"], red["A"]), gnorm, risks, curve)


# ----------------------------------------------------------------------------------------------
# Bayes posterior mean
# ----------------------------------------------------------------------------------------------


def bayes_risk(prior: Prior, C: int, *, n_mc: int = 200_000, key: jax.Array | None = None) -> BayesRisk:
    """Risk of the Bayes posterior mean ``E[w | X, y]^T x_q`` (:func:`iclgd.baselines.bayes_posterior_mean`).

    ``R = sigma^2 + E_X[tr(Sigma Cov(w | X))]`` with ``Cov(w | X) = Omega - Omega X^T (X Omega X^T +
    sigma^2 I)^+ X Omega``, which does not depend on ``y`` or ``mu``. Whitening with
    ``Omega^{1/2}`` makes the rows of ``X Omega^{1/2}`` ``N(0, Omega^{1/2} Sigma Omega^{1/2})``:

    * **closed form**, noise-free, ``Omega`` positive definite: ``C >= d`` gives ``R = 0`` (``X`` has
      rank ``d``, the task is identified); ``C < d`` with ``Omega^{1/2} Sigma Omega^{1/2} = lam I``
      (e.g. Part I, or Part III's ``Omega = Sigma^{-1}``) gives ``R = (1 - C/d) tr(Sigma Omega)``
      (``E`` of a uniformly random rank-``C`` projection is ``(C/d) I``).
    * **monte carlo** otherwise, in particular with label noise: ``tr(Sigma Cov(w | X))`` is then a
      resolvent trace of a finite real Wishart matrix (e.g. ``lam E tr (I + (lam/sigma^2) W)^{-1}``,
      ``W ~ Wishart_d(C, I)``, in the isotropic case), which has no simple closed form at finite ``C``.
      The estimate averages the conditional risk over ``n_mc`` draws of ``X`` only (Rao-Blackwellised:
      ``w``, ``x_q`` and the noise are integrated exactly), so its standard error, reported in
      ``stderr``, is far smaller than that of averaging squared errors (``~1e-4`` relative at the
      default ``n_mc``).

    Args:
        prior: task distribution.
        C: context length.
        n_mc: Monte Carlo draws (general case only).
        key: PRNG key (general case only).

    Returns:
        :class:`BayesRisk` ``(risk, stderr, method)``.
    """
    _check_prior(prior)
    C = v.positive_int("C", C)
    n_mc = v.positive_int("n_mc", n_mc, 2)
    d = prior.d
    S = np.asarray(prior.Sigma, np.float64)
    Om = np.asarray(prior.Omega, np.float64)
    s2 = float(prior.noise_std) ** 2
    lam_o, U = np.linalg.eigh((Om + Om.T) / 2)
    om_pd = lam_o.min() > 1e-12 * max(lam_o.max(), 1e-300)
    Oh = (U * np.sqrt(np.clip(lam_o, 0, None))) @ U.T
    K = Oh @ S @ Oh
    lam = float(np.trace(K)) / d
    iso = np.allclose(K, lam * np.eye(d), rtol=1e-10, atol=1e-12 * max(abs(lam), 1e-300))
    if s2 == 0.0 and om_pd and C >= d:
        return BayesRisk(0.0, 0.0, "closed form")
    if s2 == 0.0 and om_pd and iso:
        return BayesRisk((1.0 - C / d) * float(np.trace(S @ Om)), 0.0, "closed form")
    # General case: Rao-Blackwellised Monte Carlo over X.
    key = jax.random.key(0) if key is None else key
    LS = np.linalg.cholesky((S + S.T) / 2)
    vals = []
    chunk = 20_000
    with _enable_x64():
        Sj = jnp.asarray(S)
        Omj = jnp.asarray(Om)
        Ohj = jnp.asarray(Oh)
        LSj = jnp.asarray(LS)

        @jax.jit
        def cond_risk(k):
            X = _standard_normal(k, (chunk, C, d)) @ LSj.T
            if s2 > 0.0 and om_pd:  # Cov = O^{1/2} (I + O^{1/2} X^T X O^{1/2} / s2)^{-1} O^{1/2}: d x d
                Wt = jnp.einsum("de,bcd,bcf,fg->beg", Ohj, X, X, Ohj) / s2
                cov = Ohj @ jnp.linalg.inv(jnp.eye(d) + Wt) @ Ohj
            else:  # Omega - Omega X^T (X Omega X^T + s2 I)^+ X Omega: C x C pseudo-inverse
                Kx = jnp.einsum("bcd,de,bke->bck", X, Omj, X) + s2 * jnp.eye(C)
                XO = X @ Omj
                cov = Omj - jnp.einsum("bcd,bck,bke->bde", XO, jnp.linalg.pinv(Kx, hermitian=True), XO)
            return jnp.einsum("de,bed->b", Sj, cov)

        for k in jax.random.split(key, -(-n_mc // chunk)):
            vals.append(np.asarray(cond_risk(k)))
    vals = np.concatenate(vals)[:n_mc]
    return BayesRisk(s2 + float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(len(vals))), "monte carlo")
