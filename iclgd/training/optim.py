"""Optimisers by name (optax): ``"adam"``, ``"adamw"``, ``"sgd"``, ``"lbfgs"``, one rate or one per
parameter group."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from .. import checks as v

__all__ = ["OPTIMIZERS", "TorchLBFGSState", "make_optimizer", "torch_lbfgs"]


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


def _value_and_grad(value, params, key, state, reuse: bool):
    """``((loss, aux), grads)`` of ``value(params, key) -> (loss, aux)`` at the step's parameters.

    ``reuse`` (optax's L-BFGS, one parameter group, no aux): the zoom line search of the previous
    step already evaluated the loss and its gradient at the point it accepted, which are these
    parameters, and stored them in ``state``: fetch them (``optax.value_and_grad_from_state``; the
    first step, whose state holds ``inf``, evaluates). This saves one of the about 2.3 evaluations
    of an L-BFGS iteration; the line search computes the same function, so the values are the same.

    Args:
        value: ``value(params, key) -> (loss (), aux)``.
        params: the parameter pytree; key: the step's PRNG key; state: the optimiser state.
        reuse: fetch from ``state`` (``aux`` is then ``None``).

    Returns:
        ``((loss, aux), grads)``, ``grads`` shaped like ``params``.
    """
    if not reuse:
        return jax.value_and_grad(value, has_aux=True)(params, key)
    fn = optax.value_and_grad_from_state(lambda p: value(p, key)[0])
    loss, grads = fn(params, state=state)
    return (loss, None), grads


def _is_lbfgs(opt) -> bool:
    try:
        state = opt.init({"x": jnp.zeros(1)})
    except Exception:  # pragma: no cover - an exotic transformation
        return False
    leaves = jax.tree_util.tree_leaves(state, is_leaf=lambda s: hasattr(s, "_fields"))
    return any("Linesearch" in type(s).__name__ for s in leaves)


class TorchLBFGSState(NamedTuple):
    """State of :func:`torch_lbfgs` (``m`` pairs of flat vectors of the parameters' size ``P``)."""

    count: jax.Array  # iterations done
    s: jax.Array  # (m, P) steps x_{k+1} - x_k, a ring buffer
    y: jax.Array  # (m, P) gradient differences
    sy: jax.Array  # (m, m) <s_i, y_j> of the slots
    yy: jax.Array  # (m, m) <y_i, y_j> of the slots
    head: jax.Array  # slot of the next pair
    stored: jax.Array  # pairs held, <= m
    h_diag: jax.Array  # <s, y> / <y, y> of the newest pair (1 before any)
    prev_grad: jax.Array  # (P,)
    prev_step: jax.Array  # (P,) the last step t * d (also when it was not taken)


def torch_lbfgs(
    learning_rate: float = 0.1, history_size: int = 100
) -> optax.GradientTransformation:
    """``torch.optim.LBFGS(params, lr, history_size=..., line_search_fn=None)``, one optax update
    per inner iteration of torch's ``step`` (``max_iter`` updates make one torch step).

    The direction is torch's two-loop product ``-H g``, computed by the compact form of the L-BFGS
    matrix (equal in exact arithmetic): two triangular solves of size ``history_size`` instead
    of ``2 * history_size`` sequential vector steps, which on a GPU cost more than the loss.

    Without a line search torch's L-BFGS takes the fixed step ``lr * d`` along the two-loop
    direction ``d``; its first iteration ever takes ``min(1, 1/||g||_1) * lr * (-g)``; a pair
    ``(s, y)`` enters the memory only if ``<y, s> > 1e-10`` (the oldest leaves when
    ``history_size`` are held), and the initial inverse Hessian is ``<s, y>/<y, y>`` of the newest
    pair. When ``d`` is not a descent direction (``<g, d> > -1e-9``, torch's
    ``tolerance_change``) torch takes no step, and, its state then unchanged, none afterwards: so
    here. Not emulated: torch's early exits from one ``step`` call (loss change or step below
    ``tolerance_change``, which shorten that call, and ``max |g| <= tolerance_grad``: pass
    ``gtol`` to the trainer). This is the optimiser of Ahn et al.'s public code
    (github.com/chengxiang/LinearTransformer: ``lr=0.1, max_iter=4,
    history_size=600``); ``optax.lbfgs`` (``"lbfgs"``) instead searches each step's length.

    Args:
        learning_rate: torch's ``lr``, ``> 0``.
        history_size: torch's ``history_size``, an integer ``>= 1``.

    Returns:
        an optax transformation; ``update(grads, state, params)`` needs ``params``.

    Example:
        >>> import jax.numpy as jnp, optax
        >>> from iclgd import training
        >>> opt = training.torch_lbfgs(learning_rate=1.0, history_size=5)
        >>> x = {"w": jnp.array([3.0, -2.0])}  # minimise |w|^2 / 2: gradient w
        >>> state = opt.init(x)
        >>> for _ in range(3):
        ...     updates, state = opt.update(x, state, x)
        ...     x = optax.apply_updates(x, updates)
        >>> bool(jnp.abs(x["w"]).max() < 1e-6)
        True
    """
    lr = _check_lr("learning_rate", learning_rate)
    m = v.positive_int("history_size", history_size)

    def init(params):
        flat, _ = ravel_pytree(params)
        pairs, gram = jnp.zeros((m, flat.size), flat.dtype), jnp.zeros((m, m), flat.dtype)
        z, one, i0 = jnp.zeros_like(flat), jnp.ones((), flat.dtype), jnp.zeros((), jnp.int32)
        return TorchLBFGSState(i0, pairs, pairs, gram, gram, i0, i0, one, z, z)

    def update(grads, state, params=None):
        if params is None:
            raise ValueError("torch_lbfgs needs params: update(grads, state, params)")
        g, unravel = ravel_pytree(grads)
        st = state
        first = st.count == 0
        y_new, s_new = g - st.prev_grad, st.prev_step
        ys = jnp.vdot(y_new, s_new)
        accept = ~first & (ys > 1e-10)
        h = st.head
        S, Y = st.s.at[h].set(s_new), st.y.at[h].set(y_new)
        sy = st.sy.at[h, :].set(Y @ s_new).at[:, h].set(S @ y_new)
        yy = st.yy.at[h, :].set(Y @ y_new).at[:, h].set(Y @ y_new)
        keep = lambda new, old: jnp.where(accept, new, old)
        S, Y, sy, yy = keep(S, st.s), keep(Y, st.y), keep(sy, st.sy), keep(yy, st.yy)
        head = keep((h + 1) % m, h)
        stored = keep(jnp.minimum(st.stored + 1, m), st.stored)
        gamma = keep(ys / jnp.vdot(y_new, y_new), st.h_diag)
        # H g by the compact form of Byrd, Nocedal and Schnabel (1994, eq. 3.1), pairs oldest
        # first: the two-loop recursion's product, without its 2m sequential steps
        order = (head - stored + jnp.arange(m)) % m
        live = jnp.arange(m) < stored
        both = live[:, None] & live[None, :]
        Sc, Yc = S[order], Y[order]  # unheld slots are zero vectors
        SY = sy[order][:, order]
        R = jnp.where(both, jnp.triu(SY), 0.0) + jnp.diag(jnp.where(live, 0.0, 1.0))
        Dg = jnp.where(live, jnp.diag(SY), 0.0)
        a, b = Sc @ g, Yc @ g
        r_a = jax.scipy.linalg.solve_triangular(R, a, lower=False)  # R^{-1} S^T g
        inner = Dg * r_a + gamma * (yy[order][:, order] @ r_a) - gamma * b
        top = jax.scipy.linalg.solve_triangular(R, inner, trans="T", lower=False)
        hg = gamma * g + Sc.T @ top - gamma * (Yc.T @ r_a)
        d = jnp.where(first, -g, -hg)
        t = jnp.where(first, jnp.minimum(1.0, 1.0 / jnp.sum(jnp.abs(g))) * lr, lr)
        step = t * d
        descent = jnp.vdot(g, d) <= -1e-9
        new = TorchLBFGSState(st.count + 1, S, Y, sy, yy, head, stored, gamma, g, step)
        return unravel(jnp.where(descent, step, jnp.zeros_like(step))), new

    return optax.GradientTransformation(init, update)
