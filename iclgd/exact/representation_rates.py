"""Part II's convergence theory in numbers (Yang, Huang, Liang, Chi 2024, §3.1-3.2).

* :func:`zeta0` -- eq. 14's ``min_k lambda_min(B_k B_k^T)`` at an initialisation (Assumption 2);
* :func:`theorem1_constants` -- Theorem 1's learning rates and guaranteed rate (eq. 14-18);
* :func:`theorem2_steps` -- the number of training steps eq. 21 asks for (Theorem 2);
* :func:`frozen_q_gap` -- Theorem 1's GD with ``Q`` frozen: least squares in ``w``, in closed form.

The exact losses they use are in :mod:`iclgd.exact.representation`; the task family is
:mod:`iclgd.tasks.representation`, the model :mod:`iclgd.models.softmax`.
Shapes: ``K`` dictionary size, ``N`` prompt length, ``d`` token dimension, ``m`` features.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..models.softmax import _check_softmax_params, _scores, _spec_dims
from ..tasks.representation import RepresentationSpec, check_spec
from .representation import limit_matrix, optimal_loss, softmax_risk

__all__ = ["zeta0", "Theorem1Constants", "theorem1_constants", "theorem2_steps", "frozen_q_gap"]


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
