"""Symbolic models of Part I (Xie et al.): the embedding, LSA heads and predictions, the data model.

Every ``*_expr`` function builds the sympy expression of a model from its parameters and an
embedding ``E``, in the argument order of the numeric models (:mod:`iclgd.models.lsa`): parameters
first, then ``E``. :func:`linear_regression_task` builds the symbolic prompt and its Gaussian
groups, so that ``task.risk(pred)`` is the exact risk (Part I eq. 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy as sp

from ..checks import positive_int
from .core import ExprLike, as_expr, as_matrix, as_vector, gaussian_vector
from .gaussian import GaussianBlock, gaussian_block, symbolic_risk

__all__ = [
    "mask_matrix",
    "embedding",
    "attention_head_expr",
    "lsa_output_expr",
    "lsa_prediction_expr",
    "lsa_prediction_uq_expr",
    "multihead_lsa_prediction_expr",
    "RegressionTask",
    "linear_regression_task",
]


def mask_matrix(C: int) -> sp.Matrix:
    """The mask ``W^M = diag(I_C, 0)`` of shape ``(C+1, C+1)`` (Part I eq. 3).

    Example::

        >>> mask_matrix(1).tolist()
        [[1, 0], [0, 0]]
    """
    C = positive_int("C", C)
    return sp.diag(sp.eye(C), sp.Integer(0))


def embedding(X: Any, y: Any, x_q: Any, y_q: ExprLike) -> sp.Matrix:
    """The embedding ``E = [[X^T, x_q], [y^T, y_q]]`` of shape ``(d+1, C+1)`` (Part I eq. 2).

    Args:
        X: ``(C, d)`` sympy Matrix whose rows are the context inputs ``x_i^T``.
        y: length-``C`` vector of context labels.
        x_q: length-``d`` query input.
        y_q: scalar initial guess for the query label (``0``, ``w_star^T x_q``, ...).

    Example::

        >>> embedding(sp.Matrix([[1, 2]]), [3], [4, 5], 0).tolist()
        [[1, 4], [2, 5], [3, 0]]
    """
    X = as_matrix("X", X)
    C, d = X.shape
    if C < 1 or d < 1:
        raise ValueError(f"X must have shape (C, d) with C, d >= 1, got {X.shape}")
    yv = as_vector("y", y, C, f" (C = {C} context labels, X has shape {X.shape})")
    xq = as_vector("x_q", x_q, d, f" (d = {d} features, X has shape {X.shape})")
    yq = as_expr("y_q", y_q)
    top = X.T.row_join(sp.Matrix(d, 1, xq))
    bottom = sp.Matrix(1, C, yv).row_join(sp.Matrix([[yq]]))
    return top.col_join(bottom)


def _check_weights(
    E: sp.MatrixBase, weights: Sequence[Any], names: Sequence[str]
) -> list[sp.Matrix]:
    n = E.rows
    out = []
    for w, nm in zip(weights, names, strict=True):
        m = as_matrix(nm, w)
        if m.shape != (n, n):
            raise ValueError(
                f"{nm} must have shape ({n}, {n}) = (d+1, d+1) to match E of shape {E.shape}, "
                f"got {m.shape}"
            )
        out.append(m)
    return out


def _check_E(E: Any) -> sp.Matrix:
    E = as_matrix("E", E)
    if E.rows < 2 or E.cols < 2:
        raise ValueError(f"E must have shape (d+1, C+1) with d, C >= 1, got {E.shape}")
    return E


def _check_head(w: Any, name: str) -> tuple:
    if not isinstance(w, (list, tuple)) or len(w) != 4:
        raise ValueError(f"{name} must be a tuple (W_P, W_V, W_K, W_Q), got {type(w).__name__}")
    return tuple(w)


def _check_heads(heads: Any) -> list[tuple]:
    if not isinstance(heads, (list, tuple)) or not heads:
        raise ValueError("heads must be a non-empty list of (W_P, W_V, W_K, W_Q) tuples")
    return [_check_head(w, f"heads[{h}]") for h, w in enumerate(heads)]


def attention_head_expr(weights: Sequence[Any], E: Any) -> sp.Matrix:
    """One LSA head ``(1/C) W^P W^V E W^M E^T (W^K)^T W^Q E``, ``(d+1, C+1)`` (Part I eq. 5).

    For display; predictions use the cheaper :func:`lsa_prediction_expr`.

    Args:
        weights: ``(W_P, W_V, W_K, W_Q)``, each ``(d+1, d+1)`` (symbolic or numeric).
        E: ``(d+1, C+1)`` embedding (:func:`embedding`).

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [1], [1], 0); I = sp.eye(2)
        >>> attention_head_expr((I, I, I, I), E).tolist()
        [[2, 1], [2, 1]]
    """
    w = _check_head(weights, "weights")
    E = _check_E(E)
    P, V, K, Q = _check_weights(E, w, ("W_P", "W_V", "W_K", "W_Q"))
    C = E.cols - 1
    return (P * V * E * mask_matrix(C)) * (E.T * K.T * Q * E) / C


def lsa_output_expr(heads: Sequence[Sequence[Any]], E: Any) -> sp.Matrix:
    """The output ``E + sum_h head_h(E)`` of multi-head LSA (Part I eq. 6 before ``[.]_{-1,-1}``).

    Args:
        heads: list of ``(W_P, W_V, W_K, W_Q)`` tuples, one per head.
        E: ``(d+1, C+1)`` embedding.

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [1], [1], 0); Z = sp.zeros(2)
        >>> lsa_output_expr([(Z, Z, Z, Z)], E) == E
        True
    """
    heads = _check_heads(heads)
    E = _check_E(E)
    out = sp.Matrix(E)
    for w in heads:
        out += attention_head_expr(w, E)
    return out


def lsa_prediction_uq_expr(params: Sequence[Any], E: Any) -> sp.Expr:
    """LSA prediction ``E[-1,-1] + (1/C) u^T (E W^M E^T) Q E[:, -1]``, the reduced form of eq. 3.

    Only ``u^T = (W^P W^V)[-1, :]`` (length ``d+1``) and ``Q = (W^K)^T W^Q`` (``(d+1, d+1)``) enter
    the prediction, so the risk is a polynomial of degree 4 (not 8) in these parameters.

    Args:
        params: ``(u, Q)``.
        E: ``(d+1, C+1)`` embedding.

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [2], [3], 0)
        >>> lsa_prediction_uq_expr(([0, 1], sp.Matrix([[1, 0], [0, 0]])), E)   # (1/C) y x x_q
        6
    """
    if not isinstance(params, (list, tuple)) or len(params) != 2:
        raise ValueError(f"params must be a tuple (u, Q), got {type(params).__name__}")
    u, Q = params
    E = _check_E(E)
    n, C = E.rows, E.cols - 1
    uv = as_vector("u", u, n, f" (d+1 = {n}, E has shape {E.shape})")
    (Qm,) = _check_weights(E, (Q,), ("Q",))
    ctx = E[:, :C]
    A = ctx * ctx.T  # = E W^M E^T
    row = sp.Matrix(1, n, uv) * A * Qm * E[:, C]
    return E[n - 1, C] + row[0, 0] / C


def lsa_prediction_expr(weights: Sequence[Any], E: Any) -> sp.Expr:
    """Single-head LSA prediction ``[E + (1/C) W^P W^V E W^M E^T (W^K)^T W^Q E]_{-1,-1}`` (eq. 3).

    Args:
        weights: ``(W_P, W_V, W_K, W_Q)``, each ``(d+1, d+1)`` (symbolic or numeric).
        E: ``(d+1, C+1)`` embedding (see :func:`embedding`).

    Returns:
        A scalar sympy expression (computed as a vector chain; only the last row of ``W^P W^V``
        is formed).

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [2], [3], 0); I = sp.eye(2)
        >>> lsa_prediction_expr((I, I, I, I), E)      # y_q + (1/C) y (x x_q + y y_q) = 0 + 2 * 3
        6
    """
    return multihead_lsa_prediction_expr([_check_head(weights, "weights")], E)


def multihead_lsa_prediction_expr(heads: Sequence[Sequence[Any]], E: Any) -> sp.Expr:
    """Multi-head LSA prediction ``[E + sum_h head_h(E)]_{-1,-1}`` (Part I eqs. 5-6).

    Args:
        heads: list of ``(W_P, W_V, W_K, W_Q)`` tuples of ``(d+1, d+1)`` matrices, one per head.
        E: ``(d+1, C+1)`` embedding.

    Example::

        >>> E = embedding(sp.Matrix([[1]]), [2], [3], 0); I = sp.eye(2)
        >>> multihead_lsa_prediction_expr([(I, I, I, I), (I, I, I, I)], E)
        12
    """
    heads = _check_heads(heads)
    E = _check_E(E)
    n, C = E.rows, E.cols - 1
    ctx = E[:, :C]
    A = ctx * ctx.T
    col = E[:, C]
    out = E[n - 1, C]
    for h, w in enumerate(heads):
        names = tuple(f"heads[{h}] {k}" for k in ("W_P", "W_V", "W_K", "W_Q"))
        P, V, K, Q = _check_weights(E, w, names)
        u = P[n - 1, :] * V
        out += ((u * A) * (K.T * (Q * col)))[0, 0] / C
    return out


@dataclass(frozen=True)
class RegressionTask:
    """Symbols of one in-context linear-regression prompt (Part I section 2).

    ``w_hat ~ N(w_star, I_d)``, ``x_1..x_C, x_q ~ N(0, I_d)`` i.i.d., ``y_i = w_hat^T x_i (+ s
    eps_i)``, target ``y = w_hat^T x_q (+ s eps_q)``. Shapes: ``X (C, d)``, ``x_q, w_hat, w_star (d,
    1)``, ``y (C, 1)``, ``E (d+1, C+1)``.

    Attributes:
        groups: all independent Gaussian groups (``w_hat``, each ``x_i``, ``x_q``, noise) for
            :func:`symbolic_risk` / :func:`expect_independent`.
        data_groups: the groups of ``x_i``, ``x_q`` and noise only (expectation given ``w_hat``).
        task_groups: the ``w_hat`` group only.
    """

    d: int
    C: int
    X: sp.Matrix
    x_q: sp.Matrix
    w_hat: sp.Matrix
    w_star: sp.Matrix
    y: sp.Matrix
    y_q: sp.Expr
    target: sp.Expr
    E: sp.Matrix
    noise: sp.Matrix | None
    noise_q: sp.Symbol | None
    groups: tuple[GaussianBlock, ...]
    data_groups: tuple[GaussianBlock, ...]
    task_groups: tuple[GaussianBlock, ...]

    def risk(self, pred: Any) -> sp.Expr:
        """``E[(pred - y)^2]`` over all groups (:func:`symbolic_risk`)."""
        return symbolic_risk(pred, self.target, self.groups)


def linear_regression_task(
    d: int,
    C: int,
    *,
    w_star: Any = None,
    y_q: Any = 0,
    noise_std: Any = None,
) -> RegressionTask:
    """Build the symbolic prompt ``E`` and its Gaussian groups for Part I's linear-regression task.

    Args:
        d: feature dimension; C: number of context examples.
        w_star: prior mean of ``w_hat``: ``None`` (zero), a string prefix (symbols ``prefix_1..d``)
            or a length-``d`` vector of expressions.
        y_q: initial guess in ``E``: a number/expression, ``"prior"`` for ``w_star^T x_q``
            (Part I eq. 11), or a callable ``(x_q, w_star) -> expr``.
        noise_std: ``None`` (noise-free, the paper's setting) or a scale ``s`` (number or symbol):
            adds ``s * eps_i`` to each context label and ``s * eps_q`` to the target,
            ``eps ~ N(0, 1)`` independent.

    Example::

        >>> t = linear_regression_task(1, 2)
        >>> t.E.shape, t.target
        ((2, 3), what_1*x_{q,1})
    """
    d = positive_int("d", d)
    C = positive_int("C", C)
    X = sp.Matrix(C, d, lambda i, j: sp.Symbol(f"x_{{{i + 1},{j + 1}}}", real=True))
    x_q = sp.Matrix(d, 1, [sp.Symbol(f"x_{{q,{j + 1}}}", real=True) for j in range(d)])
    w_hat = gaussian_vector("what", d)
    if w_star is None:
        ws = sp.zeros(d, 1)
    elif isinstance(w_star, str):
        ws = sp.Matrix(d, 1, [sp.Symbol(f"{w_star}_{j + 1}", real=True) for j in range(d)])
    else:
        ws = sp.Matrix(d, 1, as_vector("w_star", w_star, d, f" (d = {d})"))
    if isinstance(y_q, str):
        if y_q != "prior":
            raise ValueError(
                f"y_q must be a number, an expression, 'prior' or a callable, got {y_q!r}"
            )
        yq = (ws.T * x_q)[0, 0]
    elif callable(y_q):
        yq = as_expr("y_q", y_q(x_q, ws))
    else:
        yq = as_expr("y_q", y_q)
    y = X * w_hat
    target = (w_hat.T * x_q)[0, 0]
    noise = noise_q = None
    extra: list[GaussianBlock] = []
    if noise_std is not None:
        s = as_expr("noise_std", noise_std)
        if s.is_negative or (s.is_number and not s.is_nonnegative):
            raise ValueError(f"noise_std must be >= 0 (a standard deviation), got {noise_std!r}")
        noise = gaussian_vector("eps", C)
        noise_q = sp.Symbol("eps_q", real=True)
        y = y + s * noise
        target = target + s * noise_q
        extra = [gaussian_block(noise, name="noise"), gaussian_block([noise_q], name="noise_q")]
    E = embedding(X, y, x_q, yq)
    task = (gaussian_block(w_hat, ws, None, name="w_hat"),)
    data = (
        tuple(gaussian_block(X[i, :], name=f"x_{i + 1}") for i in range(C))
        + (gaussian_block(x_q, name="x_q"),)
        + tuple(extra)
    )
    return RegressionTask(
        d, C, X, x_q, w_hat, ws, y, yq, target, E, noise, noise_q, task + data, data, task
    )
