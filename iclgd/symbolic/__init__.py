"""Exact Gaussian expectations and symbolic linear-self-attention risks (sympy).

The book derives stationary-point gradients and closed-form risks *from the model definitions*:
the prediction of a linear self-attention (LSA) model is a polynomial in jointly Gaussian data
(``x_i``, ``x_q``, ``w_hat``, label noise), so its risk is a finite sum of Gaussian moments, which
this package evaluates exactly. Nothing here retypes a paper's closed form.

* :mod:`~iclgd.symbolic.gaussian` -- Gaussian moments: :func:`gaussian_expectation` (one jointly
  Gaussian block, symbolic mean and covariance allowed), :func:`expect_independent` (independent
  blocks, the fast path), :func:`expect_nested` (conditional, innermost stage first),
  :func:`expect_product` (``E[a b]`` as a bilinear form) and :func:`symbolic_risk` (eq. 4).
* :mod:`~iclgd.symbolic.models` -- the models, as sympy expressions (``*_expr``, parameters first,
  then ``E``, as in :mod:`iclgd.models.lsa`): :func:`embedding` (Part I eq. 2),
  :func:`attention_head_expr` (eq. 5), :func:`lsa_prediction_expr` (eq. 3),
  :func:`multihead_lsa_prediction_expr` (eq. 6), :func:`lsa_prediction_uq_expr` (reduced
  parameters) and :func:`linear_regression_task` (the data model of Part I section 2).
* :mod:`~iclgd.symbolic.calculus` -- :func:`gradient`, :func:`lambdify_risk`,
  :func:`lambdify_gradient` turn a sympy risk into a jax (or numpy) callable, so that the book can
  compare a sympy gradient with ``jax.grad`` of a Monte Carlo risk; :func:`frobenius`,
  :func:`bottom_right`.
* The chapters' derivations, one module per chapter (import them by name):
  :mod:`iclgd.symbolic.gd_step` (the one-step-GD construction of "The shared setting"),
  :mod:`iclgd.symbolic.multihead` (Part I, multi-head LSA theory: App. A.1 construction, Gram
  moments, head risks, closed form), :mod:`iclgd.symbolic.yq_lsa` (Part I, y_q-LSA: Theorem 4,
  the linear class, the linear transformer block).
* :mod:`~iclgd.symbolic.core` -- symbols (:func:`gaussian_vector`, :func:`weight_matrix`,
  :func:`flatten_params`) and input conversion.

Example::

    >>> import sympy as sp
    >>> x, y = sp.symbols("x y", real=True)
    >>> rho = sp.Symbol("rho", real=True)
    >>> gaussian_expectation(x**2 * y**2, [x, y], cov=sp.Matrix([[1, rho], [rho, 1]]))
    2*rho**2 + 1

Tractability (CPU seconds on the 2-core CI machine; ``symbolic_risk`` / ``lambdify_gradient``):

* reduced parameters ``u = (W^P W^V)[-1, :]``, ``Q = (W^K)^T W^Q`` (:func:`lsa_prediction_uq_expr`,
  risk of degree 4): ``d=2, C=2`` 0.1-0.2 s; ``d=3, C=3..5`` with symbolic ``w_star`` 1-2 s.
* fully symbolic ``W^P, W^V, W^K, W^Q`` (degree 8): ``d=1`` under 1 s (also with 2 heads and a
  symbolic ``w_star``); ``d=2, C=2`` 1 s with a numeric ``w_star`` (1171 terms, 36 weights) but
  ~7 s with a symbolic ``w_star`` (21259 terms) and ~7 s for 3 heads (108 weights), most of it
  spent building the sympy expression; :func:`gradient` as sympy expressions then costs ~30 s,
  while :func:`lambdify_gradient` (sparse exponent table, no expression building) takes ~2 s.
  The cost does not grow with ``C`` (``C`` only enters through moment values).
"""

from .calculus import bottom_right, frobenius, gradient, lambdify_gradient, lambdify_risk
from .core import flatten_params, gaussian_vector, weight_matrix
from .gaussian import (
    GaussianBlock,
    expect_independent,
    expect_nested,
    expect_product,
    gaussian_block,
    gaussian_expectation,
    symbolic_risk,
)
from .models import (
    RegressionTask,
    attention_head_expr,
    embedding,
    linear_regression_task,
    lsa_output_expr,
    lsa_prediction_expr,
    lsa_prediction_uq_expr,
    mask_matrix,
    multihead_lsa_prediction_expr,
)

__all__ = [
    "GaussianBlock",
    "RegressionTask",
    "attention_head_expr",
    "bottom_right",
    "embedding",
    "expect_independent",
    "expect_nested",
    "expect_product",
    "flatten_params",
    "frobenius",
    "gaussian_block",
    "gaussian_expectation",
    "gaussian_vector",
    "gradient",
    "lambdify_gradient",
    "lambdify_risk",
    "linear_regression_task",
    "lsa_output_expr",
    "lsa_prediction_expr",
    "lsa_prediction_uq_expr",
    "mask_matrix",
    "multihead_lsa_prediction_expr",
    "symbolic_risk",
    "weight_matrix",
]
