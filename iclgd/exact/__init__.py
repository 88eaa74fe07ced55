r"""Exact population risks, optima and moments of every model family of the book.

Part I (and Part III's one-layer model): one-layer linear attention at finite context length.

The prediction of every one-layer linear-attention model of Parts I and III is a polynomial in
Gaussian data, so its risk is a polynomial in the parameters whose coefficients are Gaussian
moments. This package computes those moments exactly, for any ``d``, ``C``, prior mean ``mu``, task
covariance ``Omega``, input covariance ``Sigma`` and label noise ``sigma``, and builds from them
exact, differentiable, jittable risks, their exact optima, and losses for :func:`iclgd.train`.

* :mod:`~iclgd.exact.moments` -- moments of ``G = (1/C) sum_i z_i z_i^T`` (the columns share the
  task ``w``, so ``E[G_mn G_pq] = E_w[K_mn K_pq] + (E_w[K_mp K_nq] + E_w[K_mq K_np]) / C`` with
  ``K(w) = E[z z^T | w]``) and :func:`prepare`, which precomputes them once per prior and ``C``.
* :mod:`~iclgd.exact.risks` -- the risk of any predictor ``f = <G (x) x~_q, Mt> + vq^T x~_q``
  (``x~_q = (x_q, 1)``): ``R = ||F Pi F_S||_F^2 + sigma^2``, a sum of squares (accurate in float32);
  multi-head LSA (:func:`lsa_risk`), y_q-LSA, Part III's linear transformer, one GD step.
* :mod:`~iclgd.exact.losses` -- ``loss(params, key)`` = an exact risk, for :func:`iclgd.train`.
* :mod:`~iclgd.exact.optima` -- exact optima: least squares on ``vech G`` for ``H >= d+1`` heads
  (``beta_k = T^+ E[vech G (w~_k - v_k)]``), the best guess of y_q-LSA, Part III's Theorem 1, the
  optimal GD step, and Part I's closed form ``R* = d(d+1)/(C+d+1) + 2 (||w* - g||^2 + c^2)/(Cd+2)``.
* :mod:`~iclgd.exact.search` -- the best LSA with ``H <= d`` heads (a search over the subspace the
  heads leave out) and the best single-head y_q-LSA (L-BFGS from the GD point).
* :mod:`~iclgd.exact.bayes` -- the risk of the Bayes posterior mean.

Every other family has one file here too:

* :mod:`~iclgd.exact.representation` -- Part II: the limit matrix of eq. 34, ``L*`` (Lemma 5), the
  exact population loss of the softmax model (eq. 74-77), ridge moments; and
  :mod:`~iclgd.exact.representation_rates`, Theorems 1-2's constants and steps (eq. 14-18, 21);
* :mod:`~iclgd.exact.pgd` -- Part III: the sparse multi-layer risk (eq. 9), its optimum on the set
  of Theorem 4, tuned preconditioned GD, Theorem 1's optimal ``A``;
* :mod:`~iclgd.exact.gdpp` -- Part III: GD++ (eq. 13) on the set of Theorem 5;
* :mod:`~iclgd.exact.wishart` -- exact Wishart trace moments, the engine of the two above.

The derivations are in the book's chapter *The exact risk engine* (``book/exact_engine.md``); what
the exact risks show about the papers' claims is in the Part I chapters (multi-head LSA theory and
experiments, y_q-LSA). Example::

    import jax, jax.numpy as jnp, iclgd
    from iclgd import exact
    ex = exact.prepare(iclgd.make_prior(10, mu=jnp.ones(10)), C=10)   # moments, once (float64)
    p0 = iclgd.init_lsa(jax.random.key(0), 10, H=1)
    run = iclgd.train(exact.lsa_loss(ex), p0, jax.random.key(1), steps=2000)
    exact.risk64(exact.lsa_risk, run.params, ex)       # the population risk of the result
    exact.lsa_optimum(ex).risk                  # the floor that H >= d heads reach

**Precision.** :func:`prepare` and the ``best_*`` solvers compute in float64 (inside
``jax.enable_x64``) and return NumPy float64 arrays / Python floats, whatever the global setting.
The ``*_risk`` and ``*_loss`` functions are pure ``jnp`` functions in the ambient precision (float32
by default), jittable and differentiable in the parameters; :func:`risk64` evaluates any of them in
float64. The risks are computed on the centred prompt (``G = W G0 W^T`` with ``G0`` that of a
prior of mean 0, :mod:`~iclgd.exact.moments`), so their accuracy does not depend on ``||mu||``:
at ``||mu||^2 = 1e8`` the optimal GD step and the best multi-head LSA agree with their closed forms
to float64 rounding. A float32 risk that overflows is ``inf`` (or a ``ValueError`` naming the
overflow where ``inf - inf`` made it NaN), never a silent NaN.
"""

