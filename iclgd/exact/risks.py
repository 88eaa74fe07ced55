r"""Exact risks of every G-linear predictor: multi-head LSA, y_q-LSA, Part III, one GD step.

Every model here predicts ``f = <G (x) x~_q, Mt> + vq^T x~_q`` with ``x~_q = (x_q, 1)``, a
coefficient tensor ``Mt`` of shape ``(D, D, D)`` and ``vq`` of shape ``(D,)``. With ``u = (vech G,
w, 1)`` and ``Gamma = E[u u^T] = F^T F`` (from :func:`~iclgd.exact.prepare`) the error is ``x~_q^T
Pi^T u - eps_q``
and::

    R = E[(f - y)^2] = ||F Pi F_S||_F^2 + sigma^2,    F_S F_S^T = diag(Sigma, 1),

a sum of squares, accurate in float32 near an optimum. ``Gamma`` is that of the centred prompt
(:mod:`iclgd.exact.moments`): ``u = (vech G0, w - mu, 1)``, and ``Pi`` is built from the shifted
coefficients ``W^T Mt_k W`` and ``vq - (mu, 0)`` (:func:`centre_coefficients`), so the accuracy
does not depend on ``||mu||``. For multi-head LSA with
``y_q = x_q^T g + c``: ``Mt_{mnk} = sum_h b_{h,m} (A_h P~)_{nk}``, ``P~ = [[I_d, 0], [g^T, c]]``,
``vq = (g, c)`` (Xie et al.'s ``M_i = sum_h b_h a_i^{hT}``, ``Mt = M x_3 P~^T``).

The public functions validate their input and are pure ``jnp`` functions of the parameters
(jittable, differentiable, ambient precision); the ``*_core`` functions take the arrays of
:func:`ex_arrays` directly, for solvers that jit over many priors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from .core import vech_index
from .moments import Exact, check_exact, shift_matrix

__all__ = [
    "coef_matrix",
    "centre_coefficients",
    "ex_arrays",
    "predictor_risk",
    "predictor_risk_core",
    "sum_of_squares_risk",
    "check_guess",
    "lsa_coefficients",
    "lsa_risk_core",
    "lsa_risk_reduced",
    "lsa_risk",
    "yq_lsa_risk",
    "linear_transformer_risk",
    "ltb_risk",
    "sparse_linear_transformer_risk",
    "gd_coefficients",
    "gd_risk",
]


def coef_matrix(Mt, vq, d: int, with_w: bool = True):
    """``Pi`` ``(n_u, D)`` with ``phi = Pi^T u`` for ``u = (vech G, w, 1)`` (NumPy in, NumPy out).

    ``phi_k = <G, Mt_k> + vq_k - w~_k`` is the error's coefficient on ``x~_{q,k}``; only the
    symmetric part of each ``Mt_k`` enters (``G`` is symmetric). ``with_w=False`` drops the
    ``-w~_k`` rows (the part of ``Pi`` that is linear in ``Mt`` and ``vq``).
    """
    xp = np if isinstance(Mt, np.ndarray) and isinstance(vq, np.ndarray) else jnp
    D = d + 1
    iu = vech_index(D)
    sym = Mt + xp.swapaxes(Mt, 0, 1)
    scale = np.where(iu[0] == iu[1], 0.5, 1.0)[:, None]
    top = sym[iu[0], iu[1], :] * scale  # (p, D)
    J = -np.eye(d, D) if with_w else np.zeros((d, D))  # the -w~_k rows
    return xp.concatenate(
        [top, xp.asarray(J, top.dtype), xp.asarray(vq, top.dtype)[None, :]], axis=0
    )


def predictor_risk(Mt: jax.Array, vq: jax.Array, ex: Exact) -> jax.Array:
    r"""Exact risk of the G-linear predictor ``f = <G (x) x~_q, Mt> + vq^T x~_q``, ``x~_q = (x_q,
    1)``.

    ``R = E[(f - y)^2] = ||F Pi F_S||_F^2 + sigma^2`` (module docstring). Pure ``jnp``.

    Args:
        Mt: ``(D, D, D)`` coefficients of ``G_mn x~_{q,k}``.
        vq: ``(D,)`` coefficients of ``x~_q`` (the query guess ``(g, c)``).
        ex: :func:`~iclgd.exact.prepare`'s output.

    Returns:
        ``()`` the risk.
    """
    check_exact(ex)
    dims = v.Dims(D=ex.d + 1)
    Mt = jnp.asarray(v.array("Mt", Mt, "D D D", dims, promote=True))
    vq = v.array("vq", vq, "D", dims, promote=True)
    dt = jnp.result_type(Mt.dtype, jnp.asarray(vq).dtype)
    return _reported(predictor_risk_core(Mt.astype(dt), jnp.asarray(vq, dt), *ex_arrays(ex, dt)))


def ex_arrays(ex: Exact, dt) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(F, F_S, sigma^2, mu)`` as arrays of dtype ``dt`` (float32 unless x64 is enabled)."""
    return (
        jnp.asarray(ex.gram_factor, dt),
        jnp.asarray(ex.x_factor, dt),
        jnp.asarray(ex.noise_var, dt),
        jnp.asarray(ex.mu, dt),
    )


