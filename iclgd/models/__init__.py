"""One interface for every model family of the book.

A :class:`Model` is a pair of pure functions, like an optax ``GradientTransformation``::

    model = iclgd.models.lsa_model(d=10, H=1)    # Part I, multi-head LSA, y_q = 0
    params = model.init(jax.random.key(0))       # a parameter pytree
    pred = model.predict(params, tasks)          # (B,) predictions of the query labels

Every family has a factory with keyword configuration, ``H`` for heads and ``L`` for layers:

* :func:`lsa_model` -- multi-head LSA, Xie et al. eq. 3-6; batch: :class:`~iclgd.tasks.TaskBatch`.
* :func:`yq_lsa_model` -- y_q-LSA, Xie et al. Definition 3; batch: :class:`~iclgd.tasks.TaskBatch`.
* :func:`linear_transformer_model` -- Ahn et al. eq. 4, 9, 13; batch:
  :class:`~iclgd.tasks.TaskBatch`.
* :func:`softmax_attention_model` -- Yang et al. eq. 5-8; batch:
  :class:`~iclgd.tasks.RepresentationBatch`.
* :func:`transformer_model` -- Yang et al. Sec. 4 (pre-LN); batch:
  :class:`~iclgd.tasks.RepresentationBatch`.

Part I and III models return ``(B,)`` predictions of the query label; Part II models return
``(B, K)`` predictions of every token's label. The lower-level functions of each family
(``lsa_predict(params, E)``, ``sparse_predict(params, Z0)``, ``softmax_predict(params, spec, y)``,
...) live in the family modules and take the parameters first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import checks as v
from ..tasks import TaskBatch, embed, embed_zero_query, linear_guess
from ..tasks.representation import RepresentationBatch, RepresentationSpec, check_spec
from . import linear_transformer as _lt
from . import lsa as _lsa
from . import softmax as _softmax
from . import transformer as _transformer

__all__ = [
    "Model",
    "lsa_model",
    "yq_lsa_model",
    "linear_transformer_model",
    "softmax_attention_model",
    "transformer_model",
]


class Model(NamedTuple):
    """A model family member: ``init(key) -> params`` and ``predict(params, batch) -> predictions``.

    Attributes:
        init: ``init(key) -> params``, a parameter pytree drawn from the PRNG key.
        predict: ``predict(params, batch) -> (B,)`` (Parts I, III) or ``(B, K)`` (Part II); pure and
            jittable.
        name: a short description, e.g. ``"lsa(d=10, H=1)"``.
        prepare: ``None``, or ``prepare(batch) -> batch'``, the part of ``predict`` that does not
            depend on the parameters, done once: ``predict(params, prepare(batch))`` equals
            ``predict(params, batch)``, and ``prepare(batch).y_target`` is ``batch.y_target``.
            :func:`iclgd.training.batch_loss` of such a model prepares its fixed batch once per
            training (GD++'s context moments, :func:`linear_transformer_model`).
    """

    init: Callable[[jax.Array], Any]
    predict: Callable[[Any, Any], jax.Array]
    name: str
    prepare: Callable[[Any], Any] | None = None


def _task_batch(batch) -> TaskBatch:
    return v.container("batch", batch, TaskBatch, "an iclgd.tasks.TaskBatch (use sample_tasks)")


def _rep_batch(batch) -> RepresentationBatch:
    what = "an iclgd.tasks.RepresentationBatch (use sample_representation_tasks)"
    return v.container("batch", batch, RepresentationBatch, what)


def lsa_model(d: int, H: int = 1, *, init_std: float = 0.1, guess=None, bias: float = 0.0) -> Model:
    """Multi-head linear self-attention (Xie et al. eq. 3-6) with the initial guess
    ``y_q = x_q^T guess + bias`` (§5.1.3; default ``y_q = 0``).

    Parameters: ``{"WK", "WQ", "WV", "WP"}``, each ``(H, d+1, d+1)``
    (:func:`~iclgd.models.lsa.init_lsa`).
    """
    d, H = v.positive_int("d", d), v.positive_int("H", H)
    init_std = v.nonneg_float("init_std", init_std)
    bias = v.finite_float("bias", bias)
    if guess is not None:
        guess = jnp.asarray(v.array("guess", guess, "d", v.Dims(d=d)), float)

    def predict(params, batch):
        t = _task_batch(batch)
        y_q = None if guess is None and bias == 0.0 else linear_guess(t.x_q, guess, bias)
        return _lsa.lsa_predict(params, embed(t, y_q))

    return Model(lambda key: _lsa.init_lsa(key, d, H, init_std), predict, f"lsa(d={d}, H={H})")


def yq_lsa_model(d: int, H: int = 1, *, init_std: float = 0.1, w=None) -> Model:
    """y_q-LSA (Xie et al. Definition 3, eq. 11-12): LSA fed ``y_q = w^T x_q`` with ``w`` trained.

    Parameters: ``{"attn": LSA parameters, "w": (d,)}`` (:func:`~iclgd.models.lsa.init_yq_lsa`).
    """
    d, H = v.positive_int("d", d), v.positive_int("H", H)
    init_std = v.nonneg_float("init_std", init_std)
    if w is not None:  # checked now, not at the first init
        w = v.array("w", w, "d", v.Dims(d=d))

    def predict(params, batch):
        return _lsa.yq_lsa_predict(params, _task_batch(batch))

    return Model(
        lambda key: _lsa.init_yq_lsa(key, d, H, init_std, w), predict, f"yq_lsa(d={d}, H={H})"
    )


_FORMS = ("full", "pgd", "gdpp")


def linear_transformer_model(
    d: int,
    L: int,
    *,
    form: str = "full",
    init_std: float = 0.01,
    symmetrize: bool = False,
    layers: int | None = None,
) -> Model:
    """The ``L``-layer linear transformer of Ahn et al. on the zero-query embedding (eq. 1).

    ``form``: ``"full"`` (eq. 4, ``{"P", "Q"}`` each ``(L, d+1, d+1)``), ``"pgd"`` (eq. 9, ``{"A"}``
    ``(L, d, d)``: preconditioned GD) or ``"gdpp"`` (eq. 13, ``{"A", "B"}`` each ``(L, d, d)``:
    GD++). The prediction ``predict(params, batch)`` is ``-[Z_L]_{d+1, n+1}`` (eq. 5), ``(B,)``, for
    a :class:`~iclgd.tasks.TaskBatch` ``batch`` (e.g. :func:`~iclgd.tasks.sample_paper_prompts`).
    Forms ``"pgd"`` and ``"gdpp"`` also have ``prepare(batch)``, the batch's
    :class:`~iclgd.models.linear_transformer.PromptMoments`, which ``predict`` accepts in place of
    the batch (all that eq. 9 and eq. 13 read of a prompt:
    :func:`~iclgd.models.linear_transformer.gdpp_moments`).

    Args:
        d: input dimension, ``>= 1``.
        L: number of layers, ``>= 1``; ``params`` must have ``L`` layers.
        form: ``"full"``, ``"pgd"`` or ``"gdpp"``.
        init_std: scale of the initial entries, ``>= 0``. ``init(key)`` draws
            ``init_std * jax.random.normal(key, shape)``, shape ``(2, L, d+1, d+1)`` (``"full"``:
            ``P, Q``), ``(L, d, d)`` (``"pgd"``: ``A``) or ``(2, L, d, d)`` (``"gdpp"``: ``A, B``)
            (:func:`~iclgd.models.linear_transformer.init_sparse`); without ``symmetrize`` the
            drawn ``A_l`` are symmetrised, with it they are kept i.i.d.
        symmetrize: forms ``"pgd"``, ``"gdpp"`` only: predict with ``(A_l + A_l^T) / 2``
            (:func:`~iclgd.models.linear_transformer.symmetrize`), the paper's constraint that
            ``A_l`` is symmetric (eq. 9, 13) kept through unconstrained training.
        layers: ``k`` with ``1 <= k <= L``: only the first ``k`` layers act, the others are masked
            to zero (``A_l`` for eq. 9 / 13, ``P_l`` for eq. 4: the identity layer), so that the
            parameters keep the shape of ``L`` layers; ``None``: all ``L``.

    Returns:
        a :class:`Model`.
    """
    d, L = v.positive_int("d", d), v.positive_int("L", L)
    init_std = v.nonneg_float("init_std", init_std)
    if form not in _FORMS:
        raise ValueError(f"form must be one of {_FORMS}, got {form!r}")
    symmetrize = _lt._flag("symmetrize", symmetrize)
    if symmetrize and form == "full":
        raise ValueError(
            "symmetrize=True needs form 'pgd' or 'gdpp' (the symmetric A_l of eq. 9 / 13); "
            "form 'full' has no A_l"
        )
    if layers is not None:
        layers = v.positive_int("layers", layers)
        if layers > L:
            raise ValueError(f"layers must be an integer with 1 <= layers <= L = {L}, got {layers}")
    extra = (", symmetrize=True" if symmetrize else "") + (f", layers={layers}" if layers else "")
    name = f"linear_transformer(d={d}, L={L}, form={form!r}{extra})"
    acting = "P" if form == "full" else "A"

    def effective(params):
        _check_layer_count(params, acting, L)
        if symmetrize:
            params = _lt.symmetrize(params)
        if layers is not None:
            params = _lt.mask_layers(params, (jnp.arange(L) < layers).astype(int))
        return params

    if form == "full":

        def init(key):
            return _lt.init_linear_transformer(key, d, L, init_std)

        def predict(params, batch):
            return _lt.linear_transformer_predict(effective(params), _embed(batch))

    else:

        def init(key):
            return _lt.init_sparse(
                key, d, L, init_std, with_B=form == "gdpp", symmetric=not symmetrize
            )

        def predict(params, batch):
            if isinstance(batch, _lt.PromptMoments):
                return _lt.sparse_predict(effective(params), batch)
            return _lt.sparse_predict(effective(params), _embed(batch))

    if form == "full":
        return Model(init, predict, name)

    def prepare(batch):
        b = _task_batch(batch)
        return _lt.prompt_moments(embed_zero_query(b), b.y_target)

    return Model(init, predict, name, prepare)


def _embed(batch) -> jax.Array:
    """``Z_0`` of eq. 1, ``(B, d+1, n+1)``, materialised: behind the optimisation barrier XLA
    compiles the forward pass as on a given embedding, with the same float sums bit for bit
    (fused into the contractions, the concatenation changed their order)."""
    return jax.lax.optimization_barrier(embed_zero_query(_task_batch(batch)))


def _check_layer_count(params, key: str, L: int) -> None:
    """Raise unless ``params[key]`` (when present with 3 axes) has the model's ``L`` layers."""
    if isinstance(params, dict) and key in params:
        s = tuple(getattr(params[key], "shape", ()))
        if len(s) == 3 and s[0] != L:
            raise ValueError(
                f"params['{key}'] must have L = {L} layers (the model's L), got shape {s}"
            )


def softmax_attention_model(spec: RepresentationSpec, H: int, *, beta: float = 1.0) -> Model:
    """One-layer multi-head softmax attention of Yang et al. (eq. 5-8) on the task ``spec``.

    Parameters: ``{"Q": (H, d, d), "w": (H, K)}``; predictions ``(B, K)`` for every token.
    """
    spec = check_spec(spec)
    H = v.positive_int("H", H)
    beta = v.nonneg_float("beta", beta)

    def predict(params, batch):
        return _softmax.softmax_predict(params, spec, _rep_batch(batch).y)

    return Model(
        lambda key: _softmax.init_softmax(key, spec.d, spec.K, H, beta),
        predict,
        f"softmax_attention(K={spec.K}, N={spec.N}, H={H})",
    )


def transformer_model(
    spec: RepresentationSpec,
    *,
    d_model: int = 256,
    H: int = 8,
    d_ff: int = 512,
    L: int = 4,
    pos_encoding: str = "none",
    prompt_keys_only: bool = False,
) -> Model:
    """The pre-LayerNorm transformer of Yang et al. Sec. 4 on the embedding ``E^T`` of ``spec``.

    ``prompt_keys_only=True`` lets every position attend to the ``N`` prompt tokens only (as in
    eq. 5). Predictions ``(B, K)`` for every token.
    """
    spec = check_spec(spec)
    _transformer.check_config(d_model, H, d_ff, L, spec.K, pos_encoding)
    n_keys = spec.N if v.boolean("prompt_keys_only", prompt_keys_only) else None
    K, d_in = spec.K, spec.d + 1

    def init(key):
        return _transformer.init_transformer(
            key, d_in, d_model, H, d_ff, L, seq_len=K, pos_encoding=pos_encoding
        )

    def predict(params, batch):
        E = _rep_batch(batch).E
        return _transformer.transformer_predict(params, jnp.swapaxes(E, 1, 2), n_keys=n_keys)

    return Model(init, predict, f"transformer(d_model={d_model}, H={H}, L={L})")
