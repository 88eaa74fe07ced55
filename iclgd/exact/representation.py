"""Part II's exact quantities (Yang, Huang, Liang, Chi 2024): every expectation in closed form.

* :func:`limit_matrix` -- the matrix ``A`` of eq. 34 the trained transformer converges to, and
  :func:`optimal_loss`, the infimum ``L*`` of the population loss (Lemma 5);
* :func:`ridge_matrix`, :func:`label_moment`, :func:`prediction_gap`, :func:`ridge_gap_sweep` --
  exact second moments of the ridge predictors of eq. 20 and 25 (Fig. 3);
* :func:`softmax_risk` / :func:`softmax_risk_from_A` -- the exact population loss eq. 9 of the
  one-layer softmax model (eq. 74-77), :func:`softmax_risk_xi` (it in Lemma 6's parameters
  ``xi``), :func:`softmax_loss` (it as a training loss for
  :func:`iclgd.train`, like Part I's :func:`~iclgd.exact.lsa_loss`), :func:`one_head_lower_bound`
  (Sec. 3.3), :func:`copy_prompt_loss` (the copy baseline of Sec. 4).

Theorems 1 and 2's constants and rates (``zeta0``, ``theorem1_constants``, ``theorem2_steps``,
``frozen_q_gap``) are in :mod:`iclgd.exact.representation_rates`.

The task family is :mod:`iclgd.tasks.representation`; the model, :mod:`iclgd.models.softmax`.
Shapes: ``K`` dictionary size, ``N`` prompt length, ``d`` token dimension, ``m`` features.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..models.softmax import _spec_dims, attention_matrix
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
