"""In-context linear-regression tasks shared by the three papers.

A *prior* fixes the task distribution:

* inputs ``x ~ N(0, Sigma)`` (context inputs ``x_1 .. x_C`` and the query ``x_q``, i.i.d.),
* task weights ``w_hat ~ N(mu, Omega)``, one per prompt,
* labels ``y_i = <w_hat, x_i> + noise_i`` with ``noise_i ~ N(0, noise_std**2)``; the query target
  ``y = <w_hat, x_q> + noise``.

Part I (Xie et al.) uses ``mu = w_star``, ``Sigma = Omega = I``, no noise; Part III (Ahn et al.) uses
``mu = 0``, ``Sigma = U Lambda U^T`` and ``Omega = I`` or ``Sigma^{-1}``.

A :class:`TaskBatch` holds the raw arrays; :func:`embed` builds Part I's embedding (eq. 2) with any
initial guess ``y_q``, and :func:`embed_zero_query` builds Part III's embedding (eq. 1), i.e. ``y_q = 0``.

Shapes: ``B`` batch (prompts), ``C`` context length, ``d`` input dimension.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _validate as v

__all__ = [
    "Prior",
    "TaskBatch",
    "make_prior",
    "sample_tasks",
    "embed",
    "embed_zero_query",
    "linear_guess",
    "unembed",
]


class Prior(NamedTuple):
    """Task distribution of in-context linear regression (a pytree of arrays).

    Attributes:
        mu: ``(d,)`` prior mean of the task weights (Part I's ``w_star``).
        Sigma: ``(d, d)`` covariance of the inputs ``x``.
        Omega: ``(d, d)`` covariance of the task weights ``w_hat``.
        noise_std: ``()`` standard deviation of the label noise (0 = noise-free).
        L_Sigma: ``(d, d)`` lower Cholesky factor of ``Sigma`` (cached for sampling).
        L_Omega: ``(d, d)`` lower Cholesky factor of ``Omega``.
    """

    mu: jax.Array
    Sigma: jax.Array
    Omega: jax.Array
    noise_std: jax.Array
    L_Sigma: jax.Array
    L_Omega: jax.Array

    @property
    def d(self) -> int:
        """Input dimension ``d``."""
        return int(self.mu.shape[-1])


class TaskBatch(NamedTuple):
    """A batch of ICL regression prompts (a pytree of arrays).

    Attributes:
        X: ``(B, C, d)`` context inputs, row ``i`` is ``x_i``.
        y: ``(B, C)`` context labels.
        x_q: ``(B, d)`` query inputs.
        y_target: ``(B,)`` the query's true label (what the model must predict).
        w: ``(B, d)`` the task weights ``w_hat`` of each prompt.
    """

    X: jax.Array
    y: jax.Array
    x_q: jax.Array
    y_target: jax.Array
    w: jax.Array


def make_prior(
    d: int,
    mu=None,
    Sigma=None,
    Omega=None,
    noise_std: float = 0.0,
) -> Prior:
    """Build and validate a :class:`Prior`.

    Args:
        d: input dimension, ``d >= 1``.
        mu: ``(d,)`` prior mean of the task weights; default zeros.
        Sigma: ``(d, d)`` positive-definite input covariance; default identity.
        Omega: ``(d, d)`` positive-definite (or semi-definite) task covariance; default identity.
        noise_std: label-noise standard deviation, ``>= 0``.

    Raises:
        ValueError: naming the argument, if a shape is wrong, a covariance is not symmetric
            positive definite, ``noise_std < 0`` or a value is not finite.

    Example:
        >>> prior = make_prior(10, mu=jnp.ones(10))   # Part I, ||w_star||^2 = 10
    """
    d = v.positive_int("d", d)
    mu = jnp.zeros(d) if mu is None else jnp.asarray(v.finite_array("mu", v.shape("mu", mu, (d,), f"({d},)")), dtype=float)
    Sigma = jnp.eye(d) if Sigma is None else jnp.asarray(v.spd_matrix("Sigma", Sigma, d), dtype=float)
    if Omega is None:
        Omega = jnp.eye(d)
        L_Omega = jnp.eye(d)
    else:
        v.spd_matrix("Omega", Omega, d, psd=True)
        Omega = jnp.asarray(Omega, dtype=float)
        L_Omega = jnp.asarray(_psd_factor(np.asarray(Omega, dtype=np.float64)), dtype=float)
    noise_std = v.nonneg_float("noise_std", noise_std)
    Sigma = (Sigma + Sigma.T) / 2
    return Prior(
        mu=mu,
        Sigma=Sigma,
        Omega=Omega,
        noise_std=jnp.asarray(noise_std, dtype=float),
        L_Sigma=jnp.linalg.cholesky(Sigma),
        L_Omega=L_Omega,
    )


def _psd_factor(m: np.ndarray) -> np.ndarray:
    """A factor ``L`` with ``L L^T = m`` for a PSD matrix (eigendecomposition; exact for PD)."""
    m = (m + m.T) / 2
    eig, vec = np.linalg.eigh(m)
    return vec * np.sqrt(np.clip(eig, 0.0, None))


def sample_tasks(key: jax.Array, prior: Prior, C: int, batch: int) -> TaskBatch:
    """Draw ``batch`` independent prompts with ``C`` context examples each.

    Args:
        key: a JAX PRNG key (any implementation: threefry, rbg, unsafe_rbg).
        prior: the task distribution (:func:`make_prior`).
        C: context length, ``C >= 1``.
        batch: number of prompts ``B >= 1``.

    Returns:
        A :class:`TaskBatch` with ``X (B, C, d)``, ``y (B, C)``, ``x_q (B, d)``,
        ``y_target (B,)``, ``w (B, d)``.
    """
    C = v.positive_int("C", C)
    batch = v.positive_int("batch", batch)
    if not isinstance(prior, Prior):
        raise ValueError(f"prior must be an iclgd.tasks.Prior (use make_prior), got {type(prior).__name__}")
    d = prior.d
    k_x, k_w, k_n = jax.random.split(key, 3)
    # One draw for context and query inputs: (B, C+1, d).
    z = jax.random.normal(k_x, (batch, C + 1, d))
    xs = z @ prior.L_Sigma.T
    eps = jax.random.normal(k_w, (batch, d))
    w = prior.mu + eps @ prior.L_Omega.T
    ys = jnp.einsum("bcd,bd->bc", xs, w)
    ys = ys + prior.noise_std * jax.random.normal(k_n, ys.shape)
    return TaskBatch(X=xs[:, :C], y=ys[:, :C], x_q=xs[:, C], y_target=ys[:, C], w=w)


def linear_guess(x_q: jax.Array, guess=None, bias=0.0) -> jax.Array:
    """Initial guess ``y_q = x_q^T guess + bias`` (Part I Sec. 5.1.3).

    Args:
        x_q: ``(B, d)`` query inputs.
        guess: ``(d,)`` linear part ``y_q_guess``; default zeros.
        bias: scalar ``y_q_bias``.

    Returns:
        ``(B,)`` initial guesses.
    """
    v.shape("x_q", x_q, (None, None), "(B, d)")
    d = x_q.shape[-1]
    out = jnp.zeros(x_q.shape[:-1]) + v.finite_float("bias", bias)
    if guess is not None:
        v.shape("guess", guess, (d,), f"({d},)")
        out = out + x_q @ jnp.asarray(guess, dtype=float)
    return out


def embed(tasks: TaskBatch, y_q=None) -> jax.Array:
    """Part I's embedding (Xie et al. eq. 2) with an initial guess ``y_q``.

    ``E = [[X^T, x_q], [y^T, y_q]]`` of shape ``(B, d+1, C+1)``.

    Args:
        tasks: a :class:`TaskBatch`.
        y_q: ``(B,)`` initial guesses, or a scalar broadcast to all prompts; default 0.

    Returns:
        ``(B, d+1, C+1)`` embeddings.
    """
    X, y, x_q = tasks.X, tasks.y, tasks.x_q
    B, C, d = _check_batch(tasks)
    if y_q is None:
        y_q = jnp.zeros((B,))
    else:
        y_q = jnp.asarray(y_q, dtype=float)
        if y_q.ndim == 0:
            y_q = jnp.full((B,), y_q)
        v.shape("y_q", y_q, (B,), f"({B},) or a scalar")
    top = jnp.concatenate([jnp.swapaxes(X, 1, 2), x_q[:, :, None]], axis=2)  # (B, d, C+1)
    bottom = jnp.concatenate([y, y_q[:, None]], axis=1)[:, None, :]  # (B, 1, C+1)
    return jnp.concatenate([top, bottom], axis=1)


def embed_zero_query(tasks: TaskBatch) -> jax.Array:
    """Part III's embedding (Ahn et al. eq. 1): ``Z_0 = [[x_1 .. x_n, x_q], [y_1 .. y_n, 0]]``.

    Returns:
        ``(B, d+1, C+1)`` embeddings (identical to :func:`embed` with ``y_q = 0``).
    """
    return embed(tasks, None)


def _check_batch(tasks: TaskBatch) -> tuple[int, int, int]:
    if not isinstance(tasks, TaskBatch):
        raise ValueError(f"tasks must be an iclgd.tasks.TaskBatch, got {type(tasks).__name__}")
    X = v.shape("tasks.X", tasks.X, (None, None, None), "(B, C, d)")
    B, C, d = X.shape
    v.shape("tasks.y", tasks.y, (B, C), f"({B}, {C})")
    v.shape("tasks.x_q", tasks.x_q, (B, d), f"({B}, {d})")
    return B, C, d


def unembed(E: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Split an embedding ``(B, d+1, C+1)`` into ``X (B, C, d)``, ``y (B, C)``, ``x_q (B, d)``,
    ``y_q (B,)``."""
    v.shape("E", E, (None, None, None), "(B, d+1, C+1)")
    if E.shape[1] < 2 or E.shape[2] < 2:
        raise ValueError(f"E must have shape (B, d+1, C+1) with d, C >= 1, got shape {tuple(E.shape)}")
    X = jnp.swapaxes(E[:, :-1, :-1], 1, 2)
    return X, E[:, -1, :-1], E[:, :-1, -1], E[:, -1, -1]

