"""Algorithmic baselines that the trained models are compared with.

* :func:`gd_one_step`: one gradient step on the context least-squares loss from any ``w0``,
  ``w1 = w0 - (eta/C) X^T (X w0 - y)``, and its prediction ``w1^T x_q``.
* :func:`gd_one_step_risk` and :func:`gd_optimal_eta`: its exact population risk and the optimal step
  (closed form, derived below), for any prior ``N(mu, Omega)``, input covariance ``Sigma``, label noise.
* :func:`bayes_posterior_mean`: the Bayes-optimal predictor under a Gaussian prior.
* :func:`ridge`: ridge regression on the context.

Multi-step preconditioned GD and GD++ (Part III) live in :mod:`iclgd.linear_transformer`, beside the
transformer that implements them; Part II's basis ridge regressions in :mod:`iclgd.representation`.

Exact risk of one GD step. Write ``G = X^T X / C``, ``delta = w0 - w_hat`` and ``eps`` the label noise
(std ``sigma``). Then ``w1 - w_hat = (I - eta G) delta + (eta/C) X^T eps`` and, with ``x_q ~ N(0, Sigma)``
and a noisy target, ``R(eta) = E[(w1 - w_hat)^T Sigma (w1 - w_hat)] + sigma^2``. With
``D = E[delta delta^T] = Omega + (w0 - mu)(w0 - mu)^T`` and the Wishart moment
``E[G D G] = (1 + 1/C) Sigma D Sigma + tr(D Sigma) Sigma / C``::

    R(eta) = tr(Sigma D) - 2 eta tr(Sigma^2 D)
             + eta^2 [ (1 + 1/C) tr(Sigma^3 D) + (tr(Sigma D) + sigma^2) tr(Sigma^2) / C ] + sigma^2,

a quadratic in ``eta`` minimised at ``eta* = tr(Sigma^2 D) / [ ... ]``. For Part I
(``Sigma = Omega = I``, ``w0 = mu``, no noise) this gives ``eta* = C / (C + d + 1)`` and
``R(eta*) = d (d + 1) / (C + d + 1)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _validate as v
from .tasks import Prior, TaskBatch

__all__ = ["gd_one_step", "gd_one_step_risk", "gd_optimal_eta", "bayes_posterior_mean", "ridge"]


def _check_xyq(X, y, x_q):
    v.shape("X", X, (None, None, None), "(B, C, d)")
    B, C, d = X.shape
    v.shape("y", y, (B, C), f"({B}, {C})")
    v.shape("x_q", x_q, (B, d), f"({B}, {d})")
    return B, C, d


def gd_one_step(X: jax.Array, y: jax.Array, x_q: jax.Array, w0, eta: float) -> jax.Array:
    """Prediction of one GD step from ``w0``: ``(w0 - (eta/C) X^T (X w0 - y))^T x_q``.

    Args:
        X: ``(B, C, d)`` context inputs.
        y: ``(B, C)`` context labels.
        x_q: ``(B, d)`` queries.
        w0: ``(d,)`` starting point, shared by all prompts, or ``(B, d)``.
        eta: step size.

    Returns:
        ``(B,)`` predictions.
    """
    B, C, d = _check_xyq(X, y, x_q)
    w0 = jnp.asarray(w0, dtype=float)
    if w0.shape not in ((d,), (B, d)):
        raise ValueError(f"w0 must have shape ({d},) or ({B}, {d}), got shape {tuple(w0.shape)}")
    w0 = jnp.broadcast_to(w0, (B, d))
    resid = jnp.einsum("bcd,bd->bc", X, w0) - y
    w1 = w0 - (eta / C) * jnp.einsum("bcd,bc->bd", X, resid)
    return jnp.einsum("bd,bd->b", w1, x_q)


def _gd_quadratic(prior: Prior, C: int, w0):
    d = prior.d
    C = v.positive_int("C", C)
    w0 = prior.mu if w0 is None else jnp.asarray(v.shape("w0", w0, (d,), f"({d},)"), dtype=float)
    S = prior.Sigma
    dm = w0 - prior.mu
    D = prior.Omega + jnp.outer(dm, dm)
    s2 = prior.noise_std**2
    S2 = S @ S
    a0 = jnp.trace(S @ D) + s2
    a1 = jnp.trace(S2 @ D)
    a2 = (1 + 1 / C) * jnp.trace(S2 @ S @ D) + (jnp.trace(S @ D) + s2) * jnp.trace(S2) / C
    return a0, a1, a2


def gd_one_step_risk(prior: Prior, C: int, eta, w0=None) -> jax.Array:
    """Exact population risk of one GD step (see the module docstring for the derivation).

    Args:
        prior: task distribution (``mu``, ``Sigma``, ``Omega``, ``noise_std``).
        C: context length.
        eta: step size (scalar or array; broadcast).
        w0: ``(d,)`` starting point; default the prior mean ``mu``.

    Returns:
        ``E[(w1^T x_q - y)^2]`` with the same shape as ``eta``.
    """
    if not isinstance(prior, Prior):
        raise ValueError(f"prior must be an iclgd.tasks.Prior (use make_prior), got {type(prior).__name__}")
    a0, a1, a2 = _gd_quadratic(prior, C, w0)
    eta = jnp.asarray(eta, dtype=float)
    return a0 - 2 * eta * a1 + eta**2 * a2


def gd_optimal_eta(prior: Prior, C: int, w0=None) -> tuple[jax.Array, jax.Array]:
    """The step size that minimises :func:`gd_one_step_risk`, and that minimal risk.

    Returns:
        ``(eta_star, risk_star)``.
    """
    if not isinstance(prior, Prior):
        raise ValueError(f"prior must be an iclgd.tasks.Prior (use make_prior), got {type(prior).__name__}")
    a0, a1, a2 = _gd_quadratic(prior, C, w0)
    eta = a1 / a2
    return eta, a0 - a1**2 / a2


def bayes_posterior_mean(tasks: TaskBatch, prior: Prior) -> jax.Array:
    """Bayes-optimal prediction ``E[w_hat | X, y]^T x_q`` under the Gaussian prior.

    ``E[w_hat | X, y] = mu + Omega X^T (X Omega X^T + sigma^2 I)^+ (y - X mu)`` (a pseudo-inverse, so
    the noise-free case with ``C > d`` is covered: the posterior mean then interpolates).

    Returns:
        ``(B,)`` predictions.
    """
    X, y, x_q = tasks.X, tasks.y, tasks.x_q
    B, C, d = _check_xyq(X, y, x_q)
    if prior.d != d:
        raise ValueError(f"prior must have dimension d = {d} to match tasks.X, got d = {prior.d}")
    K = jnp.einsum("bcd,de,bke->bck", X, prior.Omega, X) + prior.noise_std**2 * jnp.eye(C)
    r = y - X @ prior.mu
    alpha = jnp.einsum("bck,bk->bc", jnp.linalg.pinv(K, hermitian=True), r)
    w = prior.mu + jnp.einsum("de,bce,bc->bd", prior.Omega, X, alpha)
    return jnp.einsum("bd,bd->b", w, x_q)


def ridge(X: jax.Array, y: jax.Array, x_q: jax.Array, lam: float) -> jax.Array:
    """Ridge regression on the context: ``w = (X^T X + lam I)^{-1} X^T y``, prediction ``w^T x_q``.

    Args:
        X, y, x_q: ``(B, C, d)``, ``(B, C)``, ``(B, d)``.
        lam: regularisation ``> 0``.

    Returns:
        ``(B,)`` predictions.
    """
    _, _, d = _check_xyq(X, y, x_q)
    lam = v.nonneg_float("lam", lam)
    if lam == 0:
        raise ValueError("lam must be > 0 (use bayes_posterior_mean for the interpolating limit), got 0")
    A = jnp.einsum("bcd,bce->bde", X, X) + lam * jnp.eye(d)
    w = jnp.linalg.solve(A, jnp.einsum("bcd,bc->bd", X, y)[..., None])[..., 0]
    return jnp.einsum("bd,bd->b", w, x_q)
