"""Errors and similarities shared by every model family: the one squared-error helper of iclgd.

* :func:`mse` -- the mean squared error over a batch (every loss in iclgd is built from it; Part II's
  losses carry the paper's factor 1/2 in front of it).
* :func:`cosine` -- cosine similarity along the last axis (App. C.2 of Xie et al. compares input
  gradients with it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["mse", "cosine"]


def mse(pred: jax.Array, target: jax.Array) -> jax.Array:
    """Mean squared error ``mean((pred - target)^2)`` over all entries.

    Args:
        pred: predictions, any shape (``(B,)`` for one query per prompt, ``(B, K)`` for Part II).
        target: the same shape as ``pred``.

    Returns:
        ``()``.

    Raises:
        ValueError: if the shapes differ or the batch is empty.
    """
    ps, ts = tuple(getattr(pred, "shape", ())), tuple(getattr(target, "shape", ()))
    if ps != ts:
        raise ValueError(f"pred and target must have the same shape, got {ps} and {ts}")
    if 0 in ps:
        raise ValueError(f"pred and target must not be empty, got shape {ps}")
    return jnp.mean((pred - target) ** 2)


def cosine(a: jax.Array, b: jax.Array) -> jax.Array:
    """Cosine similarity ``<a, b> / (|a| |b|)`` along the last axis.

    Args:
        a, b: ``(..., n)`` arrays of the same shape.

    Returns:
        ``(...)``.
    """
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return jnp.sum(a * b, -1) / (jnp.linalg.norm(a, axis=-1) * jnp.linalg.norm(b, axis=-1))
