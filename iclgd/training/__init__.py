"""Training: the trainer, the optimisers, the loss builders, and Part I's LSA sweep.

* :mod:`iclgd.training.loop` -- :func:`train` and :func:`train_seeds` (optax, ``jit`` +
  ``lax.scan``, one compilation reused, history, divergence checks, L-BFGS);
* :mod:`iclgd.training.timed` -- :func:`timed_train`: a run compiled, then timed; saved where
  ``ICLGD_RUN_CACHE`` says, so that a run a deadline cut resumes;
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
from .timed import timed_train

__all__ = [
    "History",
    "LossFn",
    "TrainResult",
    "trace_count",
    "train",
    "train_seeds",
    "timed_train",
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
