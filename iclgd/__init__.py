"""iclgd: in-context learning as gradient descent, re-derived and re-run.

The helper library of the iclgd book. Every chapter does ``import iclgd``; the most used names are
re-exported here, the rest live in the submodules, one concern each:

* :mod:`iclgd.config` -- the scale knob ``ICLGD_SCALE`` (:func:`pick`); importing iclgd asks JAX
  for full float32 matrix products (:func:`iclgd.config.full_float32_matmuls`: no TensorFloat-32 on
  a GPU), unless the user chose a precision.
* :mod:`iclgd.checks` -- the argument checks every public function runs.
* :mod:`iclgd.book` -- what a chapter glues into its text (:func:`~iclgd.book.glue`, which works
  without myst-nb, e.g. on Colab; :func:`~iclgd.book.fmt`).
* :mod:`iclgd.tasks` -- the prompt distributions and samplers: ``linear`` (Parts I, III),
  ``representation`` (Part II).
* :mod:`iclgd.models` -- one interface, ``model.init(key)`` / ``model.predict(params, batch)``, for
  every family: multi-head LSA and y_q-LSA (Part I), the linear transformer (Part III), softmax
  attention and the pre-LN transformer (Part II).
* :mod:`iclgd.exact` -- exact population risks, optima and moments, one file per family.
* :mod:`iclgd.baselines` -- the algorithms the models are compared with: GD, preconditioned GD,
  GD++, the Bayes posterior mean, ridge regression (Parts I-III).
* :mod:`iclgd.metrics` -- errors and distances on samples: the squared error every loss is built
  from, ``Dist(M, I)``, Part II's inference loss.
* :mod:`iclgd.training` -- the trainer (optax, compiled once, history, multi-seed, L-BFGS), timed
  runs that a deadline can cut and a later call resume (``timed_train``), the loss builders, and
  Part I's LSA sweep.
* :mod:`iclgd.symbolic` -- exact Gaussian expectations and symbolic risks with sympy.
* :mod:`iclgd.ladder` -- the risk ladder across the three papers.
* :mod:`iclgd.plot` -- every figure of the book.
* :mod:`iclgd.llm` -- Part I Sec. 5.3: sentence embeddings and the LLM refinement runs.
"""

from . import config, models
from .baselines import bayes_posterior_mean, gd_one_step, ridge, ridge_weights
from .config import pick, scale
from .metrics import cosine, mse
from .models import Model
from .models.lsa import gd_weights, init_lsa, init_yq_lsa, lsa_output, lsa_predict, yq_lsa_predict
from .tasks import Prior, TaskBatch, embed, embed_zero_query, linear_guess, make_prior, sample_tasks
from .training import (
    History,
    TrainResult,
    batch_loss,
    evaluate,
    make_optimizer,
    sampled_loss,
    train,
    train_seeds,
)

config.full_float32_matmuls()  # before any computation: no TensorFloat-32 on a GPU

__all__ = [
    "pick",
    "scale",
    "Prior",
    "TaskBatch",
    "embed",
    "embed_zero_query",
    "linear_guess",
    "make_prior",
    "sample_tasks",
    "cosine",
    "mse",
    "models",
    "Model",
    "gd_weights",
    "init_lsa",
    "init_yq_lsa",
    "lsa_output",
    "lsa_predict",
    "yq_lsa_predict",
    "bayes_posterior_mean",
    "gd_one_step",
    "ridge",
    "ridge_weights",
    "History",
    "TrainResult",
    "evaluate",
    "make_optimizer",
    "batch_loss",
    "sampled_loss",
    "train",
    "train_seeds",
]

__version__ = "0.1.0"

_LAZY = ("exact", "symbolic", "plot", "ladder", "llm", "metrics", "baselines", "tasks", "training")


def __getattr__(name: str):
    """``iclgd.exact``, ``iclgd.symbolic``, ``iclgd.plot``, ... without an explicit import
    (PEP 562); sympy and matplotlib are imported only when a chapter first uses them."""
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
