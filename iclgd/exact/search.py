r"""Best LSA with few heads, and the best single-head y_q-LSA: numerical searches on the exact risk.

**H-head LSA, fixed guess** (:func:`lsa_search`). Only the symmetric parts ``S_k`` of the
coefficient matrices ``Mt_k`` enter the risk, a convex quadratic in them
(:mod:`iclgd.exact.optima`)::

    R(S) = R* + sum_{k,l} W_kl (theta_k - theta*_k)^T T (theta_l - theta*_l),

with ``theta_k`` the coefficients of ``<G, S_k>`` on ``vech G``, ``theta*`` the unconstrained
optimum (:func:`~iclgd.exact.lsa_optimum`), ``T = E[vech G vech G^T]``, and ``W`` is
``diag(Sigma, 1)`` restricted to the free columns (``k <= d`` if ``c = 0``, all ``D`` if
``c != 0``). With ``H`` heads every ``Mt_k`` has its range in ``span(b_1 .. b_H)``, so every
``S_k`` vanishes on the subspace ``U = span(b)^perp`` (``N^T S_k N = 0`` for a basis ``N`` of
``U``); conversely any such ``S`` is realised by ``H = D - r`` heads, ``r = dim U``
(:func:`heads_from_subspace`). For a fixed ``U`` the best ``S`` solves a least-squares problem with
the linear constraints ``L_N theta_k = 0`` (:func:`vanishing_map`), whose excess risk is in closed
form (:func:`subspace_excess`)::

    excess(U) = tr(W (Theta* L^T) (L T^{-1} L^T)^{-1} (L Theta*^T)).

The search runs over ``r``-dimensional subspaces only (L-BFGS from random subspaces and from those
left out by the local minima of L-BFGS on the weights), and finds lower risks than L-BFGS on the
non-convex weights (tested). ``H >= d+1``: the
App. A.1 construction; ``H = d``: the folded construction when the optimum does not use ``G_yy``
(both exact, :mod:`iclgd.exact.optima`).

**Single-head y_q-LSA** (:func:`yq_lsa_search`): L-BFGS on the weights from the GD point (eq. 7).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..tasks import standard_normal
from .core import enable_x64, risk64, to_float64, vech_index
from .moments import Exact, check_exact, shift_matrix
from .optima import (
    fold_last_row,
    gd_optimal,
    guess64,
    lsa_optimum,
    reduced_to_lsa_params,
    solve_columns,
    uncentre,
)
from .risks import ex_arrays, lsa_risk, lsa_risk_core, lsa_risk_reduced

__all__ = [
    "SearchResult",
    "vanishing_map",
    "subspace_excess",
    "heads_from_subspace",
    "lbfgs_minimize",
    "lsa_search",
    "yq_lsa_search",
]


class SearchResult(NamedTuple):
    """Result of a numerical search on an exact risk (:func:`lsa_search`, :func:`yq_lsa_search`).

    Attributes:
        risk: the best exact risk found (float64, realised by ``params``).
        reduced: the reduced parameters ``{"b": (H, D), "A": (H, D, D)[, "w": (d,)]}``.
        params: the same as LSA parameters (``{"attn": ..., "w": ...}`` for y_q-LSA).
        grad_norm: Euclidean norm of the exact gradient in the reduced parameters at the end.
        risks: the final risk of every start (L-BFGS on the weights: first the GD point, if used).
        losses: the objective along the iterations of the best start (the risk; for the subspace
            search the floor plus the excess; empty for an exact construction).
        method: ``"construction"`` (``H >= d+1``), ``"fold"`` (``H = d``), ``"subspace"`` or
            ``"lbfgs"`` (on the weights).
    """

    risk: float
    reduced: dict
    params: dict
    grad_norm: float
    risks: np.ndarray
    losses: np.ndarray
    method: str = "lbfgs"


# ----------------------------------------------------------------------------------------------
# L-BFGS (optax) from many starts, one compiled solver
# ----------------------------------------------------------------------------------------------


def lbfgs_minimize(loss: Callable, starts, steps: int, patience: int = 10, rtol: float = 1e-14):
    """optax L-BFGS (zoom line search) on ``loss`` from every start; call inside ``jax.jit``.

    A step that produces a non-finite value or parameter is rejected (the iterate stays). A start
    stops early once its loss has not decreased by more than ``rtol * |loss|`` for ``patience``
    iterations in a row (converged to the working precision), else after ``steps`` iterations. The
    starts (a pytree with a leading start axis) run sequentially with ``lax.map``: on CPU that
    compiles faster than ``vmap`` and runs as fast.

    Returns:
        ``(final params, final losses (S,), loss curves (S, steps))``; a curve that stopped early
        repeats its last value.
    """
    import optax

    opt = optax.lbfgs()
    vg = optax.value_and_grad_from_state(loss)

    def run(p0):
        dt = jax.eval_shape(loss, p0).dtype

        def cond(carry):
            i, _, _, _, stall, _ = carry
            return (i < steps) & (stall < patience)

        def body(carry):
            i, p, st, curve, stall, prev = carry
            val, gr = vg(p, state=st)
            upd, st2 = opt.update(gr, st, p, value=val, grad=gr, value_fn=loss)
            p2 = optax.apply_updates(p, upd)
            leaves = jax.tree_util.tree_leaves(p2)
            ok = jnp.isfinite(val) & jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in leaves]))

            def keep(a, b):
                return jax.tree_util.tree_map(lambda x, y: jnp.where(ok, x, y), a, b)

            improved = prev - val > rtol * jnp.abs(val)
            stall = jnp.where(improved, 0, stall + 1)
            curve = curve.at[i].set(val)
            return i + 1, keep(p2, p), keep(st2, st), curve, stall, jnp.minimum(prev, val)

        init = (0, p0, opt.init(p0), jnp.zeros(steps, dt), 0, jnp.asarray(jnp.inf, dt))
        n, p, _, curve, _, _ = jax.lax.while_loop(cond, body, init)
        curve = jnp.where(jnp.arange(steps) < n, curve, curve[jnp.maximum(n - 1, 0)])
        return p, loss(p), curve

    return jax.lax.map(run, starts)


@partial(jax.jit, static_argnames=("steps",))
def _lbfgs_lsa(starts: dict, F, FS, nv, mu, g, c, train_w, *, steps: int):
    """L-BFGS on the exact LSA risk in ``{"b", "A", "w"}``; the guess is ``w`` if ``train_w`` else
    ``g``.

    One compilation per shape serves every prior and model class.
    """

    def loss(p):
        w = jnp.where(train_w, p["w"], g)
        return lsa_risk_core(p["b"], p["A"], w, c, F, FS, nv, mu)

    return lbfgs_minimize(loss, starts, steps)


def _reduced_grad_norm(ex: Exact, b, A, w, c, train_w: bool) -> float:
    """Norm of the exact gradient in ``(b, A[, w])`` (float64)."""
    with enable_x64():
        p = {"b": jnp.asarray(b, jnp.float64), "A": jnp.asarray(A, jnp.float64)}
        wj = jnp.asarray(w, jnp.float64)
        if train_w:
            p["w"] = wj
        gr = jax.grad(lambda q: lsa_risk_reduced(q["b"], q["A"], ex, q["w"] if train_w else wj, c))(
            p
        )
        return float(np.sqrt(sum(float(jnp.sum(x * x)) for x in jax.tree_util.tree_leaves(gr))))


def _run_lbfgs(ex: Exact, starts: list, g, c, train_w: bool, steps: int):
    with enable_x64():
        stacked = jax.tree_util.tree_map(lambda *xs: jnp.asarray(np.stack(xs)), *starts)
        dt = stacked["A"].dtype
        p, final, curves = _lbfgs_lsa(
            stacked, *ex_arrays(ex, dt), jnp.asarray(g, dt), jnp.asarray(c, dt),
            jnp.asarray(train_w), steps=steps,
        )  # fmt: skip
        final = np.asarray(final)
        risks = np.where(np.isfinite(final), final, np.inf)
        i = int(np.argmin(risks))
        every = to_float64(p)
        best = jax.tree_util.tree_map(lambda x: x[i], every)
    w = best["w"] if train_w else g
    gnorm = _reduced_grad_norm(ex, best["b"], best["A"], w, c, train_w)
    return best, float(risks[i]), gnorm, risks, np.asarray(curves)[i], every


# ----------------------------------------------------------------------------------------------
# The subspace search
# ----------------------------------------------------------------------------------------------


def vanishing_map(N):
    """``L_N``: ``theta`` (coefficients of a symmetric ``S`` on ``vech G``) -> ``vech(N^T S N)``.

    Args:
        N: ``(D, R)`` (NumPy or JAX).

    Returns:
        ``(R (R+1) / 2, D (D+1) / 2)``: ``(N^T S N)_ab = sum_{m<=n} L[(a,b), (m,n)] theta_mn`` with
        ``theta_mm = S_mm`` and ``theta_mn = 2 S_mn`` (``m < n``).
    """
    xp = jnp if isinstance(N, jax.Array) else np
    D, R = N.shape
    iu0, iu1 = vech_index(D)
    a, b = np.triu_indices(R)
    Nm, Nn = N[iu0], N[iu1]  # rows m and n of N for each vech entry: (p, R)
    P1 = Nm[:, a] * Nn[:, b]
    P2 = Nn[:, a] * Nm[:, b]
    return xp.where((iu0 == iu1)[:, None], P1, (P1 + P2) / 2).T


def subspace_excess(x, active, theta_star, T_inv, W, W_inv):
    """Excess risk over the floor of the best ``S`` vanishing on ``span(N)`` (pure ``jnp``).

    ``N = x * active``: ``x`` is ``(D, R)`` and the columns with ``active = 0`` are ignored, so one
    compiled function serves every ``r = sum(active) <= R`` (their rows of ``L`` vanish and are
    padded with an identity block). ``theta*`` and ``T`` are those of the centred prompt
    (``vech G0``): ``N^T S N = N0^T S0 N0`` with ``S0 = W^T S W`` and ``N0 = W^{-1} N``.

    Args:
        x: ``(D, R)``; active: ``(R,)`` 0/1.
        theta_star: ``(K, p)`` the unconstrained optimum of the ``K`` free columns on ``vech G0``.
        T_inv: ``(p, p)`` ``T0^{-1}``; W: ``(K, K)`` the weight of the columns.
        W_inv: ``(D, D)`` the inverse of the shift ``W = [[I, 0], [mu^T, 1]]``.

    Returns:
        ``tr(W (Theta* L^T) (L T^{-1} L^T)^{-1} (L Theta*^T))`` with ``L = L_{N0}``.
    """
    N = W_inv @ (x * active[None, :])
    # orthonormalise the active columns (N C^{-T}, N^T N = C C^T): the excess only depends on
    # span(N), and an orthonormal basis keeps L T^{-1} L^T well conditioned when columns align
    Cf = jnp.linalg.cholesky(N.T @ N + jnp.diag(1.0 - active))
    N = jax.scipy.linalg.solve_triangular(Cf, N.T, lower=True).T
    L = vanishing_map(N)
    a, b = np.triu_indices(x.shape[1])
    pad = 1.0 - active[a] * active[b]
    LB = theta_star @ L.T
    K = L @ T_inv @ L.T + jnp.diag(pad)
    return jnp.sum(W * (LB @ jnp.linalg.solve(K, LB.T)))


@partial(jax.jit, static_argnames=("steps",))
def _lbfgs_subspace(x0s, active, theta_star, T_inv, W, W_inv, *, steps: int):
    loss = lambda x: subspace_excess(x, active, theta_star, T_inv, W, W_inv)
    return lbfgs_minimize(loss, x0s, steps)


def _subspace_problem(ex: Exact, g: np.ndarray, c: float):
    """``(theta* (K, p), T0^{-1}, W (K, K), full_rank)`` for the free columns of the guess ``(g,
    c)``, on the centred prompt (``vech G0``)."""
    d = ex.d
    D = d + 1
    p = len(vech_index(D)[0])
    beta, (rank, size) = solve_columns(ex, g, c)
    cols = np.arange(D if c != 0.0 else d)
    S_x = ex.x_factor @ ex.x_factor.T  # diag(Sigma, 1)
    T = ex.gram[:p, :p]
    T_inv = np.linalg.inv((T + T.T) / 2) if rank == size else None
    return beta[:, cols].T, T_inv, S_x[np.ix_(cols, cols)], rank == size


def heads_from_subspace(N, theta_star, T_inv, g, c: float, mu) -> dict:
    """Reduced LSA parameters with ``H = D - r`` heads realising the best ``S`` vanishing on
    ``span(N)``.

    On the centred prompt (``S0 = W^T S W``, ``N0 = W^{-1} N``, ``L = L_{N0}``) the best ``theta_k
    = theta*_k - T^{-1} L^T (L T^{-1} L^T)^{-1} L theta*_k``; back on ``G``, ``S_k = W^{-T} S0_k
    W^{-1}``. With ``N`` orthonormal and ``B`` an orthonormal basis of its complement, ``Mt_k = B
    B^T S_k B B^T + 2 B B^T S_k N N^T`` has range in ``span(B)`` and symmetric part ``S_k``. The
    heads are ``b_h = B[:, h]``, ``A_h[n, i] = (B^T M_i)[h, n]``, with ``M`` from ``Mt = M x_3
    P~^T``.

    Args:
        N: ``(D, r)`` full column rank, ``1 <= r <= D - 1``.
        theta_star: ``(K, p)`` on ``vech G0``, ``K = d`` (``c = 0``) or ``D``; T_inv: ``(p, p)``
            ``T0^{-1}``.
        g: ``(d,)``; c: the guess.
        mu: ``(d,)`` the prior mean (the shift ``W``).

    Returns:
        ``{"b": (H, D), "A": (H, D, D)}`` (NumPy float64).
    """
    N = np.asarray(N, np.float64)
    mu = np.asarray(mu, np.float64)
    D, r = N.shape
    d = D - 1
    U = np.linalg.svd(N, full_matrices=True)[0]
    N, B = U[:, :r], U[:, r:]
    N0 = np.linalg.qr(shift_matrix(-mu) @ N)[0]
    L = vanishing_map(N0)
    theta = theta_star - (T_inv @ L.T @ np.linalg.solve(L @ T_inv @ L.T, L @ theta_star.T)).T
    iu0, iu1 = vech_index(D)
    K = theta.shape[0]
    S0 = np.zeros((D, D, K))
    S0[iu0, iu1, :] = (theta / np.where(iu0 == iu1, 1.0, 2.0)).T
    S0[iu1, iu0, :] = S0[iu0, iu1, :]
    S = uncentre(S0, mu)
    BB, NN = B @ B.T, N @ N.T
    Mt = np.zeros((D, D, D))
    for k in range(K):
        Mt[:, :, k] = BB @ S[:, :, k] @ BB + 2 * BB @ S[:, :, k] @ NN
    M = np.zeros((D, D, D))
    if c != 0.0:
        M[:, :, d] = Mt[:, :, d] / c
        M[:, :, :d] = Mt[:, :, :d] - M[:, :, d : d + 1] * np.asarray(g)[None, None, :]
    else:
        M[:, :, :d] = Mt[:, :, :d]
    return {"b": B.T.copy(), "A": np.einsum("mh,mni->hni", B, M)}


def _best_subspace(ex, H, g, c, floor, theta_star, T_inv, W, starts, steps, key, seeds=()):
    """Subspace search from ``starts`` random subspaces, then the ``seeds`` (``(D, r)`` bases)."""
    d = ex.d
    D = d + 1
    r = D - H
    active = (np.arange(d) < r).astype(np.float64)
    with enable_x64():
        x0 = [np.asarray(standard_normal(key, (starts, D, d)), np.float64)]
        if H == d:  # also the fold's subspace, U = span(e_D)
            seeds = [np.eye(D)[:, d:], *seeds]
        for U in seeds:
            x = np.zeros((1, D, d))
            x[0, :, :r] = U
            x0.append(x)
        W_inv = shift_matrix(-ex.mu)
        arrays = (np.concatenate(x0), active, theta_star, T_inv, W, W_inv)
        args = [jnp.asarray(a) for a in arrays]
        x, final, curves = _lbfgs_subspace(*args, steps=steps)
        final = np.asarray(final)
    excess = np.where(np.isfinite(final), final, np.inf)
    i = int(np.argmin(excess))
    N = np.linalg.qr(np.asarray(x[i], np.float64)[:, :r])[0]
    red = heads_from_subspace(N, theta_star, T_inv, g, c, ex.mu)
    return red, floor + excess, floor + np.asarray(curves)[i]


def lsa_search(
    ex: Exact,
    H: int = 1,
    *,
    restarts: int = 8,
    steps: int = 500,
    key: jax.Array | None = None,
    y_q_guess=None,
    y_q_bias: float = 0.0,
    method: str = "auto",
    init_std: float = 0.3,
    include_gd: bool = True,
) -> SearchResult:
    """The best ``H``-head LSA with a fixed guess ``y_q = x_q^T g + c``.

    ``method="auto"``:

    * ``H >= d+1``: the exact optimum :func:`~iclgd.exact.lsa_optimum`, realised by the
      App. A.1 construction (``D`` heads) plus ``H - D`` zero heads (``"construction"``).
    * ``H = d``: the same optimum with ``d`` heads by :func:`~iclgd.exact.fold_last_row` when no
      ``M_i`` uses ``G_yy`` (``"fold"``, exact; e.g. Part I with any ``g``, ``c``); otherwise as
      ``H < d``.
    * ``H < d``: the subspace search of the module docstring (``"subspace"``), from ``restarts``
      random subspaces and from the subspaces left out by the ``restarts`` (+ GD) local minima of
      L-BFGS on the weights (for ``H = d`` also ``U = span(e_D)``). The search is exact up to its
      local minima: in Part I every random start reaches the same optimum (lower than L-BFGS on
      the weights from ``d = 4`` on), but for some priors (correlated ``Sigma``, ``c != 0``) a
      few random starts end in a local minimum that the weight-space seeds avoid; the result is
      never worse than either search alone. If ``T = E[vech G vech G^T]`` is singular (a
      degenerate prior), L-BFGS on the weights is used instead (``"lbfgs"``).

    ``method="subspace"``: random subspaces only (faster; ``H <= d``). ``method="lbfgs"``: L-BFGS
    on the reduced weights ``(b, A)`` (non-convex, Xie et al. Lemma 1) from ``restarts`` random
    starts (entries ``N(0, init_std^2)``) and, if ``include_gd``, the GD-from-0 point
    ``b_1 = eta e_D``, ``A_1 = diag(I_d, 0)``.

    Args:
        ex: :func:`~iclgd.exact.prepare`'s output.
        H: number of heads.
        restarts: random starts (subspaces and weights), ``>= 1`` for the subspace search.
        steps: L-BFGS iterations per start.
        key: PRNG key for the starts (default ``jax.random.key(0)``).
        y_q_guess: ``(d,)`` ``g`` (default 0).
        y_q_bias: ``c``.
        method: ``"auto"``, ``"subspace"`` or ``"lbfgs"``.
        init_std: scale of the random weights (L-BFGS on the weights).
        include_gd: also start L-BFGS on the weights from the GD point.

    Returns:
        :class:`SearchResult`: ``risk`` (the exact float64 risk of ``params``), reduced params
        ``{"b": (H, D), "A": (H, D, D)}``, LSA ``params`` (``H`` heads), the gradient norm,
        ``risks`` of every start (subspace search: the random subspaces, then the fold's, then
        the weight-space seeds), the ``losses`` of the best start and the ``method`` used.
    """
    check_exact(ex)
    H = v.positive_int("H", H)
    steps = v.positive_int("steps", steps)
    restarts = v.positive_int("restarts", restarts, 0)
    init_std = v.nonneg_float("init_std", init_std)
    include_gd = v.boolean("include_gd", include_gd)
    if method not in ("auto", "subspace", "lbfgs"):
        raise ValueError(f"method must be 'auto', 'subspace' or 'lbfgs', got {method!r}")
    d = ex.d
    D = d + 1
    g = guess64(d, y_q_guess)
    c = v.finite_float("y_q_bias", y_q_bias)
    key = jax.random.key(0) if key is None else v.prng_key("key", key)

    def result(red, risks, losses, how):
        params = reduced_to_lsa_params(red["b"], red["A"])
        # evaluate with the heads padded by zero heads to D: a zero head changes neither the risk
        # nor (since M = sum_h b_h (x) A_h) the gradient of the others, and every H < D then
        # shares one compilation of the float64 risk and gradient
        pad = max(D - red["b"].shape[0], 0)
        grow = lambda x: np.concatenate([np.asarray(x), np.zeros((pad,) + np.shape(x)[1:])])
        risk = risk64(lsa_risk, {k: grow(x) for k, x in params.items()}, ex, g, c)
        gnorm = _reduced_grad_norm(ex, grow(red["b"]), grow(red["A"]), g, c, False)
        return SearchResult(risk, red, params, gnorm, np.asarray(risks), np.asarray(losses), how)

    def weights_search(k):
        return _best_lsa_lbfgs(ex, H, restarts, steps, k, init_std, g, c, include_gd)

    if method == "lbfgs":
        return weights_search(key)[0]
    if method == "subspace" and H > d:
        raise ValueError(f"method='subspace' needs H <= d = {d} (H >= d+1 is exact), got H = {H}")
    floor = lsa_optimum(ex, g, c)
    if H >= D:
        b = np.zeros((H, D))
        b[:D] = np.eye(D)
        A = np.zeros((H, D, D))
        A[:D] = floor.M  # A_h[n, i] = M_i[h, n]
        return result({"b": b, "A": A}, [floor.risk], [], "construction")
    if H == d and method == "auto":
        try:
            M = fold_last_row(floor.M)
        except ValueError:
            M = None
        if M is not None:
            return result({"b": np.eye(D)[:d], "A": M[:d]}, [floor.risk], [], "fold")
    theta_star, T_inv, W, full_rank = _subspace_problem(ex, g, c)
    if not full_rank:
        if method == "subspace":
            raise ValueError("the subspace search needs a non-singular E[vech G vech G^T]")
        return weights_search(key)[0]
    if restarts < 1:
        raise ValueError("restarts must be >= 1 for the subspace search")
    key_s, key_w = jax.random.split(key)
    seeds = []
    if method == "auto":  # the subspaces left out by the local minima on the weights
        every = weights_search(key_w)[1]
        seeds = [np.linalg.svd(b.T, full_matrices=True)[0][:, H:] for b in every["b"]]
    args = (theta_star, T_inv, W, restarts, steps, key_s, seeds)
    red, risks, losses = _best_subspace(ex, H, g, c, floor.risk, *args)
    return result(red, risks, losses, "subspace")


def _best_lsa_lbfgs(ex, H, restarts, steps, key, init_std, g, c, include_gd):
    """L-BFGS on the weights: ``(SearchResult, every start's final reduced params)``."""
    d = ex.d
    D = d + 1
    starts = []
    if include_gd:
        eta, _ = gd_optimal(ex, np.zeros(d))
        b0 = np.zeros((H, D))
        b0[0, d] = eta
        A0 = np.zeros((H, D, D))
        A0[0, :d, :d] = np.eye(d)
        if H > 1:
            b0[1:] = 1e-3
            A0[1:] = 1e-3
        starts.append({"b": b0, "A": A0})
    with enable_x64():
        for k in jax.random.split(key, restarts) if restarts else []:
            noise = np.asarray(standard_normal(k, (H * D + H * D * D,)))
            b = init_std * noise[: H * D].reshape(H, D)
            starts.append({"b": b, "A": init_std * noise[H * D :].reshape(H, D, D)})
    if not starts:
        raise ValueError("restarts must be >= 1 when include_gd is False")
    for st in starts:
        st["w"] = g
    red, risk, gnorm, risks, curve, every = _run_lbfgs(ex, starts, g, c, False, steps)
    red = {"b": red["b"], "A": red["A"]}
    params = reduced_to_lsa_params(red["b"], red["A"])
    return SearchResult(risk, red, params, gnorm, risks, curve, "lbfgs"), every


def yq_lsa_search(
    ex: Exact,
    *,
    steps: int = 500,
    restarts: int = 0,
    key: jax.Array | None = None,
    init_std: float = 0.3,
) -> SearchResult:
    """Best single-head y_q-LSA found by L-BFGS on the exact risk, starting from the GD point.

    The start is Xie et al.'s construction (eq. 7 with ``w = w*``): ``b = eta* (-w*, 1)``,
    ``A = diag(I_d, 0)``, ``w = w*``, with the exact finite-``C`` optimal step ``eta*`` of one GD
    step from ``w*``. For ``Sigma = Omega = I`` (Part I) this point is exactly stationary at every
    ``C`` and its risk equals the lower bound :func:`~iclgd.exact.yq_lsa_optimum` (tested),
    so it is the global optimum; for other priors (e.g. non-isotropic ``Sigma``) L-BFGS moves to a
    better, preconditioned step. ``restarts`` extra starts perturb it with ``N(0, init_std^2)``
    noise. The risk is non-convex (Lemma 2): in general the result is the best local minimum found;
    compare it with the bound.

    Args:
        ex: :func:`~iclgd.exact.prepare`'s output.
        steps: L-BFGS iterations per start.
        restarts: number of perturbed extra starts.
        key: PRNG key for the perturbations.
        init_std: perturbation scale.

    Returns:
        :class:`SearchResult` (reduced params ``{"b": (1, D), "A": (1, D, D), "w": (d,)}``).
    """
    check_exact(ex)
    steps = v.positive_int("steps", steps)
    restarts = v.positive_int("restarts", restarts, 0)
    init_std = v.nonneg_float("init_std", init_std)
    key = jax.random.key(0) if key is None else v.prng_key("key", key)
    d = ex.d
    D = d + 1
    mu = np.asarray(ex.prior.mu, np.float64)
    eta, _ = gd_optimal(ex)
    b0 = (eta * np.concatenate([-mu, [1.0]]))[None]
    A0 = np.zeros((1, D, D))
    A0[0, :d, :d] = np.eye(d)
    starts = [{"b": b0, "A": A0, "w": mu}]
    with enable_x64():
        for k in jax.random.split(key, restarts) if restarts else []:
            noise = np.asarray(standard_normal(k, (D + D * D + d,)))
            starts.append(
                {
                    "b": b0 + init_std * noise[:D].reshape(1, D),
                    "A": A0 + init_std * noise[D : D + D * D].reshape(1, D, D),
                    "w": mu + init_std * noise[D + D * D :],
                }
            )
    red, risk, gnorm, risks, curve, _ = _run_lbfgs(ex, starts, np.zeros(d), 0.0, True, steps)
    params = {"attn": reduced_to_lsa_params(red["b"], red["A"]), "w": red["w"]}
    return SearchResult(risk, red, params, gnorm, risks, curve, "lbfgs")