def centre_coefficients(Mt, vq, mu):
    """The predictor's coefficients on the centred prompt: ``(W^T Mt_k W, vq - (mu, 0))``.

    With ``W = [[I, 0], [mu^T, 1]]`` (:func:`~iclgd.exact.moments.shift_matrix`), ``<G, Mt_k> =
    <G0, W^T Mt_k W>``, and the target's ``w~_k = mu~_k + w0~_k`` moves ``mu`` into ``vq``.

    Args:
        Mt: ``(D, D, K)``; vq: ``(K,)`` (or ``None``); mu: ``(d,)`` (NumPy or JAX, alike).

    Returns:
        ``(Mt0 (D, D, K), vq0 (K,))`` (``vq0`` is ``None`` if ``vq`` is).
    """
    xp = np if isinstance(Mt, np.ndarray) and isinstance(mu, np.ndarray) else jnp
    W = shift_matrix(xp.asarray(mu, Mt.dtype), xp)
    Mt0 = xp.einsum("am,abk,bn->mnk", W, Mt, W)
    if vq is None:
        return Mt0, None
    K = Mt.shape[2]
    shift = xp.concatenate([xp.asarray(mu, Mt.dtype), xp.zeros((1,), Mt.dtype)])[:K]
    return Mt0, vq - shift


@jax.jit
def predictor_risk_core(Mt, vq, F, FS, nv, mu):
    """:func:`predictor_risk` on the arrays ``(F, F_S, sigma^2, mu)`` of :func:`ex_arrays`
    (jitted)."""
    # huge coefficients: shift Mt / max|Mt| (no inf * 0 = NaN inside the shift), scale back after
    sm = jnp.max(jnp.abs(Mt))
    sm = jnp.where((sm > jnp.finfo(Mt.dtype).max ** 0.25) & jnp.isfinite(sm), sm, 1.0)
    Mt0, vq0 = centre_coefficients(Mt / sm, vq, mu)
    return sum_of_squares_risk(coef_matrix(Mt0 * sm, vq0, Mt.shape[0] - 1), F, FS, nv)


def _reported(risk):
    """``risk``, or ``ValueError`` if it is NaN although the (checked, finite) inputs are concrete:
    an intermediate of the risk overflowed the dtype."""
    if not v.is_tracer(risk) and bool(jnp.isnan(risk)):
        dt = jnp.asarray(risk).dtype
        hint = (
            "evaluate it in float64 with exact.risk64"
            if dt != jnp.float64
            else "the parameters are too large for any float"
        )
        raise ValueError(
            f"the exact risk overflows {dt} at these parameters (an intermediate exceeds "
            f"{float(jnp.finfo(dt).max):.3g}); {hint}"
        )
    return risk


