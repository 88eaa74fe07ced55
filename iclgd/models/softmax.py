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
   estimated on a batch by :func:`softmax_loss` and computed exactly (no sampling) by
   :func:`population_loss` (eq. 74-77 / Lemma 5). The paper trains with GD (eq. 10, learning rates
   ``eta_Q``, ``eta_w``) in theory and with Adam (lr ``1e-4``, batch 256) in the experiments.

The pre-LayerNorm transformer of Sec. 4 is in :mod:`iclgd.models.transformer`.

Shapes: ``B`` batch, ``K`` dictionary size, ``N`` prompt length, ``d`` token dimension, ``H`` heads.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..metrics import mse
from ..representation import RepresentationBatch, RepresentationSpec, check_spec

__all__ = [
    "init_softmax",
    "attention_scores",
    "attention_matrix",
    "softmax_predict",
    "softmax_attention_map",
    "empirical_loss",
    "softmax_loss",
    "population_loss_from_A",
    "population_loss",
    "inference_loss",
    "zeta0",
    "Theorem1Constants",
    "theorem1_constants",
    "one_head_lower_bound",
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
    y = v.array("y", y, "B N", dims)
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
    E = v.array("E", E, "B d+1 K")
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


def empirical_loss(y_hat: jax.Array, y_all: jax.Array) -> jax.Array:
    """Monte-Carlo estimate of eq. 9 on a batch: ``1/2 mean_b [ 1/K sum_k (y_hat_k - y_k)^2 ]``.

    Args:
        y_hat: ``(B, K)`` predictions for all tokens.
        y_all: ``(B, K)`` true (noisy) labels of all tokens.

    Returns:
        ``()``.
    """
    y_hat, y_all = v.array("y_hat", y_hat, "B K"), v.array("y_all", y_all)
    if tuple(y_hat.shape) != tuple(y_all.shape):
        raise ValueError(
            "y_hat and y_all must have the same shape (B, K), "
            f"got {tuple(y_hat.shape)} and {tuple(y_all.shape)}"
        )
    return 0.5 * mse(y_hat, y_all)


def softmax_loss(params: dict, spec: RepresentationSpec, batch: RepresentationBatch) -> jax.Array:
    """The training loss eq. 9 of the one-layer model, estimated on ``batch``.

    Args:
        params: ``{"Q": (H, d, d), "w": (H, K)}``.
        spec: the task.
        batch: prompts from :func:`iclgd.representation.sample_representation_tasks`.

    Returns:
        ``()``.
    """
    what = "an iclgd.representation.RepresentationBatch (use sample_representation_tasks)"
    v.container("batch", batch, RepresentationBatch, what)
    return empirical_loss(softmax_predict(params, spec, batch.y), batch.y_all)


def population_loss_from_A(A_hat: jax.Array, spec: RepresentationSpec) -> jax.Array:
    """The exact population loss eq. 9 of any predictor ``y_hat = y^T A_hat`` (eq. 74-77).

    With ``S = E[lambda lambda^T] = mu mu^T + sigma^2 I_m`` (``mu = spec.lam_mean``,
    ``sigma = spec.lam_std``), the expectation over ``lambda`` and ``eps`` in eq. 75 is::

        L = 1/(2K) sum_k [ (Z a_k - z_k)^T S (Z a_k - z_k)
                           + tau tr(S) (||a_k||^2 + 1 - 2 a_kk 1{k <= N}) ]

    (the cross term, eq. 76, vanishes; the noise term is ``||a_k - e_k||^2`` for a prompt token and
    ``||a_k||^2 + 1`` for a query token). Under Assumption 1 (``S = I_m``) this is eq. 75 with
    eq. 77: ``1/(2K) sum_k [||Z a_k - z_k||^2 + m tau (||a_k||^2 + 1) - 2 m tau a_kk 1{k <= N}]``.

    Args:
        A_hat: ``(N, K)``, column ``a_k`` maps the prompt labels to the prediction for token ``k``.
        spec: the task.

    Returns:
        ``()``.
    """
    spec = check_spec(spec)
    A_hat = v.array("A_hat", A_hat, "N K", _spec_dims(spec))
    return _pop_loss(jnp.asarray(A_hat), spec)


@jax.jit
def _pop_loss(A_hat, spec):
    N, K, m = spec.N, spec.K, spec.m
    mu, sig = spec.lam_mean, spec.lam_std
    R = spec.Z @ A_hat - spec.Z_hat  # (m, K): Z a_k - z_k
    quad = sig**2 * jnp.sum(R**2, axis=0) + (mu @ R) ** 2
    trS = sig**2 * m + mu @ mu
    # ||a_k - e_k||^2 for k <= N; ||a_k||^2 + 1 for k > N (eps_k is then independent of the prompt).
    noise = jnp.sum((A_hat - jnp.eye(N, K)) ** 2, axis=0) + (jnp.arange(K) >= N)
    return jnp.sum(quad + spec.tau * trS * noise) / (2 * K)


def population_loss(params: dict, spec: RepresentationSpec) -> jax.Array:
    """The exact training objective ``L(theta)`` of eq. 9 (no sampling), via eq. 74-77.

    ``L(theta) = population_loss_from_A(A_hat(theta))``; under Assumption 1 it equals
    ``1/(2K) sum_k ||Z_bar delta_k||^2 + L*`` (Lemma 5), with ``L*`` from
    :func:`iclgd.representation.optimal_loss`.

    Returns:
        ``()``.
    """
    return population_loss_from_A(attention_matrix(params, spec), spec)


def inference_loss(y_hat: jax.Array, y_target: jax.Array) -> jax.Array:
    """Theorem 2's inference error ``1/(2K) ||y_hat - y_star||_2^2``
    (eq. 22), averaged over the batch.

    (Fig. 2 of the paper plots ``1/K ||y_hat - y_star||^2``, i.e. twice this; Fig. 3 plots
    ``1/K ||y_star - y_best||^2``.)

    Args:
        y_hat: ``(B, K)`` model predictions.
        y_target: ``(B, K)`` reference, e.g. :func:`iclgd.representation.y_star`.

    Returns:
        ``()``.
    """
    return empirical_loss(y_hat, y_target)


def zeta0(params: dict, spec: RepresentationSpec) -> jax.Array:
    """``zeta = min_k lambda_min(B_k B_k^T)`` of eq. 14 at ``params``
    (``B_k = Z_bar C_k``, eq. 12-13).

    ``Z_bar = (Z^T Z + m tau I_N)^{1/2}`` and ``C_k = (s^1_k, ..., s^H_k) in R^{N x H}``.
    Assumption 2 (``B_k`` of full row rank for all ``k``) is ``zeta > 0``; it fails whenever
    ``H < N``.

    Returns:
        ``()``.
    """
    spec = check_spec(spec)
    _check_softmax_params(params, _spec_dims(spec))
    return _zeta0(params["Q"], spec)


@jax.jit
def _zeta0(Q, spec):
    N, m = spec.N, spec.m
    G = spec.Z.T @ spec.Z + m * spec.tau * jnp.eye(N)
    ev, U = jnp.linalg.eigh(G)
    Zbar = (U * jnp.sqrt(jnp.clip(ev, 0.0))) @ U.T
    C = _scores(Q, spec)  # (H, N, K)
    Bk = jnp.einsum("ij,hjk->kih", Zbar, C)  # (K, N, H)
    return jnp.min(jnp.linalg.eigvalsh(Bk @ jnp.swapaxes(Bk, 1, 2)))


class Theorem1Constants(NamedTuple):
    """The constants of Theorem 1 (eq. 14-18) at an initialisation (:func:`theorem1_constants`).

    Attributes:
        zeta0: ``min_k lambda_min(B_k B_k^T)`` (eq. 14).
        delta0: the initial gap ``L(theta_0) - L*`` (eq. 11).
        gamma: the smallest ``gamma`` allowed by eq. 15.
        L_smooth: the smoothness constant ``L`` of eq. 17 at that ``gamma``.
        eta_Q: ``1 / L`` (eq. 16), the largest rate allowed for ``Q``.
        eta_w: ``gamma^2 eta_Q`` (eq. 16).
        rate: ``1 - eta_w zeta0 / (2K)``, the contraction per step of eq. 18.
    """

    zeta0: float
    delta0: float
    gamma: float
    L_smooth: float
    eta_Q: float
    eta_w: float
    rate: float


def theorem1_constants(params: dict, spec: RepresentationSpec) -> Theorem1Constants:
    """Theorem 1's learning rates and guaranteed rate (eq. 14-18) at the initialisation ``params``.

    Eq. 15: ``gamma >= zeta0^{-5/4} (128 sqrt(2) / (sqrt(2) - 1) ||Z_bar||_2^2 sqrt(H) f_max
    K^{3/2} Delta0)^{1/2}``; eq. 17: ``L^2 = (8 sqrt(2) H sqrt(K) ||Z_bar||^2 sqrt(Delta0) / zeta0 +
    1 + ||Z^T Z_hat||_2 / (m tau))^2 ||Z_bar||^4 (8 gamma^2 / K + 4096 K^2 N Delta0 / (gamma
    zeta0^2)) + 2 H^2 ||Z_bar||^4 (gamma^4 / K^2 + 16384 K^3 ||Z_bar||^2 Delta0^2 / (gamma
    zeta0^4))`` (read from the paper's typeset formulas), ``Z_bar = (Z^T Z + m tau I)^{1/2}``,
    ``f_max`` its largest column norm. Needs ``tau > 0`` and Assumption 1 (for ``L*``).

    Returns:
        A :class:`Theorem1Constants` of Python floats (compute in float64: ``zeta0`` is tiny).
    """
    spec = check_spec(spec)
    _check_softmax_params(params, _spec_dims(spec))
    if float(spec.tau) <= 0:
        raise ValueError(f"spec.tau must be > 0 for eq. 17 (it divides by m tau), got {spec.tau}")
    from ..representation import optimal_loss

    H, K, N, m, tau = params["Q"].shape[0], spec.K, spec.N, spec.m, float(spec.tau)
    z0 = float(zeta0(params, spec))
    if not z0 > 0:
        raise ValueError(f"zeta0 must be > 0 (Assumption 2; Prop. 1 needs H >= N), got {z0:.3g}")
    d0 = float(population_loss(params, spec)) - float(optimal_loss(spec))
    Z = np.asarray(spec.Z, np.float64)
    G = Z.T @ Z + m * tau * np.eye(N)
    ev, U = np.linalg.eigh(G)
    Zbar = (U * np.sqrt(np.clip(ev, 0, None))) @ U.T
    zb2 = float(np.linalg.norm(Zbar, 2)) ** 2  # ||Z_bar||_2^2
    f_max = float(np.linalg.norm(Zbar, axis=0).max())
    zz = float(np.linalg.norm(Z.T @ np.asarray(spec.Z_hat, np.float64), 2))
    c15 = 128 * np.sqrt(2) / (np.sqrt(2) - 1)
    gamma = z0 ** (-5 / 4) * np.sqrt(c15 * zb2 * np.sqrt(H) * f_max * K**1.5 * d0)
    first = (8 * np.sqrt(2) * H * np.sqrt(K) * zb2 * np.sqrt(d0) / z0 + 1 + zz / (m * tau)) ** 2
    first *= zb2**2 * (8 * gamma**2 / K + 4096 * K**2 * N * d0 / (gamma * z0**2))
    second = 2 * H**2 * zb2**2 * (gamma**4 / K**2 + 16384 * K**3 * zb2 * d0**2 / (gamma * z0**4))
    L_s = float(np.sqrt(first + second))
    eta_Q = 1.0 / L_s
    eta_w = gamma**2 * eta_Q
    rate = float(1 - eta_w * z0 / (2 * K))
    return Theorem1Constants(z0, d0, float(gamma), L_s, eta_Q, float(eta_w), rate)


def one_head_lower_bound(spec: RepresentationSpec) -> float:
    """A lower bound on the loss of every one-head model (Sec. 3.3), under Assumption 1.

    With ``H = 1`` each column ``a_hat_k = w_{1,k} softmax(V^T Q_1 v_k)`` has entries of one sign.
    By Lemma 5, ``L = 1/(2K) sum_k ||Z_bar (a_hat_k - a_k)||^2 + L*``, so
    ``L >= L* + 1/(2K) sum_k min_{s = +-1} min_{b >= 0} ||Z_bar (s b - a_k)||^2``
    (non-negative least squares per column, ``a_k`` the columns of eq. 34's ``A``).

    Returns:
        The bound, a Python float (``>= L*``).
    """
    from scipy.optimize import nnls  # scipy is a dependency of jax

    from ..representation import limit_matrix, optimal_loss

    spec = check_spec(spec)
    L_star = float(optimal_loss(spec))
    A = np.asarray(limit_matrix(spec), np.float64)
    Z = np.asarray(spec.Z, np.float64)
    G = Z.T @ Z + spec.m * float(spec.tau) * np.eye(spec.N)
    ev, U = np.linalg.eigh(G)
    Zbar = (U * np.sqrt(np.clip(ev, 0, None))) @ U.T
    extra = 0.0
    for k in range(spec.K):
        target = Zbar @ A[:, k]
        extra += min(nnls(Zbar, target)[1], nnls(Zbar, -target)[1]) ** 2
    return L_star + extra / (2 * spec.K)
