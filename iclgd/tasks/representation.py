"""In-context learning with representations: the task family of Part II (Yang et al.).

Part II follows Yang, Huang, Liang, Chi, *In-Context Learning with Representations: Contextual
Generalization of Trained Transformers* (2024). Equation numbers below are the paper's.

The task family (Sec. 2, eq. 1-4)
---------------------------------
* A fixed **dictionary** ``V = {v_1, ..., v_K}`` of ``K`` distinct unit-norm tokens in ``R^d``.
* A fixed **representation map** ``f = (f_1, ..., f_m): R^d -> R^m``; write ``z_k := f(v_k)``.
  In the paper's experiments (Sec. 4) every token and its representation ``f(v_k)`` are drawn from a
  standard Gaussian, i.e. ``f`` is a random lookup table over the dictionary; any callable may be
  supplied instead.
* Per prompt, coefficients ``lambda ~ D_lambda`` (Assumption 1: independent entries, mean 0,
  variance 1; the experiments use ``N(0, I_m)`` in-domain and ``N(1_m, 4 I_m)`` out-of-domain).
* Labels of **all** ``K`` tokens (eq. 1)::

      y_k = lambda^T (f(v_k) + eps_k),   eps_k ~ i.i.d. N(0, tau I_m),   k in [K],

  so ``tau`` is the noise *variance* per feature coordinate.
* The prompt shows the **first** ``N`` tokens with their labels (the tokens are the same in every
  prompt; only the labels change). Embedding (eq. 2, 4)::

      E = (E^P, E^Q) = [[v_1 ... v_N, v_{N+1} ... v_K],
                        [y_1 ... y_N,   0     ...   0 ]]  in R^{(d+1) x K}.

Notation (eq. 12, 19): ``Z = (z_1, ..., z_N) in R^{m x N}`` (prompt features),
``Z^Q = (z_{N+1}, ..., z_K) in R^{m x (K-N)}`` (query features), ``Z_hat = (Z, Z^Q) in R^{m x K}``.

Predictors the paper compares against (Sec. 3.2-3.3; :mod:`iclgd.baselines`, :mod:`iclgd.exact`)
--------------------------------------------------------------------------------------------------
* eq. 20: the ridge regression the trained transformer implements, regulariser ``m tau / (2N)``;
  eq. 22: ``y_star = (y, (Z^Q)^T lambda_hat)``.
* eq. 25 (= eq. 24 by Lemma 4): the "best possible" ridge regression, regulariser ``tau / 2``;
  eq. 23: ``y_best = (y, (Z^Q)^T lambda_hat_tau)``.
* eq. 34: the matrix ``A in R^{N x K}`` the transformer learns, with ``y_star_k = <y, A[:, k]>``
  (eq. 27); it is the best predictor *linear in y* under Assumption 1 and attains the infimum ``L*``
  of the population loss (Lemma 5), computed by :func:`optimal_loss`.

Shapes: ``B`` batch (prompts), ``K`` dictionary size, ``N`` prompt length, ``d`` token dimension,
``m`` number of basis functions.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v

__all__ = [
    "RepresentationSpec",
    "RepresentationBatch",
    "make_representation_spec",
    "check_spec",
    "random_dictionary",
    "sample_lambda",
    "representation_labels",
    "sample_representation_tasks",
    "sample_training_prompts",
    "embed_representation",
]


class RepresentationSpec(NamedTuple):
    """A task of ICL with representations (a pytree of arrays; jit-safe: ``N`` is a shape).

    The dictionary is split into the ``N`` prompt tokens and the ``K - N`` query tokens so that
    every size is static under ``jit``.

    Attributes:
        tokens_P: ``(N, d)`` prompt tokens ``v_1 .. v_N`` (rows; the paper's ``V^T``, eq. 3).
        tokens_Q: ``(K-N, d)`` query tokens ``v_{N+1} .. v_K``.
        Z: ``(m, N)`` prompt features ``(f(v_1), ..., f(v_N))`` (eq. 12).
        ZQ: ``(m, K-N)`` query features ``(f(v_{N+1}), ..., f(v_K))`` (eq. 19).
        tau: ``()`` label-noise variance ``tau`` of eq. 1 (``eps_k ~ N(0, tau I_m)``).
        lam_mean: ``(m,)`` mean of ``lambda``'s distribution ``D_lambda``.
        lam_std: ``()`` standard deviation of each ``lambda_i``
            (``D_lambda = N(lam_mean, lam_std^2 I)``).
    """

    tokens_P: jax.Array
    tokens_Q: jax.Array
    Z: jax.Array
    ZQ: jax.Array
    tau: jax.Array
    lam_mean: jax.Array
    lam_std: jax.Array

    @property
    def N(self) -> int:
        """Prompt length ``N``."""
        return int(self.tokens_P.shape[0])

    @property
    def K(self) -> int:
        """Dictionary size ``K``."""
        return int(self.tokens_P.shape[0] + self.tokens_Q.shape[0])

    @property
    def d(self) -> int:
        """Token dimension ``d``."""
        return int(self.tokens_P.shape[1])

    @property
    def m(self) -> int:
        """Number of basis functions ``m``."""
        return int(self.Z.shape[0])

    @property
    def tokens(self) -> jax.Array:
        """``(K, d)`` the whole dictionary, rows ``v_1 .. v_K``."""
        return jnp.concatenate([self.tokens_P, self.tokens_Q], axis=0)

    @property
    def Z_hat(self) -> jax.Array:
        """``(m, K)`` all features ``Z_hat = (Z, Z^Q)`` (eq. 34)."""
        return jnp.concatenate([self.Z, self.ZQ], axis=1)

    def astype(self, dtype) -> RepresentationSpec:
        """The same spec with every field rounded to the floating ``dtype`` (the same draws:
        building the spec again under another precision draws other tokens).

        >>> import jax, jax.numpy as jnp
        >>> spec = make_representation_spec(jax.random.PRNGKey(0), K=6, d=3, m=2, N=4, tau=0.01)
        >>> spec.astype(jnp.float32).Z.dtype
        dtype('float32')
        """
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"dtype must be a floating dtype, got {dtype!r}") from None
        if not np.issubdtype(dt, np.floating):
            raise TypeError(f"dtype must be a floating dtype, got {dt}")
        return RepresentationSpec(*(jnp.asarray(x, dt) for x in self))


class RepresentationBatch(NamedTuple):
    """A batch of prompts of one :class:`RepresentationSpec` (a pytree of arrays).

    Attributes:
        lam: ``(B, m)`` the coefficient vector ``lambda`` of each prompt.
        eps: ``(B, K, m)`` the feature noise ``eps_k`` of every token (eq. 1).
        y_all: ``(B, K)`` labels of all ``K`` tokens, ``y_k = lambda^T (f(v_k) + eps_k)``.
        y: ``(B, N)`` prompt labels ``y = (y_1, ..., y_N)`` (= ``y_all[:, :N]``).
        E: ``(B, d+1, K)`` embeddings ``E = (E^P, E^Q)`` (eq. 2, 4).
    """

    lam: jax.Array
    eps: jax.Array
    y_all: jax.Array
    y: jax.Array
    E: jax.Array


def random_dictionary(key: jax.Array, K: int, d: int) -> jax.Array:
    """``K`` unit-norm tokens: standard Gaussian vectors (Sec. 4) normalised to
    ``||v_k||_2 = 1`` (Sec. 2).

    Args:
        key: PRNG key.
        K: dictionary size, ``K >= 2``.
        d: token dimension, ``d >= 1``.

    Returns:
        ``(K, d)`` tokens, one per row.
    """
    v.prng_key("key", key)
    K = v.positive_int("K", K, 2)
    d = v.positive_int("d", d)
    return _random_dictionary(key, K, d)


@partial(jax.jit, static_argnums=(1, 2))
def _random_dictionary(key, K, d):
    g = jax.random.normal(key, (K, d))
    return g / jnp.linalg.norm(g, axis=-1, keepdims=True)


@partial(jax.jit, static_argnums=(1, 2, 3))
def _draw_dictionary(key, K, d, m):
    z = jax.random.normal(key, (K, d + m))
    g = z[:, :d]
    return g / jnp.linalg.norm(g, axis=-1, keepdims=True), z[:, d:]


def _check_assumption3(tokens_P: np.ndarray) -> None:
    """Assumption 3: some coordinate of the prompt tokens takes ``N`` distinct values."""
    N = tokens_P.shape[0]
    for row in tokens_P.T:  # d coordinates; concrete numpy, not traced
        if np.unique(row).size == N:
            return
    raise ValueError(
        "tokens must satisfy Assumption 3: some coordinate of the prompt tokens v_1..v_N must take "
        "N distinct values (in particular the prompt tokens must be distinct)"
    )


def make_representation_spec(
    key: jax.Array | None,
    K: int,
    d: int,
    m: int,
    N: int,
    tau: float,
    *,
    tokens=None,
    f: Callable[[jax.Array], jax.Array] | None = None,
    features=None,
    lam_mean=0.0,
    lam_std: float = 1.0,
) -> RepresentationSpec:
    """Build and validate a :class:`RepresentationSpec`.

    Defaults follow the paper's experiments (Sec. 4): tokens standard Gaussian then normalised to
    unit norm, features ``f(v_k)`` i.i.d. standard Gaussian (a random lookup table),
    ``lambda ~ N(0, I_m)``. Fig. 2 uses ``K=200, d=100, m=20, N=30``; Fig. 3
    ``K=200, m=100, tau=0.01, N in 50..150``.

    Args:
        key: PRNG key for whatever is generated (tokens and/or features); may be ``None`` only if
            both ``tokens`` and one of ``f``/``features`` are given.
        K: dictionary size, ``K >= 2``.
        d: token dimension, ``d >= 1``.
        m: number of basis functions, ``m >= 1``.
        N: prompt length, ``1 <= N < K``.
        tau: label-noise variance ``tau >= 0`` of eq. 1 (the paper assumes ``tau > 0``; ``tau = 0``
            is the noise-free case of Sec. 3.3).
        tokens: optional ``(K, d)`` dictionary (rows unit-norm, satisfying Assumption 3).
        f: optional representation map, a callable ``(d,) -> (m,)`` (vmapped over the dictionary).
        features: optional ``(K, m)`` table of ``f(v_k)`` (rows); give at most
            one of ``f``, ``features``.
        lam_mean: mean of ``lambda``, a scalar or ``(m,)``.
        lam_std: standard deviation of each ``lambda_i``, ``>= 0``.

    Returns:
        The validated spec.

    Raises:
        ValueError: naming the argument, for a bad size, shape, non-unit-norm or repeated tokens,
            ``N >= K``, ``tau < 0``, non-finite values, or both ``f`` and ``features``.
    """
    K = v.positive_int("K", K, 2)
    d = v.positive_int("d", d)
    m = v.positive_int("m", m)
    N = v.positive_int("N", N)
    if N >= K:
        raise ValueError(
            f"N must satisfy 1 <= N < K = {K} (the prompt is the first N of K tokens), got {N}"
        )
    tau = v.nonneg_float("tau", tau)
    lam_std = v.nonneg_float("lam_std", lam_std)
    if f is not None and features is not None:
        raise ValueError(
            "give at most one of f (a callable) and features (a (K, m) table), got both"
        )
    if f is not None:
        v.function("f", f, "a callable mapping a (d,) token to (m,) features")
    need_key = tokens is None or (f is None and features is None)
    if need_key and key is None:
        raise ValueError("key must be a PRNG key when tokens or features are generated, got None")
    if key is not None:
        v.prng_key("key", key)
    dims = v.Dims(K=K, d=d, m=m)
    if tokens is not None:
        tokens = v.array("tokens", tokens, "K d", dims)
    if features is not None:
        features = v.array("features", features, "K m", dims)
    # One normal draw for tokens and features (row k: d token entries, then m feature entries).
    drawn_tokens, drawn_features = _draw_dictionary(key, K, d, m) if need_key else (None, None)

    if tokens is None:
        tokens = drawn_tokens
    else:
        tokens = jnp.asarray(tokens, dtype=float)
        norms = np.linalg.norm(np.asarray(tokens, dtype=np.float64), axis=-1)
        if not np.allclose(norms, 1.0, atol=1e-4):
            raise ValueError(
                "tokens must be unit-norm (||v_k||_2 = 1), "
                f"got norms in [{norms.min():.4g}, {norms.max():.4g}]"
            )
    tok_np = np.asarray(tokens)
    if np.unique(tok_np, axis=0).shape[0] != K:
        raise ValueError(
            f"tokens must be K = {K} distinct vectors (the dictionary V of Sec. 2), "
            "got repeated rows"
        )
    _check_assumption3(tok_np[:N])

    if f is not None:
        try:
            features = jax.vmap(f)(tokens)
        except Exception as exc:  # the callable itself is at fault
            raise ValueError(
                f"f must map a (d,) = ({d},) token to (m,) = ({m},) features; "
                f"calling it failed: {exc}"
            ) from exc
        v.array("f(tokens)", features, "K m", dims, what=f"(f must return (m,) = ({m},))")
    elif features is None:
        features = drawn_features
    features = jnp.asarray(features, dtype=float)
    spec = _assemble_spec(
        tokens,
        features,
        jnp.asarray(tau, dtype=float),
        jnp.zeros(m),
        jnp.asarray(lam_std, dtype=float),
        N,
    )
    return spec._replace(lam_mean=_lambda_law(spec, lam_mean, None)[0])


@partial(jax.jit, static_argnums=(5,))
def _assemble_spec(tokens, features, tau, lam_mean, lam_std, N):
    return RepresentationSpec(
        tokens_P=tokens[:N],
        tokens_Q=tokens[N:],
        Z=features[:N].T,
        ZQ=features[N:].T,
        tau=tau,
        lam_mean=lam_mean,
        lam_std=lam_std,
    )


def check_spec(spec, name: str = "spec") -> RepresentationSpec:
    """Check that ``spec`` is a :class:`RepresentationSpec` with consistent shapes and (when
    concrete) finite entries, ``tau >= 0`` and ``lam_std >= 0``; return it."""
    what = "an iclgd.tasks.RepresentationSpec (use make_representation_spec)"
    v.container(name, spec, RepresentationSpec, what)
    dims = v.Dims()
    v.array(f"{name}.tokens_P", spec.tokens_P, "N d", dims)
    v.array(f"{name}.tokens_Q", spec.tokens_Q, "KN d", dims)
    v.array(f"{name}.Z", spec.Z, "m N", dims)
    v.array(f"{name}.ZQ", spec.ZQ, "m KN", dims)
    v.array(f"{name}.lam_mean", spec.lam_mean, "m", dims)
    v.scalar(f"{name}.tau", spec.tau, nonneg=True)
    v.scalar(f"{name}.lam_std", spec.lam_std, nonneg=True)
    return spec


def _lambda_law(spec, lam_mean, lam_std) -> tuple[jax.Array, jax.Array]:
    """The mean ``(m,)`` and std ``()`` of lambda: the spec's, unless overridden (validated)."""
    m = spec.m
    mean = spec.lam_mean if lam_mean is None else jnp.asarray(v.array("lam_mean", lam_mean), float)
    if mean.ndim == 0:
        mean = jnp.full((m,), mean)
    v.shape("lam_mean", mean, (m,), f"() or ({m},)")
    std = spec.lam_std if lam_std is None else jnp.asarray(v.nonneg_float("lam_std", lam_std))
    return mean, std


def sample_lambda(
    key: jax.Array, spec: RepresentationSpec, batch: int, lam_mean=None, lam_std=None
) -> jax.Array:
    """Draw ``lambda ~ N(lam_mean, lam_std^2 I_m)``, one per prompt (Sec. 4).

    Args:
        key: PRNG key.
        spec: the task.
        batch: number of prompts ``B >= 1``.
        lam_mean: optional override of ``spec.lam_mean`` (scalar or ``(m,)``), e.g. ``1.0`` for the
            paper's out-of-domain test set ``N(1_m, 4 I_m)``.
        lam_std: optional override of ``spec.lam_std``, e.g. ``2.0`` for the out-of-domain set.

    Returns:
        ``(B, m)`` coefficient vectors.
    """
    v.prng_key("key", key)
    spec = check_spec(spec)
    batch = v.positive_int("batch", batch)
    mean, std = _lambda_law(spec, lam_mean, lam_std)
    return _sample_lambda(key, mean, std, batch)


@partial(jax.jit, static_argnums=(3,))
def _sample_lambda(key, mean, std, batch):
    return mean + std * jax.random.normal(key, (batch, mean.shape[0]))


def embed_representation(spec: RepresentationSpec, y: jax.Array) -> jax.Array:
    """The embedding ``E = (E^P, E^Q)`` of eq. 2 and 4.

    Args:
        spec: the task.
        y: ``(B, N)`` prompt labels.

    Returns:
        ``(B, d+1, K)``: column ``k`` is ``(v_k, y_k)`` for ``k <= N`` and
        ``(v_k, 0)`` for ``k > N``.
    """
    spec = check_spec(spec)
    y = v.array("y", y, "B N", v.Dims(N=spec.N), promote=True)
    return _embed(spec, jnp.asarray(y))


@jax.jit
def _embed(spec, y):
    B, N, K = y.shape[0], spec.N, spec.K
    V = jnp.broadcast_to(spec.tokens.T, (B, spec.d, K))
    labels = jnp.concatenate([y, jnp.zeros((B, K - N), dtype=y.dtype)], axis=1)
    return jnp.concatenate([V, labels[:, None, :]], axis=1)


def representation_labels(
    key: jax.Array, spec: RepresentationSpec, lam: jax.Array
) -> RepresentationBatch:
    """Labels of all ``K`` tokens for given coefficients ``lambda`` (eq. 1),
    noise drawn from ``key``.

    Useful at inference time, where ``lambda`` may lie outside the training distribution (Thm. 2).

    Args:
        key: PRNG key for the noise ``eps``.
        spec: the task.
        lam: ``(B, m)`` coefficient vectors.

    Returns:
        A :class:`RepresentationBatch`.
    """
    v.prng_key("key", key)
    spec = check_spec(spec)
    lam = v.array("lam", lam, "B m", v.Dims(m=spec.m), promote=True)
    return _labels(key, spec, jnp.asarray(lam))


@jax.jit
def _labels(key, spec, lam):
    B, K, m = lam.shape[0], spec.K, spec.m
    eps = jnp.sqrt(spec.tau) * jax.random.normal(key, (B, K, m))
    return _batch_from(spec, lam, eps)


def _batch_from(spec, lam, eps):
    N = spec.N
    feats = spec.Z_hat.T  # (K, m), row k = z_k
    y_all = jnp.einsum("bi,bki->bk", lam, feats[None] + eps)
    y = y_all[:, :N]
    return RepresentationBatch(lam=lam, eps=eps, y_all=y_all, y=y, E=_embed(spec, y))


def sample_representation_tasks(
    key: jax.Array, spec: RepresentationSpec, batch: int, lam_mean=None, lam_std=None
) -> RepresentationBatch:
    """Draw ``batch`` prompts: ``lambda ~ D_lambda`` per prompt, then labels of all tokens (eq. 1).

    The dictionary, ``f`` and ``N`` are fixed by ``spec``; only ``lambda`` and
    the noise differ per prompt.

    Args:
        key: PRNG key.
        spec: the task (:func:`make_representation_spec`).
        batch: number of prompts ``B >= 1``.
        lam_mean: optional override of the mean of ``lambda`` (see :func:`sample_lambda`).
        lam_std: optional override of the standard deviation of ``lambda``.

    Returns:
        A :class:`RepresentationBatch` with ``lam (B, m)``, ``eps (B, K, m)``, ``y_all (B, K)``,
        ``y (B, N)``, ``E (B, d+1, K)``.
    """
    v.prng_key("key", key)
    spec = check_spec(spec)
    batch = v.positive_int("batch", batch)
    mean, std = _lambda_law(spec, lam_mean, lam_std)
    return _sample(key, spec, mean, std, batch)


@partial(jax.jit, static_argnums=(4,))
def _sample(key, spec, mean, std, batch):
    # One normal draw for lambda and eps: a single threefry kernel compiles much faster under jit.
    K, m = spec.K, spec.m
    z = jax.random.normal(key, (batch, m + K * m))
    lam = mean + std * z[:, :m]
    eps = jnp.sqrt(spec.tau) * z[:, m:].reshape(batch, K, m)
    return _batch_from(spec, lam, eps)


def sample_training_prompts(
    key: jax.Array, spec: RepresentationSpec, index: jax.Array
) -> RepresentationBatch:
    """Prompts ``index`` of the fixed training set ``key`` (Sec. 4: "the training set with 10000
    samples"): prompt ``i`` is :func:`sample_representation_tasks` of one prompt from
    ``jax.random.fold_in(key, i)``.

    The key alone defines a training set of any size, and a minibatch costs only its own prompts
    (10,000 prompts of the paper's sizes would take 1.6 GB of embeddings in float64). Jittable;
    ``index`` may be traced (:func:`iclgd.training.training_set_loss` draws it at every step).

    Args:
        key: PRNG key of the training set.
        spec: the task.
        index: ``(B,)`` non-negative integers, the prompts to return.

    Returns:
        A :class:`RepresentationBatch` of ``B`` prompts; the same ``(key, i)`` gives the same
        prompt in every call.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from iclgd import tasks
        >>> spec = tasks.make_representation_spec(jax.random.key(0), K=6, d=4, m=2, N=3, tau=0.1)
        >>> a = tasks.sample_training_prompts(jax.random.key(1), spec, jnp.array([0, 5]))
        >>> b = tasks.sample_training_prompts(jax.random.key(1), spec, jnp.array([5]))
        >>> bool(jnp.all(a.y_all[1] == b.y_all[0]))
        True
    """
    v.prng_key("key", key)
    spec = check_spec(spec)
    if not isinstance(index, jax.core.Tracer):
        index = v.array("index", index, "B")
        if not jnp.issubdtype(jnp.asarray(index).dtype, jnp.integer):
            raise v.ArgumentTypeError(f"index must hold integers, got {jnp.asarray(index).dtype}")
        if index.size and int(jnp.min(index)) < 0:
            raise ValueError(f"index must be >= 0, got min {int(jnp.min(index))}")
    return _training_prompts(key, spec, jnp.asarray(index))


@jax.jit
def _training_prompts(key, spec, index):
    mean, std = spec.lam_mean, spec.lam_std
    one = jax.vmap(lambda i: _sample(jax.random.fold_in(key, i), spec, mean, std, 1))(index)
    return jax.tree.map(lambda a: a[:, 0], one)
