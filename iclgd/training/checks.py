"""The trainer's argument checks (:mod:`iclgd.training.loop`): each raises a clear ``ValueError``
or ``TypeError`` naming the argument; and what the trainer derives from its checked arguments
(``gtol``'s initial state, a fixed batch prepared once)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..tasks.linear import TaskBatch


def _check_args(args) -> tuple:
    """``args`` must be a tuple (or list) of the loss's extra arguments, not one NamedTuple."""
    if hasattr(args, "_fields") or not isinstance(args, (tuple, list)):
        raise v.ArgumentTypeError(
            f"args must be a tuple of extra arguments of loss_fn, e.g. args=(prior,), got a "
            f"{type(args).__name__} (a missing comma in args=(x,)?)"
        )
    return tuple(args)


def _check_common(loss_fn, args, metrics, **flags) -> tuple:
    """Checks shared by :func:`train` and :func:`train_seeds` (``flags``: their bool arguments,
    ``fixed_key=...``, ``has_aux=...``); returns ``args`` as a tuple."""
    for name, value in flags.items():
        v.boolean(name, value)
    v.function("loss_fn", loss_fn, _LOSS_FN)
    if metrics is not None:
        v.function("metrics", metrics, "a function metrics(params) -> pytree")
    return _check_args(args)


_LOSS_FN = "a function loss_fn(params, key, *args) -> ()"


def _check_deterministic(loss_fn, params, key, args, has_aux) -> None:
    """L-BFGS on a stochastic loss gives meaningless line searches: refuse it."""
    a, b = (loss_fn(params, jax.random.fold_in(key, i), *args) for i in (0, 1))
    if has_aux:
        a, b = a[0], b[0]
    if not np.array_equal(np.asarray(a), np.asarray(b)):
        raise ValueError(
            "optimizer 'lbfgs' needs a deterministic loss, but loss_fn gives different values for "
            "different keys: use an exact risk, or fixed_key=True (one fixed batch)"
        )


def _loss_output(out, has_aux: bool):
    """``(loss, aux)`` from ``loss_fn``'s output, checked (at trace time: no cost per step)."""
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            got = (
                f"an array of shape {tuple(np.shape(out))}"
                if hasattr(out, "shape")
                else f"a {type(out).__name__}"
            )
            raise ValueError(
                f"with has_aux=True, loss_fn must return a pair (loss, aux), got {got}"
            )
        loss, aux = out
    else:
        if isinstance(out, (tuple, list, dict)):
            raise ValueError(
                f"loss_fn must return a scalar loss, got a {type(out).__name__}; a loss that also "
                "returns auxiliary output needs has_aux=True"
            )
        loss, aux = out, None
    shape = tuple(np.shape(loss))
    if shape != ():
        raise ValueError(
            f"loss_fn must return a scalar loss of shape (), got shape {shape} (reduce it, e.g. "
            "with jnp.mean)"
        )
    dt = jnp.asarray(loss).dtype if not hasattr(loss, "dtype") else loss.dtype
    if not jnp.issubdtype(dt, jnp.floating):
        raise v.ArgumentTypeError(f"loss_fn must return a floating-point loss, got dtype {dt}")
    return loss, aux


def _check_params(name: str, params, learning_rate) -> None:
    """Floating-point leaves (gradients of integers are not defined) and, for per-group rates, a
    dict whose top-level keys are exactly the groups."""
    v.finite_tree(name, params)
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    if not leaves:
        raise ValueError(f"{name} must hold at least one array")
    for path, leaf in leaves:
        dt = jnp.asarray(leaf).dtype
        if not jnp.issubdtype(dt, jnp.floating):
            raise v.ArgumentTypeError(
                f"{name}{jax.tree_util.keystr(path)} must be a floating-point array (gradients of "
                f"integers are not defined), got dtype {dt}"
            )
    if isinstance(learning_rate, dict):
        if not isinstance(params, dict):
            raise v.ArgumentTypeError(
                f"learning_rate as a dict {{group: rate}} needs {name} to be a dict whose "
                f"top-level keys are the groups, got {type(params).__name__}"
            )
        want, have = {str(k) for k in learning_rate}, {str(k) for k in params}
        if want != have:
            raise ValueError(
                f"learning_rate must give a rate for every top-level entry of {name} and no "
                f"other: missing {sorted(have - want)}, unknown {sorted(want - have)}"
            )


def _chunking(steps: int, chunk, record_every) -> tuple[int, int]:
    if record_every is None:
        every = min(steps, 500) if chunk is None else v.positive_int("chunk", chunk)
        return every, every
    every = v.positive_int("record_every", record_every)
    if chunk is None:
        chunk = every * max(1, min(steps, 500) // every)
    else:
        chunk = v.positive_int("chunk", chunk)
        if chunk % every:
            raise ValueError(f"chunk must be a multiple of record_every = {every}, got {chunk}")
    return chunk, every


def _check_gtol(gtol) -> float | None:
    return None if gtol is None else v.positive_float("gtol", gtol)


def _check_seed_args(seed_args, S: int) -> tuple:
    seed_args = _check_args(seed_args)
    for leaf in jax.tree_util.tree_leaves(seed_args):
        if np.ndim(leaf) == 0 or np.shape(leaf)[0] != S:
            raise ValueError(
                f"seed_args must have a leading axis of length {S} (one slice per key) on every "
                f"leaf, got a leaf of shape {np.shape(leaf)}"
            )
    return seed_args


def _prepared(loss_fn, args: tuple, seeds: bool) -> tuple:
    """``args`` with a fixed batch prepared once by ``loss_fn.prepare`` (a batch loss of a model
    with ``prepare``, :func:`~iclgd.training.batch_loss`), when the batch is the loss's one
    extra argument; seeds' batches (a leading seed axis) prepared by one ``vmap``."""
    prepare = getattr(loss_fn, "prepare", None)
    if prepare is None or len(args) != 1 or not isinstance(args[0], TaskBatch):
        return args
    key = (prepare, seeds)
    if key not in _PREPARE:
        _PREPARE[key] = jax.jit(jax.vmap(prepare) if seeds else prepare)
    return (_PREPARE[key](args[0]),)


_PREPARE: dict = {}


def _conv0(loss_fn, params, key, args, has_aux, gtol):
    """The initial ``conv`` of the trainer's jitted chunk (``None`` without ``gtol``): step ``-1``
    and zeros of the loss's and aux's shapes."""
    if gtol is None:
        return None
    out = jax.eval_shape(lambda p: _loss_output(loss_fn(p, key, *args), has_aux), params)
    tm = jax.tree_util.tree_map
    zeros = tm(lambda x: jnp.zeros(x.shape, x.dtype), out)
    strong = lambda x: jax.lax.convert_element_type(x, jnp.result_type(x))  # noqa: E731
    return tm(strong, (jnp.full((), -1, jnp.arange(1).dtype), *zeros))
