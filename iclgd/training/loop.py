"""The trainer: optax optimisers, ``jit`` + ``lax.scan``, one compilation reused across calls.

:func:`train` minimises ``loss_fn(params, key, *args) -> scalar``. A sampled loss draws a fresh
batch of prompts from ``key`` at every step (:func:`~iclgd.training.sampled_loss`); an exact
population risk ignores the key. Steps run in jitted chunks of ``lax.scan``; between chunks a tqdm
bar advances (on stderr) and the loop checks for divergence: a non-finite loss, gradient or
parameter stops the run, the parameters of the last finite step are kept, and the result says
where and why it stopped.

What the trainer offers the chapters:

* **One compilation per (loss, optimiser, shapes) per process.** The jitted chunk is cached on
  ``(loss_fn, optimizer, chunk, recording options)``; learning rates and ``args`` are traced inputs,
  so a sweep over learning rates, priors or any array-valued setting with the same shapes, and every
  seed of :func:`train_seeds`, reuse one compilation (:func:`trace_count` counts them).
* **History.** ``record_every=k`` stores the parameters, and optionally ``metrics(params)`` (any
  jittable function: an exact risk, a held-out loss, a distance to a target), at steps
  ``0, k, 2k, ..., steps``.
* **Per-group learning rates.** ``learning_rate={"w": 1e-2, "Q": 1e-3}`` gives each top-level entry
  of a parameter dict its own rate (``optax.multi_transform``), e.g. Part II's
  ``eta_w = gamma^2 eta_Q``.
* **L-BFGS** (optax's, zoom line search) for one model or many seeds; it refuses a stochastic loss.

Example::

    model = iclgd.models.lsa_model(d=10, H=1)
    loss = iclgd.sampled_loss(model, iclgd.make_prior(10, mu=jnp.ones(10)), C=10, batch=2048)
    res = iclgd.train(loss, model.init(jax.random.key(0)), jax.random.key(1), steps=5000)
    res.losses  # (5000,) numpy array
"""

from __future__ import annotations

import functools
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import checks as v
from ..models import Model
from .checks import (  # _LOSS_FN, _check_args: also imported from here by losses.py
    _LOSS_FN,  # noqa: F401
    _check_args,  # noqa: F401
    _check_common,
    _check_deterministic,
    _check_gtol,
    _check_params,
    _check_seed_args,
    _chunking,
    _conv0,
    _loss_output,
    _prepared,
)
from .optim import _build, _resolve, _value_and_grad

__all__ = [
    "TrainResult",
    "History",
    "train",
    "train_seeds",
    "trace_count",
]

LossFn = Callable[..., jax.Array]


class History(NamedTuple):
    """Parameters and metrics recorded during training (:func:`train` with ``record_every``).

    Attributes:
        steps: ``(R,)`` the step numbers of the records (``0`` = before the first update).
        params: the parameter pytree with a leading ``(R,)`` axis on every leaf.
        metrics: ``metrics(params)`` at each record, leaves with a leading ``(R,)`` axis (``None``
            without a ``metrics`` function).
    """

    steps: np.ndarray
    params: Any
    metrics: Any


class TrainResult(NamedTuple):
    """Outcome of :func:`train` (for :func:`train_seeds`, every array has a leading seed axis).

    Attributes:
        params: the final parameters (those of the last finite step if the run diverged).
        losses: ``(steps_done,)`` the loss at each step, evaluated before its update.
        diverged: ``True`` if a non-finite loss, gradient or parameter stopped the run.
        stopped_at: the step at which the run stopped (``None`` if it completed).
        message: a human-readable summary.
        history: a :class:`History`, or ``None`` without ``record_every``.
        aux: with ``has_aux=True``, the auxiliary output of the loss at each step (leading
            ``(steps_done,)`` axis), else ``None``.
        converged_at: with ``gtol``, the step at which the gradient's largest entry was at most
            ``gtol`` (``-1`` if it never was; for :func:`train_seeds`, ``(S,)``), else ``None``.
    """

    params: Any
    losses: np.ndarray
    diverged: Any
    stopped_at: Any
    message: str
    history: History | None = None
    aux: Any = None
    converged_at: Any = None


# ----------------------------------------------------------------------------------------------
# The compiled chunk, cached
# ----------------------------------------------------------------------------------------------

_RUNNERS: OrderedDict = OrderedDict()
_MAX_RUNNERS = 64  # compiled chunks kept (least recently used dropped first)
_TRACES = [0]


