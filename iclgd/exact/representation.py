"""Part II's exact quantities (Yang, Huang, Liang, Chi 2024): every expectation in closed form.

* :func:`limit_matrix` -- the matrix ``A`` of eq. 34 the trained transformer converges to, and
  :func:`optimal_loss`, the infimum ``L*`` of the population loss (Lemma 5);
* :func:`ridge_matrix`, :func:`label_moment`, :func:`prediction_gap`, :func:`ridge_gap_sweep` --
  exact second moments of the ridge predictors of eq. 20 and 25 (Fig. 3);
* :func:`softmax_risk` / :func:`softmax_risk_from_A` -- the exact population loss eq. 9 of the
  one-layer softmax model (eq. 74-77), :func:`softmax_risk_xi` (it in Lemma 6's parameters
  ``xi``), :func:`softmax_loss` (it as a training loss for
  :func:`iclgd.train`, like Part I's :func:`~iclgd.exact.lsa_loss`), :func:`zeta0` and
  :func:`theorem1_constants` (Theorem 1), :func:`frozen_q_gap` (Theorem 1's GD with ``Q``
  frozen: least squares in ``w``), :func:`one_head_lower_bound` (Sec. 3.3),
  :func:`copy_prompt_loss` (the copy baseline of Sec. 4).

The task family is :mod:`iclgd.tasks.representation`; the model, :mod:`iclgd.models.softmax`.
Shapes: ``K`` dictionary size, ``N`` prompt length, ``d`` token dimension, ``m`` features.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..models.softmax import _check_softmax_params, _scores, _spec_dims, attention_matrix
from ..tasks.representation import RepresentationSpec, _lambda_law, check_spec

__all__ = [
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
]


def limit_matrix(spec: RepresentationSpec) -> jax.Array:
    """The matrix ``A = (Z^T Z + m tau I_N)^{-1} (Z^T Z_hat + (m tau I_N, 0))`` of eq. 34.

    The trained transformer's ``A_hat(theta)`` (eq. 35) converges to ``A``;
    ``y_star_k = <y, A[:, k]>`` (eq. 27), so ``A[:, :N] = I_N`` for ``tau > 0``.

    At ``tau = 0`` (noise-free labels, Sec. 3.3) ``Z^T Z`` is singular whenever ``N > m``; the
    paper's ``A`` is then ``Z^dagger Z_hat`` (eq. 26, the Moore-Penrose pseudo-inverse), returned
    here for every ``N`` (for ``N <= m`` with ``Z`` of full column rank it equals eq. 34). Each
    column ``Z^dagger z_k`` is the minimum-norm solution of ``Z a = z_k``, a minimiser of the
    noise-free loss. For ``N > m`` it differs from ``lim_{tau -> 0+} A(tau) = (I_N, Z^dagger Z^Q)``
    in the first ``N`` columns (``Z^dagger Z != I_N``); both attain the same loss at ``tau = 0``.

    Returns:
        ``(N, K)``.

    Raises:
        ValueError: if ``tau > 0`` but ``Z^T Z + m tau I_N`` is numerically singular in ``Z``'s
            dtype (``m tau`` below rounding of ``Z^T Z``).
    """
    spec = check_spec(spec)
    if not v.is_tracer(spec.tau) and float(spec.tau) == 0.0:
        return _pinv_limit(spec.Z, spec.Z_hat)
    G, R = _gram_rhs(spec)
    _check_gram(G, spec)
    return _solve(G, R)


@jax.jit
def _pinv_limit(Z, Z_hat):
    """``Z^dagger Z_hat`` ``(N, K)``: eq. 34 at ``tau = 0`` (Sec. 3.3, eq. 26)."""
    return jnp.linalg.pinv(Z) @ Z_hat


@jax.jit
def _gram_rhs(spec) -> tuple[jax.Array, jax.Array]:
    """``G = Z^T Z + m tau I_N`` ``(N, N)`` and ``R = Z^T Z_hat + (m tau I_N, 0)`` ``(N, K)``."""
    Z, N, K, mt = spec.Z, spec.N, spec.K, spec.m * spec.tau
    G = Z.T @ Z + mt * jnp.eye(N)
    R = Z.T @ spec.Z_hat + jnp.concatenate([mt * jnp.eye(N), jnp.zeros((N, K - N))], axis=1)
    return G, R


def _check_gram(G, spec) -> None:
    """``G`` must be positive definite (relative eigenvalue floor, see
    :func:`iclgd.checks.spd_matrix`) in the coarser of its dtype and that of ``Z`` (a float32 ``Z``
    fixes ``G`` to float32 accuracy only), else solving with it returns garbage or NaN."""
    dt = max(np.dtype(G.dtype), np.dtype(spec.Z.dtype), key=lambda t: np.finfo(t).eps)
    hint = (
        "spec needs tau > 0 with m tau above the rounding of Z^T Z, "
        "or N <= m and Z of full column rank"
    )
    v.spd_matrix("Z^T Z + m tau I_N (of spec)", G, dtype=dt, hint=hint)


_solve = jax.jit(jnp.linalg.solve)


def optimal_loss(spec: RepresentationSpec) -> jax.Array:
    """``L* = inf_theta L(theta)``, the constant of Lemma 5 (eq. 36), under Assumption 1.

    ``L* = 1/(2K) [ sum_{k<=N} (||z_k||^2 + m tau - (Z^T z_k + m tau e_k)^T G^{-1}
    (Z^T z_k + m tau e_k)) + sum_{k>N} (||z_k||^2 + m tau - (Z^T z_k)^T G^{-1} Z^T z_k) ]`` with
    ``G = Z^T Z + m tau I_N``.

    Note: the paper's ``c'_k`` (query tokens, eq. 79 and the second sum of ``L*``) omits the
    ``+ m tau``; it is needed because eq. 77 gives ``m tau (||a_k||^2 + 1)`` for ``k > N`` -- the
    label noise ``lambda^T eps_k`` of an unseen token is independent of the prompt and irreducible
    (``E (lambda^T eps_k)^2 = m tau``). With it, ``L*`` equals the population loss at ``A_hat = A``
    (:func:`iclgd.exact.softmax_risk_from_A`); each prompt-token term is exactly 0.

    Returns:
        ``()``.

    Raises:
        ValueError: if ``spec``'s ``lambda`` distribution violates
            Assumption 1 (mean 0, variance 1).
    """
    spec = check_spec(spec)
    if not v.is_tracer(spec.lam_std) and (
        not np.allclose(np.asarray(spec.lam_mean), 0.0) or not np.isclose(float(spec.lam_std), 1.0)
    ):
        raise ValueError(
            "spec must satisfy Assumption 1 (lam_mean = 0, lam_std = 1) for L* of Lemma 5, "
            f"got lam_std = {float(spec.lam_std)} and lam_mean with max |.| = "
            f"{float(np.abs(np.asarray(spec.lam_mean)).max())}"
        )
    G, R = _gram_rhs(spec)
    _check_gram(G, spec)
    return _optimal_loss(spec, G, R)


@jax.jit
def _optimal_loss(spec, G, R):
    quad = jnp.sum(R * jnp.linalg.solve(G, R), axis=0)  # (K,)
    const = jnp.sum(spec.Z_hat**2, axis=0) + spec.m * spec.tau
    return jnp.sum(const - quad) / (2 * spec.K)


def ridge_matrix(spec: RepresentationSpec, reg) -> jax.Array:
    """The ``(N, K)`` matrix ``M`` of the predictor ``y^T M = (y, (Z^Q)^T lam_reg)`` (eq. 22-23).

    ``lam_reg = argmin 1/(2N) sum_i (y_i - lam^T z_i)^2 + reg/2 ||lam||^2
    = (Z Z^T + N reg I_m)^{-1} Z y``, so ``M = (I_N, Z^T (Z Z^T + N reg I_m)^{-1} Z^Q)``.
    ``reg = m tau / N`` (eq. 20) gives eq. 34's ``A`` (App. C, eq. 66); ``reg = tau`` (eq. 25) gives
    the matrix of ``y_best`` (eq. 23).

    Args:
        spec: the task.
        reg: the ridge penalty ``> 0`` (in the ``1/(2N)``-normalised objective of eq. 20 and 25).

    Returns:
        ``(N, K)``.
    """
    spec = check_spec(spec)
    reg = v.scalar("reg", reg)
    if not v.is_tracer(reg) and not float(reg) > 0:
        raise ValueError(f"reg must be a ridge penalty > 0, got {float(reg)}")
    return _ridge_matrix(spec, jnp.asarray(reg, dtype=spec.Z.dtype))


@jax.jit
def _ridge_matrix(spec, reg):
    Z, m, N = spec.Z, spec.m, spec.N
    lam_map = jnp.linalg.solve(Z @ Z.T + N * reg * jnp.eye(m), Z)  # (m, N): y -> lam
    return jnp.concatenate([jnp.eye(N, dtype=Z.dtype), lam_map.T @ spec.ZQ], axis=1)


def label_moment(spec: RepresentationSpec, lam_mean=None, lam_std=None) -> jax.Array:
    """``E[y y^T]`` of the prompt labels ``y = (Z + eps^P)^T lambda`` (eq. 1, 73).

    With ``S = E[lambda lambda^T] = mu mu^T + sigma^2 I_m``: ``E[y y^T] = Z^T S Z + tau tr(S) I_N``.
    Under Assumption 1 (``S = I_m``) this is ``Z_bar^2 = Z^T Z + m tau I_N`` (eq. 12).

    Args:
        spec: the task.
        lam_mean: optional override of ``spec.lam_mean`` (scalar or ``(m,)``), e.g. ``1.0`` for the
            paper's out-of-domain prompts ``lambda ~ N(1_m, 4 I_m)``.
        lam_std: optional override of ``spec.lam_std``, e.g. ``2.0``.

    Returns:
        ``(N, N)``.
    """
    spec = check_spec(spec)
    mean, std = _lambda_law(spec, lam_mean, lam_std)
    return _label_moment(spec, mean, std)


@jax.jit
def _label_moment(spec, mean, std):
    Z, N = spec.Z, spec.N
    S = jnp.outer(mean, mean) + std**2 * jnp.eye(spec.m)
    return Z.T @ S @ Z + spec.tau * jnp.trace(S) * jnp.eye(N)


def prediction_gap(
    A1: jax.Array, A2: jax.Array, spec: RepresentationSpec, lam_mean=None, lam_std=None
) -> jax.Array:
    """The exact ``E_{lambda, eps} [1/K ||y^T A1 - y^T A2||_2^2]`` of two linear predictors.

    This is the normalisation of the paper's Fig. 2 (``1/K ||y_hat - y_star||^2`` with
    ``A1 = A_hat(theta)``, ``A2 = A``) and Fig. 3 (``1/K ||y_star - y_best||^2``); Theorem 2 bounds
    half of it, ``1/(2K) ||y_hat - y_star||^2``. It is ``1/K tr(D^T M D)`` with ``D = A1 - A2`` and
    ``M`` = :func:`label_moment`. Under Assumption 1 and ``A2 = A`` (eq. 34) it equals
    ``2 (L(A1) - L*)`` by Lemma 5.

    Args:
        A1, A2: ``(N, K)`` predictor matrices (``y_hat = y^T A``).
        spec: the task.
        lam_mean, lam_std: optional overrides of the law of ``lambda`` (see :func:`label_moment`).

    Returns:
        ``()``.
    """
    spec = check_spec(spec)
    dims = v.Dims(N=spec.N, K=spec.K)
    A1 = jnp.asarray(v.array("A1", A1, "N K", dims, promote=True))
    A2 = jnp.asarray(v.array("A2", A2, "N K", dims, promote=True))
    mean, std = _lambda_law(spec, lam_mean, lam_std)
    return _prediction_gap(A1 - A2, spec, mean, std)


@jax.jit
def _prediction_gap(D, spec, mean, std):
    M = _label_moment(spec, mean, std)
    return jnp.sum(D * (M @ D)) / spec.K


def ridge_gap_sweep(Z_hat: jax.Array, Ns, tau) -> jax.Array:
    """Fig. 3's gap ``E [1/K ||y_star - y_best||^2]`` for every prompt length in ``Ns`` (exact).

    The prompt is the first ``N`` of the ``K`` tokens with features ``Z_hat`` (as
    :func:`make_representation_spec` with the same key gives for every ``N``);
    ``lambda ~ N(0, I_m)`` (Assumption 1). ``y_star - y_best`` vanishes on the prompt tokens and is
    ``y^T Z^T Delta Z^Q`` on the others, ``Delta = (G + m tau I)^{-1} - (G + N tau I)^{-1}``,
    ``G = Z Z^T``; with ``E[y y^T] = Z^T Z + m tau I`` and ``G = sum_i g_i u_i u_i^T``::

        gap(N) = 1/K sum_i c_i (N - m)^2 tau^2 g_i / ((g_i + m tau) (g_i + N tau)^2),
        c_i = u_i^T Z^Q Z^Q^T u_i

    -- zero at ``N = m``; large where ``G`` has small eigenvalues ``g_i`` (of order ``m tau``),
    which it has near ``N = m`` (its smallest nonzero one is about ``(sqrt N - sqrt m)^2``).
    Computed for all ``N`` in one compiled loop (a mask selects the prompt) with linear
    solves, the same sum without the eigendecomposition.

    Args:
        Z_hat: ``(m, K)`` features of the whole dictionary.
        Ns: prompt lengths, each ``1 <= N < K``.
        tau: noise variance ``> 0``.

    Returns:
        ``(len(Ns),)``.
    """
    Z_hat = jnp.asarray(v.array("Z_hat", Z_hat, "m K", promote=True))
    m, K = Z_hat.shape
    Ns = np.asarray(Ns)
    if Ns.ndim != 1 or Ns.size == 0 or not np.issubdtype(Ns.dtype, np.integer):
        raise ValueError(f"Ns must be a non-empty 1-d sequence of ints, got {Ns!r}")
    if Ns.min() < 1 or Ns.max() >= K:
        raise ValueError(f"Ns must lie in 1 <= N < K = {K}, got {Ns.min()} .. {Ns.max()}")
    tau = v.positive_float("tau", tau)
    return _ridge_gap_sweep(Z_hat, jnp.asarray(Ns), jnp.asarray(tau, dtype=Z_hat.dtype))


@jax.jit
def _ridge_gap_sweep(Z_hat, Ns, tau):
    m, K = Z_hat.shape

    def one(N):
        w = (jnp.arange(K) < N).astype(Z_hat.dtype)  # prompt tokens
        G = (Z_hat * w) @ Z_hat.T  # Z Z^T
        GQ = (Z_hat * (1 - w)) @ Z_hat.T  # Z^Q Z^Q^T
        eye = jnp.eye(m, dtype=Z_hat.dtype)
        # Delta (G^2 + m tau G) Delta = (N - m)^2 tau^2 P2 G P1 P2 (all commute), P = (G + . I)^-1
        P2GQ = jnp.linalg.solve(G + N * tau * eye, GQ)
        P2GQP2 = jnp.linalg.solve(G + N * tau * eye, P2GQ.T)
        P1G = jnp.linalg.solve(G + m * tau * eye, G)
        return (N - m) ** 2 * tau**2 * jnp.sum(P1G.T * P2GQP2) / K

    return jax.lax.map(one, Ns)  # a vmapped batched solve hung on a second call (jax 0.10.2, CPU)


def softmax_risk_from_A(A_hat: jax.Array, spec: RepresentationSpec) -> jax.Array:
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
    A_hat = v.array("A_hat", A_hat, "N K", _spec_dims(spec), promote=True)
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


def softmax_risk(params: dict, spec: RepresentationSpec) -> jax.Array:
    """The exact training objective ``L(theta)`` of eq. 9 (no sampling), via eq. 74-77.

    ``L(theta) = softmax_risk_from_A(A_hat(theta))``; under Assumption 1 it equals
    ``1/(2K) sum_k ||Z_bar delta_k||^2 + L*`` (Lemma 5), with ``L*`` from
    :func:`iclgd.exact.optimal_loss`.

    Returns:
        ``()``.
    """
    return softmax_risk_from_A(attention_matrix(params, spec), spec)


def softmax_risk_xi(xi: dict, spec: RepresentationSpec, gamma) -> jax.Array:
    """Lemma 6's ``ell(xi) = L(theta)`` (eq. 39-40): :func:`softmax_risk` at ``w = gamma alpha``.

    With ``gamma = sqrt(eta_w / eta_Q)``, gradient descent on ``xi = {Q_h, alpha_h}`` with the one
    step size ``eta_Q`` (eq. 41) is eq. 10's descent on ``theta = {Q_h, w_h}`` with ``eta_Q`` for
    ``Q`` and ``eta_w = gamma^2 eta_Q`` for ``w``.

    Args:
        xi: ``{"Q": (H, d, d), "alpha": (H, K)}``.
        spec: the task.
        gamma: the scale ``> 0`` (a number, or a traced scalar).

    Returns:
        ``()``.
    """
    if not isinstance(xi, dict) or set(xi) != {"Q", "alpha"}:
        got = sorted(xi) if isinstance(xi, dict) else type(xi).__name__
        raise TypeError(f'xi must be a dict with keys "Q" and "alpha", got {got}')
    gamma = v.scalar("gamma", gamma)
    if not v.is_tracer(gamma) and not float(gamma) > 0:
        raise ValueError(f"gamma must be > 0, got {float(gamma)}")
    return softmax_risk({"Q": xi["Q"], "w": gamma * jnp.asarray(xi["alpha"])}, spec)


def softmax_loss(spec: RepresentationSpec | None) -> Callable:
    """``loss(params, key)`` = :func:`softmax_risk` (eq. 9 exactly, via eq. 74-77; key ignored).

    The one call shape of the exact losses (:func:`~iclgd.exact.lsa_loss`, ...): training on it
    follows the exact-gradient path of the population loss (Theorem 1), without sampling noise.

    Args:
        spec: the task; ``None`` makes it an argument of the loss, ``loss(params, key, spec)``, so
            that :func:`iclgd.train` with ``args=(spec,)`` trains every task of a sweep (same
            shapes) with one compilation.

    Returns:
        ``loss(params, key) -> ()``, or ``loss(params, key, spec) -> ()`` when ``spec`` is ``None``;
        ``params = {"Q": (H, d, d), "w": (H, K)}``.

    Example:
        >>> import jax
        >>> from iclgd import exact, models, tasks
        >>> spec = tasks.make_representation_spec(jax.random.key(0), K=6, d=4, m=2, N=3, tau=0.1)
        >>> p = models.softmax_attention_model(spec, H=3).init(jax.random.key(1))
        >>> bool(exact.softmax_loss(spec)(p, None) == exact.softmax_risk(p, spec))
        True
    """
    if spec is None:
        return lambda params, key, spec: softmax_risk(params, spec)
    spec = check_spec(spec)
    return lambda params, key=None: softmax_risk(params, spec)


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
    H, K, N, m, tau = params["Q"].shape[0], spec.K, spec.N, spec.m, float(spec.tau)
    z0 = float(zeta0(params, spec))
    if not z0 > 0:
        raise ValueError(f"zeta0 must be > 0 (Assumption 2; Prop. 1 needs H >= N), got {z0:.3g}")
    d0 = float(softmax_risk(params, spec)) - float(optimal_loss(spec))
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


def theorem2_steps(
    constants: Theorem1Constants, spec: RepresentationSpec, *, B, eps, delta
) -> float:
    """The number of training steps that eq. 21 asks for before Theorem 2's guarantee holds.

    Eq. 21 (read from the paper's typeset formula)::

        T >= log( B^2 Delta0 (||Z||_2 + sqrt(tau) (2 sqrt(N log(1/delta)) + 2 log(1/delta)
                  + N)^{1/2})^2 / (m tau eps) ) / log(1 / (1 - eta_w zeta0 / (2K))),

    after which, for every prompt with ``||lambda||_2 <= B`` (Assumption 4), the trained
    transformer's output is within ``eps`` of eq. 22's ridge completion with probability at
    least ``1 - delta``. ``Z`` is the ``(m, N)`` prompt features (eq. 12); ``Delta0``,
    ``eta_w`` and ``zeta0`` are Theorem 1's (:func:`theorem1_constants`). The denominator is
    computed as ``-log1p(-eta_w zeta0 / (2K))``, exact where the contraction is ``1 - 1e-15``.

    Args:
        constants: :func:`theorem1_constants` at the initialisation, for the same ``spec``.
        spec: the task (``tau > 0``).
        B: the bound on ``||lambda||_2`` at inference (Assumption 4), ``> 0``.
        eps: the accuracy of eq. 22, ``> 0``.
        delta: the failure probability, in ``(0, 1)``.

    Returns:
        The right-hand side of eq. 21 as a float, or ``0.0`` where it is negative (eq. 21 then
        asks for no step).

    Example:
        >>> import jax
        >>> from iclgd import exact, models, tasks
        >>> key = jax.random.PRNGKey(0)
        >>> spec = tasks.make_representation_spec(key, K=12, d=5, m=3, N=4, tau=0.5)
        >>> p = models.softmax_attention_model(spec, 8).init(jax.random.PRNGKey(1))
        >>> c = exact.theorem1_constants(p, spec)
        >>> exact.theorem2_steps(c, spec, B=3.0, eps=0.01, delta=0.05) > 0
        True
    """
    if not isinstance(constants, Theorem1Constants):
        raise TypeError(
            f"constants must be the Theorem1Constants of theorem1_constants, got "
            f"{type(constants).__name__}"
        )
    spec = check_spec(spec)
    B, eps = v.positive_float("B", B), v.positive_float("eps", eps)
    delta = v.positive_float("delta", delta)
    if not delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    tau, m, N, K = float(spec.tau), spec.m, spec.N, spec.K
    if not tau > 0:
        raise ValueError(f"spec.tau must be > 0 for eq. 21 (it divides by m tau), got {spec.tau}")
    z0, d0, eta_w = (float(x) for x in (constants.zeta0, constants.delta0, constants.eta_w))
    if not (z0 > 0 and d0 > 0 and eta_w > 0 and all(map(np.isfinite, (z0, d0, eta_w)))):
        raise ValueError(
            f"constants must have zeta0, delta0 and eta_w > 0 and finite, got {constants}"
        )
    g = eta_w * z0 / (2 * K)  # the guaranteed fraction of the gap gone per step (eq. 18)
    if not g < 1:
        raise ValueError(f"eta_w zeta0 / (2K) must be < 1 (eq. 18's contraction), got {g:.3g}")
    z2 = float(np.linalg.norm(np.asarray(spec.Z, np.float64), 2))  # ||Z||_2
    ld = np.log(1 / delta)
    inner = (z2 + np.sqrt(tau) * np.sqrt(2 * np.sqrt(N * ld) + 2 * ld + N)) ** 2
    numerator = np.log(B**2 * d0 * inner / (m * tau * eps))
    return float(max(numerator / -np.log1p(-g), 0.0))


def frozen_q_gap(params: dict, spec: RepresentationSpec, eta_w: float, t) -> np.ndarray:
    """``L(theta_t) - L*`` of gradient descent on ``w`` alone, ``Q`` frozen at ``params["Q"]``,
    from ``params["w"]`` with step ``eta_w`` (eq. 10 with ``eta_Q = 0``), in closed form.

    With ``Q`` fixed the loss is a least-squares problem in ``w`` (Lemma 5):
    ``L - L* = 1/(2K) sum_k ||r_k||^2`` with ``r_k = Z_bar (C_k w_k - a_k)`` (``C_k``, ``B_k =
    Z_bar C_k`` of eq. 13, ``a_k`` the columns of eq. 34's ``A``), and a GD step maps
    ``r_k -> (I - eta_w/K B_k B_k^T) r_k``. With ``B_k B_k^T = U diag(nu) U^T``::

        L(theta_t) - L* = 1/(2K) sum_k sum_i (1 - eta_w nu_ki / K)^(2t) (U^T r_k(0))_i^2,

    so for ``eta_w nu_ki < K`` the gap decays asymptotically by ``(1 - eta_w zeta / K)^2`` per step,
    ``zeta = min_k lambda_min(B_k B_k^T)`` (eq. 14 at ``params``; a component of ``r_k`` outside
    the range of ``B_k``, possible when ``H < N``, stays). Theorem 1's rates (eq. 15-17) make
    ``eta_Q`` so small that its GD follows this curve (the training chapter).

    Args:
        params: ``{"Q": (H, d, d), "w": (H, K)}``.
        spec: the task (Assumption 1, as Lemma 5).
        eta_w: the step on ``w``, ``> 0``.
        t: ``(T,)`` non-negative step counts (integers or floats).

    Returns:
        ``(T,)`` float64 numpy array.
    """
    spec = check_spec(spec)
    _check_softmax_params(params, _spec_dims(spec))
    eta_w = v.positive_float("eta_w", eta_w)
    t = np.asarray(v.array("t", t, "T"), np.float64)
    if t.size and t.min() < 0:
        raise ValueError(f"t must be >= 0, got min {t.min()}")
    N, K, m, tau = spec.N, spec.K, spec.m, float(spec.tau)
    Z = np.asarray(spec.Z, np.float64)
    ev, U = np.linalg.eigh(Z.T @ Z + m * tau * np.eye(N))
    Zbar = (U * np.sqrt(np.clip(ev, 0, None))) @ U.T
    C = np.asarray(_scores(jnp.asarray(params["Q"], jnp.float64), spec), np.float64)  # (H, N, K)
    B = np.einsum("ij,hjk->kih", Zbar, C)  # (K, N, H)
    A = np.asarray(limit_matrix(spec), np.float64)
    w = np.asarray(params["w"], np.float64)
    r0 = np.einsum("kih,hk->ki", B, w) - np.einsum("ij,jk->ki", Zbar, A)  # (K, N): r_k(0)
    nu, V = np.linalg.eigh(B @ np.swapaxes(B, 1, 2))  # (K, N), (K, N, N)
    c2 = np.einsum("kji,kj->ki", V, r0) ** 2
    factor = (1 - eta_w * nu / K) ** 2  # (K, N)
    return np.einsum("ki,tki->t", c2, factor[None] ** t[:, None, None]) / (2 * K)


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


def copy_prompt_loss(spec) -> float:
    """Eq. 9's loss of the baseline ``y_hat = (y_1, ..., y_N, 0, ..., 0)`` (copy the prompt labels,
    predict 0 for the unseen tokens), exactly, under ``lambda ~ N(0, I_m)``.

    Each unseen token contributes ``E y_k^2 = ||z_k||^2 + m tau``, so the loss is
    ``1/(2K) sum_{k>N} (||z_k||^2 + m tau)``.

    Returns:
        The loss, a float.
    """
    spec = check_spec(spec)
    per_token = np.sum(np.asarray(spec.ZQ, np.float64) ** 2, axis=0) + spec.m * float(spec.tau)
    return float(per_token.sum() / (2 * spec.K))