def sum_of_squares_risk(Pi, F, FS, nv):
    """``||F Pi F_S||_F^2 + sigma^2`` that overflows to ``inf``, never to NaN (``inf * 0``, ``inf -
    inf``): where ``Pi`` or ``F Pi F_S`` has entries whose squares could overflow the dtype, they
    are divided by their largest entry first and the scale is multiplied back at the end (the
    ordinary case computes exactly the unscaled sum); an infinite coefficient gives ``inf``. The
    public risks raise ``ValueError`` where a concrete result is still NaN (an overflow before
    ``Pi``, e.g. ``inf - inf`` between heads)."""
    big = jnp.finfo(Pi.dtype).max ** 0.25
    sp_raw = jnp.max(jnp.abs(Pi))
    sp = jnp.where((sp_raw > big) & jnp.isfinite(sp_raw), sp_raw, 1.0)
    Y = F @ (Pi / sp) @ FS
    sy = jnp.max(jnp.abs(Y))
    sy = jnp.where((sy > big) & jnp.isfinite(sy), sy, 1.0)
    Ys = Y / sy
    s = sy * sp
    out = jnp.sum(Ys * Ys) * s * s + nv
    return jnp.where(jnp.isposinf(sp_raw), jnp.inf, out)  # an overflowed coefficient: inf


@jax.jit
def lsa_risk_core(b, A, g, c, F, FS, nv, mu):
    """:func:`lsa_risk_reduced` on the arrays ``(F, F_S, sigma^2, mu)`` of :func:`ex_arrays`
    (jitted)."""
    Mt = lsa_coefficients(b, A, g, c)
    return predictor_risk_core(Mt, jnp.concatenate([g, c[None]]), F, FS, nv, mu)


def check_guess(ex: Exact, y_q_guess, y_q_bias) -> tuple[jax.Array, jax.Array]:
    """Validate the query guess ``y_q = x_q^T g + c``; return ``(g, c)`` as arrays (``g`` default
    0)."""
    d = ex.d
    if y_q_guess is None:
        g = jnp.zeros((d,))
    else:
        g = jnp.asarray(v.array("y_q_guess", y_q_guess, "d", v.Dims(d=d), promote=True))
    c = v.array("y_q_bias", y_q_bias)
    if c.ndim != 0:
        raise ValueError(f"y_q_bias must be a scalar, got shape {tuple(c.shape)}")
    return g, jnp.asarray(c)


def lsa_coefficients(b, A, g, c):
    """``Mt`` ``(D, D, D)`` of multi-head LSA: ``Mt_{mnk} = sum_h b_{h,m} (A_h P~)_{nk}``, ``P~ =
    [[I, 0], [g^T, c]]``."""
    d = g.shape[0]
    D = d + 1
    Pt = (
        jnp.zeros((D, D), A.dtype)
        .at[:d, :d]
        .set(jnp.eye(d, dtype=A.dtype))
        .at[d, :d]
        .set(g)
        .at[d, d]
        .set(c)
    )
    APt = A @ Pt  # (H, D, D)
    return jnp.einsum("hm,hnk->mnk", b, APt)


def lsa_risk_reduced(
    b: jax.Array, A: jax.Array, ex: Exact, y_q_guess=None, y_q_bias=0.0
) -> jax.Array:
    """Exact risk of multi-head LSA in its reduced parameters, with ``y_q = x_q^T g + c``.

    The prediction is ``y_q + sum_h b_h^T G A_h z_q`` (:func:`iclgd.models.lsa.lsa_predict`); ``g``
    and ``c`` may be traced (so ``g`` can be trained: y_q-LSA).

    Args:
        b: ``(H, D)`` last rows of ``W^P_h W^V_h``.
        A: ``(H, D, D)`` ``W^K_h^T W^Q_h``.
        ex: :func:`~iclgd.exact.prepare`'s output.
        y_q_guess: ``(d,)`` ``g``; default zeros.
        y_q_bias: scalar ``c``.

    Returns:
        ``()`` the exact risk ``E[(f - y)^2]``.
    """
    check_exact(ex)
    dims = v.Dims(D=ex.d + 1)
    b = v.array("b", b, "H D", dims, promote=True)
    A = v.array("A", A, "H D D", dims, promote=True)
    g, c = check_guess(ex, y_q_guess, y_q_bias)
    A = jnp.asarray(A)
    dt = jnp.result_type(A.dtype, jnp.asarray(b).dtype, g.dtype)
    return _reported(
        lsa_risk_core(
            jnp.asarray(b, dt),
            jnp.asarray(A, dt),
            jnp.asarray(g, dt),
            jnp.asarray(c, dt),
            *ex_arrays(ex, dt),
        )
    )


