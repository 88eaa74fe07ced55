"""Algorithmic baselines that the trained models are compared with.

* :func:`gd_one_step`: one gradient step on the context least-squares loss from any ``w0``,
  ``w1 = w0 - (eta/C) X^T (X w0 - y)``, and its prediction ``w1^T x_q`` (Xie et al. eq. 9).
* :func:`bayes_posterior_mean`: the Bayes-optimal predictor under a Gaussian prior.
* :func:`ridge_weights` and :func:`ridge`: ridge regression on the context -- the one ridge of
  iclgd, also behind Part II's eq. 20 and eq. 25 (:mod:`iclgd.representation`).

The exact risk of one GD step and its optimal step size are in :mod:`iclgd.exact`
(:func:`iclgd.exact.gd_risk`, :func:`iclgd.exact.gd_optimal`); the chapter "The shared setting"
derives them. Multi-step preconditioned GD and GD++ (Part III) live in
:mod:`iclgd.models.linear_transformer`, beside the transformer that implements them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import checks as v
from .tasks import Prior, TaskBatch, check_batch, check_prior

__all__ = ["gd_one_step", "bayes_posterior_mean", "ridge_weights", "ridge"]


def _check_xyq(X, y, x_q) -> tuple:
    """``X (B, C, d)``, ``y (B, C)``, ``x_q (B, d)``: real, finite, every size >= 1; returns them
    as arrays and the bound sizes."""
    dims = v.Dims()
    X = jnp.asarray(v.array("X", X, "B C d", dims))
    y = jnp.asarray(v.array("y", y, "B C", dims))
    x_q = jnp.asarray(v.array("x_q", x_q, "B d", dims))
    return X, y, x_q, dims


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
    X, y, x_q, dims = _check_xyq(X, y, x_q)
    B, C, d = dims["B"], dims["C"], dims["d"]
    w0 = jnp.asarray(v.array("w0", w0), dtype=float)
    if w0.shape not in ((d,), (B, d)):
        raise ValueError(f"w0 must have shape ({d},) or ({B}, {d}), got shape {tuple(w0.shape)}")
    eta = v.scalar("eta", eta)
    w0 = jnp.broadcast_to(w0, (B, d))
    resid = jnp.einsum("bcd,bd->bc", X, w0) - y
    w1 = w0 - (eta / C) * jnp.einsum("bcd,bc->bd", X, resid)
    return jnp.einsum("bd,bd->b", w1, x_q)


def bayes_posterior_mean(tasks: TaskBatch, prior: Prior) -> jax.Array:
    """Bayes-optimal prediction ``E[w_hat | X, y]^T x_q`` under the Gaussian prior.

    ``E[w_hat | X, y] = mu + Omega X^T (X Omega X^T + sigma^2 I)^+ (y - X mu)`` (a pseudo-inverse,
    so the noise-free case with ``C > d`` is covered: the posterior mean then interpolates).

    Returns:
        ``(B,)`` predictions.
    """
    B, C, d = check_batch(tasks)
    X, y, x_q = tasks.X, tasks.y, tasks.x_q
    check_prior(prior)
    if prior.d != d:
        raise ValueError(f"prior must have dimension d = {d} to match tasks.X, got d = {prior.d}")
    K = jnp.einsum("bcd,de,bke->bck", X, prior.Omega, X) + prior.noise_std**2 * jnp.eye(C)
    r = y - X @ prior.mu
    alpha = jnp.einsum("bck,bk->bc", jnp.linalg.pinv(K, hermitian=True), r)
    w = prior.mu + jnp.einsum("de,bce,bc->bd", prior.Omega, X, alpha)
    return jnp.einsum("bd,bd->b", w, x_q)


def ridge_weights(X: jax.Array, y: jax.Array, reg) -> jax.Array:
    """Ridge regression on each prompt's context, batched.

    ``w = argmin_w 1/(2C) sum_i (y_i - w^T x_i)^2 + reg/2 ||w||^2
    = (X^T X + C reg I_d)^{-1} X^T y``, computed in the ``C x C`` (dual) form
    ``X^T (X X^T + C reg I_C)^{-1} y`` when ``C <= d`` and in the ``d x d`` (primal) form otherwise
    (a static, shape-based choice). So ``reg = 0`` gives the minimum-norm interpolant (``C <= d``,
    ``X`` of full row rank) or least squares (``C > d``).

    Args:
        X: ``(B, C, d)`` context inputs, or ``(C, d)`` shared by every prompt (Part II's features).
        y: ``(B, C)`` context labels.
        reg: regularisation weight ``>= 0`` (a scalar; may be traced).

    Returns:
        ``(B, d)`` ridge weights.

    Raises:
        ValueError: for shape mismatches, a negative or non-finite ``reg``, non-finite data, or (on
            concrete inputs) a singular system with ``reg = 0``.
    """
    X = v.array("X", X, finite=False)
    if X.ndim not in (2, 3):
        raise ValueError(f"X must have shape (B, C, d) or (C, d), got shape {tuple(X.shape)}")
    dims = v.Dims()
    v.array("X", X, "B C d" if X.ndim == 3 else "C d", dims)
    v.array("y", y, "B C", dims, what=f"to match X of shape {tuple(X.shape)}")
    reg = v.scalar("reg", reg, nonneg=True)
    X, y = jnp.asarray(X), jnp.asarray(y)
    if not (v.is_tracer(X) or v.is_tracer(reg)):
        _check_ridge_system(X, float(reg))
    return _ridge(X, y, jnp.asarray(reg, dtype=float))


def _check_ridge_system(X: jax.Array, reg: float) -> None:
    """The ridge system ``X X^T + C reg I`` (dual) or ``X^T X + C reg I`` (primal) of every prompt
    must be positive definite in the dtype it is solved in (relative eigenvalue floor, as
    :func:`iclgd.checks.spd_matrix`), else the solve returns garbage or NaN."""
    C, d = X.shape[-2:]
    n = min(C, d)
    eps = float(np.finfo(np.result_type(X.dtype, jnp.asarray(reg).dtype)).eps)
    Xn = np.asarray(X, np.float64)
    K = Xn @ np.swapaxes(Xn, -1, -2) if C <= d else np.swapaxes(Xn, -1, -2) @ Xn
    trace = np.trace(K, axis1=-2, axis2=-1).max()
    if C * reg > n * eps * (trace + C * reg):  # then lam_min >= C reg > n eps lam_max
        return
    lam = np.linalg.eigvalsh(K) + C * reg  # (..., n)
    bad = lam[..., 0] <= n * eps * np.maximum(lam[..., -1], 0.0)
    if np.any(bad):
        where = f" (prompt {int(np.argmax(bad))})" if K.ndim == 3 else ""
        raise ValueError(
            f"ridge regression is singular in {X.dtype}{where}: with reg = {reg:g}, X must have "
            f"full rank (row rank C = {C} if C <= d, column rank d = {d} otherwise), or use "
            "reg > 0"
        )


@jax.jit
def _ridge(X, y, reg):
    C, d = X.shape[-2:]
    c = C * reg
    if C <= d:  # static, shape-based choice: dual form
        K = jnp.einsum("...id,...jd->...ij", X, X) + c * jnp.eye(C)
        K = jnp.broadcast_to(K, (y.shape[0], C, C))
        alpha = jnp.linalg.solve(K, y[..., None])[..., 0]  # (B, C)
        return jnp.einsum("...cd,...c->...d", X, alpha) if X.ndim == 3 else alpha @ X
    A = jnp.einsum("...ci,...cj->...ij", X, X) + c * jnp.eye(d)
    Xy = jnp.einsum("...cd,...c->...d", X, y) if X.ndim == 3 else y @ X
    A = jnp.broadcast_to(A, (y.shape[0], d, d))
    return jnp.linalg.solve(A, Xy[..., None])[..., 0]


def ridge(X: jax.Array, y: jax.Array, x_q: jax.Array, reg) -> jax.Array:
    """Prediction ``w^T x_q`` of :func:`ridge_weights` (same ``reg`` convention).

    Args:
        X: ``(B, C, d)``; y: ``(B, C)``; x_q: ``(B, d)``; reg: ``>= 0``.

    Returns:
        ``(B,)`` predictions.
    """
    X, y, x_q, _ = _check_xyq(X, y, x_q)
    return jnp.einsum("bd,bd->b", ridge_weights(X, y, reg), x_q)
