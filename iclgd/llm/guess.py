"""The guess models of App. C.3: initial similarity scores for the LLM to refine.

* **The paper's guess model**: the two sentences' MiniLM embeddings concatenated, ``(2D,)`` with
  ``D = 384``, a layer to 16 units with ReLU, a layer to one scalar; MSE loss, Adam with learning
  rate ``1e-3``, 10 epochs of mini-batches of 8 (App. C.3). The layers are initialised as PyTorch's
  ``nn.Linear`` (uniform in ``±1/sqrt(fan_in)``); every epoch visits the training pairs once in a
  fresh random order, the last batch being the remainder (PyTorch's ``DataLoader`` without
  ``drop_last``). Training is one ``jit`` of a ``lax.scan`` over epochs and batches; it does not use
  :func:`iclgd.train`, whose loss sees a PRNG key per step but not the step's position in an epoch.
* **The cosine guess** ``5 cos(e_1, e_2)``: no training, the embedder's own notion of similarity.
* **Cross-fitted guesses** (:func:`cross_fit_guesses`): the guess model's out-of-fold predictions
  on its own training pairs. A context pair's guess then comes from a model that never saw that
  pair, as the query's does, so the demonstrations do not overstate the guess's reliability (in
  sample, the App. C.3 model's error on its training pairs is well below its test error).
* **In-context calibration** (:func:`calibrated_guess`): per prompt, the least-squares line
  ``score ~ a + b guess`` through the ``C`` context pairs, applied to the query's guess -- what a
  learner that fits a line from the guess in context computes, with no language model.

All are clipped to the score range ``[0, 5]`` by default.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import checks as v

__all__ = [
    "GuessFit",
    "init_guess_mlp",
    "guess_mlp",
    "train_guess_model",
    "cosine_guess",
    "cross_fit_guesses",
    "calibrated_guess",
]

SCORE_MAX = 5.0


class GuessFit(NamedTuple):
    """A trained guess model: its parameters and the mean training loss of each epoch."""

    params: dict
    epoch_losses: np.ndarray  # (epochs,)


def init_guess_mlp(key: jax.Array, dim: int = 768, hidden: int = 16) -> dict:
    """Parameters ``{"W1": (dim, hidden), "b1": (hidden,), "W2": (hidden, 1), "b2": (1,)}``, each
    uniform in ``±1/sqrt(fan_in)`` (PyTorch's ``nn.Linear`` default)."""
    v.prng_key("key", key)
    dim, hidden = v.positive_int("dim", dim), v.positive_int("hidden", hidden)
    k = jax.random.split(key, 4)
    u = lambda kk, shape, fan: jax.random.uniform(kk, shape, minval=-1.0, maxval=1.0) / fan**0.5
    return {
        "W1": u(k[0], (dim, hidden), dim),
        "b1": u(k[1], (hidden,), dim),
        "W2": u(k[2], (hidden, 1), hidden),
        "b2": u(k[3], (1,), hidden),
    }


def _mlp(params: dict, X: jax.Array) -> jax.Array:
    """``(n, 2D) -> (n,)``: ``relu(X W1 + b1) W2 + b2``."""
    return (jax.nn.relu(X @ params["W1"] + params["b1"]) @ params["W2"] + params["b2"])[:, 0]


def _pairs(E1, E2, y=None):
    dims = v.Dims()
    E1 = v.array("E1", E1, "n D", dims)
    E2 = v.array("E2", E2, "n D", dims, what="to match E1")
    dt = v.float_dtype()  # float32, or float64 with jax_enable_x64
    if y is not None:
        y = jnp.asarray(v.array("y", y, "n", dims, what="(one score per pair)"), dt)
    return jnp.concatenate([jnp.asarray(E1, dt), jnp.asarray(E2, dt)], 1), y


def guess_mlp(params: dict, E1, E2, *, clip: bool = True) -> np.ndarray:
    """The guess model's scores of the pairs ``(E1[i], E2[i])``: ``(n,)``, clipped to ``[0, 5]``
    unless ``clip=False``. ``E1``, ``E2``: ``(n, D)`` embeddings of the first and second sentences.
    """
    v.param_dict("params", params, ("W1", "b1", "W2", "b2"), "a dict from init_guess_mlp")
    X, _ = _pairs(E1, E2)
    if X.shape[1] != params["W1"].shape[0]:
        raise ValueError(
            f"E1 and E2 must have {params['W1'].shape[0] // 2} columns each to match params, "
            f"got {X.shape[1] // 2}"
        )
    out = _mlp(params, X)
    clip = v.boolean("clip", clip)
    return np.asarray(jnp.clip(out, 0.0, SCORE_MAX) if clip else out)


def cosine_guess(E1, E2, *, clip: bool = True) -> np.ndarray:
    """``5 cos(E1[i], E2[i])``: ``(n,)``, clipped to ``[0, 5]`` unless ``clip=False``."""
    dims = v.Dims()
    E1 = np.asarray(v.array("E1", E1, "n D", dims), np.float64)
    E2 = np.asarray(v.array("E2", E2, "n D", dims, what="to match E1"), np.float64)
    norms = np.linalg.norm(E1, axis=1) * np.linalg.norm(E2, axis=1)
    if np.any(norms == 0):
        raise ValueError("E1 and E2 must have no zero rows (the cosine is undefined)")
    out = SCORE_MAX * np.sum(E1 * E2, axis=1) / norms
    return np.clip(out, 0.0, SCORE_MAX) if v.boolean("clip", clip) else out


def _train(params, X, y, order, mask, lr):
    """``lax.scan`` over epochs and batches: ``order``, ``mask`` are ``(epochs, batches, b)``."""
    opt = optax.adam(lr)

    def batch_loss(p, idx, m):
        err = _mlp(p, X[idx]) - y[idx]
        return jnp.sum(m * err**2) / jnp.sum(m)

    def step(carry, batch):
        p, st = carry
        loss, g = jax.value_and_grad(batch_loss)(p, *batch)
        upd, st = opt.update(g, st, p)
        return (optax.apply_updates(p, upd), st), (loss, jnp.sum(batch[1]))

    def epoch(carry, batches):
        carry, (losses, counts) = jax.lax.scan(step, carry, batches)
        return carry, jnp.sum(losses * counts) / jnp.sum(counts)

    (params, _), epoch_losses = jax.lax.scan(epoch, (params, opt.init(params)), (order, mask))
    return params, epoch_losses


_train_jit = jax.jit(_train)


def train_guess_model(
    key: jax.Array,
    E1,
    E2,
    y,
    *,
    epochs: int = 10,
    batch_size: int = 8,
    learning_rate: float = 1e-3,
    hidden: int = 16,
) -> GuessFit:
    """Train the paper's guess model (App. C.3) on pairs ``(E1[i], E2[i])`` with scores ``y[i]``.

    Args:
        key: PRNG key of the initialisation and of the epochs' orders.
        E1, E2: ``(n, D)`` embeddings of the first and second sentences.
        y: ``(n,)`` scores.
        epochs, batch_size, hidden: ``>= 1`` (paper: 10, 8, 16).
        learning_rate: Adam's rate, ``> 0`` (paper: ``1e-3``).

    Returns:
        A :class:`GuessFit`; ``epoch_losses[e]`` is the mean squared error over the batches of
        epoch ``e`` (weighted by their sizes), each measured before its update.

    Raises:
        FloatingPointError: training diverged (a non-finite loss or parameter); the epoch is named.
    """
    v.prng_key("key", key)
    X, y = _pairs(E1, E2, y)
    epochs = v.positive_int("epochs", epochs)
    b = v.positive_int("batch_size", batch_size)
    lr = v.positive_float("learning_rate", learning_rate)
    k_init, k_order = jax.random.split(key)
    params = init_guess_mlp(k_init, X.shape[1], hidden)
    n = X.shape[0]
    nb = -(-n // b)
    perms = jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(k_order, epochs))
    pad = nb * b - n
    order = jnp.pad(perms, ((0, 0), (0, pad))).reshape(epochs, nb, b)
    mask = jnp.pad(jnp.ones((epochs, n), jnp.float32), ((0, 0), (0, pad))).reshape(epochs, nb, b)
    params, losses = _train_jit(params, X, y, order, mask, lr)
    losses = np.asarray(losses)
    bad = ~np.isfinite(losses)
    if bad.any() or not all(np.isfinite(np.asarray(p)).all() for p in params.values()):
        at = int(np.argmax(bad)) if bad.any() else epochs - 1
        raise FloatingPointError(
            f"the guess model diverged: non-finite loss or parameters in epoch {at + 1} of "
            f"{epochs}; lower learning_rate (got {lr})"
        )
    return GuessFit(params, losses)


def cross_fit_guesses(key: jax.Array, E1, E2, y, *, folds: int = 5, **train_kw) -> np.ndarray:
    """Out-of-fold guesses of the App. C.3 model on its own training pairs.

    The pairs are split at random into ``folds`` parts of (nearly) equal size; the guesses of
    part ``k`` come from :func:`train_guess_model` trained on the other parts.

    Args:
        key: PRNG key of the split (``fold_in(key, 0)``) and of fold ``k``'s training
            (``fold_in(key, k + 1)``).
        E1, E2: ``(n, D)`` embeddings of the first and second sentences; y: ``(n,)`` scores.
        folds: ``2 <= folds <= n``.
        train_kw: passed to :func:`train_guess_model` (``epochs``, ``batch_size``, ...).

    Returns:
        ``(n,)`` guesses, clipped to ``[0, 5]``.
    """
    v.prng_key("key", key)
    X, y = _pairs(E1, E2, y)
    n = X.shape[0]
    folds = v.positive_int("folds", folds, minimum=2)
    if folds > n:
        raise ValueError(f"folds must be <= the number of pairs {n}, got {folds}")
    D = X.shape[1] // 2
    part = np.empty(n, int)
    part[np.asarray(jax.random.permutation(jax.random.fold_in(key, 0), n))] = np.arange(n) % folds
    out = np.empty(n)
    for k in range(folds):
        tr, te = part != k, part == k
        fit = train_guess_model(
            jax.random.fold_in(key, k + 1), X[tr, :D], X[tr, D:], y[tr], **train_kw
        )
        out[te] = guess_mlp(fit.params, X[te, :D], X[te, D:])
    return out


def calibrated_guess(context_guess, context_score, query_guess, *, clip: bool = True) -> np.ndarray:
    """In-context calibration of a guess: least squares ``score ~ a + b guess`` per prompt.

    For prompt ``r`` the line is fitted to the ``C`` points ``(context_guess[r, i],
    context_score[r, i])`` and evaluated at ``query_guess[r]``: ``b = cov / var`` of the context's
    guesses and scores, ``a = mean(score) - b mean(guess)``; when the context's guesses are all
    equal (``var = 0``) ``b = 0``, the prediction is the context's mean score.

    Args:
        context_guess, context_score: ``(R, C)`` the context pairs' guesses and true scores.
        query_guess: ``(R,)`` the queries' guesses.
        clip: clip to ``[0, 5]`` (default).

    Returns:
        ``(R,)`` the calibrated guesses.
    """
    dims = v.Dims()
    g = np.asarray(v.array("context_guess", context_guess, "R C", dims), np.float64)
    s = np.asarray(
        v.array("context_score", context_score, "R C", dims, what="to match context_guess"),
        np.float64,
    )
    q = np.asarray(
        v.array("query_guess", query_guess, "R", dims, what="(one per prompt)"), np.float64
    )
    gc, sc = g - g.mean(1, keepdims=True), s - s.mean(1, keepdims=True)
    var = np.sum(gc**2, 1)
    b = np.divide(np.sum(gc * sc, 1), var, out=np.zeros_like(var), where=var > 0)
    out = s.mean(1) + b * (q - g.mean(1))
    clip = v.boolean("clip", clip)
    return np.clip(out, 0.0, SCORE_MAX) if clip else out