def trace_count() -> int:
    """How many times the trainer's chunk function has been traced (= compiled) in this process.

    A second :func:`train` call with the same loss function, optimiser and shapes adds nothing.
    """
    return _TRACES[0]


def _all_finite(tree) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def _max_abs(tree) -> jax.Array:
    return jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in jax.tree_util.tree_leaves(tree)]))


def _strong(tree):
    """``tree`` with weak types made strong: optax's L-BFGS ``init`` returns weakly typed scalars
    that its ``update`` returns strongly typed, which would compile the chunk a second time."""
    return _tm(lambda x: jax.lax.convert_element_type(x, jnp.result_type(x)), tree)


def _runner(loss_fn, opt_key, chunk, every, fixed_key, has_aux, metrics, gtol=None):
    """The jitted chunk ``run(params, state, key, bad, conv, start, end, lr, args)``, cached.

    ``conv`` is ``(step, loss, aux)``: the step at which the gradient's largest entry was at most
    ``gtol`` (``-1``: not yet), and the loss and aux of that step; a converged run's later steps
    are no-ops (``lax.cond``: skipped, not computed, outside ``vmap``) that repeat them. Named
    L-BFGS takes each step's value and gradient from its line search (``optim._value_and_grad``)."""
    cache_key = (loss_fn, opt_key, chunk, every, fixed_key, has_aux, metrics, gtol)
    if cache_key in _RUNNERS:
        _RUNNERS.move_to_end(cache_key)
        return _RUNNERS[cache_key]
    name_or_opt, lr_groups = opt_key
    reuse = (lbfgs := name_or_opt == "lbfgs") and not lr_groups and not has_aux

    def run(params, state, key, bad, conv, start, end, lr, args):
        _TRACES[0] += 1
        if isinstance(name_or_opt, str):
            opt = _build(name_or_opt, dict(zip(lr_groups, lr)) if lr_groups else lr)
        else:
            opt = name_or_opt

        def value(p, k):
            return _loss_output(loss_fn(p, k, *args), has_aux)

        def step(carry, i):
            if gtol is None:
                return active(carry, i)
            return jax.lax.cond(carry[3][0] >= 0, frozen, active, carry, i)

        def frozen(carry, i):
            bad, (_, loss, aux) = carry[2], carry[3]
            return carry, (jnp.where(bad, jnp.nan, loss), aux)

        def active(carry, i):
            params, state, bad, conv = carry
            k = key if fixed_key else jax.random.fold_in(key, i)
            (loss, aux), grads = _value_and_grad(value, params, k, state, reuse)
            # L-BFGS's zoom line search takes the value, the gradient and the loss function
            search = (
                dict(value=loss, grad=grads, value_fn=lambda p: value(p, k)[0]) if lbfgs else {}
            )
            updates, new_state = opt.update(grads, state, params, **search)
            new_params = optax.apply_updates(params, updates)
            finite = jnp.isfinite(loss) & _all_finite(grads) & _all_finite(new_params)
            live = i < end  # steps past `end` (the tail of the last chunk) are no-ops
            ok = finite & ~bad & live
            if gtol is not None:  # converged: this step's update is not applied, nor later ones
                small = (_max_abs(grads) <= gtol) & ok
                ok = ok & ~small
                now = (i.astype(conv[0].dtype), loss, aux)
                conv = jax.tree_util.tree_map(lambda a, b: jnp.where(small, a, b), now, conv)
            keep = lambda new, old: jax.tree_util.tree_map(
                lambda a, b: jnp.where(ok, a, b), new, old
            )
            bad = bad | (~finite & live)
            return (keep(new_params, params), keep(new_state, state), bad, conv), (
                jnp.where(bad, jnp.nan, loss),
                aux,
            )

        def group(carry, g):
            carry, out = jax.lax.scan(step, carry, start + g * every + jnp.arange(every))
            rec = (carry[0], metrics(carry[0]) if metrics is not None else None)
            return carry, (out, rec)

        (params, state, bad, conv), ((losses, aux), rec) = jax.lax.scan(
            group, (params, state, bad, conv), jnp.arange(chunk // every)
        )
        flat = lambda x: x.reshape((chunk,) + x.shape[2:])
        return params, state, bad, conv, flat(losses), jax.tree_util.tree_map(flat, aux), rec

    fn = jax.jit(run)
    _RUNNERS[cache_key] = fn
    if len(_RUNNERS) > _MAX_RUNNERS:
        old = _RUNNERS.popitem(last=False)[1]
        for k in [k for k in _VMAPPED if k[0] is old]:
            del _VMAPPED[k]
    return fn


_tm = jax.tree_util.tree_map


def _host(tree):
    return _tm(np.asarray, tree)


def _cat(trees: list, axis: int):
    """The pytrees of ``trees`` concatenated leaf by leaf along ``axis`` (NumPy)."""
    return _tm(lambda *xs: np.concatenate(xs, axis=axis), *trees)


def _progress(progress, total: int, desc: str):
    """A tqdm bar on stderr (default: when ``total >= 2000`` steps), or ``None``."""
    if not ((total >= 2000) if progress is None else bool(progress)):
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False)


