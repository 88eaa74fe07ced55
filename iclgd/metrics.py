"""Errors and similarities shared by every model family: the one squared-error helper of iclgd.

* :func:`mse` -- the mean squared error over a batch (every loss in iclgd is built from it;
  Part II's losses carry the paper's factor 1/2 in front of it).
* :func:`cosine` -- cosine similarity along the last axis.
* :func:`input_gradient` and :func:`compare_predictors` -- do two predictors compute the same
  function? Xie et al. App. C.2 compares predictions and input gradients ``d f / d x_q``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import checks as v
from .tasks import check_batch

__all__ = ["mse", "cosine", "input_gradient", "compare_predictors", "safe_scale"]


def safe_scale(x: jax.Array, axis) -> jax.Array:
    """A divisor for ``x`` along ``axis`` (keepdims) under which its squares neither overflow nor
    underflow: ``max |x|`` where that is above ``max ** (1/4)`` or below ``tiny ** (1/4)`` of the
    dtype, else exactly 1 (so ordinary inputs are computed unchanged). No gradient flows through
    it (use it for scale-invariant quantities)."""
    x = jnp.asarray(x)
    fi = jnp.finfo(x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32)
    s = jax.lax.stop_gradient(jnp.max(jnp.abs(x), axis=axis, keepdims=True))
    bad = ((s > fi.max**0.25) | (s < fi.tiny**0.25)) & (s > 0) & jnp.isfinite(s)
    return jnp.where(bad, s, jnp.ones_like(s))


def mse(pred: jax.Array, target: jax.Array) -> jax.Array:
    """Mean squared error ``mean((pred - target)^2)`` over all entries.

    Args:
        pred: predictions, any shape (``(B,)`` for one query per prompt, ``(B, K)`` for Part II).
        target: the same shape as ``pred``.

    Returns:
        ``()``.

    Raises:
        ValueError: if the shapes differ, the batch is empty or (concrete) a value is NaN or Inf.
    """
    pred, target = v.array("pred", pred), v.array("target", target)
    ps, ts = tuple(pred.shape), tuple(target.shape)
    if ps != ts:
        raise ValueError(f"pred and target must have the same shape, got {ps} and {ts}")
    if 0 in ps:
        raise ValueError(f"pred and target must not be empty, got shape {ps}")
    return jnp.mean((pred - target) ** 2)


def cosine(a: jax.Array, b: jax.Array) -> jax.Array:
    """Cosine similarity ``<a, b> / (|a| |b|)`` along the last axis.

    The cosine with a zero vector is ``0 / 0``; it is returned as ``0`` (no direction is closer
    than another), never NaN. Vectors whose squared norm would overflow (or underflow) are scaled
    by their largest entry first.

    Args:
        a, b: ``(..., n)`` arrays of the same shape, ``n >= 1``.

    Returns:
        ``(...)``.
    """
    a = v.array("a", a, "... n")
    b = v.array("b", b, "... n")
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    a, b = jnp.asarray(a), jnp.asarray(b)
    a, b = a / safe_scale(a, -1), b / safe_scale(b, -1)
    a2, b2 = jnp.sum(a * a, -1), jnp.sum(b * b, -1)
    ok = (a2 > 0) & (b2 > 0)
    safe = lambda s: jnp.sqrt(jnp.where(ok, s, 1.0))  # no NaN in the value nor the gradient
    return jnp.where(ok, jnp.sum(a * b, -1) / (safe(a2) * safe(b2)), 0.0)


_PREDICT = "a function predict(tasks) -> (B,)"


def input_gradient(predict: Callable, tasks) -> jax.Array:
    """The gradient of each prompt's prediction with respect to its own query, ``d f / d x_q``.

    Args:
        predict: ``predict(tasks) -> (B,)``, prompts predicted independently (every model of iclgd).
        tasks: a :class:`~iclgd.tasks.TaskBatch`.

    Returns:
        ``(B, d)``.
    """
    v.function("predict", predict, _PREDICT)
    check_batch(tasks)
    # prompts are independent, so the gradient of the sum is every prompt's own gradient
    return jax.grad(lambda x_q: jnp.sum(predict(tasks._replace(x_q=x_q))))(tasks.x_q)


def compare_predictors(predict_a: Callable, predict_b: Callable, tasks) -> dict:
    """How close two predictors are as functions (Xie et al. App. C.2), on a batch of prompts.

    Args:
        predict_a: ``predict_a(tasks) -> (B,)``, e.g. a trained model.
        predict_b: ``predict_b(tasks) -> (B,)``, the reference, e.g. one GD step.
        tasks: a :class:`~iclgd.tasks.TaskBatch`.

    Returns:
        A dict of NumPy arrays and floats: ``pred_diff`` ``(B,)`` ``|f_a - f_b|``, ``pred_scale``
        the rms of ``f_b``; ``grad_diff`` ``(B,)`` ``|grad f_a - grad f_b|`` (input gradients),
        ``grad_scale`` the mean ``|grad f_b|``; ``cos`` ``(B,)`` the cosine of the two input
        gradients; ``cos_ref`` ``(B,)`` the cosine of ``grad f_b`` with each prompt's true task
        weights ``tasks.w`` (how well the reference itself recovers the task).
    """
    v.function("predict_a", predict_a, _PREDICT)
    v.function("predict_b", predict_b, _PREDICT)
    dims = v.Dims()
    check_batch(tasks, dims=dims)
    v.array("tasks.w", tasks.w, "B d", dims)
    B = dims["B"]
    f_a, f_b = predict_a(tasks), predict_b(tasks)
    for name, f in (("predict_a", f_a), ("predict_b", f_b)):
        shp = tuple(np.shape(f))
        if shp != (B,):
            raise ValueError(
                f"{name}(tasks) must return shape (B,) = ({B},) (one prediction per prompt), got "
                f"{shp}"
            )
        v.array(f"{name}(tasks)", f)
    g_a, g_b = input_gradient(predict_a, tasks), input_gradient(predict_b, tasks)
    return {
        "pred_diff": np.asarray(jnp.abs(f_a - f_b)),
        "pred_scale": float(jnp.sqrt(jnp.mean(f_b**2))),
        "grad_diff": np.asarray(jnp.linalg.norm(g_a - g_b, axis=-1)),
        "grad_scale": float(jnp.mean(jnp.linalg.norm(g_b, axis=-1))),
        "cos": np.asarray(cosine(g_a, g_b)),
        "cos_ref": np.asarray(cosine(g_b, tasks.w)),
    }
