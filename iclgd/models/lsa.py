"""Linear self-attention (LSA) models of Part I (Xie et al.).

Multi-head LSA (Xie et al. eq. 3, 5, 6) on an embedding ``E`` of shape ``(d+1, C+1)``::

    f(E) = [ E + sum_h (1/C) W^P_h W^V_h E W^M E^T (W^K_h)^T W^Q_h E ]_{-1,-1},

with the mask ``W^M = diag(I_C, 0)``. Only the bottom-right entry is read, so iclgd computes just
that: with ``b_h`` the last row of ``W^P_h W^V_h``, ``A_h = (W^K_h)^T W^Q_h``,
``G = (1/C) sum_{i<=C} z_i z_i^T`` and ``z_q`` the last column of ``E``::

    f(E) = y_q + sum_h b_h^T G A_h z_q .

:func:`lsa_output` computes the whole output matrix literally, for tests and for the book.

Parameters are pytrees: ``{"WK", "WQ", "WV", "WP"}``, each ``(H, d+1, d+1)``. The y_q-LSA of
Definition 3 adds a vector ``"w"`` of shape ``(d,)`` and feeds ``y_q = w^T x_q``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import checks as v
from ..tasks import TaskBatch, check_batch, embed

__all__ = [
    "init_lsa",
    "lsa_predict",
    "lsa_output",
    "gd_weights",
    "init_yq_lsa",
    "yq_lsa_predict",
    "lsa_reduced",
    "ltb_predict",
    "ltb_from_yq_lsa",
    "yq_lsa_from_ltb",
]

_KEYS = ("WK", "WQ", "WV", "WP")


def init_lsa(key: jax.Array, d: int, H: int = 1, init_std: float = 0.1) -> dict:
    """Random multi-head LSA parameters.

    Args:
        key: PRNG key.
        d: input dimension (the model dimension is ``d+1``).
        H: number of heads, ``H >= 1``.
        init_std: standard deviation of the i.i.d. normal entries, ``> 0``.

    Returns:
        ``{"WK", "WQ", "WV", "WP"}``, each of shape ``(H, d+1, d+1)``.
    """
    v.prng_key("key", key)
    d = v.positive_int("d", d)
    H = v.positive_int("H", H)
    init_std = v.nonneg_float("init_std", init_std)
    keys = jax.random.split(key, 4)
    D = d + 1
    return {k: init_std * jax.random.normal(kk, (H, D, D)) for k, kk in zip(_KEYS, keys)}


_WHAT = f"a dict with keys {_KEYS} (see init_lsa)"


def _check_params(params, dims: dict | None = None, name: str = "params") -> tuple[int, int]:
    """Check LSA parameters ``{"WK", "WQ", "WV", "WP"}``, each ``(H, d+1, d+1)``; return ``(H,
    d+1)``."""
    v.param_dict(name, params, _KEYS, _WHAT)
    dims = v.Dims() if dims is None else dims
    for k in _KEYS:
        v.array(f"{name}[{k!r}]", params[k], "H d+1 d+1", dims)
    return dims["H"], dims["d+1"]


def _check_E(E, dims: dict) -> tuple[int, int]:
    E = v.array("E", E, "B d+1 C+1", dims)
    if E.shape[1] < 2 or E.shape[2] < 2:
        raise ValueError(
            f"E must have shape (B, d+1, C+1) with d >= 1 and C >= 1, got shape {tuple(E.shape)}"
        )
    return E.shape[1], E.shape[2] - 1


def lsa_reduced(params: dict) -> tuple[jax.Array, jax.Array]:
    """The parameters that the prediction depends on.

    Returns:
        ``b``: ``(H, d+1)``, the last rows of ``W^P_h W^V_h``;
        ``A``: ``(H, d+1, d+1)``, the products ``(W^K_h)^T W^Q_h``.
    """
    _check_params(params)
    return _reduced(params)


def _reduced(params: dict) -> tuple[jax.Array, jax.Array]:
    b = jnp.einsum("hj,hjk->hk", params["WP"][:, -1, :], params["WV"])
    A = jnp.einsum("hji,hjk->hik", params["WK"], params["WQ"])
    return b, A


def lsa_predict(params: dict, E: jax.Array) -> jax.Array:
    """Prediction of multi-head LSA, the bottom-right entry of eq. 6 (Xie et al.).

    Args:
        params: ``{"WK", "WQ", "WV", "WP"}`` each ``(H, d+1, d+1)``.
        E: ``(B, d+1, C+1)`` embeddings (:func:`iclgd.tasks.embed`).

    Returns:
        ``(B,)`` predictions ``y_q + sum_h b_h^T G A_h z_q``.
    """
    dims = v.Dims()
    D, C = _check_E(E, dims)
    _check_params(params, dims)
    b, A = _reduced(params)
    Z = E[:, :, :C]  # context columns (B, D, C)
    zq = E[:, :, C]  # query column (B, D)
    # b_h^T G A_h z_q  with  G = Z Z^T / C:  (b_h^T Z)(Z^T A_h z_q) / C
    bZ = jnp.einsum("hk,bkc->bhc", b, Z)  # (B, H, C)
    Az = jnp.einsum("hik,bk->bhi", A, zq)  # (B, H, D)
    ZAz = jnp.einsum("bic,bhi->bhc", Z, Az)  # (B, H, C)
    return zq[:, -1] + jnp.sum(bZ * ZAz, axis=(1, 2)) / C


def lsa_output(params: dict, E: jax.Array) -> jax.Array:
    """The full output matrix ``E + sum_h head_h(E)`` of eq. 5-6, literally (for tests).

    Returns:
        ``(B, d+1, C+1)``.
    """
    dims = v.Dims()
    D, C = _check_E(E, dims)
    _check_params(params, dims)
    M = jnp.diag(jnp.concatenate([jnp.ones(C), jnp.zeros(1)]))
    heads = jnp.einsum(
        "hij,hjk,bkl,lm,bnm,hpn,hpq,bqr->bir",
        params["WP"],
        params["WV"],
        E,
        M,
        E,
        params["WK"],
        params["WQ"],
        E,
    )
    return E + heads / C


def gd_weights(w0, eta: float, H: int = 1) -> dict:
    """LSA weights that implement one GD step from ``w0`` with step ``eta`` (Xie et al. eq. 7).

    ``W^V = [[0, 0], [w0^T, -1]]``, ``W^K = W^Q = diag(I_d, 0)``, and ``W^P = -eta * I``. With these
    weights and ``y_q = w0^T x_q``, LSA returns ``(w0 - (eta/C) X^T (X w0 - y))^T x_q`` (eq. 9).

    Note: eq. 7 of the paper writes ``W^P = -(eta/C) I``; since eq. 3 already divides by ``C``, that
    choice gives a step of ``eta/C`` (see the book's chapter "The shared setting"). Extra heads
    (``H > 1``) are zero.

    Args:
        w0: ``(d,)`` the GD starting point (Part I: the prior mean ``w_star``).
        eta: the step size.
        H: number of heads (head 0 carries the construction).

    Returns:
        LSA parameters with ``H`` heads.
    """
    w0 = jnp.asarray(v.array("w0", w0, "d"), dtype=float)
    eta = v.finite_float("eta", eta)
    H = v.positive_int("H", H)
    d = w0.shape[0]
    D = d + 1
    WV = jnp.zeros((D, D)).at[d, :d].set(w0).at[d, d].set(-1.0)
    WK = jnp.zeros((D, D)).at[:d, :d].set(jnp.eye(d))
    WP = -eta * jnp.eye(D)
    one = {"WK": WK, "WQ": WK, "WV": WV, "WP": WP}
    return {k: jnp.zeros((H, D, D)).at[0].set(m) for k, m in one.items()}


def init_yq_lsa(key: jax.Array, d: int, H: int = 1, init_std: float = 0.1, w=None) -> dict:
    """Random y_q-LSA parameters (Xie et al. Definition 3): LSA weights plus the guess vector ``w``.

    Args:
        key: PRNG key.
        d: input dimension.
        H: heads (the paper uses ``H = 1``).
        init_std: std of the LSA weights.
        w: ``(d,)`` initial guess vector; default zeros.

    Returns:
        ``{"attn": LSA params, "w": (d,)}``.
    """
    attn = init_lsa(key, d, H, init_std)
    w = jnp.zeros(d) if w is None else jnp.asarray(v.array("w", w, "d", v.Dims(d=d)), dtype=float)
    return {"attn": attn, "w": w}


_YQ_WHAT = "a dict {'attn': LSA params, 'w': (d,)} (see init_yq_lsa)"


def yq_lsa_predict(params: dict, tasks: TaskBatch) -> jax.Array:
    """Prediction of y_q-LSA: LSA on the embedding ``E_w`` with ``y_q = w^T x_q`` (eq. 11-12).

    Args:
        params: ``{"attn": LSA params, "w": (d,)}``.
        tasks: a :class:`~iclgd.tasks.TaskBatch`.

    Returns:
        ``(B,)`` predictions.
    """
    v.param_dict("params", params, ("attn", "w"), _YQ_WHAT)
    dims = v.Dims()
    check_batch(tasks, dims=dims)
    v.array("params['w']", params["w"], "d", dims)
    return lsa_predict(params["attn"], embed(tasks, tasks.x_q @ params["w"]))


# ----------------------------------------------------------------------------------------------
# The linear transformer block of Xie et al. eq. 30 (Lemma 3)
# ----------------------------------------------------------------------------------------------


def ltb_predict(params: dict, E: jax.Array) -> jax.Array:
    """Prediction of a one-head linear transformer block (Xie et al. eq. 30, Zhang et al. 2024).

    ``f(E) = [W_2^T W_1 (E + (1/C) W^P W^V E W^M E^T (W^K)^T W^Q E)]_{-1,-1}``: an LSA layer
    followed by a linear MLP.

    Args:
        params: ``{"W1", "W2", "WP", "WV", "WK", "WQ"}``, each ``(d+1, d+1)``.
        E: ``(B, d+1, C+1)`` embeddings.

    Returns:
        ``(B,)`` predictions.
    """
    dims = v.Dims()
    D, C = _check_E(E, dims)
    keys = ("W1", "W2", "WP", "WV", "WK", "WQ")
    v.param_dict("params", params, keys, f"a dict with keys {keys} (see ltb_from_yq_lsa)")
    for k in keys:
        v.array(f"params[{k!r}]", params[k], "d+1 d+1", dims)
    EM = E * jnp.concatenate([jnp.ones(C), jnp.zeros(1)])  # E W^M
    p = params
    attn = p["WP"] @ p["WV"] @ EM @ jnp.swapaxes(E, -1, -2) @ p["WK"].T @ p["WQ"] @ E / C
    return (p["W2"].T @ p["W1"] @ (E + attn))[:, -1, -1]


def ltb_from_yq_lsa(params: dict, c: float | None = None, *, paper: bool = False) -> dict:
    """Weights of a linear transformer block that computes a one-head y_q-LSA (Xie et al. Lemma 3).

    With ``W_1 = [[I, w], [w^T, c]]`` (any ``c != ||w||^2``), ``W_2 = I`` and
    ``W_3 = [[I, 0], [w^T, 0]]`` (so that ``W_3 E_0 = E_w`` on the query column only), the block fed
    ``y_q = 0`` returns the y_q-LSA prediction for every prompt when
    ``W^P <- W_1^{-1} W^P``, ``W^Q <- W^Q W_3`` and ``W^K, W^V`` unchanged (the corrected
    construction). ``paper=True`` also multiplies ``W^K`` and ``W^V`` by ``W_3``, as the paper
    prints it; that block equals y_q-LSA only on prompts whose labels satisfy ``y = X w``.

    Args:
        params: one-head y_q-LSA parameters ``{"attn": LSA params with H = 1, "w": (d,)}``.
        c: the free entry of ``W_1``; default ``||w||^2 + 1``.
        paper: build the paper's (incorrect) construction instead.

    Returns:
        ``{"W1", "W2", "WP", "WV", "WK", "WQ"}`` for :func:`ltb_predict`.
    """
    v.param_dict("params", params, ("attn", "w"), _YQ_WHAT)
    dims = v.Dims()
    H, D = _check_params(params["attn"], dims, "params['attn']")
    if H != 1:
        raise ValueError(f"params['attn'] must have one head (H = 1), got H = {H}")
    a = {k: val[0] for k, val in params["attn"].items()}
    d = D - 1
    w = jnp.asarray(v.array("params['w']", params["w"], "d", v.Dims(d=d)))
    c = float(w @ w) + 1.0 if c is None else v.finite_float("c", c)
    if abs(c - float(w @ w)) < 1e-12 * (1.0 + abs(c)):
        raise ValueError(f"c must differ from ||w||^2 = {float(w @ w):.6g} (W_1 is singular there)")
    W1 = jnp.eye(D).at[:d, d].set(w).at[d, :d].set(w).at[d, d].set(c)
    W3 = jnp.zeros((D, D)).at[:d, :d].set(jnp.eye(d)).at[d, :d].set(w)
    out = {
        "W1": W1,
        "W2": jnp.eye(D),
        "WP": jnp.linalg.solve(W1, a["WP"]),
        "WQ": a["WQ"] @ W3,
        "WK": a["WK"],
        "WV": a["WV"],
    }
    if v.boolean("paper", paper):
        out["WK"], out["WV"] = a["WK"] @ W3, a["WV"] @ W3
    return out


_LTB_KEYS = ("W1", "W2", "WP", "WV", "WK", "WQ")


def yq_lsa_from_ltb(params: dict) -> dict:
    """Weights of a one-head y_q-LSA that computes a given linear transformer block (eq. 30).

    The converse of :func:`ltb_from_yq_lsa`: together they show that a one-head LTB fed ``y_q = 0``
    and a one-head y_q-LSA compute the same predictors. With ``r^T = (r_x^T, r_y)`` the last row of
    ``W_2^T W_1`` and ``A = (W^K)^T W^Q``, the block predicts, for every prompt (no data model
    needed),

        ``f_LTB = r_x^T x_q + r^T W^P W^V G A (x_q, 0)``,  ``G = (1/C) sum_{i<=C} z_i z_i^T``;

    ``r_y`` multiplies the query's zero label and drops out. The y_q-LSA with guess ``w = r_x``,
    ``W^P <- e_{d+1} r^T W^P`` (its last row is ``r^T W^P``), ``W^Q <- W^Q diag(I_d, 0)`` (the
    query's guess ``w^T x_q`` is not seen by the attention) and ``W^K``, ``W^V`` unchanged predicts
    ``w^T x_q + r^T W^P W^V G A (x_q, 0)``, the same.

    Args:
        params: ``{"W1", "W2", "WP", "WV", "WK", "WQ"}``, each ``(d+1, d+1)`` (:func:`ltb_predict`).

    Returns:
        ``{"attn": LSA params with H = 1, "w": (d,)}`` for :func:`yq_lsa_predict`.
    """
    v.param_dict("params", params, _LTB_KEYS, f"a dict with keys {_LTB_KEYS} (see ltb_predict)")
    dims = v.Dims()
    p = {k: jnp.asarray(v.array(f"params[{k!r}]", params[k], "d+1 d+1", dims)) for k in _LTB_KEYS}
    D = dims["d+1"]
    if D < 2:
        raise ValueError(f"the LTB weights must be (d+1, d+1) with d >= 1, got ({D}, {D})")
    d = D - 1
    r = (p["W2"].T @ p["W1"])[-1, :]  # (D,)
    WP = jnp.zeros((D, D), r.dtype).at[d, :].set(r @ p["WP"])
    keep_x = jnp.zeros((D, D), r.dtype).at[:d, :d].set(jnp.eye(d, dtype=r.dtype))
    one = {"WK": p["WK"], "WQ": p["WQ"] @ keep_x, "WV": p["WV"], "WP": WP}
    return {"attn": {k: m[None] for k, m in one.items()}, "w": r[:d]}
