"""Exact moments of the context Gram matrix ``G`` and the precomputation :func:`prepare`.

With ``z_i = (x_i, y_i)`` and ``G = (1/C) sum_{i<=C} z_i z_i^T`` (``D = d + 1``), given the task
``w`` the ``z_i`` are i.i.d. ``N(0, K(w))``, ``K(w) = [[Sigma, Sigma w], [w^T Sigma, w^T Sigma w +
sigma^2]]``, and (Wishart moments, then ``E_w`` last, because the columns share ``w``)::

    E[G] = E_w[K],   E[w_k G] = E_w[w_k K],
    E[G_mn G_pq] = E_w[K_mn K_pq] + (E_w[K_mp K_nq] + E_w[K_mq K_np]) / C.

``K`` is quadratic in ``omega = (w, 1) ~ N((mu, 1), diag(Omega, 0))``, so these are Gaussian moments
of order <= 4 (:func:`omega_moments`). The derivation, and why Xie et al.'s eq. 27 (independent
columns) is wrong, are in the book's chapter *The exact risk engine*.

**Centred moments.** The raw moments grow like ``||mu||^4`` and a risk computed from them loses
about ``||mu||^4 eps`` to cancellation. :func:`prepare` therefore keeps the moments of the *centred*
prompt: with ``w = mu + w0``, ``z = W z0`` for ``W = [[I, 0], [mu^T, 1]]`` (``y = y0 + x^T mu``), so
``G = W G0 W^T`` with ``G0`` the Gram matrix of a prompt drawn with prior mean 0, and every
``<G, S> = <G0, W^T S W>`` (as :mod:`iclgd.training.lsa_sweep` does). The risks shift their
coefficients by
``W`` and use ``E[u0 u0^T]``, ``u0 = (vech G0, w0, 1)``, whose size does not depend on ``mu``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..tasks import Prior
from .core import check_prior, enable_x64, psd_factor_rows, to_float64, vech_index

__all__ = [
    "Moments",
    "Exact",
    "check_exact",
    "omega_moments",
    "gaussian_moments",
    "moments",
    "gram_matrix",
    "shift_matrix",
    "prepare",
]


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

    The Gram matrix is that of the centred prompt (module docstring): ``G = W G0 W^T`` with
    ``W = [[I, 0], [mu^T, 1]]`` (:func:`shift_matrix`), ``w = mu + w0``.

    Attributes:
        C: context length.
        moments: the :class:`Moments` of ``G`` itself (raw, not centred).
        gram: ``(n_u, n_u)`` ``Gamma0 = E[u0 u0^T]`` for ``u0 = (vech G0, w - mu, 1)``,
            ``n_u = D(D+1)/2 + d + 1`` (the moments of the prior with mean 0).
        gram_factor: ``(r, n_u)`` ``F`` with ``F^T F = Gamma0`` (eigenvalues below ``1e-14 * max``
            dropped, so ``r <= n_u``).
        x_factor: ``(D, D)`` ``F_S`` with ``F_S F_S^T = diag(Sigma, 1)``.
        noise_var: label-noise variance ``sigma^2``.
        prior: the :class:`~iclgd.tasks.Prior`.
        mu: ``(d,)`` the prior mean (float64), the shift of ``G0``.
    """

    C: int
    moments: Moments
    gram: np.ndarray
    gram_factor: np.ndarray
    x_factor: np.ndarray
    noise_var: float
    prior: Prior
    mu: np.ndarray

    @property
    def d(self) -> int:
        """Input dimension ``d``."""
        return int(self.moments.Ew.shape[-1])


