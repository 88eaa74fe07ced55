"""Training loops: optax optimisers, ``jit`` + ``lax.scan``, fresh tasks each step from a key.

The loop is generic: it minimises ``loss_fn(params, key) -> scalar``. A sampled loss draws a fresh
batch of tasks from ``key`` at every step (:func:`sampled_loss`); an exact population risk simply
ignores the key. Steps run in jitted chunks of ``lax.scan``; between chunks a tqdm bar advances (on
stderr) and the loop checks for divergence: a non-finite loss or gradient stops the run, the
parameters of the last finite step are kept, and the result says where and why it stopped.

Example::

    prior = iclgd.make_prior(10, mu=jnp.ones(10))
    loss = iclgd.sampled_loss(lambda p, t: iclgd.lsa_predict(p, iclgd.embed(t)), prior, C=10, batch=2048)
    res = iclgd.train(loss, iclgd.init_lsa(jax.random.key(0), 10, H=1), jax.random.key(1), steps=5000)
    res.losses  # (5000,) numpy array
"""

from __future__ import annotations

import sys
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _validate as v
from .lsa import mse
from .tasks import Prior, TaskBatch, sample_tasks

__all__ = ["TrainResult", "train", "train_seeds", "sampled_loss", "make_optimizer", "evaluate"]

LossFn = Callable[[object, jax.Array], jax.Array]


class TrainResult(NamedTuple):
    """Outcome of :func:`train`.

    Attributes:
        params: the final parameters (those of the last finite step if the run diverged).
        losses: ``(steps_done,)`` numpy array, the loss at each step before its update.
        diverged: ``True`` if a non-finite loss or gradient stopped the run.
        stopped_at: the step index at which the run stopped (``None`` if it completed).
        message: a human-readable summary.
    """

    params: object
    losses: np.ndarray
    diverged: bool
    stopped_at: int | None
    message: str


def make_optimizer(name: str = "adam", learning_rate: float = 5e-4) -> optax.GradientTransformation:
    """An optax optimiser by name: ``"adam"``, ``"adamw"``, ``"sgd"`` or ``"lbfgs"``.

    ``"lbfgs"`` uses optax's zoom line search (``learning_rate`` is ignored) and needs a
    deterministic loss: use it with an exact risk or ``fixed_key=True`` in :func:`train`.
    """
    if name not in ("adam", "adamw", "sgd", "lbfgs"):
        raise ValueError(f"name must be one of 'adam', 'adamw', 'sgd', 'lbfgs', got {name!r}")
    if name == "lbfgs":
        return optax.lbfgs()
    learning_rate = v.nonneg_float("learning_rate", learning_rate)
    if learning_rate == 0:
        raise ValueError("learning_rate must be > 0, got 0")
    return {"adam": optax.adam, "adamw": optax.adamw, "sgd": optax.sgd}[name](learning_rate)


def sampled_loss(
    predict: Callable[[object, TaskBatch], jax.Array], prior: Prior, C: int, batch: int
) -> LossFn:
    """The Monte Carlo ICL risk: a fresh batch of ``batch`` prompts from ``key`` at each call.

    Args:
        predict: ``predict(params, tasks) -> (B,)`` predictions of the query labels.
        prior: task distribution.
        C: context length.
        batch: prompts per step.

    Returns:
        ``loss(params, key) -> ()``, the mean squared error on the query.
    """
    C = v.positive_int("C", C)
    batch = v.positive_int("batch", batch)
    if not isinstance(prior, Prior):
        raise ValueError(f"prior must be an iclgd.tasks.Prior (use make_prior), got {type(prior).__name__}")

    def loss(params, key):
        tasks = sample_tasks(key, prior, C, batch)
        return mse(predict(params, tasks), tasks.y_target)

    return loss


def _is_lbfgs(opt) -> bool:
    # optax.lbfgs's state holds a linesearch state; detect it from the init structure.
    try:
        state = opt.init({"x": jnp.zeros(1)})
    except Exception:  # pragma: no cover
        return False
    return any("ScaleByZoomLinesearchState" in type(s).__name__ or "Linesearch" in type(s).__name__
               for s in jax.tree_util.tree_leaves(state, is_leaf=lambda s: hasattr(s, "_fields")))


def _make_chunk(loss_fn: LossFn, opt, chunk: int, fixed_key: bool, lbfgs: bool):
    value_and_grad = jax.value_and_grad(loss_fn)

    def step(carry, i):
        params, state, key, bad, end = carry
        k = key if fixed_key else jax.random.fold_in(key, i)
        loss, grads = value_and_grad(params, k)
        if lbfgs:
            updates, new_state = opt.update(
                grads, state, params, value=loss, grad=grads, value_fn=lambda p: loss_fn(p, k)
            )
        else:
            updates, new_state = opt.update(grads, state, params)
        new_params = optax.apply_updates(params, updates)
        finite = jnp.isfinite(loss) & jnp.all(
            jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree_util.tree_leaves(grads)])
        )
        finite = finite & jnp.all(
            jnp.array([jnp.all(jnp.isfinite(p)) for p in jax.tree_util.tree_leaves(new_params)])
        )
        ok = finite & ~bad & (i < end)  # steps past `end` (the tail of the last chunk) are no-ops
        keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new, old)
        params = keep(new_params, params)
        state = keep(new_state, state)
        bad = bad | (~finite & (i < end))
        return (params, state, key, bad, end), jnp.where(bad, jnp.nan, loss)

    @jax.jit
    def run_chunk(params, state, key, bad, start, end):
        (params, state, _, bad, _), losses = jax.lax.scan(
            step, (params, state, key, bad, end), start + jnp.arange(chunk)
        )
        return params, state, bad, losses

    return run_chunk


