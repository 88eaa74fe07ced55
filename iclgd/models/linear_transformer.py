"""Multi-layer linear transformers of Part III (Ahn, Cheng, Daneshmand,
Sra 2023) and their algorithms.

Notation follows the paper: ``n`` context examples, input dimension ``d``, ``D = d + 1`` rows,
``L`` layers (the paper's "k-layer transformer"; its indices run over ``A_0, A_1, ...``). Every
function is batched over ``B`` prompts.

**The model (eq. 1-5).** The input is Part III's embedding (eq. 1,
:func:`iclgd.tasks.embed_zero_query`)

    Z_0 = [[x^(1) ... x^(n)  x^(n+1)],
           [y^(1) ... y^(n)  0      ]]                       shape (d+1, n+1),

and each layer is a residual linear self-attention (eq. 3-4)

    Z_{l+1} = Z_l + (1/n) P_l Z_l M (Z_l^T Q_l Z_l),   M = diag(I_n, 0)   (eq. 2),

with full ``(d+1) x (d+1)`` matrices ``P_l`` (value) and ``Q_l`` (``= W_k^T W_q``). Following eq. 5
the model's prediction of ``y^(n+1) = <w*, x^(n+1)>`` is the *negative* bottom-right entry,
``y_hat = -[Z_L]_{d+1, n+1}`` (the loss of eq. 5 is ``([Z_L]_{d+1,n+1} + w*^T x^(n+1))^2``).

**Sparse parametrisations.**

* eq. 9: ``P_l = [[0, 0], [0, 1]]``, ``Q_l = [[A_l, 0], [0, 0]]`` --
  parameters ``{"A": (L, d, d)}``.
* eq. 13: ``P_l = [[B_l, 0], [0, 1]]``, ``Q_l = [[A_l, 0], [0, 0]]`` -- parameters
  ``{"A": (L, d, d), "B": (L, d, d)}``.

The paper takes every ``A_l`` symmetric (eq. 9, 13). The code accepts any ``A_l``.

**Lemma 2 (eq. 10-11, proof in App. C.2).** Under eq. 9 the prediction after ``l`` layers is
``<w_l, x^(n+1)>`` (i.e. ``[Z_l]_{d+1,n+1} = -<w_l, x^(n+1)>``), where ``w_0 = 0`` and

    w_{l+1} = w_l + A_l grad R(w_l),   R(w) = (1/2n) sum_{i<=n} (w^T x^(i) - y^(i))^2   (eq. 10-11),

so ``-A_l`` is the preconditioner and the ``1/n`` of eq. 4 is exactly the ``1/n`` of ``grad R``. The
attention score of query ``x^(n+1)`` against key ``x^(j)`` is ``x^(j)T A_l x^(n+1)``, so for a
*non-symmetric* ``A_l`` the transformer takes the step with ``A_l^T`` (the proof's eq. 57-58 write
the transposed score, which is the same thing for the symmetric ``A_l`` of eq. 9). Nothing in the
proof needs noise-free labels: the equivalence holds for any ``y``.

**GD++ (Sec. 6, eq. 13; von Oswald et al. 2022).** With ``B_l != 0`` every token's covariates are
also transformed, ``x <- (I + B_l G_l A_l) x`` with ``G_l = (1/n) sum_{i<=n} x_l^(i) x_l^(i)T``
(App. C.1 eq. 54), the "curvature correction" of von Oswald et al. (``A_l = a_l I``,
``B_l = b_l I``, ``a_l b_l < 0``). See :func:`gd_plus_plus`.

**Counting layers and examples.** The paper calls a transformer with parameters
``{P_i, Q_i}_{i=0}^k`` "k-layer" (``k+1`` matrices; App. C.1 calls ``Z_k`` "the output of the
(k-1)-th layer"); here ``L`` is the number of attention layers, ``A`` has shape ``(L, d, d)`` and
``L`` layers match ``L`` GD steps. Eq. 10 and the mask of eq. 2 use all ``n`` context examples, and
so do the GD baselines here.

:func:`linear_transformer_output_literal` evaluates eq. 4 with whole matrix products, for tests and
the book; the other forward functions are the same maps computed cheaply.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v

__all__ = [
    "init_linear_transformer",
    "init_sparse",
    "sparse_to_full",
    "linear_transformer_output",
    "linear_transformer_output_literal",
    "linear_transformer_predict",
    "sparse_predict",
    "preconditioned_gd_iterates",
    "preconditioned_gd",
    "gd_plus_plus",
    "theorem1_optimal_A",
]

_FULL_KEYS = ("P", "Q")


# ----------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------


def _check_Z(Z0, dims: dict) -> tuple[int, int]:
    """Check an embedding ``(B, d+1, n+1)``; return ``(d, n)`` (``d`` is bound in ``dims``)."""
    Z0 = v.array("Z0", Z0, "B d+1 n+1", dims)
    if Z0.shape[1] < 2 or Z0.shape[2] < 2:
        raise ValueError(
            f"Z0 must have shape (B, d+1, n+1) with d >= 1 and n >= 1, got shape {tuple(Z0.shape)}"
        )
    dims["d"] = Z0.shape[1] - 1
    return Z0.shape[1] - 1, Z0.shape[2] - 1


def _check_L(name: str, x) -> None:
    """Reject an empty stack of layers (``L = 0``) with a message about ``L``."""
    s = tuple(np.shape(x))
    if len(s) == 3 and s[0] < 1:
        raise ValueError(f"L must be an integer >= 1: {name} has shape {s}, i.e. L = 0 layers")


def _check_full_params(params, dims: dict) -> int:
    """Check ``{"P": (L, d+1, d+1), "Q": (L, d+1, d+1)}``; return ``L``."""
    what = "a dict {'P': (L, d+1, d+1), 'Q': (L, d+1, d+1)} (see init_linear_transformer)"
    v.param_dict("params", params, _FULL_KEYS, what)
    _check_L("params['P']", params["P"])
    v.array("params['P']", params["P"], "L d+1 d+1", dims, what="to match Z0")
    v.array("params['Q']", params["Q"], "L d+1 d+1", dims)
    return dims["L"]


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
    return v.array(name, A, "L d d", dims, what=what)


def _check_sparse_params(params, dims: dict) -> bool:
    """Check ``{"A": (L, d, d)}`` or ``{"A": (L, d, d), "B": (L, d, d)}``; return ``has_B``."""
    what = (
        "a dict {'A': (L, d, d)} (eq. 9) or {'A': (L, d, d), 'B': (L, d, d)} (eq. 13) "
        "(see init_sparse)"
    )
    v.param_dict("params", params, ("A",), what, optional=("B",))
    _check_L("params['A']", params["A"])
    v.array("params['A']", params["A"], "L d d", dims, what="to match Z0")
    if "B" in params:
        v.array("params['B']", params["B"], "L d d", dims, what="like params['A']")
    return "B" in params


def _check_regression(X, y, x_q=None) -> v.Dims:
    """Check ``X (B, n, d)``, ``y (B, n)`` and ``x_q (B, d)``; return the bound sizes."""
    dims = v.Dims()
    v.array("X", X, "B n d", dims)
    v.array("y", y, "B n", dims, what="to match X")
    if x_q is not None:
        v.array("x_q", x_q, "B d", dims, what="to match X")
    return dims


# ----------------------------------------------------------------------------------------------
# Initialisation and parameter constructors
# ----------------------------------------------------------------------------------------------


def init_linear_transformer(key: jax.Array, d: int, L: int, init_std: float = 0.01) -> dict:
    """Random full parameters of the ``L``-layer linear transformer (eq. 4).

    Args:
        key: a JAX PRNG key.
        d: input dimension, ``d >= 1`` (matrices are ``(d+1) x (d+1)``).
        L: number of layers, ``L >= 1``.
        init_std: standard deviation of the i.i.d. normal entries, ``>= 0``.

    Returns:
        ``{"P": (L, d+1, d+1), "Q": (L, d+1, d+1)}``.
    """
    v.prng_key("key", key, single=True)
    d = v.positive_int("d", d)
    L = v.positive_int("L", L)
    init_std = v.nonneg_float("init_std", init_std)
    D = d + 1
    PQ = init_std * jax.random.normal(key, (2, L, D, D))  # one draw: one compiled kernel per shape
    return {"P": PQ[0], "Q": PQ[1]}


def init_sparse(
    key: jax.Array,
    d: int,
    L: int,
    init_std: float = 0.01,
    *,
    with_B: bool = False,
    symmetric: bool = True,
) -> dict:
    """Random sparse parameters: eq. 9 (``{"A"}``) or, with
    ``with_B=True``, eq. 13 (``{"A", "B"}``).

    ``A_l = init_std * (G + G^T) / 2`` with ``G`` standard normal if ``symmetric`` (eq. 9 and 13
    take ``A_l`` symmetric), else ``init_std * G``. ``B_l = init_std * G'`` (no symmetry imposed;
    the paper's Sec. 6.1 initialises with scaled i.i.d. Gaussians).

    Args:
        key: a JAX PRNG key.
        d: input dimension, ``d >= 1``.
        L: number of layers, ``L >= 1``.
        init_std: scale of the entries, ``>= 0``.
        with_B: also return the ``B_l`` blocks of eq. 13.
        symmetric: symmetrise the ``A_l``.

    Returns:
        ``{"A": (L, d, d)}`` or ``{"A": (L, d, d), "B": (L, d, d)}``.
    """
    v.prng_key("key", key, single=True)
    d = v.positive_int("d", d)
    L = v.positive_int("L", L)
    init_std = v.nonneg_float("init_std", init_std)
    G = jax.random.normal(key, (2, L, d, d))  # one draw for A and B
    A = init_std * ((G[0] + jnp.swapaxes(G[0], 1, 2)) / 2 if symmetric else G[0])
    out = {"A": A}
    if with_B:
        out["B"] = init_std * G[1]
    return out


def sparse_to_full(params: dict) -> dict:
    """Full ``(P_l, Q_l)`` of eq. 9 (from ``{"A"}``) or eq. 13 (from ``{"A", "B"}``).

    ``P_l = [[B_l, 0], [0, 1]]`` (``B_l = 0`` for eq. 9) and ``Q_l = [[A_l, 0], [0, 0]]``.

    Args:
        params: ``{"A": (L, d, d)}`` or ``{"A": (L, d, d), "B": (L, d, d)}``.

    Returns:
        ``{"P": (L, d+1, d+1), "Q": (L, d+1, d+1)}``.
    """
    has_B = _check_sparse_params(params, v.Dims())
    A = jnp.asarray(params["A"])
    Bs = jnp.asarray(params["B"]) if has_B else jnp.zeros_like(A)
    P, Q = _sparse_to_full(A, Bs)
    return {"P": P, "Q": Q}


@jax.jit
def _sparse_to_full(A: jax.Array, Bs: jax.Array) -> tuple[jax.Array, jax.Array]:
    L, d, _ = A.shape
    dtype = jnp.result_type(A, Bs)
    pad = ((0, 0), (0, 1), (0, 1))
    Q = jnp.pad(A.astype(dtype), pad)
    P = jnp.pad(Bs.astype(dtype), pad).at[:, d, d].set(1.0)
    return P, Q


# ----------------------------------------------------------------------------------------------
# Forward passes
# ----------------------------------------------------------------------------------------------


def _full_layer(Z: jax.Array, PQ: tuple[jax.Array, jax.Array], n: int) -> jax.Array:
    """One layer of eq. 4 via ``Z M Z^T = Zc Zc^T`` (``Zc`` the ``n`` context columns)."""
    P, Q = PQ
    Zc = Z[:, :, :n]
    G = jnp.einsum("bic,bjc->bij", Zc, Zc)  # Z M Z^T  (B, D, D)
    K = jnp.einsum("ij,bjk,kl->bil", P, G, Q)  # P Z M Z^T Q  (B, D, D)
    return Z + jnp.einsum("bil,blm->bim", K, Z) / n


def linear_transformer_output(params: dict, Z0: jax.Array) -> jax.Array:
    """Output ``Z_L`` of the ``L``-layer linear transformer (eq. 4), computed cheaply.

    Uses ``Z M Z^T = sum_{i<=n} z^(i) z^(i)T``: ``O(B D^2 (n+1))`` per layer instead of the literal
    ``O(B D (n+1)^2)``; ``lax.scan`` over the stacked layers.

    Args:
        params: ``{"P": (L, d+1, d+1), "Q": (L, d+1, d+1)}``.
        Z0: ``(B, d+1, n+1)`` embeddings (eq. 1, :func:`iclgd.tasks.embed_zero_query`).

    Returns:
        ``(B, d+1, n+1)``, the matrix ``Z_L``.
    """
    dims = v.Dims()
    _check_Z(Z0, dims)
    _check_full_params(params, dims)
    return _forward_full(params["P"], params["Q"], Z0)


@jax.jit
def _forward_full(P: jax.Array, Q: jax.Array, Z0: jax.Array) -> jax.Array:
    n = Z0.shape[2] - 1

    def step(Z, PQ):
        return _full_layer(Z, PQ, n), None

    ZL, _ = jax.lax.scan(step, Z0, (P, Q))
    return ZL


def linear_transformer_output_literal(params: dict, Z0: jax.Array) -> jax.Array:
    """``Z_L`` of eq. 4 evaluated literally, ``Z + (1/n) P Z M (Z^T Q Z)`` with
    whole matrices (tests/book).

    Args:
        params: ``{"P": (L, d+1, d+1), "Q": (L, d+1, d+1)}``.
        Z0: ``(B, d+1, n+1)`` embeddings.

    Returns:
        ``(B, d+1, n+1)``.
    """
    dims = v.Dims()
    _check_Z(Z0, dims)
    _check_full_params(params, dims)
    return _forward_literal(params["P"], params["Q"], Z0)


@jax.jit
def _forward_literal(Ps: jax.Array, Qs: jax.Array, Z0: jax.Array) -> jax.Array:
    n = Z0.shape[2] - 1
    M = jnp.diag(jnp.concatenate([jnp.ones(n), jnp.zeros(1)])).astype(Z0.dtype)  # eq. 2
    Z = Z0
    for l in range(Ps.shape[0]):  # L is static: a Python loop, unrolled
        P, Q = Ps[l], Qs[l]
        attn = P @ Z @ M @ (jnp.swapaxes(Z, 1, 2) @ Q @ Z)  # Attn_{P,Q}(Z), eq. 3
        Z = Z + attn / n
    return Z


def linear_transformer_predict(params: dict, Z0: jax.Array) -> jax.Array:
    """Prediction ``-[Z_L]_{d+1, n+1}`` of the full-parameter transformer (eq. 4-5).

    Args:
        params: ``{"P": (L, d+1, d+1), "Q": (L, d+1, d+1)}``.
        Z0: ``(B, d+1, n+1)`` embeddings.

    Returns:
        ``(B,)`` predictions of ``y^(n+1)``.
    """
    return -linear_transformer_output(params, Z0)[:, -1, -1]


def sparse_predict(params: dict, Z0: jax.Array) -> jax.Array:
    """Prediction ``-[Z_L]_{d+1,n+1}`` of the sparse transformer, from the
    sparse parameters directly.

    * ``{"A"}`` (eq. 9): the covariate rows never change (App. B.2 eq. 22) and only the label row
      evolves, ``Y_{l+1} = Y_l + (1/n) Y_l M X^T A_l X`` (App. C.2 eq. 56): ``O(B d (n+1) + B d^2)``
      per layer.
    * ``{"A", "B"}`` (eq. 13): ``X_{l+1} = X_l + (1/n) B_l X_l M X_l^T A_l X_l`` and
      ``Y_{l+1} = Y_l + (1/n) Y_l M X_l^T A_l X_l`` (App. C.1 eq. 54): ``O(B d^2 (n+1))`` per layer.

    Equals ``linear_transformer_predict(sparse_to_full(params), Z0)``.

    Args:
        params: ``{"A": (L, d, d)}`` or ``{"A": (L, d, d), "B": (L, d, d)}``.
        Z0: ``(B, d+1, n+1)`` embeddings (eq. 1).

    Returns:
        ``(B,)`` predictions.
    """
    dims = v.Dims()
    _check_Z(Z0, dims)
    if _check_sparse_params(params, dims):
        return _sparse_forward_gdpp(params["A"], params["B"], Z0)
    return _sparse_forward_pgd(params["A"], Z0)


# The layers are unrolled (L is small): on a CPU the backward pass of a lax.scan over the layers
# was 1.5-2.5x slower (benchmarks/bench_part3.py).


@jax.jit
def _sparse_forward_pgd(As: jax.Array, Z0: jax.Array) -> jax.Array:
    d, n = Z0.shape[1] - 1, Z0.shape[2] - 1
    X0, Y = Z0[:, :d, :], Z0[:, d, :]  # (B, d, n+1), (B, n+1)
    for A in As:
        u = jnp.einsum("bic,bc->bi", X0[:, :, :n], Y[:, :n]) / n  # (1/n) X M Y^T  (B, d)
        Y = Y + jnp.einsum("bi,ij,bjc->bc", u, A, X0)
    return -Y[:, n]


@jax.jit
def _sparse_forward_gdpp(As: jax.Array, Bs: jax.Array, Z0: jax.Array) -> jax.Array:
    d, n = Z0.shape[1] - 1, Z0.shape[2] - 1
    X, Y = Z0[:, :d, :], Z0[:, d, :]
    for A, Bm in zip(As, Bs):
        Xc = X[:, :, :n]
        u = jnp.einsum("bic,bc->bi", Xc, Y[:, :n]) / n  # (B, d)
        G = jnp.einsum("bic,bjc->bij", Xc, Xc) / n  # (1/n) X M X^T  (B, d, d)
        AX = jnp.einsum("ij,bjc->bic", A, X)  # (B, d, n+1)
        X, Y = X + jnp.einsum("ij,bjk,bkc->bic", Bm, G, AX), Y + jnp.einsum("bi,bic->bc", u, AX)
    return -Y[:, n]


# ----------------------------------------------------------------------------------------------
# Algorithmic counterparts
# ----------------------------------------------------------------------------------------------


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
    A = _check_stack("A_list", A_list, _check_regression(X, y))
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
    A = _check_stack("A_list", A_list, _check_regression(X, y, x_q))
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
    dims = _check_regression(X, y, x_q)
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


# ----------------------------------------------------------------------------------------------
# Theorem 1
# ----------------------------------------------------------------------------------------------


def theorem1_optimal_A(Sigma, n: int, w_cov: str = "identity") -> jax.Array:
    """Single-layer global optimum of Theorem 1 (eq. 8), as the ``A_0`` of eq. 9.

    **This is the paper's formula, transcribed; a later issue verifies it exactly.**

    With ``b = e_{d+1}`` (i.e. ``P_0 = [[0, 0], [0, 1]]``) and ``Q_0 = [[A, 0], [0, 0]]``:

    * ``w_cov="identity"`` (Theorem 1: ``x ~ N(0, Sigma)``, ``w* ~ N(0, I_d)``,
      ``Sigma = U Lambda U^T``)::

          A = -U diag( 1 / ((n+1)/n * lambda_i + (1/n) sum_k lambda_k) ) U^T        (eq. 8)

      which for ``Sigma = I`` is ``-1 / ((n-1)/n + (d+2)/n) I = -n/(n+d+1) I``.
    * ``w_cov="inverse_sigma"`` (``w* ~ N(0, Sigma^{-1})``, the setting of Theorems 4-5): the paper
      states no Theorem-1 formula for this prior. Writing ``x = Sigma^{1/2} x_bar``,
      ``w* = Sigma^{-1/2} w_bar`` (Sec. 5.2's "distorted view") maps it to the isotropic case, whose
      optimum ``-n/(n+d+1) I`` transforms to ``A = -n/(n+d+1) Sigma^{-1}`` (derived here, not stated
      in the paper).

    The optimum is unique only up to ``b <- gamma b``, ``A <- A / gamma``; ``-A`` is the
    preconditioner of the one GD step (Lemma 2) and ``sparse_predict({"A": A[None]}, Z0)`` is the
    optimal predictor.

    Args:
        Sigma: ``(d, d)`` symmetric positive-definite input covariance.
        n: number of context examples, ``n >= 1``.
        w_cov: ``"identity"`` or ``"inverse_sigma"``, the covariance of ``w*``.

    Returns:
        ``(d, d)`` symmetric negative-definite ``A``.
    """
    v.spd_matrix("Sigma", Sigma)
    n = v.positive_int("n", n)
    if w_cov not in ("identity", "inverse_sigma"):
        raise ValueError(f"w_cov must be 'identity' or 'inverse_sigma', got {w_cov!r}")
    S = jnp.asarray(Sigma)
    S = (S + S.T) / 2
    d = S.shape[0]
    lam, U = jnp.linalg.eigh(S)
    if w_cov == "identity":
        diag = 1.0 / ((n + 1) / n * lam + jnp.sum(lam) / n)
    else:
        diag = (n / (n + d + 1)) / lam
    A = -(U * diag) @ U.T
    return (A + A.T) / 2