from .bayes import BayesRisk, bayes_risk
from .core import quadratic_min, risk64
from .gdpp import (
    GDppCritical,
    GDppSearch,
    gdpp_critical_point,
    gdpp_critical_points,
    gdpp_gradient_on_S,
    gdpp_gram_eigenvalues,
    gdpp_lowest,
    gdpp_multistart,
    gdpp_residual,
    gdpp_risk,
    gdpp_risk_expr,
)
from .losses import linear_transformer_loss, lsa_loss, yq_lsa_loss
from .moments import Exact, Moments, gaussian_moments, moments, omega_moments, prepare
from .optima import (
    ClosedForm,
    GDPointGrad,
    LSAOptimum,
    fold_last_row,
    gd_optimal,
    heads_from_M,
    linear_transformer_optimum,
    lsa_optimum,
    lsa_params_from_M,
    multihead_lsa_closed_form,
    reduced_to_lsa_params,
    stack_rank,
    yq_lsa_gd_point_grad,
    yq_lsa_optimum,
)
from .pgd import (
    OptimalScalars,
    TunedGD,
    optimal_scalars,
    pgd_loss,
    pgd_risk,
    scalar_risk_expr,
    theorem1_optimal_A,
    tuned_gd,
)
from .representation import (
    copy_prompt_loss,
    label_moment,
    limit_matrix,
    one_head_lower_bound,
    optimal_loss,
    prediction_gap,
    ridge_gap_sweep,
    ridge_matrix,
    softmax_loss,
    softmax_risk,
    softmax_risk_from_A,
    softmax_risk_xi,
)
from .representation_rates import (
    Theorem1Constants,
    frozen_q_gap,
    theorem1_constants,
    theorem2_steps,
    zeta0,
)
from .risks import (
    gd_risk,
    linear_transformer_risk,
    lsa_risk,
    lsa_risk_reduced,
    ltb_risk,
    predictor_risk,
    sparse_linear_transformer_risk,
    yq_lsa_risk,
)
from .search import SearchResult, lsa_search, yq_lsa_search

__all__ = [
    "Moments",
    "Exact",
    "LSAOptimum",
    "SearchResult",
    "BayesRisk",
    "ClosedForm",
    "GDPointGrad",
    "omega_moments",
    "gaussian_moments",
    "moments",
    "prepare",
    "predictor_risk",
    "lsa_risk_reduced",
    "lsa_risk",
    "ltb_risk",
    "yq_lsa_risk",
    "linear_transformer_risk",
    "sparse_linear_transformer_risk",
    "gd_risk",
    "gd_optimal",
    "risk64",
    "quadratic_min",
    "lsa_loss",
    "yq_lsa_loss",
    "linear_transformer_loss",
    "lsa_optimum",
    "yq_lsa_optimum",
    "linear_transformer_optimum",
    "multihead_lsa_closed_form",
    "yq_lsa_search",
    "lsa_search",
    "bayes_risk",
    "lsa_params_from_M",
    "reduced_to_lsa_params",
    "fold_last_row",
    "heads_from_M",
    "stack_rank",
    "yq_lsa_gd_point_grad",
    "limit_matrix",
    "optimal_loss",
    "ridge_matrix",
    "label_moment",
    "prediction_gap",
    "ridge_gap_sweep",
    "softmax_risk_from_A",
    "softmax_risk",
    "softmax_risk_xi",
    "softmax_loss",
    "zeta0",
    "Theorem1Constants",
    "theorem1_constants",
    "theorem2_steps",
    "frozen_q_gap",
    "one_head_lower_bound",
    "copy_prompt_loss",
    "pgd_risk",
    "pgd_loss",
    "scalar_risk_expr",
    "OptimalScalars",
    "optimal_scalars",
    "TunedGD",
    "tuned_gd",
    "theorem1_optimal_A",
    "gdpp_residual",
    "gdpp_gram_eigenvalues",
    "gdpp_risk_expr",
    "gdpp_risk",
    "gdpp_gradient_on_S",
    "GDppCritical",
    "gdpp_critical_point",
    "GDppSearch",
    "gdpp_critical_points",
    "gdpp_multistart",
    "gdpp_lowest",
]
