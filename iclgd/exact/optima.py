r"""Exact optima: the best multi-head LSA, y_q-LSA bound, Part III's Theorem 1, one GD step.

For fixed ``y_q = x_q^T g + c`` the risk is a convex quadratic in the coefficients ``Mt`` (see
:mod:`iclgd.exact.risks`). With ``H >= d+1`` heads every ``(M_1 .. M_D)`` is reachable (Xie et al.
Theorem 1, App. A.1: :func:`lsa_params_from_M`), so the best multi-head LSA is the least-squares
regression, column by column, of the target ``w~_k - v_k`` on ``vech G``::

    beta_k = T^+ E[vech G (w~_k - v_k)],   T = E[vech G vech G^T]

(:func:`solve_columns`; free columns ``k <= d`` if ``c = 0``, all ``D`` if ``c != 0``). ``T`` does
not depend on ``g``, so the best risk is a quadratic in ``g`` too (:func:`yq_lsa_optimum`).
In Part I (``Sigma = Omega = I``, no noise) the optimum has a closed form
(:func:`multihead_lsa_closed_form`)::

    R* = d (d+1) / (C+d+1) + 2 (||w* - g||^2 + c^2) / (C d + 2).

With ``H = d`` heads the optimum is still reached when no ``M_i`` uses ``G_yy``
(:func:`fold_last_row`, :func:`heads_from_M`); fewer heads: :func:`iclgd.exact.lsa_search`. The
derivations and what they show about the papers are in the book's Part I chapters.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from .core import enable_x64, pinv_psd, risk64, to_float64, vech_index
from .moments import Exact, check_exact, shift_matrix
from .risks import (
    centre_coefficients,
    coef_matrix,
    gd_coefficients,
    linear_transformer_risk,
    lsa_risk_reduced,
)

__all__ = [
    "LSAOptimum",
    "ClosedForm",
    "GDPointGrad",
    "lsa_params_from_M",
    "reduced_to_lsa_params",
    "fold_last_row",
    "heads_from_M",
    "stack_rank",
    "solve_columns",
    "uncentre",
    "centred_risk",
    "guess64",
    "vech_to_sym",
    "lsa_optimum",
    "yq_lsa_optimum",
    "linear_transformer_optimum",
    "multihead_lsa_closed_form",
    "gd_optimal",
    "yq_lsa_gd_point_grad",
]


class LSAOptimum(NamedTuple):
    """An exact optimum of a model class that is linear in its features.

    Attributes:
        risk: the minimal risk.
        M: ``(D, D, D)`` Xie et al.'s matrices, ``M[:, :, i] = M_i = sum_h b_h a_i^{hT}``
            (for :func:`linear_transformer_optimum`: ``Mt``, the coefficients of ``G (x) x~_q``).
        params: model parameters realising it (LSA params with ``H = D`` heads, or Part III's
            ``{"P", "Q"}`` with ``L = 1``).
        y_q_guess: ``(d,)`` the ``g`` of ``y_q = x_q^T g + c`` used.
        y_q_bias: the ``c`` used.
        rank: rank of ``T = E[vech G vech G^T]`` kept by the pseudo-inverse, and its size.
    """

    risk: float
    M: np.ndarray
    params: dict
    y_q_guess: np.ndarray
    y_q_bias: float
    rank: tuple


class ClosedForm(NamedTuple):
    """The best multi-head LSA of Part I in closed form (:func:`multihead_lsa_closed_form`).

    Attributes:
        kappa: ``C / (C d + 2)``.
        eta: ``C / (C + d + 1)``, the optimal step of one GD step.
        M: ``(D, D, D)`` the optimal (symmetric) ``M_i = M[:, :, i]``.
        risk: the optimal risk.
    """

    kappa: float
    eta: float
    M: np.ndarray
    risk: float


class GDPointGrad(NamedTuple):
    """Exact gradient of the y_q-LSA risk in its reduced parameters (:func:`yq_lsa_gd_point_grad`).

    Attributes:
        u: ``(D,)`` gradient in ``u``, the last row of ``W^P W^V``.
        Q: ``(D, D)`` gradient in ``Q = (W^K)^T W^Q``.
        w: ``(d,)`` gradient in the guess ``w``.
    """

    u: np.ndarray
    Q: np.ndarray
    w: np.ndarray

    def norm(self) -> float:
        """Euclidean norm of the whole gradient."""
        return float(np.sqrt(sum(np.sum(np.asarray(x) ** 2) for x in self)))


def _xp(*arrays):
    return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def lsa_params_from_M(M) -> dict:
    """LSA weights with ``H = D`` heads realising given matrices ``M_i`` (Xie et al. App. A.1).

    Head ``h`` has ``b_h = e_h`` (``W^V = I``, ``W^P = e_D e_h^T``) and ``A_h[n, i] = M_i[h, n]``
    (``W^K = I``, ``W^Q = A_h``), so ``sum_h b_h a_i^{hT} = M_i``.

    Args:
        M: ``(D, D, D)`` with ``M[:, :, i] = M_i`` (NumPy in, NumPy out; a JAX array gives JAX
            arrays).

    Returns:
        ``{"WK", "WQ", "WV", "WP"}`` each ``(D, D, D)``.
    """
    xp = _xp(M)
    M = xp.asarray(v.array("M", M, "D D D"))
    D = M.shape[0]
    eye = xp.eye(D, dtype=M.dtype)
    eyes = xp.einsum("h,ij->hij", xp.ones(D, M.dtype), eye)
    WP = xp.einsum("i,hj->hij", eye[D - 1], eye)  # W^P_h = e_D e_h^T
    return {"WK": eyes, "WQ": M, "WV": eyes, "WP": WP}


def reduced_to_lsa_params(b, A) -> dict:
    """LSA weights with the given reduced parameters: ``W^V = I``, ``W^P = [[0], [b_h^T]]``, ``W^K =
    I``, ``W^Q = A_h``.

    Args:
        b: ``(H, D)``; A: ``(H, D, D)`` (NumPy in, NumPy out; JAX arrays give JAX arrays).

    Returns:
        ``{"WK", "WQ", "WV", "WP"}`` each ``(H, D, D)``.
    """
    xp = _xp(b, A)
    dims = v.Dims()
    b = xp.asarray(v.array("b", b, "H D", dims))
    A = xp.asarray(v.array("A", A, "H D D", dims))
    H, D = b.shape
    eyes = xp.einsum("h,ij->hij", xp.ones(H, A.dtype), xp.eye(D, dtype=A.dtype))
    WP = xp.einsum("i,hj->hij", xp.eye(D, dtype=b.dtype)[D - 1], b)
    return {"WK": eyes, "WQ": A, "WV": eyes, "WP": WP}


def _check_M(M, name: str = "M") -> np.ndarray:
    return np.asarray(v.array(name, M, "D D D"), dtype=np.float64)


def fold_last_row(M, tol: float = 1e-10) -> np.ndarray:
    """Move row ``D`` of every ``M_i`` onto column ``D``: the same model with ``d`` heads.

    ``G`` is symmetric, so ``<G, M_i>`` only depends on ``M_i + M_i^T``: adding ``M_i[D, n]`` to
    ``M_i[n, D]`` (``n <= d``) and zeroing row ``D`` leaves every prediction unchanged, provided
    ``M_i[D, D] = 0`` (a ``G_yy`` coefficient cannot be moved off row ``D``). Row ``D`` of the stack
    ``[M_1 .. M_D]`` is then zero, so the App. A.1 construction (:func:`lsa_params_from_M`) needs
    only its first ``d`` heads (:func:`heads_from_M` ``(M, d)``).

    Args:
        M: ``(D, D, D)`` with ``M[:, :, i] = M_i``.
        tol: ``|M_i[D, D]|`` must be at most ``tol * max(1, max |M|)``.

    Returns:
        The folded ``(D, D, D)`` NumPy array.

    Raises:
        ValueError: if some ``M_i[D, D] != 0`` (the model uses ``G_yy``; folding would change it).
    """
    M = _check_M(M).copy()
    tol = v.nonneg_float("tol", tol)
    k = M.shape[0] - 1
    scale = max(1.0, float(np.abs(M).max()))
    if np.abs(M[k, k, :]).max() > tol * scale:
        raise ValueError(
            "M[D, D, i] must be 0 for every i to fold the last row (the model uses G_yy; folding "
            f"would change it), got max |M[D, D, :]| = {np.abs(M[k, k, :]).max():.3g}"
        )
    M[:k, k, :] += M[k, :k, :]
    M[k, :, :] = 0.0
    return M


def heads_from_M(M, H: int, tol: float = 1e-10) -> dict:
    """The App. A.1 construction (:func:`lsa_params_from_M`) with ``H`` heads.

    Head ``h`` of the construction reads row ``h`` of the stack ``[M_1 .. M_D]``. For ``H < D`` the
    rows ``H+1 .. D`` must be zero (e.g. after :func:`fold_last_row`, ``H = d``); for ``H > D`` zero
    heads are appended (they leave the prediction, and the risk's gradient in the other heads,
    unchanged).

    Args:
        M: ``(D, D, D)`` with ``M[:, :, i] = M_i``.
        H: number of heads, ``H >= 1``.
        tol: the dropped rows must have entries at most ``tol * max(1, max |M|)``.

    Returns:
        ``{"WK", "WQ", "WV", "WP"}`` each ``(H, D, D)`` (NumPy float64).

    Raises:
        ValueError: if ``H < D`` and a dropped head is not zero.
    """
    M = _check_M(M)
    H = v.positive_int("H", H)
    tol = v.nonneg_float("tol", tol)
    D = M.shape[0]
    if H < D and np.abs(M[H:]).max() > tol * max(1.0, float(np.abs(M).max())):
        raise ValueError(
            f"rows {H + 1}..{D} of every M_i must be zero to drop heads {H + 1}..{D}, got max "
            f"|M[{H}:]| = {np.abs(M[H:]).max():.3g} (fold_last_row first?)"
        )
    p = lsa_params_from_M(M)
    if H <= D:
        return {k: a[:H] for k, a in p.items()}
    return {k: np.concatenate([a, np.zeros((H - D, D, D))]) for k, a in p.items()}


def stack_rank(M, tol: float = 1e-9) -> int:
    """Rank of the ``D x D^2`` stack ``[M_1 .. M_D] = sum_h b_h [a^h_1^T .. a^h_D^T]``.

    The stack is a sum of ``H`` rank-one terms, so realising ``M`` exactly needs ``H >= rank`` heads
    (the antisymmetric parts of the ``M_i`` do not change the model: compare representatives, e.g.
    :func:`fold_last_row`).

    Args:
        M: ``(D, D, K)`` (``M[:, :, i] = M_i``).
        tol: singular values below ``tol * (largest)`` count as zero.

    Returns:
        The numerical rank (0 for ``M = 0``).
    """
    M = np.asarray(v.array("M", M, "D D K"), dtype=np.float64)
    tol = v.nonneg_float("tol", tol)
    s = np.linalg.svd(M.reshape(M.shape[0], -1), compute_uv=False)
    if s.size == 0 or s[0] == 0.0:
        return 0
    return int(np.sum(s > tol * s[0]))


def solve_columns(ex: Exact, g: np.ndarray, c: float, feat: np.ndarray | None = None):
    """Least squares of the targets ``w~_k - v_k`` on ``vech G`` (or on features ``L vech G0``).

    Solved on the centred prompt (:mod:`iclgd.exact.moments`): ``<G, S> = <G0, W^T S W>`` and
    ``w~_k - v_k = w0~_k - (v_k - mu~_k)``, so the regression is on ``vech G0`` with the moments
    ``E[u0 u0^T]``, whose size does not depend on ``mu``.

    Args:
        ex: :func:`~iclgd.exact.prepare`'s output.
        g: ``(d,)`` the guess; c: its bias (``v = (g, c)``).
        feat: ``(q, p)`` the features as linear maps of ``vech G0`` (default: all of ``vech G0``,
            ``p = D(D+1)/2``); a feature set of very different scales is equilibrated first.

    Returns:
        ``(beta, (rank, size))``: ``beta`` ``(p, D)`` (``feat`` given: ``(q, D)``) the
        coefficients of ``<G0, W^T Mt_k W>`` on ``vech G0`` (on the features), zero for the
        columns that are not free (``k = D`` when ``c = 0``), and the rank kept by the
        pseudo-inverse of ``T0 = E[vech G0 vech G0^T]`` (of the features' ``L T0 L^T``) with
        its size.
    """
    gram = ex.gram
    d = ex.d
    D = d + 1
    iu = vech_index(D)
    p = len(iu[0])
    T = gram[:p, :p]
    L = None if feat is None else np.asarray(feat, np.float64)
    if L is not None:
        T = L @ T @ L.T
        scale = np.sqrt(np.maximum(np.diag(T), np.finfo(np.float64).tiny))
        T = T / scale[:, None] / scale[None, :]
    Tp, rank = pinv_psd(T)
    vq0 = np.concatenate([np.asarray(g, np.float64) - ex.mu, [c]])
    cols = range(D) if c != 0.0 else range(d)
    beta = np.zeros((p if L is None else L.shape[0], D))
    for k in cols:
        # E[vech G0 * (w0~_k - vq0_k)]
        ew = gram[:p, p + k] if k < d else np.zeros(p)
        r = ew - vq0[k] * gram[:p, -1]
        beta[:, k] = Tp @ r if L is None else (Tp @ ((L @ r) / scale)) / scale
    return beta, (rank, T.shape[0])


def uncentre(S0: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``Mt_k = W^{-T} S0_k W^{-1}`` ``(D, D, K)``: the coefficients on ``G`` of ``<G0, S0_k>``
    (``W`` of :func:`~iclgd.exact.moments.shift_matrix`, ``W^{-1}`` that of ``-mu``)."""
    Wi = shift_matrix(-np.asarray(mu, np.float64))
    return np.einsum("ma,abk,nb->mnk", Wi.T, S0, Wi.T)


def vech_to_sym(beta: np.ndarray, D: int) -> np.ndarray:
    """Coefficients on ``vech G`` (p, K) -> symmetric ``Mt`` (D, D, K) with the same ``<G,
    Mt_k>``."""
    iu = vech_index(D)
    K = beta.shape[1]
    Mt = np.zeros((D, D, K))
    off = iu[0] != iu[1]
    Mt[iu[0], iu[1], :] = np.where(off[:, None], beta / 2, beta)
    Mt[iu[1], iu[0], :] = np.where(off[:, None], beta / 2, beta)
    return Mt


def guess64(d: int, y_q_guess) -> np.ndarray:
    """The guess ``g`` ``(d,)`` as float64 (default zeros), checked."""
    if y_q_guess is None:
        return np.zeros(d)
    return np.asarray(v.array("y_q_guess", y_q_guess, "d", v.Dims(d=d)), np.float64)


def lsa_optimum(ex: Exact, y_q_guess=None, y_q_bias: float = 0.0) -> LSAOptimum:
    """The best multi-head LSA with ``H >= d+1`` heads and ``y_q = x_q^T g + c``: exact least
    squares.

    With ``H >= d+1`` every tuple ``(M_1 .. M_D)`` is reachable (Xie et al. Theorem 1), and the risk
    is a convex quadratic in it, minimised column by column (module docstring). ``T`` is
    inverted with a pseudo-inverse (eigenvalues below ``1e-12 * max`` dropped; the kept rank is
    returned); the antisymmetric part of each ``M_i`` does not affect the prediction and is set to
    0.

    Args:
        ex: :func:`~iclgd.exact.prepare`'s output.
        y_q_guess: ``(d,)`` ``g``; default zeros (``y_q = 0`` when also ``c = 0``: Xie et al. Sec.
            3).
        y_q_bias: scalar ``c``.

    Returns:
        :class:`LSAOptimum` with the risk, ``M``, and LSA params with ``H = D`` heads realising it.
    """
    check_exact(ex)
    d = ex.d
    D = d + 1
    g = guess64(d, y_q_guess)
    c = v.finite_float("y_q_bias", y_q_bias)
    beta, rank = solve_columns(ex, g, c)
    S0 = vech_to_sym(beta, D)  # the coefficients on the centred G0
    Mt = uncentre(S0, ex.mu)
    # Mt = M x_3 P~^T; invert P~ (c != 0) or use M_D = 0 (c = 0).
    M = np.zeros((D, D, D))
    if c != 0.0:
        M[:, :, d] = Mt[:, :, d] / c
        M[:, :, :d] = Mt[:, :, :d] - M[:, :, d : d + 1] * g[None, None, :]
    else:
        M[:, :, :d] = Mt[:, :, :d]
    params = to_float64(lsa_params_from_M(M))
    # the risk of the centred solution itself (the same predictor as params: no round trip
    # through W, whose rounding grows with ||mu||)
    vq0 = np.concatenate([g - ex.mu, [c]])
    risk = centred_risk(ex, S0, vq0)
    return LSAOptimum(risk, M, params, g, c, rank)


def centred_risk(ex: Exact, S0: np.ndarray, vq0: np.ndarray) -> float:
    """The risk (float64) of the predictor with coefficients ``S0`` ``(D, D, D)`` on ``G0`` and
    ``vq0`` ``(D,)`` (``= vq - (mu, 0)``) on ``x~_q``: ``||F Pi0 F_S||^2 + sigma^2``."""
    Pi = coef_matrix(S0, vq0, ex.d)
    Y = ex.gram_factor @ Pi @ ex.x_factor
    return float(np.sum(Y * Y)) + ex.noise_var


def yq_lsa_optimum(ex: Exact) -> LSAOptimum:
    """The best multi-head LSA (``H >= d+1``) when the guess ``y_q = x_q^T g`` is trained too.

    ``T`` does not depend on ``g`` and the targets ``w_k - g_k`` are affine in ``g``, so the best
    risk over ``M`` is a convex quadratic in ``g``, ``rho g^T Sigma g - 2 g^T Sigma (mu - nu) +
    const`` with ``rho = 1 - E[vech G]^T T^+ E[vech G]`` and ``nu_k = E[vech G]^T T^+ E[vech G
    w_k]``; its minimiser is ``g* = (mu - nu) / rho``. (A bias ``c != 0`` only adds ``rho c^2``, so
    ``c = 0`` is optimal.) This is a lower bound for y_q-LSA with any number of heads.

    Returns:
        :class:`LSAOptimum` at ``g = g*``.
    """
    check_exact(ex)
    d = ex.d
    gram = ex.gram
    p = gram.shape[0] - d - 1
    Tp, _ = pinv_psd(gram[:p, :p])
    m = gram[:p, -1]
    rho = 1.0 - m @ Tp @ m
    if not rho > 1e-12:  # 1 would be a linear function of vech G: no finite best guess
        raise ValueError(
            "ex must have a prior for which the constant 1 is not a linear function of vech G "
            f"(1 - E[vech G]^T T^+ E[vech G] = {rho:.3g}); the best guess g* = (mu - nu) / rho "
            "is then undefined"
        )
    # on the centred prompt (E[vech G0 w0] = nu0): g* = (mu - nu) / rho = mu - nu0 / rho
    nu0 = gram[:p, p : p + d].T @ Tp @ m
    g = ex.mu - nu0 / rho
    return lsa_optimum(ex, g, 0.0)


def linear_transformer_optimum(ex: Exact) -> LSAOptimum:
    """Part III Theorem 1 solved exactly: the best ``A`` of Ahn et al. eq. 7 for ``b = e_{d+1}``.

    With ``b = e_{d+1}`` the prediction ``-G[d+1, :] A x_q`` is linear in ``A`` (``(D, d)``), so the
    exact risk is minimised by least squares on the features ``G[d+1, n] = (1/C) sum_i y_i
    z_{i,n}``. For ``mu = 0`` (Theorem 1's prior) the best multi-head LSA uses only these features
    (the risk is even in ``w``), so this is the global optimum over all ``(b, A)`` -- and over all
    ``H`` -- up to the rescaling ``b -> gamma b``, ``A -> A / gamma``; the tests check it against
    :func:`lsa_optimum` and Theorem 1's formula
    (:func:`iclgd.exact.theorem1_optimal_A`). For ``mu != 0`` it is the best
    model in the slice ``b = e_{d+1}`` only (polish with L-BFGS on :func:`linear_transformer_risk`).

    Returns:
        :class:`LSAOptimum` whose ``params`` are ``{"P": (1, D, D), "Q": (1, D, D)}`` (``P = e_D
        e_D^T``, ``Q = [A, 0]``), and ``M`` the coefficient tensor ``Mt``.
    """
    check_exact(ex)
    d = ex.d
    D = d + 1
    iu = vech_index(D)
    # the features G[n, D] = <G0, sym(W^T e_n (W^T e_D)^T)> on vech G0 (theta_mm = S_mm,
    # theta_mn = 2 S_mn for m < n)
    W = shift_matrix(ex.mu)
    Q = np.einsum("nm,l->nml", W, W[d])
    Q = (Q + np.swapaxes(Q, 1, 2)) / 2
    feat = np.where(iu[0] == iu[1], 1.0, 2.0)[None, :] * Q[:, iu[0], iu[1]]  # (D, p)
    beta, rank = solve_columns(ex, np.zeros(d), 0.0, feat)
    # f = <G, Mt_k> x_k with Mt[D, n, k] = -A[n, k]: coefficient of G[D, n] is -A[n, k].
    A = -beta[:, :d]
    P = np.zeros((1, D, D))
    P[0, d, d] = 1.0
    Q = np.zeros((1, D, D))
    Q[0, :, :d] = A
    params = {"P": P, "Q": Q}
    Mt = np.zeros((D, D, D))
    Mt[d, :, :d] = -A
    risk = risk64(linear_transformer_risk, params, ex)
    return LSAOptimum(risk, Mt, params, np.zeros(d), 0.0, rank)


def gd_optimal(ex: Exact, w0=None) -> tuple[float, float]:
    """Optimal step of one GD step from ``w0`` and its risk, from the exact quadratic in ``eta``.

    With ``Y(eta) = Y0 + eta Y1`` (the sum-of-squares form, NumPy float64),
    ``eta* = -<Y0, Y1> / ||Y1||^2`` and ``R* = ||Y0||^2 + eta* <Y0, Y1> + sigma^2``.

    **Flat risk** (``0 / 0``). If ``Y1 = 0`` (to float64 rounding: ``||Y1|| <= 1e3 eps ||F||
    ||Pi_1|| ||F_S||``) the risk does not depend on ``eta``: the GD step never changes the
    prediction's error -- e.g. ``Omega = 0``, no noise and ``w0 = mu``, where every prompt's task is
    ``w0`` and its gradient is zero. Every ``eta`` is then optimal; this returns ``eta* = 0`` (no
    step, the minimiser of least magnitude) and the constant risk ``||Y0||^2 + sigma^2``.

    Args:
        ex: :func:`~iclgd.exact.prepare`'s output.
        w0: ``(d,)`` the start; default the prior mean ``mu``.

    Returns:
        ``(eta_star, risk_star)`` as floats.
    """
    check_exact(ex)
    d = ex.d
    w0 = ex.prior.mu if w0 is None else v.array("w0", w0, "d", v.Dims(d=d))
    w0 = np.asarray(w0, np.float64)
    # on the centred prompt: Mt -> W^T Mt W, vq -> vq - (mu, 0) (exact cancellation at w0 = mu)
    M1, vq = centre_coefficients(gd_coefficients(w0, np), np.concatenate([w0, [0.0]]), ex.mu)
    F, FS = ex.gram_factor, ex.x_factor
    Y0 = F @ coef_matrix(np.zeros_like(M1), vq, d) @ FS
    Pi1 = coef_matrix(M1, np.zeros_like(vq), d, with_w=False)
    Y1 = F @ Pi1 @ FS
    a1 = float(np.sum(Y0 * Y1))
    a2 = float(np.sum(Y1 * Y1))
    bound = np.linalg.norm(F) * np.linalg.norm(Pi1) * np.linalg.norm(FS)
    if np.sqrt(a2) <= 1e3 * np.finfo(np.float64).eps * bound:  # flat in eta (docstring)
        return 0.0, float(np.sum(Y0 * Y0)) + ex.noise_var
    eta = -a1 / a2
    return eta, float(np.sum(Y0 * Y0)) + eta * a1 + ex.noise_var


def multihead_lsa_closed_form(d: int, C: int, w_star, g=None, c: float = 0.0) -> ClosedForm:
    """The best multi-head LSA (``H >= d``) of Part I in closed form: ``Sigma = Omega = I``, no
    noise.

    With ``kappa = C / (C d + 2)``, ``eta = C / (C + d + 1)``, ``P = diag(I_d, 0)`` and
    ``v = (-w*, 1)``, the optimum for ``y_q = 0`` is::

        M_i = kappa w*_i P + (eta / 2) (e_i v^T + v e_i^T)      (i <= d),      M_D = 0,

    one GD step from ``w*`` (the ``eta`` term) plus ``kappa w*_i P``, the best linear fit of the
    constant ``w*_i`` by ``<G, .>``. For ``y_q = x_q^T g + c``: if ``c = 0``, ``M_i`` loses
    ``kappa g_i P``; if ``c != 0``, the ``M_i`` are unchanged and ``M_D = -kappa P``. The risk is::

        R* = d (d+1) / (C+d+1) + 2 (||w* - g||^2 + c^2) / (C d + 2).

    Equal to :func:`lsa_optimum` (``M`` and risk, tested), which computes it numerically for
    any prior.

    Args:
        d: input dimension.
        C: context length.
        w_star: ``(d,)`` prior mean.
        g: ``(d,)`` the guess (default 0); c: its bias.

    Returns:
        :class:`ClosedForm` ``(kappa, eta, M, risk)``.
    """
    d = v.positive_int("d", d)
    C = v.positive_int("C", C)
    dims = v.Dims(d=d)
    w = np.asarray(v.array("w_star", w_star, "d", dims), np.float64)
    g = np.zeros(d) if g is None else np.asarray(v.array("g", g, "d", dims), np.float64)
    c = v.finite_float("c", c)
    kappa, eta = C / (C * d + 2), C / (C + d + 1)
    D = d + 1
    P = np.diag(np.append(np.ones(d), 0.0))
    vec = np.append(-w, 1.0)  # e_D - w~*
    M = np.zeros((D, D, D))
    for i in range(d):
        e = np.eye(D)[i]
        M[:, :, i] = kappa * w[i] * P + eta / 2 * (np.outer(e, vec) + np.outer(vec, e))
        if c == 0.0:
            M[:, :, i] -= kappa * g[i] * P
    if c != 0.0:
        M[:, :, d] = -kappa * P
    with np.errstate(over="ignore"):  # a huge c: the risk overflows to inf, not an error
        c2 = float(np.float64(c) ** 2)
    risk = d * (d + 1) / (C + d + 1) + 2 * (float(np.sum((w - g) ** 2)) + c2) / (C * d + 2)
    return ClosedForm(kappa, eta, M, risk)


def yq_lsa_gd_point_grad(ex: Exact, eta: float, w0=None) -> GDPointGrad:
    """Exact gradient of the y_q-LSA risk at the GD point, in the reduced parameters ``(u, Q, w)``.

    The GD point (Xie et al. eq. 7 with ``w = w0``) is ``u = eta (-w0, 1)`` (the last row of
    ``W^P W^V``), ``Q = (W^K)^T W^Q = diag(I_d, 0)`` and the guess ``w = w0``: the model computes
    one GD step from ``w0`` with step ``eta``. In Part I (``Sigma = Omega = I``, ``w0 = w*``) the
    gradient vanishes exactly at ``eta* = C / (C + d + 1)`` (:func:`gd_optimal`) at every finite
    ``C``; at ``eta = 1`` it is ``g_u = -2 d kappa e_D``, ``g_Q = -2 kappa P P^T`` with
    ``kappa = 1 - (C + d + 1) / C`` and ``P = [I_d; w*^T]``.

    Args:
        ex: :func:`~iclgd.exact.prepare`'s output.
        eta: the step.
        w0: ``(d,)`` start and guess; default the prior mean.

    Returns:
        :class:`GDPointGrad` ``(u (D,), Q (D, D), w (d,))``, NumPy float64.
    """
    check_exact(ex)
    d = ex.d
    eta = v.finite_float("eta", eta)
    w0 = ex.prior.mu if w0 is None else v.array("w0", w0, "d", v.Dims(d=d))
    w0 = np.asarray(w0, np.float64)
    with enable_x64():
        u = eta * jnp.concatenate([-jnp.asarray(w0), jnp.ones(1)])
        Q = jnp.zeros((d + 1, d + 1)).at[:d, :d].set(jnp.eye(d))
        risk = lambda u, Q, w: lsa_risk_reduced(u[None], Q[None], ex, w, 0.0)
        gu, gQ, gw = jax.grad(risk, argnums=(0, 1, 2))(u, Q, jnp.asarray(w0))
        return GDPointGrad(np.asarray(gu), np.asarray(gQ), np.asarray(gw))