def _check_lsa_params(params: dict, D: int, name: str = "params") -> None:
    keys = ("WK", "WQ", "WV", "WP")
    v.param_dict(name, params, keys, f"a dict with keys {keys} (see iclgd.init_lsa)")
    dims = v.Dims(D=D)
    for k in keys:
        v.array(f"{name}[{k!r}]", params[k], "H D D", dims)


def lsa_risk(params: dict, ex: Exact, y_q_guess=None, y_q_bias=0.0) -> jax.Array:
    """Exact risk of multi-head LSA (Xie et al. eq. 6) with ``y_q = x_q^T g + c`` (Sec. 5.1.3).

    Args:
        params: ``{"WK", "WQ", "WV", "WP"}`` each ``(H, D, D)`` (:func:`iclgd.init_lsa`).
        ex: :func:`~iclgd.exact.prepare`'s output.
        y_q_guess: ``(d,)`` ``g`` (``y_q_guess``); default zeros (``y_q = c``).
        y_q_bias: scalar ``c`` (``y_q_bias``); default 0.

    Returns:
        ``()`` the exact risk; equals the Monte Carlo limit of ``mse(lsa_predict(params, embed(t,
        y_q)), t.y_target)``.
    """
    check_exact(ex)
    _check_lsa_params(params, ex.d + 1)  # validates
    g, c = check_guess(ex, y_q_guess, y_q_bias)
    dt = jnp.result_type(*[jnp.asarray(params[k]).dtype for k in ("WK", "WQ", "WV", "WP")], g.dtype)
    p = {k: jnp.asarray(params[k], dt) for k in ("WK", "WQ", "WV", "WP")}
    return _reported(
        _lsa_params_risk_core(p, jnp.asarray(g, dt), jnp.asarray(c, dt), *ex_arrays(ex, dt))
    )


@jax.jit
def _lsa_params_risk_core(p, g, c, F, FS, nv, mu):
    b = jnp.einsum("hj,hjk->hk", p["WP"][:, -1, :], p["WV"])
    A = jnp.einsum("hji,hjk->hik", p["WK"], p["WQ"])
    return lsa_risk_core(b, A, g, c, F, FS, nv, mu)


def yq_lsa_risk(params: dict, ex: Exact) -> jax.Array:
    """Exact risk of y_q-LSA (Xie et al. Definition 3): LSA with ``y_q = w^T x_q``, ``w`` trainable.

    Args:
        params: ``{"attn": LSA params, "w": (d,)}`` (:func:`iclgd.init_yq_lsa`).
        ex: :func:`~iclgd.exact.prepare`'s output.

    Returns:
        ``()`` the exact risk.
    """
    what = "a dict {'attn': LSA params, 'w': (d,)} (see iclgd.init_yq_lsa)"
    v.param_dict("params", params, ("attn", "w"), what)
    check_exact(ex)
    _check_lsa_params(params["attn"], ex.d + 1, "params['attn']")
    v.array("params['w']", params["w"], "d", v.Dims(d=ex.d))
    return lsa_risk(params["attn"], ex, y_q_guess=params["w"], y_q_bias=0.0)


