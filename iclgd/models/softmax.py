"""Softmax-attention models of Part II (Yang, Huang, Liang, Chi 2024).

1. The one-layer multi-head softmax attention of eq. 5-8. With the paper's parametrisation (eq. 7)
   ``W^O = (I_K, ..., I_K)``, ``W^V_h = (0, w_h)`` with ``w_h in R^K``, and
   ``(W^K_h)^T W^Q_h = [[Q_h, 0], [0, 0]]`` with ``Q_h in R^{d x d}``, the prediction for token
   ``k`` is the ``k``-th diagonal entry of ``T(E)`` (eq. 6)::

       y_hat_k = < y, sum_h w_{h,k} softmax(V^T Q_h v_k) >,   k in [K]            (eq. 8)

   where ``V = (v_1, ..., v_N)`` are the prompt tokens and ``y`` the prompt labels. The attention
   scores ``s^h_k = softmax(V^T Q_h v_k) in R^N`` (eq. 28) do not depend on the labels, so the model
   is ``y_hat = y^T A_hat(theta)`` with ``A_hat(theta) = (sum_h w_{h,k} s^h_k)_k in R^{N x K}``
   (eq. 35): :func:`softmax_predict` computes exactly that, :func:`softmax_attention_map` computes
   ``T(E)`` literally (for tests and the book).

   Parameters: ``{"Q": (H, d, d), "w": (H, K)}``. Initialisation (Prop. 1, Thm. 1, Sec. 4):
   ``Q_h(i, j) ~ N(0, beta^2)`` (the experiments use ``beta = 1``), ``w_h = 0``.

   Training objective: the population loss (eq. 9)
   ``L(theta) = 1/2 E_{lambda, eps}[ 1/K sum_k (y_hat_k - y_k)^2 ]`` over all ``K`` tokens,
   estimated on a batch by :func:`iclgd.metrics.softmax_sample_loss` and computed exactly (no
   sampling) by :func:`iclgd.exact.softmax_risk` (eq. 74-77 / Lemma 5). The paper trains with GD
   (eq. 10, learning rates ``eta_Q``, ``eta_w``) in theory and with Adam (lr ``1e-4``, batch 256)
   in the experiments.

The pre-LayerNorm transformer of Sec. 4 is in :mod:`iclgd.models.transformer`.

Shapes: ``B`` batch, ``K`` dictionary size, ``N`` prompt length, ``d`` token dimension, ``H`` heads.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from .. import checks as v
from ..tasks.representation import RepresentationSpec, check_spec

__all__ = [
    "init_softmax",
    "attention_scores",
    "attention_matrix",
    "softmax_predict",
    "softmax_attention_map",
]


# ----------------------------------------------------------------------------------------------
# One-layer multi-head softmax attention (eq. 5-8)
# ----------------------------------------------------------------------------------------------


def init_softmax(key: jax.Array, d: int, K: int, H: int, beta: float = 1.0) -> dict:
    """Initial parameters ``theta = {Q_h, w_h}_{h<=H}`` of the paper's model.

    ``Q_h(i, j) ~ i.i.d. N(0, beta^2)`` (Prop. 1; Sec. 4 uses standard Gaussian, ``beta = 1``) and
    ``w_h = 0`` (Thm. 1). Prop. 1 needs ``H >= N`` for Assumption 2 to hold almost surely.

    Args:
        key: PRNG key.
        d: token dimension.
        K: dictionary size (each head has one value weight ``w_{h,k}`` per token).
        H: number of heads.
        beta: standard deviation of the entries of ``Q_h``, ``>= 0``.

    Returns:
        ``{"Q": (H, d, d), "w": (H, K)}``.
    """
    v.prng_key("key", key)
    d = v.positive_int("d", d)
    K = v.positive_int("K", K, 2)
    H = v.positive_int("H", H)
    beta = v.nonneg_float("beta", beta)
    return _init_softmax(key, jnp.asarray(beta), d, K, H)


@partial(jax.jit, static_argnums=(2, 3, 4))
def _init_softmax(key, beta, d, K, H):
    return {"Q": beta * jax.random.normal(key, (H, d, d)), "w": jnp.zeros((H, K))}


def _check_softmax_params(params, dims: dict) -> None:
    """Check ``{"Q": (H, d, d), "w": (H, K)}`` against the sizes bound in ``dims``."""
    what = "a dict {'Q': (H, d, d), 'w': (H, K)} (see init_softmax)"
    v.param_dict("params", params, ("Q", "w"), what)
    v.array("params['Q']", params["Q"], "H d d", dims)
    v.array("params['w']", params["w"], "H K", dims)


def _spec_dims(spec) -> v.Dims:
    return v.Dims(d=spec.d, K=spec.K, N=spec.N)


def attention_scores(params: dict, spec: RepresentationSpec) -> jax.Array:
    """Attention scores ``s^h_k = softmax(V^T Q_h v_k)`` (eq. 28) of every head and token.

    Args:
        params: ``{"Q": (H, d, d), "w": (H, K)}``.
        spec: the task (gives the prompt tokens ``V`` and the dictionary).

    Returns:
        ``(H, N, K)``; entry ``[h, i, k]`` is ``s^h_{ik}``; each ``[h, :, k]`` sums to 1.
    """
    spec = check_spec(spec)
    _check_softmax_params(params, _spec_dims(spec))
    return _scores(params["Q"], spec)


@jax.jit
def _scores(Q, spec):
    logits = jnp.einsum("id,hde,ke->hik", spec.tokens_P, Q, spec.tokens)
    return jax.nn.softmax(logits, axis=1)


@jax.jit
def _A_hat(params, spec):
    return jnp.einsum("hk,hik->ik", params["w"], _scores(params["Q"], spec))


def attention_matrix(params: dict, spec: RepresentationSpec) -> jax.Array:
    """``A_hat(theta) = (sum_h w_{h,1} s^h_1, ..., sum_h w_{h,K} s^h_K)`` of eq. 35.

    Returns:
        ``(N, K)``; the model predicts ``y_hat = y^T A_hat(theta)`` (eq. 8).
    """
    spec = check_spec(spec)
    _check_softmax_params(params, _spec_dims(spec))
    return _A_hat(params, spec)


def softmax_predict(params: dict, spec: RepresentationSpec, y: jax.Array) -> jax.Array:
    """Predictions ``y_hat_k`` of eq. 8 for all ``K`` tokens of the dictionary.

    Args:
        params: ``{"Q": (H, d, d), "w": (H, K)}``.
        spec: the task (tokens are fixed; only the labels change between prompts).
        y: ``(B, N)`` prompt labels.

    Returns:
        ``(B, K)`` predictions (the diagonal of ``T(E)``, eq. 6).
    """
    spec = check_spec(spec)
    dims = _spec_dims(spec)
    y = v.array("y", y, "B N", dims, promote=True)
    _check_softmax_params(params, dims)
    return _softmax_predict(params, spec, jnp.asarray(y))


@jax.jit
def _softmax_predict(params, spec, y):
    return y @ _A_hat(params, spec)


def softmax_attention_map(params: dict, E: jax.Array, N: int) -> jax.Array:
    """The attention map ``T(E) = W^O (head_1(E); ...; head_H(E))`` of eq. 5-7, computed literally.

    ``head_h(E) = W^V_h E^P softmax((E^P)^T (W^K_h)^T W^Q_h E)`` (column-wise softmax, eq. 5) with
    ``W^V_h = (0, w_h) in R^{K x (d+1)}``, ``(W^K_h)^T W^Q_h = [[Q_h, 0], [0, 0]]`` and
    ``W^O = (I_K, ..., I_K)`` (eq. 7). The predictions are ``diag(T(E))`` (eq. 8).

    Args:
        params: ``{"Q": (H, d, d), "w": (H, K)}``.
        E: ``(B, d+1, K)`` embeddings ``(E^P, E^Q)`` (eq. 2, 4).
        N: prompt length (the first ``N`` columns of ``E`` are ``E^P``), ``1 <= N < K``.

    Returns:
        ``(B, K, K)``.
    """
    E = v.array("E", E, "B d+1 K", promote=True)
    B, D, K = E.shape
    N = v.positive_int("N", N)
    if N >= K:
        raise ValueError(f"N must satisfy 1 <= N < K = {K} (E has K = {K} columns), got {N}")
    if D < 2:
        raise ValueError(f"E must have shape (B, d+1, K) with d >= 1, got shape {tuple(E.shape)}")
    _check_softmax_params(params, v.Dims(d=D - 1, K=K))
    return _attention_map(params, jnp.asarray(E), N)


@partial(jax.jit, static_argnums=(2,))
def _attention_map(params, E, N):
    H, D, K = params["Q"].shape[0], E.shape[1], E.shape[2]
    M = jnp.zeros((H, D, D)).at[:, : D - 1, : D - 1].set(params["Q"])  # (W^K_h)^T W^Q_h, eq. 7b
    WV = jnp.zeros((H, K, D)).at[:, :, D - 1].set(params["w"])  # W^V_h = (0, w_h), eq. 7a
    EP = E[:, :, :N]
    logits = jnp.einsum("bdi,hde,bek->bhik", EP, M, E)  # (E^P)^T M_h E : (B, H, N, K)
    S = jax.nn.softmax(logits, axis=2)  # column-wise
    heads = jnp.einsum("hjd,bdi,bhik->bhjk", WV, EP, S)  # (B, H, K, K)
    return jnp.sum(heads, axis=1)  # W^O = (I_K, ..., I_K)