def _record0(params, metrics, seeds: bool):
    """The record of step 0: ``(steps (1,), params, metrics)`` with a record axis (after the seed
    axis for :func:`train_seeds`)."""
    m0 = None
    if metrics is not None:
        m0 = jax.jit(jax.vmap(metrics) if seeds else metrics)(params)
    new = (lambda x: x[:, None]) if seeds else (lambda x: x[None])
    return np.zeros(1, int), _host(_tm(new, params)), _host(_tm(lambda x: new(jnp.asarray(x)), m0))


def _history(records: list, metrics, axis: int) -> History | None:
    """The :class:`History` of ``records`` (concatenated along the record ``axis``)."""
    if not records:
        return None
    ps = _cat([r[1] for r in records], axis)
    ms = _cat([r[2] for r in records], axis) if metrics is not None else None
    return History(np.concatenate([r[0] for r in records]), ps, ms)


def _run(
    fn,
    params,
    state,
    key,
    bad,
    conv,
    args,
    bar,
    lr,
    steps,
    chunk,
    every,
    recording,
    has_aux,
    stop,
    done=0,
    on_chunk=None,
):
    """The training loop: run the jitted chunk ``fn`` from step ``done`` (default 0) to ``steps``.

    ``fn`` runs one seed, or all seeds vmapped (a leading seed axis on what it returns). ``stop``
    (one seed, :func:`train`): stop at the first non-finite step; otherwise the steps after a
    seed's divergence are no-ops and record NaN losses. ``conv`` (``gtol``: see :func:`_runner`,
    else ``None``): once every seed has converged (or diverged), the remaining chunks are not run;
    their losses, aux and records repeat those of the converged step, as the no-op steps would.
    ``on_chunk(done, params, state, bad, conv, losses, records)``: after each chunk but the last.

    Returns:
        ``(params, bad, [losses (..., n)], [aux], [(steps, params, metrics) records],
        stopped_at, conv)``.
    """
    losses, auxes, records = [], [], []
    stopped_at = None
    while done < steps:
        params, state, bad, conv, ls, aux, rec = fn(
            params, state, key, bad, conv, jnp.asarray(done), jnp.asarray(steps), lr, args
        )
        ls = np.asarray(ls)
        axis = ls.ndim - 1  # the step axis: 0 for one seed, 1 for vmapped seeds
        n = min(chunk, steps - done)
        if stop and bool(bad):
            n = int(np.argmax(~np.isfinite(ls)))
            stopped_at = done + n
        losses.append(ls[..., :n])
        if has_aux:
            auxes.append(_tm(lambda x: np.take(np.asarray(x), np.arange(n), axis), aux))
        if recording:
            at = done + every * np.arange(1, chunk // every + 1)
            keep = (at - every < done + n) if stopped_at is None else (at <= stopped_at)
            pick = lambda x: np.compress(keep, x, axis=axis)
            rec = _host(rec)
            records.append((np.minimum(at, steps)[keep], _tm(pick, rec[0]), _tm(pick, rec[1])))
        if bar is not None:
            bar.update(n * (ls.shape[0] if ls.ndim > 1 else 1))
        if stopped_at is not None:
            break
        done += n
        if on_chunk is not None and done < steps:
            on_chunk(done, params, state, bad, conv, losses, records)
        if conv is not None and done < steps and np.all((np.asarray(conv[0]) >= 0) | bad):
            _fill(losses, auxes, records, conv, bad, done, steps, every, axis, has_aux, recording)
            if bar is not None:
                bar.update((steps - done) * (ls.shape[0] if ls.ndim > 1 else 1))
            break
    return params, bad, losses, auxes, records, stopped_at, conv


def _fill(losses, auxes, records, conv, bad, done, steps, every, axis, has_aux, recording):
    """Append the steps ``done, ..., steps - 1`` of converged (or diverged) runs, whose steps are
    no-ops: the loss and aux of the converged step (NaN losses after a divergence), and the last
    record's parameters and metrics at the remaining record steps."""
    rest = steps - done
    again = lambda x, k: np.repeat(np.expand_dims(np.asarray(x), axis), k, axis)
    losses.append(again(np.where(np.asarray(bad), np.nan, np.asarray(conv[1])), rest))
    if has_aux:
        auxes.append(_tm(lambda x: again(x, rest), conv[2]))
    if recording:
        grid = every * np.arange(1, -(-steps // every) + 1)  # every record step of the run
        at = grid[grid >= done + every]  # the records after the last chunk run
        if at.size:
            last = lambda x: np.repeat(np.take(x, [-1], axis), at.size, axis)
            records.append(
                (np.minimum(at, steps), _tm(last, records[-1][1]), _tm(last, records[-1][2]))
            )


def _drive(groups: list, bar, *loop) -> list:
    """:func:`_run` on each ``(fn, params, state, key, bad, conv, args)`` of ``groups``, then closes
    ``bar``."""
    try:
        return [_run(*g, bar, *loop) for g in groups]
    finally:
        if bar is not None:
            bar.close()


def train(
    loss_fn: LossFn,
    params,
    key: jax.Array,
    *,
    steps: int,
    optimizer: optax.GradientTransformation | str = "adam",
    learning_rate: float | dict = 5e-4,
    args: tuple = (),
    has_aux: bool = False,
    record_every: int | None = None,
    metrics: Callable | None = None,
    chunk: int | None = None,
    fixed_key: bool = False,
    gtol: float | None = None,
    progress: bool | None = None,
    desc: str = "train",
    _resume: tuple | None = None,
    _on_chunk: Callable | None = None,
) -> TrainResult:
    """Minimise ``loss_fn(params, key, *args)`` with an optax optimiser.

    Args:
        loss_fn: ``loss_fn(params, key, *args) -> ()`` (or ``-> ((), aux)`` with ``has_aux``); step
            ``i`` gets ``jax.random.fold_in(key, i)``. Pass the same function object to reuse the
            compilation across calls.
        params: initial parameter pytree.
        key: PRNG key of the data stream.
        steps: number of optimiser steps, ``>= 1``.
        optimizer: ``"adam"``, ``"adamw"``, ``"sgd"``, ``"lbfgs"`` or an optax transformation.
        learning_rate: with a named optimiser, a rate ``> 0`` or a dict ``{group: rate}`` over the
            top-level keys of a parameter dict. Traced: changing it does not recompile.
        args: extra arguments of ``loss_fn`` (arrays or pytrees, traced: a sweep over values of the
            same shapes compiles once).
        has_aux: ``loss_fn`` returns ``(loss, aux)``; ``aux`` of every step is returned stacked.
        record_every: record parameters (and ``metrics``) at steps ``0, k, 2k, ..., steps``.
        metrics: ``metrics(params) -> pytree`` (jittable), evaluated at the recorded steps. Pass
            the same function object across calls to reuse the compilation.
        chunk: steps per jitted ``lax.scan`` chunk (default about 500; a multiple of
            ``record_every``).
        fixed_key: use the same ``key`` at every step (one fixed batch, as for L-BFGS).
        gtol: stop the run once the largest entry of the gradient (``max |g|``, at the step's
            parameters, before its update) is at most ``gtol``: that step's update and every later
            step are no-ops, skipped, that repeat the loss (and aux) of that step, so ``losses``
            and ``history`` keep their length; ``converged_at`` says at which step. For L-BFGS in
            float64, whose steps after convergence only move the last bits. ``None`` (default):
            run every step.
        progress: show a tqdm bar on stderr; default: when ``steps >= 2000``.
        desc: label of the progress bar.
        _resume, _on_chunk: private, for :func:`~iclgd.training.timed_train`'s checkpoints:
            resume at a chunk's end (the result holds the steps from there on); a chunk hook.

    Returns:
        A :class:`TrainResult`. A non-finite loss, gradient or parameter stops the run; ``diverged``
        is then ``True`` and ``message`` says at which step.

    Raises:
        ValueError: bad sizes or rates, ``"lbfgs"`` with a stochastic loss.
        TypeError: ``key`` not a PRNG key, ``optimizer`` not an optimiser.
    """
    steps = v.positive_int("steps", steps)
    v.prng_key("key", key)
    args = _check_common(loss_fn, args, metrics, fixed_key=fixed_key, has_aux=has_aux)
    args = _prepared(loss_fn, args, seeds=False)
    gtol = _check_gtol(gtol)
    _check_params("params", params, learning_rate if isinstance(optimizer, str) else None)
    opt_key, opt, lr, lbfgs = _resolve(optimizer, learning_rate)
    chunk, every = _chunking(steps, chunk, record_every)
    if lbfgs and not fixed_key:
        _check_deterministic(loss_fn, params, key, args, has_aux)
    recording = record_every is not None
    met = metrics if recording else None
    run = _runner(loss_fn, opt_key, chunk, every, fixed_key, has_aux, met, gtol)
    state = _strong(opt.init(params))
    conv = _conv0(loss_fn, params, key, args, has_aux, gtol)
    done, bad = 0, jnp.array(False)
    if _resume is not None:
        done, params, state, bad, conv = _resume(params, state, conv, steps, chunk)
    records = [_record0(params, metrics, seeds=False)] if recording and not done else []
    bar = _progress(progress, steps - done, desc)
    hook = None if _on_chunk is None else functools.partial(_on_chunk, records)
    group = (run, params, state, key, bad, conv, args)
    loop = (lr, steps, chunk, every, recording, has_aux, True, done, hook)
    params, _, losses, auxes, recs, stopped_at, conv = _drive([group], bar, *loop)[0]
    conv_at = None if conv is None else int(conv[0])
    history = _history(records + recs, metrics, 0)
    aux_all = _cat(auxes, 0) if has_aux and auxes else None
    all_losses = np.concatenate(losses)
    msg = f"completed {steps} steps"
    if conv_at is not None and conv_at >= 0:
        msg += f" (converged at step {conv_at}: max |gradient| <= {gtol:g})"
    if stopped_at is not None:
        msg = (
            f"diverged: non-finite loss, gradient or parameter at step {stopped_at} of {steps}; "
            f"returning the parameters of step {stopped_at}"
        )
    return TrainResult(
        params, all_losses, stopped_at is not None, stopped_at, msg, history, aux_all, conv_at
    )


def train_seeds(
    loss_fn: LossFn,
    init_fn: Callable[[jax.Array], Any] | Model,
    keys: jax.Array,
    *,
    steps: int,
    optimizer: optax.GradientTransformation | str = "adam",
    learning_rate: float | dict = 5e-4,
    args: tuple = (),
    seed_args: tuple = (),
    has_aux: bool = False,
    record_every: int | None = None,
    metrics: Callable | None = None,
    chunk: int | None = None,
    fixed_key: bool = False,
    gtol: float | None = None,
    vectorize: bool | None = None,
    progress: bool | None = None,
) -> TrainResult:
    """Train one model per key (every optimiser, L-BFGS included).

    Seed ``s`` initialises with ``init_fn(fold_in(keys[s], 0))`` and draws its data with
    ``fold_in(keys[s], 1)``. The arguments are those of :func:`train`; ``init_fn`` may be a
    :class:`~iclgd.models.Model`, and two more:

    Args:
        seed_args: extra arguments of ``loss_fn`` with a leading ``(S,)`` seed axis on every leaf;
            seed ``s`` gets its slice, after ``args``: ``loss_fn(params, key, *args,
            *seed_args[s])``. Use it for each seed's fixed batch (e.g. L-BFGS on one batch per
            seed), drawn once instead of at every evaluation of the loss.
        vectorize: ``True`` runs all seeds as one ``vmap``-ed computation, ``False`` one after
            another (one compilation either way). Default: ``False`` for L-BFGS on a CPU, where
            the ``vmap``-ed line search evaluates every seed until the slowest seed's search ends
            (about twice the work), ``True`` otherwise. With ``gtol``, each seed stops on its own
            (``False``), or the run stops once every seed has converged (``True``).
        progress: a tqdm bar on stderr; default: when ``seeds * steps >= 2000``.

    Returns:
        A :class:`TrainResult` whose arrays have a leading ``(S,)`` seed axis: ``params``,
        ``losses (S, steps)`` (NaN after a seed diverged), ``diverged (S,)`` booleans,
        ``stopped_at (S,)`` (``-1`` for a completed seed), ``history`` with ``(S, R, ...)`` leaves,
        ``converged_at (S,)`` with ``gtol``. A diverged seed does not stop the others.
    """
    steps = v.positive_int("steps", steps)
    S = v.prng_keys("keys", keys)
    init = init_fn.init if isinstance(init_fn, Model) else init_fn
    v.function("init_fn", init, "a Model or a function init_fn(key) -> params")
    args = _check_common(loss_fn, args, metrics, fixed_key=fixed_key, has_aux=has_aux)
    seed_args = _check_seed_args(seed_args, S)
    seed_args = seed_args if args else _prepared(loss_fn, seed_args, seeds=True)
    gtol = _check_gtol(gtol)
    opt_key, opt, lr, lbfgs = _resolve(optimizer, learning_rate)
    chunk, every = _chunking(steps, chunk, record_every)
    if vectorize is None:
        vectorize = not (lbfgs and jax.default_backend() == "cpu")
    elif not isinstance(vectorize, bool):
        raise v.ArgumentTypeError(f"vectorize must be True, False or None, got {vectorize!r}")
    init_keys = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
    data_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    params = jax.vmap(init)(init_keys)
    _check_params("init_fn(key)", params, learning_rate if isinstance(optimizer, str) else None)
    take = lambda tree, s: _tm(lambda x: x[s], tree)
    if lbfgs and not fixed_key:
        first, seed0 = take(params, 0), take(seed_args, 0)
        _check_deterministic(loss_fn, first, data_keys[0], args + seed0, has_aux)
    recording = record_every is not None
    met = metrics if recording else None
    run = _runner(loss_fn, opt_key, chunk, every, fixed_key, has_aux, met, gtol)
    state = _strong(jax.vmap(opt.init)(params))
    bad = jnp.zeros(S, dtype=bool)
    conv = _conv0(loss_fn, take(params, 0), data_keys[0], args + take(seed_args, 0), has_aux, gtol)
    bar = _progress(progress, S * steps, "train_seeds")
    records = [_record0(params, metrics, seeds=True)] if recording else []
    if vectorize:
        fn = _vmapped(run, len(args), len(seed_args))
        conv = _tm(lambda x: jnp.broadcast_to(x, (S,) + x.shape), conv)
        groups = [(fn, params, state, data_keys, bad, conv, args + seed_args)]
    else:
        groups = [
            (run, take(params, s), take(state, s), data_keys[s], bad[s], conv)
            + (args + take(seed_args, s),)
            for s in range(S)
        ]
    outs = _drive(groups, bar, lr, steps, chunk, every, recording, has_aux, False)
    if vectorize:
        params, bad, losses, auxes, recs, _, conv = outs[0]
    else:  # each seed's chunks (a converged seed has fewer) joined, then the seeds stacked
        stack = lambda *xs: _tm(lambda *ys: np.stack(ys), *xs)
        params = _tm(lambda *ys: jnp.stack(ys), *[o[0] for o in outs])
        bad = np.array([bool(o[1]) for o in outs])
        losses = [np.stack([np.concatenate(o[2]) for o in outs])]
        auxes = [stack(*[_cat(o[3], 0) for o in outs])] if has_aux else []
        recs = (
            [
                (
                    np.concatenate([r[0] for r in outs[0][4]]),
                    stack(*[_cat([r[1] for r in o[4]], 0) for o in outs]),
                    stack(*[_cat([r[2] for r in o[4]], 0) for o in outs]),
                )
            ]
            if recording
            else []
        )
        conv = None if gtol is None else stack(*[o[6] for o in outs])
    all_losses = np.concatenate(losses, axis=1)
    diverged = np.asarray(bad)
    stopped = np.where(diverged, np.argmax(~np.isfinite(all_losses), axis=1), -1)
    history = _history(records + recs, metrics, 1)
    aux_all = _cat(auxes, 1) if has_aux and auxes else None
    n_bad = int(diverged.sum())
    msg = f"completed {steps} steps, {S} seeds" + (f"; {n_bad} diverged" if n_bad else "")
    conv_at = None if conv is None else np.asarray(conv[0])
    if conv_at is not None:
        msg += f"; {int((conv_at >= 0).sum())} converged (max |gradient| <= {gtol:g})"
    return TrainResult(params, all_losses, diverged, stopped, msg, history, aux_all, conv_at)


_VMAPPED: dict = {}


def _vmapped(run, n_args: int = 0, n_seed_args: int = 0):
    """``run`` vmapped over seeds: params, state, key, bad, conv and the last ``n_seed_args``
    args."""
    cache_key = (run, n_args, n_seed_args)
    try:
        return _VMAPPED[cache_key]
    except KeyError:
        arg_axes = (None,) * n_args + (0,) * n_seed_args
        fn = jax.jit(jax.vmap(run, in_axes=(0, 0, 0, 0, 0, None, None, None, arg_axes)))
        _VMAPPED[cache_key] = fn
        return fn
