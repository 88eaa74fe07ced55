"""Training: the trainer, the optimisers, the loss builders, and Part I's LSA sweep.

* :mod:`iclgd.training.loop` -- :func:`train` and :func:`train_seeds` (optax, ``jit`` +
  ``lax.scan``, one compilation reused, history, divergence checks, L-BFGS);
* :mod:`iclgd.training.optim` -- :func:`make_optimizer`;
* :mod:`iclgd.training.losses` -- loss builders, ``loss(params, key, *args)``, and :func:`evaluate`;
* :mod:`iclgd.training.lsa_sweep` -- many LSA configurations of Part I trained on one stream of
  prompts.
"""

from .loop import History, LossFn, TrainResult, trace_count, train, train_seeds
from .losses import (
    batch_loss,
    evaluate,
    layer_masked_loss,
    per_prompt_loss,
    sampled_loss,
    sampled_population_loss,
    training_set_loss,
)
from .optim import OPTIMIZERS, TorchLBFGSState, make_optimizer, torch_lbfgs

__all__ = [
    "History",
    "LossFn",
    "TrainResult",
    "trace_count",
    "train",
    "train_seeds",
    "evaluate",
    "sampled_loss",
    "batch_loss",
    "per_prompt_loss",
    "layer_masked_loss",
    "sampled_population_loss",
    "training_set_loss",
    "OPTIMIZERS",
    "make_optimizer",
    "torch_lbfgs",
    "TorchLBFGSState",
]
