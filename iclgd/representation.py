"""In-context learning with representations: the task family and the ridge predictors of Part II.

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

Predictors the paper compares against (Sec. 3.2-3.3)
----------------------------------------------------
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

from . import checks as v
from .baselines import ridge_weights

__all__ = [
    "RepresentationSpec",
    "RepresentationBatch",
    "make_representation_spec",
    "random_dictionary",
    "sample_lambda",
    "representation_labels",
    "sample_representation_tasks",
    "embed_representation",
    "ridge_eq20",
    "ridge_eq25",
    "y_star",
    "y_best",
    "limit_matrix",
    "optimal_loss",
    "ridge_matrix",
    "label_moment",
    "prediction_gap",
    "ridge_gap_sweep",
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
    what = "an iclgd.representation.RepresentationSpec (use make_representation_spec)"
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
    y = v.array("y", y, "B N", v.Dims(N=spec.N))
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
    lam = v.array("lam", lam, "B m", v.Dims(m=spec.m))
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


# ----------------------------------------------------------------------------------------------
# Ridge regression over the basis (eq. 20, 25) and the predictors of eq. 22, 23, 27, 34.
# ----------------------------------------------------------------------------------------------


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


def limit_matrix(spec: RepresentationSpec) -> jax.Array:
    """The matrix ``A = (Z^T Z + m tau I_N)^{-1} (Z^T Z_hat + (m tau I_N, 0))`` of eq. 34.

    The trained transformer's ``A_hat(theta)`` (eq. 35) converges to ``A``;
    ``y_star_k = <y, A[:, k]>`` (eq. 27), so ``A[:, :N] = I_N`` for ``tau > 0``.

    At ``tau = 0`` (noise-free labels, Sec. 3.3) ``Z^T Z`` is singular whenever ``N > m``; the
    paper's ``A`` is then ``Z^dagger Z_hat`` (eq. 26, the Moore-Penrose pseudo-inverse), returned
    here for every ``N`` (for ``N <= m`` with ``Z`` of full column rank it equals eq. 34). Each
    column ``Z^dagger z_k`` is the minimum-norm solution of ``Z a = z_k``, a minimiser of the
    noise-free loss. For ``N > m`` it differs from ``lim_{tau -> 0+} A(tau) = (I_N, Z^dagger Z^Q)``
    in the first ``N`` columns (``Z^dagger Z != I_N``); both attain the same loss at ``tau = 0``.

    Returns:
        ``(N, K)``.

    Raises:
        ValueError: if ``tau > 0`` but ``Z^T Z + m tau I_N`` is numerically singular in ``Z``'s
            dtype (``m tau`` below rounding of ``Z^T Z``).
    """
    spec = check_spec(spec)
    if not v.is_tracer(spec.tau) and float(spec.tau) == 0.0:
        return _pinv_limit(spec.Z, spec.Z_hat)
    G, R = _gram_rhs(spec)
    _check_gram(G, spec)
    return _solve(G, R)


@jax.jit
def _pinv_limit(Z, Z_hat):
    """``Z^dagger Z_hat`` ``(N, K)``: eq. 34 at ``tau = 0`` (Sec. 3.3, eq. 26)."""
    return jnp.linalg.pinv(Z) @ Z_hat


@jax.jit
def _gram_rhs(spec) -> tuple[jax.Array, jax.Array]:
    """``G = Z^T Z + m tau I_N`` ``(N, N)`` and ``R = Z^T Z_hat + (m tau I_N, 0)`` ``(N, K)``."""
    Z, N, K, mt = spec.Z, spec.N, spec.K, spec.m * spec.tau
    G = Z.T @ Z + mt * jnp.eye(N)
    R = Z.T @ spec.Z_hat + jnp.concatenate([mt * jnp.eye(N), jnp.zeros((N, K - N))], axis=1)
    return G, R


def _check_gram(G, spec) -> None:
    """``G`` must be positive definite (relative eigenvalue floor, see
    :func:`iclgd.checks.spd_matrix`) in the coarser of its dtype and that of ``Z`` (a float32 ``Z``
    fixes ``G`` to float32 accuracy only), else solving with it returns garbage or NaN."""
    dt = max(np.dtype(G.dtype), np.dtype(spec.Z.dtype), key=lambda t: np.finfo(t).eps)
    hint = (
        "spec needs tau > 0 with m tau above the rounding of Z^T Z, "
        "or N <= m and Z of full column rank"
    )
    v.spd_matrix("Z^T Z + m tau I_N (of spec)", G, dtype=dt, hint=hint)


_solve = jax.jit(jnp.linalg.solve)


def optimal_loss(spec: RepresentationSpec) -> jax.Array:
    """``L* = inf_theta L(theta)``, the constant of Lemma 5 (eq. 36), under Assumption 1.

    ``L* = 1/(2K) [ sum_{k<=N} (||z_k||^2 + m tau - (Z^T z_k + m tau e_k)^T G^{-1}
    (Z^T z_k + m tau e_k)) + sum_{k>N} (||z_k||^2 + m tau - (Z^T z_k)^T G^{-1} Z^T z_k) ]`` with
    ``G = Z^T Z + m tau I_N``.

    Note: the paper's ``c'_k`` (query tokens, eq. 79 and the second sum of ``L*``) omits the
    ``+ m tau``; it is needed because eq. 77 gives ``m tau (||a_k||^2 + 1)`` for ``k > N`` -- the
    label noise ``lambda^T eps_k`` of an unseen token is independent of the prompt and irreducible
    (``E (lambda^T eps_k)^2 = m tau``). With it, ``L*`` equals the population loss at ``A_hat = A``
    (:func:`iclgd.models.softmax.population_loss_from_A`); each prompt-token term is exactly 0.

    Returns:
        ``()``.

    Raises:
        ValueError: if ``spec``'s ``lambda`` distribution violates
            Assumption 1 (mean 0, variance 1).
    """
    spec = check_spec(spec)
    if not v.is_tracer(spec.lam_std) and (
        not np.allclose(np.asarray(spec.lam_mean), 0.0) or not np.isclose(float(spec.lam_std), 1.0)
    ):
        raise ValueError(
            "spec must satisfy Assumption 1 (lam_mean = 0, lam_std = 1) for L* of Lemma 5, "
            f"got lam_std = {float(spec.lam_std)} and lam_mean with max |.| = "
            f"{float(np.abs(np.asarray(spec.lam_mean)).max())}"
        )
    G, R = _gram_rhs(spec)
    _check_gram(G, spec)
    return _optimal_loss(spec, G, R)


@jax.jit
def _optimal_loss(spec, G, R):
    quad = jnp.sum(R * jnp.linalg.solve(G, R), axis=0)  # (K,)
    const = jnp.sum(spec.Z_hat**2, axis=0) + spec.m * spec.tau
    return jnp.sum(const - quad) / (2 * spec.K)


# ----------------------------------------------------------------------------------------------
# Inference (Thm. 2, Sec. 3.2, Fig. 2-3): ridge predictors as matrices and exact expected gaps.
# ----------------------------------------------------------------------------------------------


def ridge_matrix(spec: RepresentationSpec, reg) -> jax.Array:
    """The ``(N, K)`` matrix ``M`` of the predictor ``y^T M = (y, (Z^Q)^T lam_reg)`` (eq. 22-23).

    ``lam_reg = argmin 1/(2N) sum_i (y_i - lam^T z_i)^2 + reg/2 ||lam||^2
    = (Z Z^T + N reg I_m)^{-1} Z y``, so ``M = (I_N, Z^T (Z Z^T + N reg I_m)^{-1} Z^Q)``.
    ``reg = m tau / N`` (eq. 20) gives eq. 34's ``A`` (App. C, eq. 66); ``reg = tau`` (eq. 25) gives
    the matrix of ``y_best`` (eq. 23).

    Args:
        spec: the task.
        reg: the ridge penalty ``> 0`` (in the ``1/(2N)``-normalised objective of eq. 20 and 25).

    Returns:
        ``(N, K)``.
    """
    spec = check_spec(spec)
    reg = v.scalar("reg", reg)
    if not v.is_tracer(reg) and not float(reg) > 0:
        raise ValueError(f"reg must be a ridge penalty > 0, got {float(reg)}")
    return _ridge_matrix(spec, jnp.asarray(reg, dtype=spec.Z.dtype))


@jax.jit
def _ridge_matrix(spec, reg):
    Z, m, N = spec.Z, spec.m, spec.N
    lam_map = jnp.linalg.solve(Z @ Z.T + N * reg * jnp.eye(m), Z)  # (m, N): y -> lam
    return jnp.concatenate([jnp.eye(N, dtype=Z.dtype), lam_map.T @ spec.ZQ], axis=1)


def label_moment(spec: RepresentationSpec, lam_mean=None, lam_std=None) -> jax.Array:
    """``E[y y^T]`` of the prompt labels ``y = (Z + eps^P)^T lambda`` (eq. 1, 73).

    With ``S = E[lambda lambda^T] = mu mu^T + sigma^2 I_m``: ``E[y y^T] = Z^T S Z + tau tr(S) I_N``.
    Under Assumption 1 (``S = I_m``) this is ``Z_bar^2 = Z^T Z + m tau I_N`` (eq. 12).

    Args:
        spec: the task.
        lam_mean: optional override of ``spec.lam_mean`` (scalar or ``(m,)``), e.g. ``1.0`` for the
            paper's out-of-domain prompts ``lambda ~ N(1_m, 4 I_m)``.
        lam_std: optional override of ``spec.lam_std``, e.g. ``2.0``.

    Returns:
        ``(N, N)``.
    """
    spec = check_spec(spec)
    mean, std = _lambda_law(spec, lam_mean, lam_std)
    return _label_moment(spec, mean, std)


@jax.jit
def _label_moment(spec, mean, std):
    Z, N = spec.Z, spec.N
    S = jnp.outer(mean, mean) + std**2 * jnp.eye(spec.m)
    return Z.T @ S @ Z + spec.tau * jnp.trace(S) * jnp.eye(N)


def prediction_gap(
    A1: jax.Array, A2: jax.Array, spec: RepresentationSpec, lam_mean=None, lam_std=None
) -> jax.Array:
    """The exact ``E_{lambda, eps} [1/K ||y^T A1 - y^T A2||_2^2]`` of two linear predictors.

    This is the normalisation of the paper's Fig. 2 (``1/K ||y_hat - y_star||^2`` with
    ``A1 = A_hat(theta)``, ``A2 = A``) and Fig. 3 (``1/K ||y_star - y_best||^2``); Theorem 2 bounds
    half of it, ``1/(2K) ||y_hat - y_star||^2``. It is ``1/K tr(D^T M D)`` with ``D = A1 - A2`` and
    ``M`` = :func:`label_moment`. Under Assumption 1 and ``A2 = A`` (eq. 34) it equals
    ``2 (L(A1) - L*)`` by Lemma 5.

    Args:
        A1, A2: ``(N, K)`` predictor matrices (``y_hat = y^T A``).
        spec: the task.
        lam_mean, lam_std: optional overrides of the law of ``lambda`` (see :func:`label_moment`).

    Returns:
        ``()``.
    """
    spec = check_spec(spec)
    dims = v.Dims(N=spec.N, K=spec.K)
    A1 = jnp.asarray(v.array("A1", A1, "N K", dims))
    A2 = jnp.asarray(v.array("A2", A2, "N K", dims))
    mean, std = _lambda_law(spec, lam_mean, lam_std)
    return _prediction_gap(A1 - A2, spec, mean, std)


@jax.jit
def _prediction_gap(D, spec, mean, std):
    M = _label_moment(spec, mean, std)
    return jnp.sum(D * (M @ D)) / spec.K


def ridge_gap_sweep(Z_hat: jax.Array, Ns, tau) -> jax.Array:
    """Fig. 3's gap ``E [1/K ||y_star - y_best||^2]`` for every prompt length in ``Ns`` (exact).

    The prompt is the first ``N`` of the ``K`` tokens with features ``Z_hat`` (as
    :func:`make_representation_spec` with the same key gives for every ``N``);
    ``lambda ~ N(0, I_m)`` (Assumption 1). ``y_star - y_best`` vanishes on the prompt tokens and is
    ``y^T Z^T Delta Z^Q`` on the others, ``Delta = (G + m tau I)^{-1} - (G + N tau I)^{-1}``,
    ``G = Z Z^T``; with ``E[y y^T] = Z^T Z + m tau I`` and ``G = sum_i g_i u_i u_i^T``::

        gap(N) = 1/K sum_i c_i (N - m)^2 tau^2 g_i / ((g_i + m tau) (g_i + N tau)^2),
        c_i = u_i^T Z^Q Z^Q^T u_i

    -- zero at ``N = m``; large where ``G`` has small eigenvalues ``g_i`` (of order ``m tau``),
    which it has near ``N = m`` (its smallest nonzero one is about ``(sqrt N - sqrt m)^2``).
    Computed for all ``N`` in one compiled loop (a mask selects the prompt) with linear
    solves, the same sum without the eigendecomposition.

    Args:
        Z_hat: ``(m, K)`` features of the whole dictionary.
        Ns: prompt lengths, each ``1 <= N < K``.
        tau: noise variance ``> 0``.

    Returns:
        ``(len(Ns),)``.
    """
    Z_hat = jnp.asarray(v.array("Z_hat", Z_hat, "m K"))
    m, K = Z_hat.shape
    Ns = np.asarray(Ns)
    if Ns.ndim != 1 or Ns.size == 0 or not np.issubdtype(Ns.dtype, np.integer):
        raise ValueError(f"Ns must be a non-empty 1-d sequence of ints, got {Ns!r}")
    if Ns.min() < 1 or Ns.max() >= K:
        raise ValueError(f"Ns must lie in 1 <= N < K = {K}, got {Ns.min()} .. {Ns.max()}")
    tau = v.positive_float("tau", tau)
    return _ridge_gap_sweep(Z_hat, jnp.asarray(Ns), jnp.asarray(tau, dtype=Z_hat.dtype))


@jax.jit
def _ridge_gap_sweep(Z_hat, Ns, tau):
    m, K = Z_hat.shape

    def one(N):
        w = (jnp.arange(K) < N).astype(Z_hat.dtype)  # prompt tokens
        G = (Z_hat * w) @ Z_hat.T  # Z Z^T
        GQ = (Z_hat * (1 - w)) @ Z_hat.T  # Z^Q Z^Q^T
        eye = jnp.eye(m, dtype=Z_hat.dtype)
        # Delta (G^2 + m tau G) Delta = (N - m)^2 tau^2 P2 G P1 P2 (all commute), P = (G + . I)^-1
        P2GQ = jnp.linalg.solve(G + N * tau * eye, GQ)
        P2GQP2 = jnp.linalg.solve(G + N * tau * eye, P2GQ.T)
        P1G = jnp.linalg.solve(G + m * tau * eye, G)
        return (N - m) ** 2 * tau**2 * jnp.sum(P1G.T * P2GQP2) / K

    return jax.lax.map(one, Ns)  # a vmapped batched solve hung on a second call (jax 0.10.2, CPU)
