"""iclgd: in-context learning as gradient descent, re-derived and re-run.

The helper library of the iclgd book. Every chapter does ``import iclgd``; the most used names are
re-exported here, the rest live in the submodules:

* :mod:`iclgd.config` -- the scale knob ``ICLGD_SCALE`` (:func:`pick`).
* :mod:`iclgd.tasks` -- in-context linear-regression tasks and embeddings.
* :mod:`iclgd.lsa` -- (multi-head) linear self-attention and y_q-LSA (Part I).
* :mod:`iclgd.baselines` -- one-step GD (exact risk, optimal step), Bayes posterior mean, ridge.
* :mod:`iclgd.training` -- optax training loops with divergence detection.
* :mod:`iclgd.exact` -- exact population risks, exact optima and exact-risk losses.
* :mod:`iclgd.symbolic` -- exact Gaussian expectations and symbolic risks with sympy.
* :mod:`iclgd.linear_transformer` -- Part III's multi-layer linear transformer, preconditioned GD, GD++.
* :mod:`iclgd.representation`, :mod:`iclgd.softmax` -- Part II's tasks and models.
"""

from .config import pick, scale
from .tasks import Prior, TaskBatch, embed, embed_zero_query, linear_guess, make_prior, sample_tasks
from .lsa import gd_weights, init_lsa, init_yq_lsa, lsa_output, lsa_predict, mse, yq_lsa_predict
from .baselines import bayes_posterior_mean, gd_one_step, gd_one_step_risk, gd_optimal_eta, ridge
from .training import TrainResult, evaluate, make_optimizer, sampled_loss, train, train_seeds

__version__ = "0.1.0"