def train(
    loss_fn: LossFn,
    params,
    key: jax.Array,
    *,
    steps: int,
    optimizer: optax.GradientTransformation | str = "adam",
    learning_rate: float = 5e-4,
    chunk: int | None = None,
    fixed_key: bool = False,
    progress: bool | None = None,
    desc: str = "train",
) -> TrainResult:
    """Minimise ``loss_fn(params, key)`` with an optax optimiser.

    Args:
        loss_fn: ``loss_fn(params, key) -> ()``; step ``i`` gets ``jax.random.fold_in(key, i)``.
        params: initial parameter pytree.
        key: PRNG key of the data stream.
        steps: number of optimiser steps, ``>= 1``.
        optimizer: an optax transformation, or a name for :func:`make_optimizer`.
        learning_rate: used when ``optimizer`` is a name.
        chunk: steps per jitted ``lax.scan`` chunk (default: ``min(steps, 500)``).
        fixed_key: use the same ``key`` at every step (one fixed batch, as for L-BFGS).
        progress: show a tqdm bar on stderr; default: when ``steps >= 2000``.
        desc: label of the progress bar.

    Returns:
        A :class:`TrainResult`. A non-finite loss or gradient stops the run; ``diverged`` is then
        ``True`` and ``message`` says at which step.
    """
    steps = v.positive_int("steps", steps)
    opt = make_optimizer(optimizer, learning_rate) if isinstance(optimizer, str) else optimizer
    if not hasattr(opt, "init") or not hasattr(opt, "update"):
        raise ValueError(f"optimizer must be an optax GradientTransformation or a name, got {optimizer!r}")
    chunk = min(steps, 500) if chunk is None else v.positive_int("chunk", chunk)
    lbfgs = _is_lbfgs(opt)
    run_chunk = _make_chunk(loss_fn, opt, chunk, fixed_key, lbfgs)
    state = opt.init(params)
    bad = jnp.array(False)
    show = (steps >= 2000) if progress is None else bool(progress)
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc=desc, file=sys.stderr, leave=False)
    losses: list[np.ndarray] = []
    done = 0
    stopped_at = None
    try:
        while done < steps:
            params, state, bad, l = run_chunk(params, state, key, bad, jnp.asarray(done), jnp.asarray(steps))
            l = np.asarray(l)
            n = min(chunk, steps - done)
            if bool(bad):
                first = int(np.argmax(~np.isfinite(l)))
                losses.append(l[:first])
                stopped_at = done + first
                break
            losses.append(l[:n])
            done += n
            if bar is not None:
                bar.update(n)
    finally:
        if bar is not None:
            bar.close()
    all_losses = np.concatenate(losses) if losses else np.zeros(0)
    if stopped_at is not None:
        msg = (f"diverged: non-finite loss or gradient at step {stopped_at} of {steps}; "
               f"returning the parameters of step {stopped_at}")
        return TrainResult(params, all_losses, True, stopped_at, msg)
    return TrainResult(params, all_losses, False, None, f"completed {steps} steps")


def train_seeds(
    loss_fn: LossFn,
    init_fn: Callable[[jax.Array], object],
    keys: jax.Array,
    *,
    steps: int,
    optimizer: optax.GradientTransformation | str = "adam",
    learning_rate: float = 5e-4,
    chunk: int | None = None,
) -> tuple[object, np.ndarray, np.ndarray]:
    """Train one model per key, vectorised with ``vmap`` (pays off on a GPU).

    Args:
        loss_fn: as in :func:`train`.
        init_fn: ``init_fn(key) -> params``.
        keys: ``(S,)`` PRNG keys; seed ``s`` initialises with ``fold_in(keys[s], 0)`` and draws data
            with ``fold_in(keys[s], 1)``.
        steps, optimizer, learning_rate, chunk: as in :func:`train`.

    Returns:
        ``(params, losses, diverged)``: stacked params with a leading ``(S,)`` axis, ``(S, steps)``
        losses (NaN after a seed diverged), ``(S,)`` booleans.
    """
    steps = v.positive_int("steps", steps)
    if keys.ndim != 1:
        raise ValueError(f"keys must have shape (S,) (a batch of PRNG keys), got shape {tuple(keys.shape)}")
    opt = make_optimizer(optimizer, learning_rate) if isinstance(optimizer, str) else optimizer
    chunk = min(steps, 500) if chunk is None else v.positive_int("chunk", chunk)
    run_chunk = _make_chunk(loss_fn, opt, chunk, False, False)
    init_keys = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
    data_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    params = jax.vmap(init_fn)(init_keys)
    state = jax.vmap(opt.init)(params)
    bad = jnp.zeros(keys.shape[0], dtype=bool)
    vchunk = jax.jit(jax.vmap(run_chunk, in_axes=(0, 0, 0, 0, None, None)))
    out = []
    done = 0
    while done < steps:
        params, state, bad, l = vchunk(params, state, data_keys, bad, jnp.asarray(done), jnp.asarray(steps))
        n = min(chunk, steps - done)
        out.append(np.asarray(l)[:, :n])
        done += n
    return params, np.concatenate(out, axis=1), np.asarray(bad)


def evaluate(loss_fn: LossFn, params, key: jax.Array, n_batches: int = 10) -> tuple[float, float]:
    """Monte Carlo estimate of a sampled loss over ``n_batches`` fresh batches.

    Returns:
        ``(mean, standard_error)`` over the batches.
    """
    n_batches = v.positive_int("n_batches", n_batches, 2)
    keys = jax.random.split(key, n_batches)
    vals = np.asarray(jax.lax.map(lambda k: loss_fn(params, k), keys))
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(n_batches))
