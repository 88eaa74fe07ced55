"""Algorithmic baselines that the trained models are compared with: one file, every family.

Linear regression (Parts I, III):

* :func:`gd_one_step`: one gradient step on the context least-squares loss from any ``w0``,
  ``w1 = w0 - (eta/C) X^T (X w0 - y)``, and its prediction ``w1^T x_q`` (Xie et al. eq. 9).
* :func:`bayes_posterior_mean`: the Bayes-optimal predictor under a Gaussian prior.
* :func:`ridge_weights` and :func:`ridge`: ridge regression on the context -- the one ridge of
  iclgd, also behind Part II's eq. 20 and eq. 25.
* :func:`preconditioned_gd_iterates`, :func:`preconditioned_gd` and :func:`gd_plus_plus`: multi-step
  preconditioned GD (Ahn et al. eq. 10-11, Lemma 2) and GD++ (Sec. 6, eq. 13), the algorithms that
  the linear transformers of :mod:`iclgd.models.linear_transformer` implement.

Representations (Part II, Yang et al. Sec. 3.2-3.3):

* :func:`ridge_eq20` / :func:`y_star` -- the ridge regression the trained transformer implements
  (regulariser ``m tau / (2N)``; eq. 20, 22);
* :func:`ridge_eq25` / :func:`y_best` -- the "best possible" ridge (regulariser ``tau / 2``; eq. 23,
  25).

Exact risks and optimal step sizes of these algorithms are in :mod:`iclgd.exact`
(:func:`iclgd.exact.gd_risk`, :func:`iclgd.exact.gd_optimal`, :func:`iclgd.exact.tuned_gd`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import checks as v
from .models.linear_transformer import _check_L
from .tasks.linear import Prior, TaskBatch, check_batch, check_prior
from .tasks.representation import RepresentationSpec, check_spec

__all__ = [
    "gd_one_step",
    "bayes_posterior_mean",
    "ridge_weights",
    "ridge",
    "preconditioned_gd_iterates",
    "preconditioned_gd",
    "gd_plus_plus",
    "tune_gdpp_mc",
    "ridge_eq20",
    "ridge_eq25",
    "y_star",
    "y_best",
]


def _check_xyq(X, y, x_q) -> tuple:
    """``X (B, C, d)``, ``y (B, C)``, ``x_q (B, d)``: real, finite, every size >= 1; returns them
    as arrays and the bound sizes."""
    dims = v.Dims()
    X = jnp.asarray(v.array("X", X, "B C d", dims, promote=True))
    y = jnp.asarray(v.array("y", y, "B C", dims, promote=True))
    x_q = jnp.asarray(v.array("x_q", x_q, "B d", dims, promote=True))
    return X, y, x_q, dims


def gd_one_step(X: jax.Array, y: jax.Array, x_q: jax.Array, w0, eta: float) -> jax.Array:
    """Prediction of one GD step from ``w0``: ``(w0 - (eta/C) X^T (X w0 - y))^T x_q``.

    Args:
        X: ``(B, C, d)`` context inputs.
        y: ``(B, C)`` context labels.
        x_q: ``(B, d)`` queries.
        w0: ``(d,)`` starting point, shared by all prompts, or ``(B, d)``.
        eta: step size.

    Returns:
        ``(B,)`` predictions.
    """
    X, y, x_q, dims = _check_xyq(X, y, x_q)
    B, C, d = dims["B"], dims["C"], dims["d"]
    w0 = jnp.asarray(v.array("w0", w0), dtype=float)
    if w0.shape not in ((d,), (B, d)):
        raise ValueError(f"w0 must have shape ({d},) or ({B}, {d}), got shape {tuple(w0.shape)}")
    eta = v.scalar("eta", eta)
    w0 = jnp.broadcast_to(w0, (B, d))
    resid = jnp.einsum("bcd,bd->bc", X, w0) - y
    w1 = w0 - (eta / C) * jnp.einsum("bcd,bc->bd", X, resid)
    return jnp.einsum("bd,bd->b", w1, x_q)


def bayes_posterior_mean(tasks: TaskBatch, prior: Prior) -> jax.Array:
    """Bayes-optimal prediction ``E[w_hat | X, y]^T x_q`` under the Gaussian prior.

    ``E[w_hat | X, y] = mu + Omega X^T (X Omega X^T + sigma^2 I)^+ (y - X mu)`` (a pseudo-inverse,
    so the noise-free case with ``C > d`` is covered: the posterior mean then interpolates).

    Returns:
        ``(B,)`` predictions.
    """
    B, C, d = check_batch(tasks)
    X, y, x_q = tasks.X, tasks.y, tasks.x_q
    check_prior(prior)
    if prior.d != d:
        raise ValueError(f"prior must have dimension d = {d} to match tasks.X, got d = {prior.d}")
    K = jnp.einsum("bcd,de,bke->bck", X, prior.Omega, X) + prior.noise_std**2 * jnp.eye(C)
    r = y - X @ prior.mu
    alpha = jnp.einsum("bck,bk->bc", jnp.linalg.pinv(K, hermitian=True), r)
    w = prior.mu + jnp.einsum("de,bce,bc->bd", prior.Omega, X, alpha)
    return jnp.einsum("bd,bd->b", w, x_q)


def ridge_weights(X: jax.Array, y: jax.Array, reg) -> jax.Array:
    """Ridge regression on each prompt's context, batched.

    ``w = argmin_w 1/(2C) sum_i (y_i - w^T x_i)^2 + reg/2 ||w||^2
    = (X^T X + C reg I_d)^{-1} X^T y``, computed in the ``C x C`` (dual) form
    ``X^T (X X^T + C reg I_C)^{-1} y`` when ``C <= d`` and in the ``d x d`` (primal) form otherwise
    (a static, shape-based choice). So ``reg = 0`` gives the minimum-norm interpolant (``C <= d``,
    ``X`` of full row rank) or least squares (``C > d``).

    Args:
        X: ``(B, C, d)`` context inputs, or ``(C, d)`` shared by every prompt (Part II's features).
        y: ``(B, C)`` context labels.
        reg: regularisation weight ``>= 0`` (a scalar; may be traced).

    Returns:
        ``(B, d)`` ridge weights.

    Raises:
        ValueError: for shape mismatches, a negative or non-finite ``reg``, non-finite data, or (on
            concrete inputs) a singular system with ``reg = 0``.
    """
    X = v.array("X", X, finite=False)
    if X.ndim not in (2, 3):
        raise ValueError(f"X must have shape (B, C, d) or (C, d), got shape {tuple(X.shape)}")
    dims = v.Dims()
    v.array("X", X, "B C d" if X.ndim == 3 else "C d", dims)
    v.array("y", y, "B C", dims, what=f"to match X of shape {tuple(X.shape)}")
    reg = v.scalar("reg", reg, nonneg=True)
    X, y = jnp.asarray(v.floating(X)), jnp.asarray(v.floating(y))
    if not (v.is_tracer(X) or v.is_tracer(reg)):
        _check_ridge_system(X, float(reg))
    return _ridge(X, y, jnp.asarray(reg, dtype=float))


def _check_ridge_system(X: jax.Array, reg: float) -> None:
    """The ridge system ``X X^T + C reg I`` (dual) or ``X^T X + C reg I`` (primal) of every prompt
    must be positive definite in the dtype it is solved in (relative eigenvalue floor, as
    :func:`iclgd.checks.spd_matrix`), else the solve returns garbage or NaN."""
    C, d = X.shape[-2:]
    n = min(C, d)
    eps = float(np.finfo(np.result_type(X.dtype, jnp.asarray(reg).dtype)).eps)
    Xn = np.asarray(X, np.float64)
    K = Xn @ np.swapaxes(Xn, -1, -2) if C <= d else np.swapaxes(Xn, -1, -2) @ Xn
    trace = np.trace(K, axis1=-2, axis2=-1).max()
    if C * reg > n * eps * (trace + C * reg):  # then lam_min >= C reg > n eps lam_max
        return
    lam = np.linalg.eigvalsh(K) + C * reg  # (..., n)
    bad = lam[..., 0] <= n * eps * np.maximum(lam[..., -1], 0.0)
    if np.any(bad):
        where = f" (prompt {int(np.argmax(bad))})" if K.ndim == 3 else ""
        raise ValueError(
            f"ridge regression is singular in {X.dtype}{where}: with reg = {reg:g}, X must have "
            f"full rank (row rank C = {C} if C <= d, column rank d = {d} otherwise), or use "
            "reg > 0"
        )


@jax.jit
def _ridge(X, y, reg):
    C, d = X.shape[-2:]
    c = C * reg
    if C <= d:  # static, shape-based choice: dual form
        K = jnp.einsum("...id,...jd->...ij", X, X) + c * jnp.eye(C)
        K = jnp.broadcast_to(K, (y.shape[0], C, C))
        alpha = jnp.linalg.solve(K, y[..., None])[..., 0]  # (B, C)
        return jnp.einsum("...cd,...c->...d", X, alpha) if X.ndim == 3 else alpha @ X
    A = jnp.einsum("...ci,...cj->...ij", X, X) + c * jnp.eye(d)
    Xy = jnp.einsum("...cd,...c->...d", X, y) if X.ndim == 3 else y @ X
    A = jnp.broadcast_to(A, (y.shape[0], d, d))
    return jnp.linalg.solve(A, Xy[..., None])[..., 0]


def ridge(X: jax.Array, y: jax.Array, x_q: jax.Array, reg) -> jax.Array:
    """Prediction ``w^T x_q`` of :func:`ridge_weights` (same ``reg`` convention).

    Args:
        X: ``(B, C, d)``; y: ``(B, C)``; x_q: ``(B, d)``; reg: ``>= 0``.

    Returns:
        ``(B,)`` predictions.
    """
    X, y, x_q, _ = _check_xyq(X, y, x_q)
    return jnp.einsum("bd,bd->b", ridge_weights(X, y, reg), x_q)


# Part III: multi-step preconditioned GD and GD++


def _check_stack(name: str, A, dims: dict, what: str = "") -> jax.Array:
    """Turn a stack or a sequence of ``(d, d)`` matrices into a ``(L, d, d)`` array and check it."""
    if isinstance(A, (list, tuple)):
        if len(A) == 0:
            raise ValueError(f"L must be an integer >= 1: {name} holds no matrices")
        shapes = {tuple(np.shape(a)) for a in A}
        if len(shapes) != 1:
            raise ValueError(
                f"{name} must hold L matrices of shape (d, d), got shapes {sorted(shapes)}"
            )
        A = jnp.stack([jnp.asarray(v.array(f"{name}[{i}]", a)) for i, a in enumerate(A)])
    _check_L(name, A)
    return v.array(name, A, "L d d", dims, what=what, promote=True)


def _check_regression(X, y, x_q=None) -> tuple:
    """Check ``X (B, n, d)``, ``y (B, n)`` and ``x_q (B, d)``; return the bound sizes and the
    three as floating arrays (:func:`iclgd.checks.floating`)."""
    dims = v.Dims()
    X = v.array("X", X, "B n d", dims, promote=True)
    y = v.array("y", y, "B n", dims, what="to match X", promote=True)
    if x_q is not None:
        x_q = v.array("x_q", x_q, "B d", dims, what="to match X", promote=True)
    return dims, X, y, x_q


def _grad_R(X: jax.Array, y: jax.Array, w: jax.Array) -> jax.Array:
    """``grad R(w) = (1/n) X^T (X w - y)`` of eq. 10, batched: ``X (B, n, d)``,
    ``y (B, n)``, ``w (B, d)``."""
    n = X.shape[1]
    return jnp.einsum("bni,bn->bi", X, jnp.einsum("bni,bi->bn", X, w) - y) / n


def preconditioned_gd_iterates(X: jax.Array, y: jax.Array, A_list) -> jax.Array:
    """Iterates of ``L`` steps of preconditioned GD from ``w_0 = 0`` (eq. 10-11, Lemma 2).

    ``w_{l+1} = w_l + A_l grad R(w_l)`` with ``R(w) = (1/2n) sum_{i<=n} (w^T x^(i) - y^(i))^2``;
    with ``A_l = -gamma_l I`` this is plain GD with step ``gamma_l`` (the paper's sign: ``-A_l`` is
    the preconditioner). All ``n`` context examples enter ``R`` (eq. 10 sums ``i = 1..n``).

    By Lemma 2, ``w_l`` is the weight vector the eq. 9 transformer with symmetric
    ``A_0, ..., A_{l-1}`` uses after ``l`` layers. For a non-symmetric ``A_l`` the transformer
    matches this function called with the transposes ``A_l^T`` (see the module docstring).

    Args:
        X: ``(B, n, d)`` context inputs (row ``i`` is ``x^(i)``).
        y: ``(B, n)`` context labels.
        A_list: ``(L, d, d)`` array or a sequence of ``L`` ``(d, d)`` arrays, ``L >= 1``.

    Returns:
        ``(L+1, B, d)``: ``w_0 = 0, w_1, ..., w_L``.
    """
    dims, X, y, _ = _check_regression(X, y)
    A = _check_stack("A_list", A_list, dims)
    return _pgd_iterates(X, y, A)


@jax.jit
def _pgd_iterates(X: jax.Array, y: jax.Array, A: jax.Array) -> jax.Array:
    B, _, d = X.shape

    def step(w, A_l):
        w_new = w + jnp.einsum("ij,bj->bi", A_l, _grad_R(X, y, w))
        return w_new, w_new

    w0 = jnp.zeros((B, d), dtype=jnp.result_type(X, y, A))
    _, ws = jax.lax.scan(step, w0, A)
    return jnp.concatenate([w0[None], ws], axis=0)


def preconditioned_gd(X: jax.Array, y: jax.Array, x_q: jax.Array, A_list) -> jax.Array:
    """Prediction ``<w_L, x_q>`` after ``L`` preconditioned GD steps from
    ``w_0 = 0`` (eq. 11, Lemma 2).

    See :func:`preconditioned_gd_iterates` for the update and its conventions.

    Args:
        X: ``(B, n, d)`` context inputs.
        y: ``(B, n)`` context labels.
        x_q: ``(B, d)`` query inputs ``x^(n+1)``.
        A_list: ``(L, d, d)`` (or a sequence of ``L`` ``(d, d)`` arrays).

    Returns:
        ``(B,)`` predictions; for symmetric ``A_l`` equal to ``sparse_predict({"A": A_list}, Z0)``.
    """
    dims, X, y, x_q = _check_regression(X, y, x_q)
    A = _check_stack("A_list", A_list, dims)
    return jnp.einsum("bi,bi->b", _pgd_iterates(X, y, A)[-1], x_q)


def gd_plus_plus(X: jax.Array, y: jax.Array, x_q: jax.Array, A_list, B_list) -> jax.Array:
    """GD++ (von Oswald et al. 2022) in the preconditioned form of Ahn et al.
    Sec. 6 (eq. 13, App. C.1).

    Each step interleaves (i) a preconditioned GD step (eq. 11) on the least-squares loss of the
    *current* covariates ``x_l = S_l x`` and (ii) a linear transform of every covariate (context and
    query), ``x_{l+1} = (I + B_l G_l A_l) x_l`` with ``G_l = (1/n) sum_{i<=n} x_l^(i) x_l^(i)T``
    (the paper's ``X_{k+1} = X_k + B_k X_k M X_k^T A_k X_k``; von Oswald et al.'s curvature
    correction ``x <- (I - gamma X X^T) x`` when ``A_l = a_l I``, ``B_l = b_l I``,
    ``a_l b_l = -gamma n``). The predictor's values at the tokens are kept through (ii), so in the
    original coordinates, with ``w_0 = 0`` and ``S_0 = I``::

        w_{l+1} = w_l + S_l^T A_l S_l grad R(w_l)          (R of eq. 10 on the original data)
        S_{l+1} = (I + B_l S_l G_0 S_l^T A_l) S_l,         G_0 = (1/n) sum_{i<=n} x^(i) x^(i)T,

    and the prediction is ``<w_L, x_q>``. With ``B_l = 0`` this is :func:`preconditioned_gd`. For
    the symmetric ``A_l`` of eq. 13 it equals ``sparse_predict({"A": A_list, "B": B_list}, Z0)``.

    Args:
        X: ``(B, n, d)`` context inputs.
        y: ``(B, n)`` context labels.
        x_q: ``(B, d)`` query inputs.
        A_list: ``(L, d, d)`` preconditioners (or a sequence of ``(d, d)``).
        B_list: ``(L, d, d)`` covariate-transform blocks (same ``L``).

    Returns:
        ``(B,)`` predictions.
    """
    dims, X, y, x_q = _check_regression(X, y, x_q)
    A = _check_stack("A_list", A_list, dims)
    Bs = _check_stack("B_list", B_list, dims, what="like A_list")
    return _gdpp(X, y, x_q, A, Bs)


@jax.jit
def _gdpp(X: jax.Array, y: jax.Array, x_q: jax.Array, A: jax.Array, Bs: jax.Array) -> jax.Array:
    Bsz, n, d = X.shape
    G0 = jnp.einsum("bni,bnj->bij", X, X) / n  # (B, d, d)
    I = jnp.eye(d, dtype=G0.dtype)

    def step(carry, AB):
        w, S = carry
        A_l, B_l = AB
        g = _grad_R(X, y, w)  # (B, d)
        step_dir = jnp.einsum("bji,jk,bkl,bl->bi", S, A_l, S, g)  # S^T A S g
        G_l = jnp.einsum("bij,bjk,blk->bil", S, G0, S)  # S G0 S^T
        T = I + jnp.einsum("ij,bjk,kl->bil", B_l, G_l, A_l)
        return (w + step_dir, jnp.einsum("bij,bjk->bik", T, S)), None

    w0 = jnp.zeros((Bsz, d), dtype=jnp.result_type(X, y, A, Bs))
    S0 = jnp.broadcast_to(I, (Bsz, d, d)).astype(w0.dtype)
    (wL, _), _ = jax.lax.scan(step, (w0, S0), (A, Bs))
    return jnp.einsum("bi,bi->b", wL, x_q)


def tune_gdpp_mc(L: int, lam, starts) -> tuple[np.ndarray, np.ndarray]:
    """GD++'s scalars on Theorem 5's set tuned by Monte Carlo: BFGS (scipy) on the mean of
    :func:`iclgd.metrics.gdpp_sample_loss` over the sampled eigenvalues ``lam``, from each start;
    the best run wins (Ahn et al. Sec. 6). Not to be trusted (the book's chapter "GD baselines"):
    GD++'s squared errors are heavy-tailed, so the sampled loss has local minima whose exact risk,
    :func:`iclgd.exact.gdpp_risk`, lies far above it, and which one BFGS reaches from a start
    depends on the last bits of the arithmetic (the CPU).

    Args:
        L: layers (scalars ``a_0 .. a_{L-1}``, ``b_0 .. b_{L-2}``; the last ``b`` does not enter).
        lam: ``(N, d)`` eigenvalues of sampled whitened Gram matrices (the fitting sample).
        starts: a non-empty list of ``(a, b)`` starting points, ``a`` and ``b`` of length ``L``.

    Returns:
        ``(a, b)``, float64 arrays of length ``L`` with ``b[-1] = 0``.
    """
    from scipy.optimize import minimize

    from .exact.gdpp import gdpp_residual  # lazy: iclgd.exact imports sympy

    L = v.positive_int("L", L)
    lam = np.asarray(v.array("lam", lam, "N d"), dtype=np.float64)
    if not isinstance(starts, (list, tuple)) or not starts:
        raise v.ArgumentTypeError(
            f"starts must be a non-empty list of (a, b) pairs, got {starts!r:.60}"
        )
    points = []
    for i, ab in enumerate(starts):
        if not isinstance(ab, (list, tuple)) or len(ab) != 2:
            raise v.ArgumentTypeError(f"starts[{i}] must be a pair (a, b), got {ab!r:.60}")
        a = np.asarray(v.array(f"starts[{i}][0]", ab[0], (L,)), dtype=np.float64)
        b = np.asarray(v.array(f"starts[{i}][1]", ab[1], (L,)), dtype=np.float64)
        points.append(np.r_[a, b[:-1]])

    def split(th):
        return th[:L], np.r_[th[L:], 0.0]

    def fit(th):  # the mean of iclgd.metrics.gdpp_sample_loss over the sample
        return np.sum(gdpp_residual(*split(th), lam) ** 2, -1).mean()

    runs = [minimize(fit, th0, method="BFGS") for th0 in points]
    return split(min(runs, key=lambda r: r.fun).x)


# Part II: the ridge predictors of eq. 20-25


def _check_Zy(Z, y) -> tuple[int, int]:
    dims = v.Dims()
    Z = v.array("Z", Z, "m N", dims)
    v.array("y", y, "B N", dims, what=f"to match Z of shape (m, N) = {tuple(Z.shape)}")
    return dims["m"], dims["N"]


def ridge_eq20(Z: jax.Array, y: jax.Array, tau) -> jax.Array:
    """The transformer's ridge regression, eq. 20.

    ``lam_hat = argmin_lam 1/(2N) sum_i (y_i - lam^T f(v_i))^2 + (m tau)/(2N) ||lam||^2``
    ``       = (Z Z^T + m tau I_m)^{-1} Z y``.

    Args:
        Z: ``(m, N)`` prompt features.
        y: ``(B, N)`` prompt labels.
        tau: noise variance ``tau >= 0``.

    Returns:
        ``(B, m)``.
    """
    m, N = _check_Zy(Z, y)
    tau = v.scalar("tau", tau, nonneg=True)
    return ridge_weights(Z.T, y, m * tau / N)


def ridge_eq25(Z: jax.Array, y: jax.Array, tau) -> jax.Array:
    """The best-possible ridge regression, eq. 25 (equivalent to eq. 24 by Lemma 4).

    ``lam_hat_tau = argmin_lam 1/(2N) sum_i (y_i - lam^T f(v_i))^2 + tau/2 ||lam||^2``
    ``            = (Z Z^T + N tau I_m)^{-1} Z y``.

    Args:
        Z: ``(m, N)`` prompt features.
        y: ``(B, N)`` prompt labels.
        tau: noise variance ``tau >= 0``.

    Returns:
        ``(B, m)``.
    """
    _check_Zy(Z, y)
    tau = v.scalar("tau", tau, nonneg=True)
    return ridge_weights(Z.T, y, tau)


def y_star(spec: RepresentationSpec, y: jax.Array) -> jax.Array:
    """The trained transformer's limit output ``y_star = (y, (Z^Q)^T lam_hat)`` of
    eq. 22 (``lam_hat`` of eq. 20).

    Args:
        spec: the task.
        y: ``(B, N)`` prompt labels.

    Returns:
        ``(B, K)``.
    """
    spec = check_spec(spec)
    lam = ridge_eq20(spec.Z, y, spec.tau)
    return _complete(y, lam, spec.ZQ)


@jax.jit
def _complete(y, lam, ZQ):
    return jnp.concatenate([y, lam @ ZQ], axis=1)


def y_best(spec: RepresentationSpec, y: jax.Array) -> jax.Array:
    """The best possible output ``y_best = (y, (Z^Q)^T lam_hat_tau)`` of eq. 23
    (``lam_hat_tau`` of eq. 25).

    Args:
        spec: the task.
        y: ``(B, N)`` prompt labels.

    Returns:
        ``(B, K)``.
    """
    spec = check_spec(spec)
    lam = ridge_eq25(spec.Z, y, spec.tau)
    return _complete(y, lam, spec.ZQ)
