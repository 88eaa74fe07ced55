"""Loss builders for :func:`~iclgd.training.train`: one call shape, ``loss(params, key, *args)``.

* :func:`sampled_loss` -- Parts I and III: the Monte Carlo ICL risk on fresh prompts of a prior;
* :func:`batch_loss` -- Parts I and III: the mean squared error on one fixed batch (L-BFGS);
* :func:`per_prompt_loss` -- Parts I and III: the squared error of every prompt of a batch;
* :func:`layer_masked_loss` -- Part III: a loss of the first ``k`` layers, ``k`` an argument;
* :func:`sampled_population_loss` -- Part II: eq. 9 on fresh prompts of a representation task;
* :func:`training_set_loss` -- Part II: eq. 9 on minibatches of a fixed training set (Sec. 4);
* :func:`evaluate` -- a sampled loss averaged over fresh batches, with its standard error.

Exact population risks, which ignore the key, are in :mod:`iclgd.exact`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..metrics import _predict_fn, mse
from ..models import Model
from ..models.linear_transformer import PromptMoments, mask_layers
from ..tasks.linear import Prior, TaskBatch, check_prior, sample_tasks
from ..tasks.representation import (
    sample_representation_tasks,
    sample_training_prompts,
)
from .loop import _LOSS_FN, LossFn, _check_args, _loss_output

__all__ = [
    "sampled_loss",
    "batch_loss",
    "per_prompt_loss",
    "layer_masked_loss",
    "sampled_population_loss",
    "training_set_loss",
    "evaluate",
]


def sampled_loss(
    model: Model | Callable[[Any, TaskBatch], jax.Array], prior: Prior | None, C: int, batch: int
) -> LossFn:
    """The Monte Carlo ICL risk: a fresh batch of ``batch`` prompts from ``key`` at each call.

    Args:
        model: a :class:`~iclgd.models.Model`, or ``predict(params, tasks) -> (B,)``.
        prior: the task distribution; ``None`` makes the prior an argument of the loss,
            ``loss(params, key, prior)``, so that :func:`train` with ``args=(prior,)`` trains every
            prior of a sweep with one compilation.
        C: context length.
        batch: prompts per step.

    Returns:
        ``loss(params, key) -> ()`` (or ``loss(params, key, prior)``), the mean squared error of the
        query predictions.
    """
    C = v.positive_int("C", C)
    batch = v.positive_int("batch", batch)
    predict = model.predict if isinstance(model, Model) else model
    v.function("model", predict, "an iclgd Model or a function predict(params, tasks)")
    if prior is not None:
        check_prior(prior)

    def loss_with_prior(params, key, prior):
        tasks = sample_tasks(key, prior, C, batch)
        return mse(predict(params, tasks), tasks.y_target)

    if prior is None:
        return loss_with_prior

    def loss(params, key):
        return loss_with_prior(params, key, prior)

    return loss


def _linear_predict(model) -> Callable[[Any, TaskBatch], jax.Array]:
    predict = model.predict if isinstance(model, Model) else model
    return v.function("model", predict, "an iclgd Model or a function predict(params, tasks)")


def batch_loss(model: Model | Callable[[Any, TaskBatch], jax.Array]) -> LossFn:
    """The mean squared error of the query predictions on one fixed batch (the key is ignored).

    For a batch drawn once per seed and passed with ``train_seeds(..., seed_args=(batch,),
    fixed_key=True)`` (L-BFGS: the loss must be deterministic), e.g. Part III's
    :func:`~iclgd.tasks.sample_paper_prompts` (Ahn et al. Secs. 5.3, 6.1: the empirical version of
    the loss of eq. 5).

    For a model with ``prepare`` (GD++, :class:`~iclgd.models.Model`) the loss also accepts
    ``model.prepare(batch)`` and carries ``loss.prepare``: :func:`~iclgd.training.train` and
    :func:`~iclgd.training.train_seeds` then prepare the fixed batch once, before the first step
    (the same loss, without recomputing the batch's moments at every evaluation).

    Args:
        model: a :class:`~iclgd.models.Model` of Parts I/III, or ``predict(params, tasks) -> (B,)``.

    Returns:
        ``loss(params, key, batch) -> ()``, ``mean((predict(params, batch) - batch.y_target)**2)``
        for a :class:`~iclgd.tasks.TaskBatch` ``batch`` of ``B`` prompts.
    """
    predict = _linear_predict(model)
    prepare = model.prepare if isinstance(model, Model) else None
    if prepare is None:

        def loss(params, key, batch):
            b = v.container("batch", batch, TaskBatch, "an iclgd.tasks.TaskBatch")
            return jnp.mean((predict(params, b) - b.y_target) ** 2)

        return loss

    def prepared_loss(params, key, batch):
        if not isinstance(batch, PromptMoments):
            batch = v.container("batch", batch, TaskBatch, "an iclgd.tasks.TaskBatch")
        return jnp.mean((predict(params, batch) - batch.y_target) ** 2)

    prepared_loss.prepare = prepare
    return prepared_loss


def per_prompt_loss(model: Model | Callable[[Any, TaskBatch], jax.Array]) -> Callable:
    """The squared error of every prompt of a batch, ``(predict(params, batch) - y_target)**2``.

    Its mean is :func:`batch_loss`; the batch may also be given as the five arrays of a
    :class:`~iclgd.tasks.TaskBatch` (``X, y, x_q, y_target, w``, each with a leading prompt axis),
    the form :func:`iclgd.metrics.gradient_stats` passes: ``gradient_stats(per_prompt_loss(model),
    params, *batch)``.

    Args:
        model: a :class:`~iclgd.models.Model` of Parts I/III, or ``predict(params, tasks) -> (B,)``.

    Returns:
        ``errors(params, batch) -> (B,)`` (or ``errors(params, X, y, x_q, y_target, w)``).
    """
    predict = _linear_predict(model)

    def errors(params, *batch):
        if len(batch) == 1:
            b = v.container("batch", batch[0], TaskBatch, "an iclgd.tasks.TaskBatch")
        elif len(batch) == len(TaskBatch._fields):
            b = TaskBatch(*batch)
        else:
            raise ValueError(
                "batch must be one iclgd.tasks.TaskBatch or its 5 arrays (X, y, x_q, y_target, "
                f"w), got {len(batch)} arguments"
            )
        return (predict(params, b) - b.y_target) ** 2

    return errors


def layer_masked_loss(loss: LossFn) -> LossFn:
    """A loss of Part III's linear transformer with some of its layers switched off, the mask an
    argument: ``masked(params, key, on, *args) = loss(mask_layers(params, on), key, *args)``.

    :func:`~iclgd.training.train_seeds` with ``args=(on,)`` then trains the models of every depth
    ``k`` (``on = (1, ..., 1, 0, ..., 0)``, ``k`` ones) in the shape of ``L`` layers with one
    compilation; with a fixed ``on`` it is the loss of ``linear_transformer_model(..., layers=k)``
    (:func:`~iclgd.models.linear_transformer.mask_layers`).

    Args:
        loss: ``loss(params, key, *args) -> ()`` of a linear-transformer model of
            :func:`~iclgd.models.linear_transformer_model`, e.g. :func:`batch_loss`.

    Returns:
        ``masked(params, key, on, *args) -> ()``, ``on`` of shape ``(L,)``, entries 0 or 1.
    """
    loss = v.function("loss", loss, "a loss function loss(params, key, *args)")

    def masked(params, key, on, *args):
        return loss(mask_layers(params, on), key, *args)

    return masked


def evaluate(loss_fn: LossFn, params, key: jax.Array, n_batches: int = 10, args: tuple = ()):
    """Monte Carlo estimate of a sampled loss over ``n_batches`` fresh batches.

    Returns:
        ``(mean, standard_error)`` over the batches, as floats.

    Raises:
        ValueError: if the loss is not a scalar or is not finite on some batch.
    """
    n_batches = v.positive_int("n_batches", n_batches, 2)
    v.prng_key("key", key)
    v.function("loss_fn", loss_fn, _LOSS_FN)
    args = _check_args(args)
    v.finite_tree("params", params)
    keys = jax.random.split(key, n_batches)
    vals = np.asarray(
        jax.lax.map(lambda k: _loss_output(loss_fn(params, k, *args), False)[0], keys)
    )
    bad = np.flatnonzero(~np.isfinite(vals))
    if bad.size:
        raise ValueError(
            f"loss_fn returned {vals[bad[0]]} on batch {int(bad[0])} of {n_batches} (the loss is "
            "not finite at these params: a diverged model, or an overflow in the loss)"
        )
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(n_batches))


def sampled_population_loss(model, batch: int) -> Callable:
    """The population loss of eq. 9 estimated on ``batch`` fresh prompts per call.

    ``L(theta) = 1/2 E[(1/K) sum_k (y_hat_k - y_k)^2]``, ``lambda ~ N(spec.lam_mean,
    spec.lam_std^2 I)`` and the label noise of eq. 1; the dictionary is ``spec``'s.

    Args:
        model: an iclgd :class:`~iclgd.models.Model` of Part II, or ``predict(params, batch) ->
            (B, K)``.
        batch: prompts per call, ``>= 1``.

    Returns:
        ``loss(params, key, spec) -> ()``; pass ``args=(spec,)`` to :func:`iclgd.train`.
    """
    predict = _predict_fn(model)
    batch = v.positive_int("batch", batch)

    def loss(params, key, spec):
        b = sample_representation_tasks(key, spec, batch)
        return 0.5 * jnp.mean((predict(params, b) - b.y_all) ** 2)

    return loss


def training_set_loss(model, n: int, batch: int) -> Callable:
    """Eq. 9 on a fixed training set of ``n`` prompts, ``batch`` of them per call (Sec. 4: "the
    training set with 10000 samples", "a batch size 256").

    Each call draws ``batch`` distinct prompts of the set (uniformly, without replacement within a
    batch, independently between calls: not a shuffled pass per epoch) and returns
    ``1/2 mean_b [1/K sum_k (y_hat_k - y_k)^2]`` on them. The set is
    :func:`iclgd.tasks.sample_training_prompts` of its key; with ``batch = n`` every call sees the
    whole set (the finite-sample training loss).

    Args:
        model: an iclgd :class:`~iclgd.models.Model` of Part II, or ``predict(params, batch) ->
            (B, K)``.
        n: prompts in the training set, ``>= 1``.
        batch: prompts per call, ``1 <= batch <= n``.

    Returns:
        ``loss(params, key, spec, set_key) -> ()``; pass ``args=(spec, set_key)`` to
        :func:`iclgd.train`.
    """
    predict = _predict_fn(model)
    n = v.positive_int("n", n)
    batch = v.positive_int("batch", batch)
    if batch > n:
        raise ValueError(
            f"batch must be <= n (prompts drawn without replacement), got {batch} > {n}"
        )

    def loss(params, key, spec, set_key):
        idx = jax.random.choice(key, n, (batch,), replace=False) if batch < n else jnp.arange(n)
        b = sample_training_prompts(set_key, spec, idx)
        return 0.5 * jnp.mean((predict(params, b) - b.y_all) ** 2)

    return loss