def check_exact(ex) -> Exact:
    """Raise ``ValueError`` unless ``ex`` is an :class:`Exact` (from :func:`prepare`); return it."""
    return v.container("ex", ex, Exact, "an iclgd.exact.Exact (use exact.prepare(prior, C))")


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
    dims = v.Dims()
    m = jnp.asarray(v.array("mean", mean, "n", dims, promote=True))
    V = jnp.asarray(v.array("cov", cov, "n n", dims, promote=True))
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
    computes in the ambient precision (see :func:`moments` for float64 NumPy output). The derivation
    is in the module docstring of :mod:`iclgd.exact.moments`. Cost ``O(D^6)``.

    Args:
        mu: ``(d,)`` prior mean of the task weights.
        Sigma: ``(d, d)`` input covariance.
        Omega: ``(d, d)`` task covariance (PSD).
        noise_std: label-noise standard deviation.
        C: context length (``>= 1``).

    Returns:
        :class:`Moments`.
    """
    dims = v.Dims()
    mu = jnp.asarray(v.array("mu", mu, "d", dims, promote=True))
    Sigma = jnp.asarray(v.array("Sigma", Sigma, "d d", dims, promote=True))
    Omega = jnp.asarray(v.array("Omega", Omega, "d d", dims, promote=True))
    s2 = jnp.asarray(v.scalar("noise_std", noise_std, nonneg=True)) ** 2
    if not v.is_tracer(C) and v.finite_float("C", C) < 1:
        raise ValueError(f"C must be a number >= 1 (the context length), got {C}")
    d = dims["d"]
    D = d + 1
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
        >>> from iclgd.tasks import make_prior
        >>> m = moments(make_prior(2), C=3)
        >>> m.EG.tolist()  # [[I, mu], [mu^T, tr(Sigma Omega) + mu^T Sigma mu + sigma^2]]
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
    """
    check_prior(prior)
    C = v.positive_int("C", C)
    return _moments64(prior.mu, prior, C)


def _moments64(mu, prior: Prior, C: int) -> Moments:
    """:func:`moments` of ``prior`` with its mean replaced by ``mu`` (inputs checked)."""
    with enable_x64():
        f = lambda a: jnp.asarray(np.asarray(a, dtype=np.float64))
        out = _gaussian_moments_jit(
            f(mu), f(prior.Sigma), f(prior.Omega), f(prior.noise_std), jnp.asarray(float(C))
        )
        return to_float64(out)


def gram_matrix(mom: Moments) -> np.ndarray:
    """``Gamma = E[u u^T]`` for ``u = (vech G, w, 1)`` (NumPy float64)."""
    v.container("mom", mom, Moments, "an iclgd.exact.Moments (use exact.moments)")
    D = mom.EG.shape[0]
    d = D - 1
    iu = vech_index(D)
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


def shift_matrix(mu, xp=np):
    """``W = [[I_d, 0], [mu^T, 1]]`` ``(D, D)``: ``z = W z0`` shifts a prompt of prior mean 0 to
    prior mean ``mu`` (``y = y0 + x^T mu``), so ``G = W G0 W^T`` and ``<G, S> = <G0, W^T S W>``."""
    d = mu.shape[0]
    top = xp.concatenate([xp.eye(d, dtype=mu.dtype), xp.zeros((d, 1), mu.dtype)], axis=1)
    bottom = xp.concatenate([mu, xp.ones((1,), mu.dtype)])[None, :]
    return xp.concatenate([top, bottom], axis=0)


def prepare(prior: Prior, C: int) -> Exact:
    """Precompute (float64, once) everything the exact risks of this module need.

    The risks use the moments of the centred prompt (``E[u0 u0^T]``, module docstring), so their
    accuracy does not depend on the size of the prior mean; :attr:`Exact.moments` holds the raw
    moments of ``G``.

    Args:
        prior: task distribution.
        C: context length, ``C >= 1``.

    Returns:
        An :class:`Exact` (NumPy arrays; safe to close over in jitted losses).
    """
    check_prior(prior)
    C = v.positive_int("C", C)
    mom = _moments64(prior.mu, prior, C)
    mu = np.asarray(prior.mu, np.float64)
    mom0 = mom if not mu.any() else _moments64(np.zeros_like(mu), prior, C)
    gram = gram_matrix(mom0)
    F = psd_factor_rows(gram, 1e-14)
    d = prior.d
    S = np.zeros((d + 1, d + 1))
    S[:d, :d] = np.asarray(prior.Sigma, dtype=np.float64)
    S[d, d] = 1.0
    FS = np.linalg.cholesky((S + S.T) / 2)
    return Exact(C, mom, gram, F, FS, float(mom.noise_var), prior, mu)
