"""Timed training runs, and a store that lets a run cut short by a deadline resume.

:func:`timed_train` is :func:`~iclgd.training.train` measured: the chunk is compiled first by a
short run, then the run itself is timed, and its steps per second come back with the result (Part
II's Fig. 5 converts a wall-clock budget into steps with them).

A paper-scale run on a lent GPU gets a deadline (``scripts/paper_run.sh``); a chapter that trains
many models in one cell would lose all of them when the deadline interrupts the last. With
``store=NAME`` and the environment variable ``ICLGD_RUN_CACHE`` naming a folder
(:func:`iclgd.config.run_cache_dir`), every finished run is saved there under its name and a
fingerprint of everything that determines it, and a later call with the same name and fingerprint
returns the saved run instead of training again: the result's ``message`` then says so, with the
device and the date it was trained on, and the rate is the one measured then. The fingerprint
covers the parameters, the key, the arguments' arrays, the steps and the trainer's options, the
loss and the metrics as JAX traces them (their jaxprs, and the arrays they close over: a model, a
batch size or a test set changed in a chapter or in iclgd changes it), the trainer's source (the
modules of :mod:`iclgd.training`), the matrix-product precision and the version of JAX; a mismatch
only trains again. Without the variable
(the default, and every ci run) nothing is read or written.

A run in progress is checkpointed too, every 30 s of training (at the end of a chunk): its
parameters, the optimiser's state, the losses and records so far and the seconds spent, in
``NAME-FINGERPRINT.partial.npz``. A later call finds it, compiles, and goes on from that step
(step ``i`` draws its data from ``fold_in(key, i)``, so the steps are those of an uncut run); the
finished run replaces the checkpoint, its message adds "resumed from a checkpoint at step N", its
rate is the steps over the seconds of every part, and its history keeps no parameters. A
checkpoint made on another device is not resumed (a warning says so): the rate must be one
device's.

Example::

    res, rate = iclgd.training.timed_train(
        loss, model.init(jax.random.key(0)), jax.random.key(1), steps=2000, warmup=50,
        learning_rate=1e-3, store="H8")
    res.losses, rate  # (2000,) losses; steps per second of the timed run
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..config import run_cache_dir
from .loop import History, LossFn, TrainResult, train

__all__ = ["timed_train"]

#: A store name: it becomes part of a file name. Functions among the options (``metrics``, an optax
#: optimiser) enter the fingerprint by their name only.
_STORE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_FORMAT = 2
_CHECKPOINT_S = 30.0  # seconds of training between checkpoints of a stored run in progress


def timed_train(
    loss_fn: LossFn,
    params,
    key: jax.Array,
    *,
    steps: int,
    warmup: int,
    store: str | None = None,
    **options,
) -> tuple[TrainResult, float]:
    """Train ``steps`` steps with :func:`~iclgd.training.train` and measure the steps per second.

    First a run of ``warmup`` steps (same options, the key folded with 1; its result is discarded)
    compiles the chunk, so the timed run measures steps, not compilation; pass ``chunk`` equal to
    ``warmup`` (or a divisor of it) for that to hold. The timed run starts from ``params`` with
    ``key``; the clock stops once its final parameters are ready.

    Args:
        loss_fn, params, key, steps: as for :func:`~iclgd.training.train`.
        warmup: steps of the compiling run, ``1 <= warmup <= steps``.
        store: a name (letters, digits, ``.``, ``_``, ``-``; at most 100 characters). Where
            ``ICLGD_RUN_CACHE`` names a folder, the finished run is saved there, and a saved run of
            the same name and fingerprint is returned instead of training (module docstring). The
            saved run keeps the losses, the history's steps and metrics (a dict of arrays, or
            ``None``), ``diverged``, ``stopped_at``, ``converged_at``, the message and the rate;
            not the parameters: ``params`` and ``history.params`` of a loaded run are ``None``
            (and ``history.params`` of a run resumed from a checkpoint).
        **options: any other keyword of :func:`~iclgd.training.train`.

    Returns:
        ``(result, rate)``: the :class:`~iclgd.training.TrainResult` and the timed run's steps per
        second.

    Raises:
        ValueError: bad ``steps``/``warmup``, a bad ``store`` name; with ``store``: ``has_aux``
            (the aux output is not stored), an optax optimiser object instead of a name (its
            settings cannot be fingerprinted), or a ``metrics`` output that is not a dict of arrays.
        TypeError: as :func:`~iclgd.training.train`.
    """
    steps = v.positive_int("steps", steps)
    warmup = v.positive_int("warmup", warmup)
    if warmup > steps:
        raise ValueError(f"warmup must be at most steps ({steps}), got {warmup}")
    path = None
    if store is not None:
        if not isinstance(store, str) or not _STORE_NAME.match(store):
            raise ValueError(
                "store must be a name of letters, digits, '.', '_' or '-' (at most 100 "
                f"characters, not starting with '.', '_' or '-'), got {store!r}"
            )
        if options.get("has_aux"):
            raise ValueError("store: a run with has_aux=True cannot be stored (aux is not kept)")
        if not isinstance(options.get("optimizer", "adam"), str):
            raise ValueError(
                "store: pass the optimizer by name (an optax object's settings are hidden)"
            )
        folder = run_cache_dir()
        if folder is not None and options.get("metrics") is not None:
            out = jax.eval_shape(options["metrics"], params)  # checked before any training
            if not (isinstance(out, dict) and all(isinstance(k, str) for k in out)):
                raise ValueError("store: the metrics output must be a dict of arrays to be stored")
        if folder is not None:
            fingerprint = _fingerprint(store, loss_fn, params, key, steps, warmup, options)
            path = folder / f"{store}-{fingerprint}.npz"
            if path.exists():
                return _load(path)
    partial = None if path is None else path.with_name(path.stem + ".partial.npz")
    prior = None if partial is None else _load_partial(partial)
    train(loss_fn, params, jax.random.fold_in(key, 1), steps=warmup, **options)  # compiles
    spent = 0.0 if prior is None else prior["elapsed"]
    t0 = last = time.perf_counter()

    def checkpoint(first, done, p, state, bad, conv, losses, records):
        nonlocal last
        now = time.perf_counter()
        if now - last >= _CHECKPOINT_S:
            _save_partial(
                partial,
                prior,
                done,
                spent + now - t0,
                (p, state, bad, conv),
                losses,
                first + records,
            )
            last = time.perf_counter()

    resume = None if prior is None else functools.partial(_restore, prior["resume"])
    hook = None if partial is None else checkpoint
    result = train(loss_fn, params, key, steps=steps, _resume=resume, _on_chunk=hook, **options)
    jax.block_until_ready(result.params)
    rate = steps / (spent + time.perf_counter() - t0)
    if prior is not None:
        result = _joined(prior, result)
    if path is not None:
        _save(path, result, rate)
        partial.unlink(missing_ok=True)
    return result, rate


def _restore(resume: tuple, params, opt_state, conv, steps: int, chunk: int):
    """``(done, params, opt_state, bad, conv)`` from a checkpoint's ``resume = (done, params,
    opt_state, bad, conv)`` (lists of leaves), shaped and typed as the fresh run's ``params``,
    ``opt_state`` and ``conv`` (``train``'s ``_resume``, with ``functools.partial``)."""
    done, p_leaves, s_leaves, bad, c_leaves = resume
    done = int(done)
    if not (0 < done < steps and done % chunk == 0):
        raise ValueError(f"_resume: step {done} is not a chunk boundary inside the run")
    out = []
    for template, got in zip((params, opt_state, conv), (p_leaves, s_leaves, c_leaves)):
        ref, treedef = jax.tree_util.tree_flatten(template)
        if len(ref) != len(got) or any(np.shape(a) != np.shape(b) for a, b in zip(ref, got)):
            raise ValueError("_resume: the saved state does not match this run's shapes")
        out.append(treedef.unflatten([jnp.asarray(b, dtype=a.dtype) for a, b in zip(ref, got)]))
    return done, out[0], out[1], jnp.asarray(bad, dtype=bool), out[2]


def _save_partial(path, prior, done, elapsed, state, losses, records) -> None:
    """Checkpoint a run in progress at step ``done`` (atomically): its parameters, optimiser
    state, ``bad`` and ``conv`` as leaves, the losses and history records so far (after those of
    ``prior``, the checkpoint it resumed from, if any; the records' parameters are not kept), the
    seconds of timed training so far and the device."""
    p, opt_state, bad, conv = state
    head = [] if prior is None else [prior["losses"]]
    steps = [] if prior is None else [prior["steps"]]
    steps += [np.asarray(r[0]) for r in records]
    arrays = {
        "losses": np.concatenate(head + [np.asarray(x) for x in losses]),
        "steps": np.concatenate(steps) if steps else np.zeros(0, int),
        "bad": np.asarray(bad),
    }
    names = None
    if records and records[0][2] is not None:
        names = sorted(records[0][2])
    elif prior is not None:
        names = prior["metric_names"]
    for k in names or ():
        old = [] if prior is None else [prior["metrics"][k]]
        arrays[f"metric_{k}"] = np.concatenate(old + [np.asarray(r[2][k]) for r in records])
    for tag, tree in (("p", p), ("s", opt_state), ("c", conv)):
        leaves = jax.tree_util.tree_leaves(tree)
        arrays.update({f"{tag}{i}": np.asarray(x) for i, x in enumerate(leaves)})
        arrays[f"n_{tag}"] = np.array(len(leaves))
    meta = {"format": _FORMAT, "done": int(done), "elapsed": float(elapsed), "device": _device()}
    meta["metrics"] = names
    meta["resumed_at"] = [] if prior is None else prior["resumed_at"]
    arrays["meta"] = np.array(json.dumps(meta))
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def _load_partial(path: Path) -> dict | None:
    """The checkpoint at ``path`` (see :func:`_save_partial`), or ``None`` if there is none or it
    was made on another device (its steps per second would not be this device's)."""
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{path}: a checkpoint of another format ({meta.get('format')})")
        if meta["device"] != _device():
            warnings.warn(
                f"{path.name}: checkpoint made on {meta['device']}, not on {_device()}: the run "
                "starts again (its steps per second must be one device's)",
                stacklevel=3,
            )
            return None
        leaves = {t: [z[f"{t}{i}"] for i in range(int(z[f"n_{t}"]))] for t in "psc"}
        names = meta["metrics"]
        return {
            "resume": (meta["done"], leaves["p"], leaves["s"], z["bad"], leaves["c"]),
            "losses": z["losses"],
            "steps": z["steps"],
            "metrics": None if names is None else {k: z[f"metric_{k}"] for k in names},
            "metric_names": names,
            "elapsed": meta["elapsed"],
            "resumed_at": meta["resumed_at"] + [meta["done"]],
        }


def _joined(prior: dict, result: TrainResult) -> TrainResult:
    """``result`` of a run resumed from the checkpoint ``prior``, with the checkpoint's losses and
    records ahead of its own (the records' parameters are ``None``: the checkpoint keeps none)."""
    losses = np.concatenate([prior["losses"], np.asarray(result.losses)])
    history = result.history
    if history is not None:
        metrics = None
        if history.metrics is not None:
            metrics = {
                k: np.concatenate([prior["metrics"][k], np.asarray(history.metrics[k])])
                for k in history.metrics
            }
        history = History(np.concatenate([prior["steps"], history.steps]), None, metrics)
    at = prior["resumed_at"]
    where = f"a checkpoint at step {at[0]}" if len(at) == 1 else "checkpoints at steps "
    where += "" if len(at) == 1 else ", ".join(str(s) for s in at)
    message = f"{result.message} (resumed from {where})"
    return result._replace(losses=losses, history=history, message=message)


def _digest(h, x) -> None:
    """Feed one leaf (an array or a plain value) into the hash ``h``."""
    if isinstance(x, (jax.Array, np.ndarray, np.generic)):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        a = np.asarray(x)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    elif callable(x):
        h.update(f"fn:{getattr(x, '__qualname__', type(x).__name__)}".encode())
    else:
        h.update(repr(x).encode())


@functools.cache
def _source_digest() -> str:
    """sha256 of the trainer's source, the modules of :mod:`iclgd.training`: what the traced loss
    and metrics do not show (the optimiser's steps, the chunks, the checks)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.glob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _trace_digest(h, fn, *args) -> None:
    """Feed ``fn``'s jaxpr at ``args`` (no memory addresses) and the arrays it closes over."""
    closed = jax.make_jaxpr(fn)(*args)
    h.update(re.sub(r" at 0x[0-9a-fA-F]+", "", str(closed.jaxpr)).encode())
    for const in closed.consts:
        _digest(h, const)


def _fingerprint(store, loss_fn, params, key, steps, warmup, options) -> str:
    """16 hex digits of sha256 over everything that determines the run (module docstring)."""
    h = hashlib.sha256()
    settings = {
        "format": _FORMAT,
        "store": store,
        "steps": steps,
        "warmup": warmup,
        "precision": str(jax.config.jax_default_matmul_precision),
        "x64": bool(jax.config.jax_enable_x64),
        "trainer_source": _source_digest(),
        "jax": jax.__version__,
    }
    h.update(json.dumps(settings, sort_keys=True).encode())
    for leaf in jax.tree_util.tree_leaves((params, key)):
        _digest(h, leaf)
    for name in sorted(options):
        h.update(f"|{name}=".encode())
        for leaf in jax.tree_util.tree_leaves(options[name]):
            _digest(h, leaf)
        if not jax.tree_util.tree_leaves(options[name]):
            _digest(h, options[name])
    _trace_digest(h, loss_fn, params, key, *options.get("args", ()))
    if options.get("metrics") is not None:
        _trace_digest(h, options["metrics"], params)
    return h.hexdigest()[:16]


def _device() -> str:
    """The device a run trains on, e.g. ``NVIDIA H100 80GB HBM3`` or ``cpu``."""
    dev = jax.devices()[0]
    return str(getattr(dev, "device_kind", None) or dev.platform)


def _save(path: Path, result: TrainResult, rate: float) -> None:
    """Write ``result`` (no parameters) and ``rate`` to ``path`` atomically."""
    hist = result.history
    metrics = None if hist is None else hist.metrics  # a dict: checked by timed_train
    meta = {
        "format": _FORMAT,
        "message": result.message,
        "diverged": bool(result.diverged),
        "stopped_at": None if result.stopped_at is None else int(result.stopped_at),
        "converged_at": None if result.converged_at is None else int(result.converged_at),
        "rate": float(rate),
        "device": _device(),
        "trained_at": time.strftime("%Y-%m-%d", time.gmtime()),
        "history": hist is not None,
        "metrics": None if metrics is None else sorted(metrics),
    }
    arrays = {"losses": np.asarray(result.losses), "meta": np.array(json.dumps(meta))}
    if hist is not None:
        arrays["steps"] = np.asarray(hist.steps)
        for k in meta["metrics"] or ():
            arrays[f"metric_{k}"] = np.asarray(metrics[k])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def _load(path: Path) -> tuple[TrainResult, float]:
    """The run saved at ``path`` (no parameters) and its rate."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{path}: a stored run of another format ({meta.get('format')})")
        history = None
        if meta["history"]:
            names = meta["metrics"]
            metrics = None if names is None else {k: z[f"metric_{k}"] for k in names}
            history = History(z["steps"], None, metrics)
        losses = z["losses"]
    message = (
        f"{meta['message']} (loaded from ICLGD_RUN_CACHE: trained on {meta['device']}, "
        f"{meta['trained_at']})"
    )
    result = TrainResult(
        None,
        losses,
        meta["diverged"],
        meta["stopped_at"],
        message,
        history,
        None,
        meta["converged_at"],
    )
    return result, meta["rate"]
