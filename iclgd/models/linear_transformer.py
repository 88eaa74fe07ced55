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

The paper takes every ``A_l`` symmetric (eq. 9, 13). The code accepts any ``A_l``;
:func:`symmetrize` maps unconstrained parameters to the symmetric ones (what
``iclgd.models.linear_transformer_model(..., symmetrize=True)`` predicts with).

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

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from .batched_products import _mm, _mm_t, _mv, _sandwich, _tv

__all__ = [
    "init_linear_transformer",
    "init_sparse",
    "symmetrize",
    "mask_layers",
    "sparse_to_full",
    "linear_transformer_output",
    "linear_transformer_output_literal",
    "linear_transformer_predict",
    "sparse_predict",
    "PromptMoments",
    "prompt_moments",
    "gdpp_moments",
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


def _flag(name: str, x) -> bool:
    """Check a boolean option (``True``/``False``, numpy bools too)."""
    if not isinstance(x, (bool, np.bool_)):
        raise v.ArgumentTypeError(f"{name} must be True or False, got {x!r}")
    return bool(x)


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

    Draws ``G`` standard normal of shape ``(L, d, d)`` (eq. 9) or ``(2, L, d, d)`` (eq. 13: ``G[0]``
    for the ``A_l``, ``G[1]`` for the ``B_l``), so that ``init_std * G`` is exactly
    ``init_std * jax.random.normal(key, shape)``. ``A_l = init_std * (G + G^T) / 2`` if
    ``symmetric`` (eq. 9 and 13 take ``A_l`` symmetric), else ``init_std * G``. ``B_l = init_std *
    G'`` (no symmetry imposed; the paper's Sec. 6.1 initialises with scaled i.i.d. Gaussians).

    Args:
        key: a JAX PRNG key.
        d: input dimension, ``d >= 1``.
        L: number of layers, ``L >= 1``.
        init_std: scale of the entries, ``>= 0``.
        with_B: also return the ``B_l`` blocks of eq. 13.
        symmetric: symmetrise the ``A_l`` (``False``: i.i.d. entries, for a model that
            symmetrises in its forward pass, :func:`symmetrize`).

    Returns:
        ``{"A": (L, d, d)}`` or ``{"A": (L, d, d), "B": (L, d, d)}``.
    """
    v.prng_key("key", key, single=True)
    d = v.positive_int("d", d)
    L = v.positive_int("L", L)
    init_std = v.nonneg_float("init_std", init_std)
    with_B, symmetric = _flag("with_B", with_B), _flag("symmetric", symmetric)
    G = init_std * jax.random.normal(key, (2, L, d, d) if with_B else (L, d, d))
    A = G[0] if with_B else G
    out = {"A": (A + jnp.swapaxes(A, 1, 2)) / 2 if symmetric else A}
    if with_B:
        out["B"] = G[1]
    return out


def symmetrize(params: dict) -> dict:
    """The effective parameters of a sparse model that keeps eq. 9's / eq. 13's constraint
    ``A_l = A_l^T`` through unconstrained training: ``A_l -> (A_l + A_l^T) / 2``, ``B_l``
    unchanged (``iclgd.models.linear_transformer_model(..., symmetrize=True)`` predicts with
    these).

    Args:
        params: ``{"A": (..., L, d, d)}`` or ``{"A": (..., L, d, d), "B": (..., L, d, d)}``: one
            model, or stacks of them (seeds, records of a training history); jittable.

    Returns:
        the same keys and shapes, every ``A_l`` symmetric.
    """
    what = (
        "a dict {'A': (..., L, d, d)} (eq. 9) or {'A': (..., L, d, d), 'B': (..., L, d, d)} "
        "(eq. 13)"
    )
    v.param_dict("params", params, ("A",), what, optional=("B",))
    _check_L("params['A']", params["A"])
    A = v.array("params['A']", params["A"], "... L d d")
    if "B" in params:
        v.shape("params['B']", params["B"], tuple(A.shape), "like params['A']")
    return {**params, "A": (A + jnp.swapaxes(A, -1, -2)) / 2}


def mask_layers(params: dict, on) -> dict:
    """The parameters with layer ``l`` switched off where ``on[l] = 0``: ``A_l -> on[l] A_l``
    (eq. 9 / 13: a layer with ``A_l = 0`` leaves ``Z`` unchanged, ``B_l`` too) or
    ``P_l -> on[l] P_l`` (eq. 4: the identity layer), the masking of
    ``iclgd.models.linear_transformer_model(..., layers=k)`` with the mask an array, so that a
    jitted loss of ``mask_layers(params, on)`` serves every depth with one compilation
    (:func:`iclgd.training.layer_masked_loss`).

    Args:
        params: ``{"A": (L, d, d)}``, ``{"A", "B"}`` (eq. 9 / 13) or ``{"P", "Q"}`` (eq. 4).
        on: ``(L,)``, each entry 0 or 1 (checked when concrete): ``on = (1, 1, 0)`` is the
            two-layer model in the shape of three layers.

    Returns:
        the same keys and shapes.

    Example:
        >>> import jax.numpy as jnp
        >>> p = {"A": jnp.ones((3, 2, 2))}
        >>> mask_layers(p, jnp.array([1.0, 1.0, 0.0]))["A"][:, 0, 0].tolist()
        [1.0, 1.0, 0.0]
    """
    if not isinstance(params, dict):
        raise v.ArgumentTypeError(
            "params must be a dict {'A': (L, d, d)} (eq. 9), {'A', 'B'} (eq. 13) or {'P', 'Q'} "
            f"(eq. 4), got {type(params).__name__}"
        )
    acting = "P" if "P" in params else "A"
    if acting == "P":
        v.param_dict("params", params, _FULL_KEYS, "a dict {'P': (L, D, D), 'Q': (L, D, D)}")
    else:
        what = "a dict {'A': (L, d, d)} (eq. 9) or {'A': (L, d, d), 'B': (L, d, d)} (eq. 13)"
        v.param_dict("params", params, ("A",), what, optional=("B",))
    _check_L(f"params['{acting}']", params[acting])
    M = v.array(f"params['{acting}']", params[acting], "L D D")
    on = v.array("on", on, (M.shape[0],), what=f"one entry per layer of params['{acting}']")
    if not v.is_tracer(on) and not np.all((np.asarray(on) == 0) | (np.asarray(on) == 1)):
        raise ValueError(f"on must hold only 0 and 1 (a layer acts or not), got {np.asarray(on)}")
    return {**params, acting: M * jnp.asarray(on, jnp.result_type(M))[:, None, None]}


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


def sparse_predict(params: dict, Z0) -> jax.Array:
    """Prediction ``-[Z_L]_{d+1,n+1}`` of the sparse transformer, from the
    sparse parameters directly.

    * ``{"A"}`` (eq. 9): the covariate rows never change (App. B.2 eq. 22) and only the label row
      evolves, ``Y_{l+1} = Y_l + (1/n) Y_l M X^T A_l X`` (App. C.2 eq. 56), so ``Y_l = Y_0 +
      c_l^T X`` with ``c_{l+1} = c_l + A_l^T (h_0 + G_0 c_l)`` (:func:`gdpp_moments` with
      ``B_l = 0``): ``O(B d^2 n)`` once, then ``O(B d^2)`` per layer.
    * ``{"A", "B"}`` (eq. 13): ``X_{l+1} = X_l + (1/n) B_l X_l M X_l^T A_l X_l`` and
      ``Y_{l+1} = Y_l + (1/n) Y_l M X_l^T A_l X_l`` (App. C.1 eq. 54), computed through each
      prompt's context moments (:func:`gdpp_moments`): ``O(B d^2 n)`` once, then ``O(B d^3)`` per
      layer, whatever ``n``.

    Equals ``linear_transformer_predict(sparse_to_full(params), Z0)``.

    Args:
        params: ``{"A": (L, d, d)}`` or ``{"A": (L, d, d), "B": (L, d, d)}``.
        Z0: ``(B, d+1, n+1)`` embeddings (eq. 1), or their :class:`PromptMoments`
            (:func:`prompt_moments`: the same predictions, without the per-call moments).

    Returns:
        ``(B,)`` predictions.
    """
    dims = v.Dims()
    if isinstance(Z0, PromptMoments):
        m = _check_moments(Z0, dims)
        has_B = _check_sparse_params(params, dims)
        As = jnp.asarray(params["A"])
        if not has_B:
            return _moments_forward_pgd(As, m.G, m.h, m.x_q, m.y_q)
        return _moments_forward_gdpp(As, jnp.asarray(params["B"]), m.G, m.h, m.x_q, m.y_q)
    _check_Z(Z0, dims)
    if _check_sparse_params(params, dims):
        return _sparse_forward_gdpp(params["A"], params["B"], Z0)
    return _sparse_forward_pgd(params["A"], Z0)


class PromptMoments(NamedTuple):
    """A batch of prompts as the sparse transformers (eq. 9, 13) read it: each prompt's context
    moments, its query and target (:func:`prompt_moments`).

    Attributes:
        G: ``(B, d, d)``, ``G_0 = (1/n) X_0 M X_0^T``.
        h: ``(B, d)``, ``h_0 = (1/n) X_0 M Y_0^T``.
        x_q: ``(B, d)``, the query ``x^(n+1)``.
        y_q: ``(B,)``, the query's label entry ``[Z_0]_{d+1,n+1}`` (0 in eq. 1).
        y_target: ``(B,)``, the label to predict (carried for the losses).
    """

    G: jax.Array
    h: jax.Array
    x_q: jax.Array
    y_q: jax.Array
    y_target: jax.Array


def prompt_moments(Z0: jax.Array, y_target: jax.Array) -> PromptMoments:
    """The :class:`PromptMoments` of embeddings ``Z0``: what eq. 9's and eq. 13's predictions
    depend on, computed once for a fixed batch (``O(B d^2 n)``), after which
    :func:`sparse_predict` costs ``O(B d^3)`` per layer whatever ``n``.

    Args:
        Z0: ``(B, d+1, n+1)`` embeddings (eq. 1).
        y_target: ``(B,)`` targets.

    Returns:
        a :class:`PromptMoments`.
    """
    dims = v.Dims()
    _check_Z(Z0, dims)
    y_target = v.array("y_target", y_target, "B", dims, what="one target per prompt of Z0")
    return PromptMoments(*_moments(Z0), y_target)


def _check_moments(m: PromptMoments, dims: dict) -> PromptMoments:
    G = v.array("Z0.G", m.G, "B d d", dims)
    return PromptMoments(
        G,
        v.array("Z0.h", m.h, "B d", dims),
        v.array("Z0.x_q", m.x_q, "B d", dims),
        v.array("Z0.y_q", m.y_q, "B", dims),
        m.y_target,
    )


@jax.jit
def _moments(Z0: jax.Array):
    d, n = Z0.shape[1] - 1, Z0.shape[2] - 1
    Xc, Yc = Z0[:, :d, :n], Z0[:, d, :n]
    # sums over the n examples as reductions (an unrolled sum would be copied into every consumer)
    G0 = (Xc[:, :, None, :] * Xc[:, None, :, :]).sum(-1) / n  # (B, d, d)
    h0 = (Xc * Yc[:, None, :]).sum(-1) / n  # (B, d)
    return G0, h0, Z0[:, :d, n], Z0[:, d, n]


# The layers are unrolled (L is small): on a CPU the backward pass of a lax.scan over the layers
# was 1.5-2.5x slower (benchmarks/bench_part3.py).


@jax.jit
def _sparse_forward_pgd(As: jax.Array, Z0: jax.Array) -> jax.Array:
    return _moments_forward_pgd(As, *_moments(Z0))


@jax.jit
def _sparse_forward_gdpp(As: jax.Array, Bs: jax.Array, Z0: jax.Array) -> jax.Array:
    G0, h0, xq, yq = _moments(Z0)
    return -(yq + _gdpp_coefficients(As, Bs, G0, h0, xq))


@jax.jit
def _moments_forward_gdpp(As, Bs, G0, h0, xq, yq) -> jax.Array:
    return -(yq + _gdpp_coefficients(As, Bs, G0, h0, xq))


@jax.jit
def _moments_forward_pgd(As, G0, h0, xq, yq) -> jax.Array:
    c = jnp.zeros_like(h0)  # eq. 9: F_l = I, c_{l+1} = c_l + A_l^T (h_0 + G_0 c_l)
    for A in As:
        c = c + (h0 + _mv(G0, c)) @ A
    return -(yq + jnp.sum(c * xq, axis=-1))


def gdpp_moments(params: dict, Z0: jax.Array) -> dict:
    """GD++ (eq. 13) through each prompt's context moments: the same predictions as
    :func:`sparse_predict` on ``{"A", "B"}``, and what it computes.

    With ``X_l = F_l X_0`` (``F_0 = I``), eq. 54 is a recursion on ``d x d`` and ``d`` per prompt:

        G_l = F_l G_0 F_l^T,   u_l = F_l (h_0 + G_0 c_l),
        c_{l+1} = c_l + F_l^T A_l^T u_l,   F_{l+1} = (I + B_l G_l A_l) F_l,

    where ``G_0 = (1/n) X_0 M X_0^T``, ``h_0 = (1/n) X_0 M Y_0^T`` (the context's moments) and
    ``c_0 = 0``; the label row is ``Y_l = Y_0 + c_l^T X_0`` and the prediction
    ``-[Z_L]_{d+1,n+1} = -(y_q + <c_L, x^(n+1)>)`` (``y_q = [Z_0]_{d+1,n+1}``, 0 in eq. 1).

    Args:
        params: ``{"A": (L, d, d), "B": (L, d, d)}`` (any ``A_l``, ``B_l``).
        Z0: ``(B, d+1, n+1)`` embeddings.

    Returns:
        ``{"G": (B, d, d), "h": (B, d), "F": (L+1, B, d, d), "c": (L+1, B, d)}``: the moments
        and every layer's ``F_l``, ``c_l`` (``l = 0..L``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from iclgd import tasks
        >>> t = tasks.sample_paper_prompts(jax.random.key(0), n=10, batch=4)
        >>> p = init_sparse(jax.random.key(1), 5, 2, 0.3, with_B=True)
        >>> Z0 = tasks.embed_zero_query(t)
        >>> m = gdpp_moments(p, Z0)
        >>> bool(jnp.allclose(-jnp.sum(m["c"][-1] * t.x_q, -1), sparse_predict(p, Z0)))
        True
    """
    dims = v.Dims()
    _check_Z(Z0, dims)
    if not _check_sparse_params(params, dims):
        raise ValueError("params must hold 'B' too: gdpp_moments is eq. 13's recursion")
    return _gdpp_states(jnp.asarray(params["A"]), jnp.asarray(params["B"]), Z0)


@jax.jit
def _gdpp_states(As, Bs, Z0):
    d, n = Z0.shape[1] - 1, Z0.shape[2] - 1
    Xc, Yc = Z0[:, :d, :n], Z0[:, d, :n]
    G0 = jnp.einsum("bic,bjc->bij", Xc, Xc) / n
    h0 = jnp.einsum("bic,bc->bi", Xc, Yc) / n
    F = jnp.broadcast_to(jnp.eye(d, dtype=G0.dtype), G0.shape)
    c = jnp.zeros_like(h0)
    Fs, cs = [F], [c]
    for A, Bm in zip(As, Bs):
        G = jnp.einsum("bij,bjk,blk->bil", F, G0, F)
        u = jnp.einsum("bij,bj->bi", F, h0 + jnp.einsum("bij,bj->bi", G0, c))
        c = c + jnp.einsum("bji,kj,bk->bi", F, A, u)
        F = F + jnp.einsum("ij,bjk,kl,blm->bim", Bm, G, A, F)
        Fs.append(F)
        cs.append(c)
    return {"G": G0, "h": h0, "F": jnp.stack(Fs), "c": jnp.stack(cs)}


def _gdpp_coefficients(As, Bs, G0, h0, xq):
    """``<c_L, x_q>`` of :func:`gdpp_moments`'s recursion, ``(B,)``, from ``G0 (B, d, d)``, ``h0
    (B, d)`` and ``xq (B, d)``; the first layer (``F_0 = I``, ``c_0 = 0``) in closed form."""
    c = h0 @ As[0]  # c_1 = A_0^T h_0 (row vectors: h A = (A^T h)^T)
    F = jnp.eye(G0.shape[-1], dtype=G0.dtype) + _sandwich(Bs[0], G0, As[0])
    for A, Bm in zip(As[1:], Bs[1:]):
        G = _mm_t(_mm(F, G0), F)  # F G_0 F^T
        u = _mv(F, h0 + _mv(G0, c))
        c = c + _tv(F, u @ A)
        F = F + _mm(_sandwich(Bm, G, A), F)
    return jnp.sum(c * xq, axis=-1)


# ----------------------------------------------------------------------------------------------
# Algorithmic counterparts
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# Theorem 1
# ----------------------------------------------------------------------------------------------