def sparse_linear_transformer_risk(A, ex: Exact) -> float:
    """Exact risk, in float64, of the one-layer eq. 9 transformer with ``A_0 = A`` (Ahn et al.):
    :func:`linear_transformer_risk` at ``b = e_{d+1}`` and ``A = [[A], [0]]`` (its reduced form),
    i.e. ``P_0 = [[0, 0], [0, 1]]``, ``Q_0 = [[A, 0], [0, 0]]``.

    Args:
        A: ``(d, d)`` the matrix ``A_0`` (any, not only symmetric).
        ex: :func:`~iclgd.exact.prepare`'s output (``C`` plays the role of ``n``).

    Returns:
        The risk, a Python float.
    """
    from .core import risk64

    check_exact(ex)
    d = ex.d
    A = np.asarray(v.array("A", A, "d d", v.Dims(d=d)), dtype=np.float64)
    e_b = np.eye(d + 1)[d]
    return risk64(linear_transformer_risk, {"b": e_b, "A": np.vstack([A, np.zeros((1, d))])}, ex)


def linear_transformer_risk(params: dict, ex: Exact) -> jax.Array:
    """Exact risk of Part III's one-layer linear transformer (Ahn et al. eq. 5-7), zero query label.

    The prediction is ``-[Z_1]_{d+1, n+1} = -b^T G A x_q`` with ``b = P[-1, :]``, ``A = Q[:, :d]``.

    Args:
        params: ``{"P": (1, D, D), "Q": (1, D, D)}`` (one layer of
            :func:`iclgd.models.linear_transformer.init_linear_transformer`), or the reduced
            ``{"b": (D,), "A": (D, d)}`` of eq. 7.
        ex: :func:`~iclgd.exact.prepare`'s output.

    Returns:
        ``()`` the exact risk ``E[(-[Z_1]_{d+1,n+1} - y)^2]``.
    """
    check_exact(ex)
    d = ex.d
    dims = v.Dims(D=d + 1, d=d)
    what = "a dict {'P': (1, D, D), 'Q': (1, D, D)} or {'b': (D,), 'A': (D, d)}"
    if isinstance(params, dict) and "b" in params and "A" in params:
        b = jnp.asarray(v.array("params['b']", params["b"], "D", dims, promote=True))
        A = jnp.asarray(v.array("params['A']", params["A"], "D d", dims, promote=True))
    else:
        v.param_dict("params", params, ("P", "Q"), what)
        one = "(exact risks are for one layer)"
        P = v.array("params['P']", params["P"], (1, "D", "D"), dims, what=one)
        Q = v.array("params['Q']", params["Q"], (1, "D", "D"), dims, what=one)
        b = jnp.asarray(P)[0, -1, :]
        A = jnp.asarray(Q)[0, :, :d]
    dt = jnp.result_type(b.dtype, A.dtype)
    return _reported(_lt_risk_core(b.astype(dt), A.astype(dt), *ex_arrays(ex, dt)))


@jax.jit
def _lt_risk_core(b, A, F, FS, nv, mu):
    D, d = A.shape
    Mt = jnp.concatenate([-jnp.einsum("m,nk->mnk", b, A), jnp.zeros((D, D, 1), A.dtype)], axis=2)
    return predictor_risk_core(Mt, jnp.zeros((D,), A.dtype), F, FS, nv, mu)


