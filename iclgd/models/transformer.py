"""A standard pre-LayerNorm transformer encoder in plain JAX (Part II, Yang et al. Sec. 4).

The paper's 4-layer runs use ``d_model = 256``, ``d_ff = 512``, ``H = 8`` heads. The model reads the
embedding ``E^T`` (one row ``(v_k, y_k or 0)`` per token) and returns one label prediction per
position. ``H`` is the number of heads and ``L`` the number of layers, as everywhere in iclgd.

The losses of Sec. 4 for any Part II model (``predict(params, batch) -> (B, K)``):

* :func:`sampled_population_loss` -- eq. 9 by Monte Carlo, fresh prompts at every step;
* :func:`inference_sets` and :func:`inference_metrics` -- the inference loss
  ``(1/K) ||y_hat - y_star||^2`` (Fig. 2) on fixed in-domain (``lambda ~ N(0, I)``) and
  out-of-domain (``lambda ~ N(1, 4 I)``) test prompts;
* :func:`copy_prompt_loss` and :func:`copy_prompt_gap` -- the baseline that copies the prompt
  labels and predicts 0 for the unseen tokens.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v

__all__ = [
    "layer_norm",
    "init_transformer",
    "transformer_predict",
]


# ----------------------------------------------------------------------------------------------
# Standard pre-LayerNorm transformer (Sec. 4's 4-layer runs)
# ----------------------------------------------------------------------------------------------

_LAYER_KEYS = (
    "ln1_g",
    "ln1_b",
    "Wq",
    "Wk",
    "Wv",
    "Wo",
    "bo",
    "ln2_g",
    "ln2_b",
    "W1",
    "b1",
    "W2",
    "b2",
)


def layer_norm(x: jax.Array, gain: jax.Array, bias: jax.Array, eps: float = 1e-5) -> jax.Array:
    """LayerNorm over the last axis: ``gain * (x - mean) / sqrt(var + eps) + bias``.

    Args:
        x: ``(..., D)``.
        gain: ``(D,)``.
        bias: ``(D,)``.
        eps: variance floor, ``> 0``.

    Returns:
        ``(..., D)``.
    """
    dims = v.Dims()
    x = v.array("x", x, "... D", dims, promote=True)
    gain = v.array("gain", gain, "D", dims, promote=True)
    bias = v.array("bias", bias, "D", dims, promote=True)
    return _layer_norm(x, gain, bias, v.positive_float("eps", eps))


@jax.jit
def _layer_norm(x, gain, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return gain * (x - mean) * jax.lax.rsqrt(var + eps) + bias


def init_transformer(
    key: jax.Array,
    d_in: int,
    d_model: int = 256,
    H: int = 8,
    d_ff: int = 512,
    L: int = 4,
    seq_len: int | None = None,
    pos_encoding: str = "none",
) -> dict:
    """Parameters of a pre-LayerNorm transformer encoder (Vaswani et al. 2017 with pre-LN).

    Defaults are the paper's 4-layer configuration (Sec. 4: ``d_model = 256``, ``d_ff = 512``,
    ``H = 8`` in Fig. 2). Weights are ``N(0, 1/fan_in)``, biases 0, LayerNorm gains 1. The per-layer
    weights are stacked along a leading ``L`` axis so :func:`transformer_predict` can ``lax.scan``
    over them.

    The paper's dictionary is fixed and always in the same order, so a token ``v_k`` already
    identifies its position; ``pos_encoding="none"`` (default) relies on that, ``"learned"`` adds a
    learned ``(seq_len, d_model)`` table (``N(0, 0.02^2)``).

    Args:
        key: PRNG key.
        d_in: input feature size (``d + 1`` for the embedding ``E^T``).
        d_model: model width, divisible by ``H``.
        H: attention heads per layer.
        d_ff: hidden width of the ReLU feed-forward block.
        L: number of layers.
        seq_len: maximum sequence length (``K``); required for ``pos_encoding="learned"``.
        pos_encoding: ``"none"`` or ``"learned"``.

    Returns:
        ``{"embed": {"W": (d_in, d_model), "b": (d_model,)},
        "layers": {"ln1_g", "ln1_b": (L, D), "Wq", "Wk", "Wv": (L, D, H, D/H), "Wo": (L, H, D/H, D),
        "bo": (L, D), "ln2_g", "ln2_b": (L, D), "W1": (L, D, d_ff), "b1": (L, d_ff), "W2": (L, d_ff,
        D), "b2": (L, D)}, "final_ln": {"g", "b": (D,)}, "readout": {"W": (D,), "b": ()}}`` plus
        ``"pos": (seq_len, D)`` if learned.
    """
    v.prng_key("key", key)
    d_in = v.positive_int("d_in", d_in)
    D, H, F, L, seq_len = check_config(d_model, H, d_ff, L, seq_len, pos_encoding)
    return _init_transformer(key, d_in, D, H, F, L, seq_len)


def check_config(d_model, H, d_ff, L, seq_len, pos_encoding: str) -> tuple:
    """Validate the sizes of :func:`init_transformer`; return ``(d_model, H, d_ff, L, seq_len)``
    with ``seq_len = None`` unless ``pos_encoding == "learned"``."""
    D = v.positive_int("d_model", d_model)
    H = v.positive_int("H", H)
    F = v.positive_int("d_ff", d_ff)
    L = v.positive_int("L", L)
    if D % H:
        raise ValueError(f"d_model must be divisible by H = {H}, got d_model = {D}")
    if pos_encoding not in ("none", "learned"):
        raise ValueError(f"pos_encoding must be 'none' or 'learned', got {pos_encoding!r}")
    if pos_encoding != "learned":
        return D, H, F, L, None
    if seq_len is None:
        raise ValueError("seq_len must be given (an integer >= 1) when pos_encoding='learned'")
    return D, H, F, L, v.positive_int("seq_len", seq_len)


@partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _init_transformer(key, d_in, D, H, F, L, seq_len):
    Dh = D // H
    # (name, shape, std): every random tensor comes from ONE normal draw (one threefry kernel;
    # XLA:CPU compiles each separate jax.random call inside jit slowly).
    spec = [
        ("embed_W", (d_in, D), 1 / math.sqrt(d_in)),
        ("Wq", (L, D, H, Dh), 1 / math.sqrt(D)),
        ("Wk", (L, D, H, Dh), 1 / math.sqrt(D)),
        ("Wv", (L, D, H, Dh), 1 / math.sqrt(D)),
        ("Wo", (L, H, Dh, D), 1 / math.sqrt(D)),
        ("W1", (L, D, F), 1 / math.sqrt(D)),
        ("W2", (L, F, D), 1 / math.sqrt(F)),
        ("readout_W", (D,), 1 / math.sqrt(D)),
    ]
    if seq_len is not None:
        spec.append(("pos", (seq_len, D), 0.02))
    sizes = [math.prod(shape) for _, shape, _ in spec]
    z = jax.random.normal(key, (sum(sizes),))
    w, start = {}, 0
    for (name, shape, std), n in zip(spec, sizes):
        w[name] = std * z[start : start + n].reshape(shape)
        start += n
    layers = {
        "ln1_g": jnp.ones((L, D)),
        "ln1_b": jnp.zeros((L, D)),
        "Wq": w["Wq"],
        "Wk": w["Wk"],
        "Wv": w["Wv"],
        "Wo": w["Wo"],
        "bo": jnp.zeros((L, D)),
        "ln2_g": jnp.ones((L, D)),
        "ln2_b": jnp.zeros((L, D)),
        "W1": w["W1"],
        "b1": jnp.zeros((L, F)),
        "W2": w["W2"],
        "b2": jnp.zeros((L, D)),
    }
    params = {
        "embed": {"W": w["embed_W"], "b": jnp.zeros((D,))},
        "layers": layers,
        "final_ln": {"g": jnp.ones((D,)), "b": jnp.zeros((D,))},
        "readout": {"W": w["readout_W"], "b": jnp.zeros(())},
    }
    if seq_len is not None:
        params["pos"] = w["pos"]
    return params


_PARAMS_WHAT = (
    "the nested dict returned by init_transformer (keys embed, layers, final_ln, readout)"
)
_SHAPES = {
    "embed": {"W": "d_in D", "b": "D"},
    "layers": {
        "ln1_g": "L D",
        "ln1_b": "L D",
        "Wq": "L D H Dh",
        "Wk": "L D H Dh",
        "Wv": "L D H Dh",
        "Wo": "L H Dh D",
        "bo": "L D",
        "ln2_g": "L D",
        "ln2_b": "L D",
        "W1": "L D F",
        "b1": "L F",
        "W2": "L F D",
        "b2": "L D",
    },
    "final_ln": {"g": "D", "b": "D"},
    "readout": {"W": "D", "b": ""},
}


def _check_transformer_params(params) -> dict:
    """Check the nested parameter dict of :func:`init_transformer`; return its sizes (``d_in``,
    ``D``, ``L``, ``H``, ``Dh``, ``F``)."""
    v.param_dict("params", params, tuple(_SHAPES), _PARAMS_WHAT)
    dims = v.Dims()
    for group, leaves in _SHAPES.items():
        v.param_dict(f"params[{group!r}]", params[group], tuple(leaves), _PARAMS_WHAT)
        for k, spec in leaves.items():
            v.array(f"params[{group!r}][{k!r}]", params[group][k], spec, dims)
    if dims["H"] * dims["Dh"] != dims["D"]:
        raise ValueError(
            f"params['layers']['Wq'] must have shape (L, {dims['D']}, H, {dims['D']}/H), "
            f"got shape {tuple(params['layers']['Wq'].shape)}"
        )
    return dims


def transformer_predict(
    params: dict, inputs: jax.Array, causal: bool = False, n_keys: int | None = None
) -> jax.Array:
    """Forward pass of the pre-LN transformer; one scalar prediction per position.

    ``x_0 = inputs W_e + b_e (+ pos)``; for each layer ``x <- x + MHA(LN_1(x))``,
    ``x <- x + FFN(LN_2(x))`` with ``FFN(u) = ReLU(u W_1 + b_1) W_2 + b_2``; then
    ``y_hat_t = LN_f(x_t)^T w_r + b_r``. Attention is bidirectional by default (an encoder: like
    eq. 5, every query position sees the whole prompt).

    For the paper's task use ``inputs = jnp.swapaxes(batch.E, 1, 2)`` (``(B, K, d+1)``, rows
    ``(v_k, y_k)`` for ``k <= N`` and ``(v_k, 0)`` after) and compare the
    output with ``batch.y_all``.

    Args:
        params: from :func:`init_transformer`.
        inputs: ``(B, T, d_in)``.
        causal: if True, position ``t`` attends only to positions ``<= t``.
        n_keys: if given, every position attends only to the first ``n_keys`` positions (with
            ``n_keys = N`` the keys are the prompt tokens, as in eq. 5), ``1 <= n_keys <= T``.

    Returns:
        ``(B, T)`` predictions.
    """
    dims = _check_transformer_params(params)
    inputs = v.array("inputs", inputs, "B T d_in", dims, promote=True)
    T, D = dims["T"], dims["D"]
    if not isinstance(causal, (bool, np.bool_)):
        raise v.ArgumentTypeError(f"causal must be a bool, got {causal!r}")
    if "pos" in params:
        P = v.array("params['pos']", params["pos"], "seq_len D", dims)
        if P.shape[0] < T:
            raise ValueError(
                f"params['pos'] must have shape (seq_len >= T = {T}, {D}), "
                f"got shape {tuple(P.shape)}"
            )
    if n_keys is not None:
        n_keys = v.positive_int("n_keys", n_keys)
        if n_keys > T:
            raise ValueError(f"n_keys must satisfy 1 <= n_keys <= T = {T}, got {n_keys}")
    return _transformer_forward(params, jnp.asarray(inputs), bool(causal), n_keys)


@partial(jax.jit, static_argnums=(2, 3))
def _transformer_forward(params, inputs, causal, n_keys):
    T = inputs.shape[1]
    Dh = params["layers"]["Wq"].shape[-1]
    x = inputs @ params["embed"]["W"] + params["embed"]["b"]
    if "pos" in params:
        x = x + params["pos"][:T]
    allowed = jnp.ones((T, T), dtype=bool)  # [query t, key s]
    if causal:
        allowed = allowed & jnp.tril(jnp.ones((T, T), dtype=bool))
    if n_keys is not None:
        allowed = allowed & (jnp.arange(T) < n_keys)[None, :]
    neg = jnp.finfo(x.dtype).min

    def layer(x, p):
        u = _layer_norm(x, p["ln1_g"], p["ln1_b"])
        q = jnp.einsum("btd,dhe->bhte", u, p["Wq"])
        k = jnp.einsum("btd,dhe->bhte", u, p["Wk"])
        val = jnp.einsum("btd,dhe->bhte", u, p["Wv"])
        logits = jnp.einsum("bhte,bhse->bhts", q, k) / math.sqrt(Dh)
        att = jax.nn.softmax(jnp.where(allowed, logits, neg), axis=-1)
        o = jnp.einsum("bhts,bhse->bhte", att, val)
        x = x + jnp.einsum("bhte,hed->btd", o, p["Wo"]) + p["bo"]
        u = _layer_norm(x, p["ln2_g"], p["ln2_b"])
        x = x + jax.nn.relu(u @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
        return x, None

    x, _ = jax.lax.scan(layer, x, params["layers"])
    x = _layer_norm(x, params["final_ln"]["g"], params["final_ln"]["b"])
    return x @ params["readout"]["W"] + params["readout"]["b"]


# ----------------------------------------------------------------------------------------------
# Sec. 4: the training loss (eq. 9, sampled), the inference loss of Fig. 2 and a baseline
# ----------------------------------------------------------------------------------------------
