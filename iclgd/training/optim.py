"""Optimisers by name (optax): ``"adam"``, ``"adamw"``, ``"sgd"``, ``"lbfgs"``, one rate or one per
parameter group."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from .. import checks as v

__all__ = ["OPTIMIZERS", "make_optimizer"]


OPTIMIZERS = ("adam", "adamw", "sgd", "lbfgs")


def _base(name: str, lr) -> optax.GradientTransformation:
    if name == "lbfgs":
        return optax.lbfgs()
    return {"adam": optax.adam, "adamw": optax.adamw, "sgd": optax.sgd}[name](lr)


def _check_lr(name: str, lr) -> float:
    lr = v.nonneg_float(name, lr)
    if lr == 0:
        raise ValueError(f"{name} must be > 0, got 0")
    return lr


def _build(name: str, lr) -> optax.GradientTransformation:
    """The optax transformation for ``name`` with learning rate(s) ``lr`` (a scalar or a dict)."""
    if isinstance(lr, dict):
        groups = tuple(sorted(lr))

        def labels(params):
            return {k: k for k in params}

        return optax.multi_transform({g: _base(name, lr[g]) for g in groups}, labels)
    return _base(name, lr)


def make_optimizer(
    name: str = "adam", learning_rate: float | dict = 5e-4
) -> optax.GradientTransformation:
    """An optax optimiser by name: ``"adam"``, ``"adamw"``, ``"sgd"`` or ``"lbfgs"``.

    Args:
        name: the optimiser.
        learning_rate: a rate ``> 0``, or a dict ``{group: rate}`` giving each top-level entry of a
            parameter dict its own rate (``optax.multi_transform``). Ignored by ``"lbfgs"``, which
            uses optax's zoom line search and needs a deterministic loss (an exact risk, or
            ``fixed_key=True`` in :func:`train`).
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    return _build(name, _lr_spec(learning_rate))


def _lr_spec(learning_rate):
    if isinstance(learning_rate, dict):
        if not learning_rate:
            raise ValueError("learning_rate must be a number > 0 or a non-empty dict {group: rate}")
        return {str(k): _check_lr(f"learning_rate[{k!r}]", r) for k, r in learning_rate.items()}
    return _check_lr("learning_rate", learning_rate)


def _resolve(optimizer, learning_rate):
    """``(opt_key, optimizer object, lr pytree, is_lbfgs)`` for the cache."""
    if isinstance(optimizer, str):
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        lr = _lr_spec(learning_rate)
        groups = tuple(sorted(lr)) if isinstance(lr, dict) else ()
        lr_tree = tuple(jnp.float32(lr[g]) for g in groups) if groups else jnp.float32(lr)
        return (optimizer, groups), _build(optimizer, lr), lr_tree, optimizer == "lbfgs"
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise v.ArgumentTypeError(
            f"optimizer must be an optax GradientTransformation or one of {OPTIMIZERS}, "
            f"got {type(optimizer).__name__}"
        )
    return (optimizer, ()), optimizer, jnp.float32(0.0), _is_lbfgs(optimizer)


def _is_lbfgs(opt) -> bool:
    try:
        state = opt.init({"x": jnp.zeros(1)})
    except Exception:  # pragma: no cover - an exotic transformation
        return False
    leaves = jax.tree_util.tree_leaves(state, is_leaf=lambda s: hasattr(s, "_fields"))
    return any("Linesearch" in type(s).__name__ for s in leaves)