def ltb_risk(params: dict, ex: Exact) -> jax.Array:
    """Exact risk of the one-head linear transformer block of Xie et al. eq. 30 (``y_q = 0``).

    Reduced from the block's own weights, not through y_q-LSA: with ``r`` the last row of
    ``W_2^T W_1``, ``u = (W^P W^V)^T r`` and ``A = (W^K)^T W^Q``, the prediction is
    ``r_x^T x_q + u^T G A (x_q, 0)`` (:func:`iclgd.models.lsa.yq_lsa_from_ltb`), a G-linear
    predictor with ``Mt_{mnk} = u_m A_{nk}`` (``k <= d``; 0 for ``k = d+1``) and ``vq = (r_x, 0)``.

    Args:
        params: ``{"W1", "W2", "WP", "WV", "WK", "WQ"}``, each ``(D, D)``
            (:func:`iclgd.models.lsa.ltb_predict`).
        ex: :func:`~iclgd.exact.prepare`'s output.

    Returns:
        ``()`` the exact risk ``E[(f_LTB - y)^2]``.
    """
    check_exact(ex)
    keys = ("W1", "W2", "WP", "WV", "WK", "WQ")
    v.param_dict("params", params, keys, f"a dict with keys {keys} (see iclgd.models.lsa)")
    dims = v.Dims(D=ex.d + 1)
    p = {
        k: jnp.asarray(v.array(f"params[{k!r}]", params[k], "D D", dims, promote=True))
        for k in keys
    }
    dt = jnp.result_type(*[m.dtype for m in p.values()])
    return _reported(_ltb_risk_core({k: m.astype(dt) for k, m in p.items()}, *ex_arrays(ex, dt)))


@jax.jit
def _ltb_risk_core(p, F, FS, nv, mu):
    D = p["W1"].shape[0]
    r = (p["W2"].T @ p["W1"])[-1, :]
    u = (p["WP"] @ p["WV"]).T @ r
    A = p["WK"].T @ p["WQ"]
    Mt = jnp.einsum("m,nk->mnk", u, A).at[:, :, D - 1].set(0.0)  # the query's label is 0
    vq = r.at[D - 1].set(0.0)
    return predictor_risk_core(Mt, vq, F, FS, nv, mu)


def gd_coefficients(w0, xp=jnp):
    """``Mt`` per unit step of one GD step from ``w0``: ``f = w0^T x_q - eta (G_xx w0 - G_xy)^T
    x_q``, i.e. ``Mt[k, n, k] = -w0_n`` (``n <= d``), ``Mt[k, D, k] = 1``."""
    d = w0.shape[0]
    eye = xp.eye(d, dtype=w0.dtype)
    # rows m = k (one-hot e_k), columns n: (-w0, 1), third index k
    col = xp.concatenate([-w0, xp.ones((1,), w0.dtype)])  # (D,)
    top = xp.einsum("mk,n->mnk", eye, col)  # (d, D, d)
    M1 = xp.concatenate([top, xp.zeros((1, d + 1, d), w0.dtype)], axis=0)  # (D, D, d)
    return xp.concatenate([M1, xp.zeros((d + 1, d + 1, 1), w0.dtype)], axis=2)


@jax.jit
def _gd_risk_core(eta, w0, F, FS, nv, mu):
    vq = jnp.concatenate([w0, jnp.zeros((1,), w0.dtype)])
    return predictor_risk_core(eta * gd_coefficients(w0), vq, F, FS, nv, mu)


def gd_risk(ex: Exact, eta, w0=None) -> jax.Array:
    """Exact risk of one GD step ``w1 = w0 - (eta/C) X^T (X w0 - y)``, prediction ``w1^T x_q``.

    Computed from the moments as a G-linear predictor with ``Mt = eta *``
    :func:`gd_coefficients` ``(w0)`` and ``vq = (w0, 0)``; the risk is quadratic in ``eta``
    (its minimiser: :func:`~iclgd.exact.gd_optimal`).

    Args:
        ex: :func:`~iclgd.exact.prepare`'s output.
        eta: scalar step size (may be traced).
        w0: ``(d,)`` start; default the prior mean ``mu``.

    Returns:
        ``()`` the exact risk.
    """
    check_exact(ex)
    d = ex.d
    w0 = jnp.asarray(
        ex.prior.mu if w0 is None else v.array("w0", w0, "d", v.Dims(d=d), promote=True)
    )
    eta = jnp.asarray(v.array("eta", eta, promote=True))
    if eta.ndim != 0:
        raise ValueError(f"eta must be a scalar, got shape {tuple(eta.shape)}")
    dt = jnp.result_type(w0.dtype, eta.dtype, float)
    return _reported(_gd_risk_core(eta.astype(dt), w0.astype(dt), *ex_arrays(ex, dt)))
