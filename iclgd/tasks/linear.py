"""In-context linear-regression tasks: Parts I and III (Xie et al.; Ahn et al.).

A *prior* fixes the task distribution:

* inputs ``x ~ N(0, Sigma)`` (context inputs ``x_1 .. x_C`` and the query ``x_q``, i.i.d.),
* task weights ``w_hat ~ N(mu, Omega)``, one per prompt,
* labels ``y_i = <w_hat, x_i> + noise_i`` with ``noise_i ~ N(0, noise_std**2)``; the query target
  ``y = <w_hat, x_q> + noise``.

Part I (Xie et al.) uses ``mu = w_star``, ``Sigma = Omega = I``, no noise; Part III (Ahn et al.)
uses ``mu = 0``, ``Sigma = U Lambda U^T`` and ``Omega = I`` or ``Sigma^{-1}``.

A :class:`TaskBatch` holds the raw arrays; :func:`embed` builds Part I's embedding (eq. 2) with any
initial guess ``y_q``, and :func:`embed_zero_query` builds Part III's embedding
(eq. 1), i.e. ``y_q = 0``.

Part III's prompts (Ahn et al. Secs. 5.3, 6.1): :func:`sample_paper_prompts` draws a Haar-rotated
``Sigma = U^T D^2 U`` per key (:func:`paper_prompt_sigma`) and a :class:`TaskBatch` with
``x ~ N(0, Sigma)``, ``w* ~ N(0, Sigma^{-1})``; :func:`paper_sigma` draws such a ``Sigma`` alone.

Shapes: ``B`` batch (prompts), ``C`` context length, ``d`` input dimension.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v

__all__ = [
    "Prior",
    "TaskBatch",
    "make_prior",
    "check_prior",
    "check_batch",
    "sample_tasks",
    "sample_tasks_reference",
    "standard_normal",
    "embed",
    "embed_zero_query",
    "linear_guess",
    "unembed",
    "haar_orthogonal",
    "paper_sigma",
    "paper_prompt_sigma",
    "sample_paper_prompts",
]


class Prior(NamedTuple):
    """Task distribution of in-context linear regression (a pytree of arrays).

    Attributes:
        mu: ``(d,)`` prior mean of the task weights (Part I's ``w_star``).
        Sigma: ``(d, d)`` covariance of the inputs ``x``.
        Omega: ``(d, d)`` covariance of the task weights ``w_hat``.
        noise_std: ``()`` standard deviation of the label noise (0 = noise-free).
        L_Sigma: ``(d, d)`` lower Cholesky factor of ``Sigma`` (cached for sampling).
        L_Omega: ``(d, d)`` factor of ``Omega`` (``L L^T = Omega``): its PSD square root, the
            one factor that every CPU computes alike.
    """

    mu: jax.Array
    Sigma: jax.Array
    Omega: jax.Array
    noise_std: jax.Array
    L_Sigma: jax.Array
    L_Omega: jax.Array

    @property
    def d(self) -> int:
        """Input dimension ``d``."""
        return int(self.mu.shape[-1])


class TaskBatch(NamedTuple):
    """A batch of ICL regression prompts (a pytree of arrays).

    Attributes:
        X: ``(B, C, d)`` context inputs, row ``i`` is ``x_i``.
        y: ``(B, C)`` context labels.
        x_q: ``(B, d)`` query inputs.
        y_target: ``(B,)`` the query's true label (what the model must predict).
        w: ``(B, d)`` the task weights ``w_hat`` of each prompt.
    """

    X: jax.Array
    y: jax.Array
    x_q: jax.Array
    y_target: jax.Array
    w: jax.Array


def make_prior(
    d: int,
    mu=None,
    Sigma=None,
    Omega=None,
    noise_std: float = 0.0,
) -> Prior:
    """Build and validate a :class:`Prior`.

    Args:
        d: input dimension, ``d >= 1``.
        mu: ``(d,)`` prior mean of the task weights; default zeros.
        Sigma: ``(d, d)`` positive-definite input covariance; default identity.
        Omega: ``(d, d)`` positive-definite (or semi-definite) task covariance; default identity.
        noise_std: label-noise standard deviation, ``>= 0``.

    Raises:
        ValueError: naming the argument, if a shape is wrong, a covariance is not symmetric
            positive definite, ``noise_std < 0``, a value is not finite, or an entry (of ``mu``,
            ``Sigma``, ``Omega``, or ``noise_std``) is larger than ``max ** (1/4)`` of the stored
            dtype (``4.3e9`` in float32): the prompts' fourth moments, which the exact risks and
            the losses square, would overflow.

    Example:
        >>> prior = make_prior(10, mu=jnp.ones(10))   # Part I, ||w_star||^2 = 10
    """
    d = v.positive_int("d", d)
    dims = v.Dims(d=d)
    for name, x in (("mu", mu), ("noise_std", noise_std)):
        _check_magnitude(name, x)
    for name, x in (("Sigma", Sigma), ("Omega", Omega)):  # overflow: spd_matrix says so
        _check_magnitude(name, x, defer_overflow=True)
    mu = jnp.zeros(d) if mu is None else jnp.asarray(v.array("mu", mu, "d", dims), dtype=float)
    Sigma = (
        jnp.eye(d) if Sigma is None else jnp.asarray(v.spd_matrix("Sigma", Sigma, d), dtype=float)
    )
    if Omega is None:
        Omega = jnp.eye(d)
        L_Omega = jnp.eye(d)
    else:
        v.spd_matrix("Omega", Omega, d, psd=True)
        Omega = jnp.asarray(Omega, dtype=float)
        L_Omega = jnp.asarray(_psd_factor(np.asarray(Omega, dtype=np.float64)), dtype=float)
    noise_std = v.nonneg_float("noise_std", noise_std)
    Sigma = (Sigma + Sigma.T) / 2
    L_Sigma = jnp.linalg.cholesky(Sigma)
    if not v.is_tracer(L_Sigma) and not bool(jnp.all(jnp.isfinite(L_Sigma))):  # never NaN samples
        raise ValueError("Sigma must be positive definite in the dtype it is stored in")
    return Prior(
        mu=mu,
        Sigma=Sigma,
        Omega=Omega,
        noise_std=jnp.asarray(noise_std, dtype=float),
        L_Sigma=L_Sigma,
        L_Omega=L_Omega,
    )


def _check_magnitude(name: str, x, defer_overflow: bool = False) -> None:
    """Raise unless every finite entry of ``x`` (concrete) is at most ``max ** (1/4)`` of the
    stored dtype, so that the fourth moments of the prompts stay finite (``defer_overflow``:
    entries that overflow the dtype itself are left to the caller's finiteness check)."""
    if x is None or v.is_tracer(x):
        return
    try:
        a = np.asarray(x)
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            return  # not real numbers: the other checks say what is expected
        a = np.abs(a.astype(np.float64))
    except (TypeError, ValueError):
        return
    top = float(np.finfo(v.float_dtype()).max)
    lim = top**0.25
    # entries that are not finite in the stored dtype are reported by the finiteness checks
    keep = np.isfinite(a) & ((a <= top) | (not defer_overflow))
    big = float(np.max(np.where(keep, a, 0.0), initial=0.0))
    if big > lim:
        raise ValueError(
            f"{name} must have entries of magnitude at most {lim:.3g} (the fourth moments of the "
            f"prompts must be finite in {v.float_dtype()}), got max |{name}| = {big:.3g}"
        )


_CHECKED: list = []  # the last priors that passed check_prior (identity cache)


def check_prior(prior, name: str = "prior") -> Prior:
    """Check that ``prior`` is a :class:`Prior` with consistent shapes and (when concrete) finite
    entries and ``noise_std >= 0``; return it. Raises ``ArgumentTypeError`` for another type.

    A concrete prior that passed is remembered (the last 16, by identity; a :class:`Prior` is
    immutable), so the checks of the functions it is passed on to cost nothing."""
    if any(p is prior for p in _CHECKED):
        return prior
    v.container(name, prior, Prior, "an iclgd.tasks.Prior (use make_prior)")
    dims = v.Dims()
    v.array(f"{name}.mu", prior.mu, "d", dims)
    for field in ("Sigma", "Omega", "L_Sigma", "L_Omega"):
        v.array(f"{name}.{field}", getattr(prior, field), "d d", dims)
    v.scalar(f"{name}.noise_std", prior.noise_std, nonneg=True)
    for field in ("mu", "Sigma", "Omega"):
        _check_magnitude(f"{name}.{field}", getattr(prior, field))
    _check_magnitude(f"{name}.noise_std", prior.noise_std)
    if not any(v.is_tracer(x) for x in prior):
        _CHECKED[:] = [prior, *_CHECKED[:15]]
    return prior


def check_batch(tasks, name: str = "tasks", dims: dict | None = None) -> tuple[int, int, int]:
    """Check that ``tasks`` is a :class:`TaskBatch` whose ``X (B, C, d)``, ``y (B, C)`` and
    ``x_q (B, d)`` agree, with every size >= 1 and (when concrete) finite entries; return
    ``(B, C, d)`` (also bound in ``dims``, see :mod:`iclgd.checks`)."""
    v.container(name, tasks, TaskBatch, "an iclgd.tasks.TaskBatch (use sample_tasks)")
    dims = v.Dims() if dims is None else dims
    v.array(f"{name}.X", tasks.X, "B C d", dims)
    v.array(f"{name}.y", tasks.y, "B C", dims)
    v.array(f"{name}.x_q", tasks.x_q, "B d", dims)
    return dims["B"], dims["C"], dims["d"]


def _psd_factor(m: np.ndarray) -> np.ndarray:
    """The factor ``L = m^{1/2}`` (``L L^T = m``) of a PSD matrix: its unique PSD square root.

    Unique, so the same on every CPU: the eigenvectors that LAPACK returns are not (their signs,
    and the basis of a repeated eigenvalue's eigenspace, change with the CPU's kernels), and
    ``vec * sqrt(eig)`` drew different task weights from the same key on AVX2 and AVX-512 CPUs.
    """
    m = (m + m.T) / 2
    eig, vec = np.linalg.eigh(m)
    root = (vec * np.sqrt(np.clip(eig, 0.0, None))) @ vec.T
    return (root + root.T) / 2


# ----------------------------------------------------------------------------------------------
# Fast standard normals (bit-identical to jax.random.normal for threefry keys)
# ----------------------------------------------------------------------------------------------


def _rotl32(x: jax.Array, r: int) -> jax.Array:
    return jax.lax.shift_left(x, np.uint32(r)) | jax.lax.shift_right_logical(x, np.uint32(32 - r))


def _threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), unrolled: the same function as JAX's
    ``threefry2x32`` primitive, written with elementwise ``lax`` ops so that XLA fuses it into one
    loop (on CPU JAX lowers the primitive as a rolled 5-iteration loop, which is ~10x slower)."""
    rot0, rot1 = (13, 15, 26, 6), (17, 29, 16, 24)
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x1 = x1 + ks[0]
    x2 = x2 + ks[1]
    for i, (rots, a, b) in enumerate(
        ((rot0, 1, 2), (rot1, 2, 0), (rot0, 0, 1), (rot1, 1, 2), (rot0, 2, 0))
    ):
        for r in rots:
            x1 = x1 + x2
            x2 = x1 ^ _rotl32(x2, r)
        x1 = x1 + ks[a]
        x2 = x2 + ks[b] + np.uint32(i + 1)
    return x1, x2


def _is_threefry_key(key) -> bool:
    dt = getattr(key, "dtype", None)
    if dt is None:
        return False
    if jax.dtypes.issubdtype(dt, jax.dtypes.prng_key):
        return str(jax.random.key_impl(key)) == "threefry2x32"
    # legacy raw uint32 keys follow the default implementation
    return (
        dt == np.uint32
        and key.shape[-1:] == (2,)
        and jax.config.jax_default_prng_impl == "threefry2x32"
    )


@partial(jax.jit, static_argnums=1)
def standard_normal(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """``jax.random.normal(key, shape)`` (default float dtype), computed faster for threefry keys.

    For a threefry key this reproduces JAX's algorithm step by step -- partitionable threefry bits
    of the flat counter ``0 .. n-1`` (``jax_threefry_partitionable``, JAX's default), a uniform on
    ``[nextafter(-1, 0), 1)`` from the top mantissa bits, ``sqrt(2) erfinv(u)`` -- so the numbers
    are bit-identical to ``jax.random.normal`` (tested), and exactly ``N(0, 1)`` in distribution up
    to floating-point resolution. Two changes make it ~5x faster on CPU: the unrolled hash (see
    :func:`_threefry2x32`), and computing on the flat counter inside a 2-step ``lax.scan`` so that
    the normals are materialised once, then reshaped (a bitcast), instead of being fused into every
    consumer over a ``(B, C+1, d)`` index space with a short last axis, which defeats vectorisation.
    Other key implementations (rbg, unsafe_rbg) and non-default settings fall back to
    ``jax.random.normal``.
    """
    v.prng_key("key", key)
    shape = tuple(v.positive_int("shape", s, 0) for s in shape)
    n = int(np.prod(shape))
    if not _is_threefry_key(key) or not jax.config.jax_threefry_partitionable or n >= 2**32:
        return jax.random.normal(key, shape)
    dtype = jnp.dtype(jax.dtypes.canonicalize_dtype(float))
    finfo = jnp.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    ud = np.uint32 if nbits == 32 else np.uint64
    one = np.array(1.0, dtype).view(ud)
    lo_v = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    span = np.array(1.0, dtype) - lo_v  # computed as JAX does, in the float dtype
    data = key if key.dtype == np.uint32 else jax.random.key_data(key)
    k1, k2 = data[..., 0], data[..., 1]
    chunks = 2 if n >= 4096 else 1
    m = -(-n // chunks)

    def chunk(carry, offset):
        ctr = (
            jax.lax.iota(np.uint32, m) + offset
        )  # flat counter, as jax's iota_2x32_shape (n < 2^32)
        b1, b2 = _threefry2x32(k1, k2, jnp.zeros_like(ctr), ctr)
        if nbits == 32:
            bits = b1 ^ b2
        else:
            bits = jax.lax.shift_left(b1.astype(ud), ud(32)) | b2.astype(ud)
        fbits = jax.lax.shift_right_logical(bits, ud(nbits - nmant)) | ud(one)
        floats = jax.lax.bitcast_convert_type(fbits, dtype) - dtype.type(1.0)
        u = jax.lax.max(dtype.type(lo_v), floats * dtype.type(span) + dtype.type(lo_v))
        return carry, jax.lax.mul(dtype.type(np.sqrt(2)), jax.lax.erf_inv(u))

    # The scan materialises the flat normals: without it XLA fuses the whole hash into each
    # consumer (a slice of a (B, C+1, d) array), where a short last axis defeats vectorisation.
    _, z = jax.lax.scan(chunk, None, jnp.arange(chunks, dtype=np.uint32) * np.uint32(m))
    return z.reshape(-1)[:n].reshape(shape)


def _is_concrete_identity(m) -> bool:
    if isinstance(m, jax.core.Tracer):
        return False
    a = np.asarray(m)
    return a.ndim == 2 and a.shape[0] == a.shape[1] and np.array_equal(a, np.eye(a.shape[0]))


def _is_concrete_zero(s) -> bool:
    return not isinstance(s, jax.core.Tracer) and float(np.asarray(s)) == 0.0


def sample_tasks(key: jax.Array, prior: Prior, C: int, batch: int) -> TaskBatch:
    """Draw ``batch`` independent prompts with ``C`` context examples each.

    The key is split into three (inputs, task weights, label noise); each draws standard normals
    that are bit-identical to ``jax.random.normal`` on the same key, but for threefry keys (the
    default) they are computed by a fused, unrolled threefry (:func:`standard_normal`), several
    times faster on CPU.
    Multiplications by an identity ``L_Sigma`` / ``L_Omega`` and the noise draw when
    ``noise_std == 0`` are skipped when the prior is concrete (they would not change any number).

    Args:
        key: a JAX PRNG key (any implementation: threefry, rbg, unsafe_rbg).
        prior: the task distribution (:func:`make_prior`).
        C: context length, ``C >= 1``.
        batch: number of prompts ``B >= 1``.

    Returns:
        A :class:`TaskBatch` with ``X (B, C, d)``, ``y (B, C)``, ``x_q (B, d)``,
        ``y_target (B,)``, ``w (B, d)``.
    """
    v.prng_key("key", key)
    check_prior(prior)
    C = v.positive_int("C", C)
    batch = v.positive_int("batch", batch)
    flags = (
        _is_concrete_identity(prior.L_Sigma),
        _is_concrete_identity(prior.L_Omega),
        _is_concrete_zero(prior.noise_std),
    )
    return _sample_tasks_jit(key, prior, C, batch, flags)


@partial(jax.jit, static_argnums=(2, 3, 4))
def _sample_tasks_jit(
    key, prior: Prior, C: int, batch: int, flags: tuple[bool, bool, bool]
) -> TaskBatch:
    """The body of :func:`sample_tasks`, jitted (so that eager calls are
    compiled once per shape)."""
    sigma_is_identity, omega_is_identity, noise_free = flags
    d = prior.d
    k_x, k_w, k_n = jax.random.split(key, 3)
    # One draw for context and query inputs: (B, C+1, d).
    z = standard_normal(k_x, (batch, C + 1, d))
    xs = z if sigma_is_identity else z @ prior.L_Sigma.T
    eps = standard_normal(k_w, (batch, d))
    w = prior.mu + (eps if omega_is_identity else eps @ prior.L_Omega.T)
    ys = jnp.einsum("bcd,bd->bc", xs, w)
    if not noise_free:
        ys = ys + prior.noise_std * standard_normal(k_n, ys.shape)
    return TaskBatch(X=xs[:, :C], y=ys[:, :C], x_q=xs[:, C], y_target=ys[:, C], w=w)


def sample_tasks_reference(key: jax.Array, prior: Prior, C: int, batch: int) -> TaskBatch:
    """The straightforward version of :func:`sample_tasks` (``jax.random.normal`` everywhere).

    Bit-identical to :func:`sample_tasks` for threefry keys but ~5x slower on CPU; kept as the
    reference that the tests compare :func:`sample_tasks` with, and that ``benchmarks/`` times.
    """
    v.prng_key("key", key)
    check_prior(prior)
    C = v.positive_int("C", C)
    batch = v.positive_int("batch", batch)
    d = prior.d
    k_x, k_w, k_n = jax.random.split(key, 3)
    z = jax.random.normal(k_x, (batch, C + 1, d))
    xs = z @ prior.L_Sigma.T
    eps = jax.random.normal(k_w, (batch, d))
    w = prior.mu + eps @ prior.L_Omega.T
    ys = jnp.einsum("bcd,bd->bc", xs, w)
    ys = ys + prior.noise_std * jax.random.normal(k_n, ys.shape)
    return TaskBatch(X=xs[:, :C], y=ys[:, :C], x_q=xs[:, C], y_target=ys[:, C], w=w)


def linear_guess(x_q: jax.Array, guess=None, bias=0.0) -> jax.Array:
    """Initial guess ``y_q = x_q^T guess + bias`` (Part I Sec. 5.1.3).

    Args:
        x_q: ``(B, d)`` query inputs.
        guess: ``(d,)`` linear part ``y_q_guess``; default zeros.
        bias: scalar ``y_q_bias``.

    Returns:
        ``(B,)`` initial guesses.
    """
    dims = v.Dims()
    x_q = v.array("x_q", x_q, "B d", dims, promote=True)
    out = jnp.zeros(x_q.shape[:-1]) + v.finite_float("bias", bias)
    if guess is not None:
        out = out + x_q @ jnp.asarray(v.array("guess", guess, "d", dims), dtype=float)
    return out


def embed(tasks: TaskBatch, y_q=None) -> jax.Array:
    """Part I's embedding (Xie et al. eq. 2) with an initial guess ``y_q``.

    ``E = [[X^T, x_q], [y^T, y_q]]`` of shape ``(B, d+1, C+1)``.

    Args:
        tasks: a :class:`TaskBatch`.
        y_q: ``(B,)`` initial guesses, or a scalar broadcast to all prompts; default 0.

    Returns:
        ``(B, d+1, C+1)`` embeddings.
    """
    B, C, d = check_batch(tasks)
    X, y, x_q = tasks.X, tasks.y, tasks.x_q
    if y_q is None:
        y_q = jnp.zeros((B,))
    else:
        y_q = jnp.asarray(v.array("y_q", y_q), dtype=float)
        if y_q.ndim == 0:
            y_q = jnp.full((B,), y_q)
        v.shape("y_q", y_q, (B,), f"({B},) or a scalar")
    top = jnp.concatenate([jnp.swapaxes(X, 1, 2), x_q[:, :, None]], axis=2)  # (B, d, C+1)
    bottom = jnp.concatenate([y, y_q[:, None]], axis=1)[:, None, :]  # (B, 1, C+1)
    return jnp.concatenate([top, bottom], axis=1)


def embed_zero_query(tasks: TaskBatch) -> jax.Array:
    """Part III's embedding (Ahn et al. eq. 1): ``Z_0 = [[x_1 .. x_n, x_q], [y_1 .. y_n, 0]]``.

    Returns:
        ``(B, d+1, C+1)`` embeddings (identical to :func:`embed` with ``y_q = 0``).
    """
    return embed(tasks, None)


def unembed(E: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Split an embedding ``(B, d+1, C+1)`` into ``X (B, C, d)``, ``y (B, C)``, ``x_q (B, d)``,
    ``y_q (B,)``."""
    E = v.array("E", E, "B d+1 C+1")
    if E.shape[1] < 2 or E.shape[2] < 2:
        raise ValueError(
            f"E must have shape (B, d+1, C+1) with d, C >= 1, got shape {tuple(E.shape)}"
        )
    X = jnp.swapaxes(E[:, :-1, :-1], 1, 2)
    return X, E[:, -1, :-1], E[:, :-1, -1], E[:, -1, -1]


def haar_orthogonal(key: jax.Array, d: int) -> jax.Array:
    """A Haar-distributed ``(d, d)`` orthogonal matrix (QR of a Gaussian matrix, signs fixed by
    the diagonal of ``R``, so that the law is uniform)."""
    v.prng_key("key", key)
    d = v.positive_int("d", d)
    G = jax.random.normal(key, (d, d))
    Qm, R = jnp.linalg.qr(G)
    return Qm * jnp.sign(jnp.diag(R))[None, :]


def paper_sigma(key: jax.Array, diag=(1.0, 1.0, 0.5, 0.25, 1.0)) -> jax.Array:
    """``Sigma = U^T D^2 U`` of Secs. 5.3 and 6.1, ``U`` Haar, ``D = diag(diag)`` (the paper's
    ``(1, 1, 0.5, 0.25, 1)`` by default).

    ``Sigma`` is computed in JAX's float dtype; a ``diag`` whose ratio ``max / min`` gives
    ``Sigma`` a condition number ``(max / min)^2`` that dtype cannot hold to 1 % in its smallest
    eigenvalue (above ``0.01 / (d eps)``: about 1.7e4 in float32 for ``d = 5``, so a ratio above
    ~130) raises ``ValueError``; compute it under ``jax.enable_x64(True)`` instead."""
    D = _diag(diag, sigma=True)
    U = haar_orthogonal(key, D.shape[0])
    S = U.T @ (D[:, None] ** 2 * U)
    return (S + S.T) / 2


def _diag(diag, sigma: bool = False) -> jax.Array:
    """Check the diagonal of ``D`` (a non-empty vector of finite positive numbers); with
    ``sigma``, also that ``Sigma = U^T D^2 U`` is computed to 1 % in its smallest eigenvalue in
    JAX's float dtype (condition number ``(max / min)^2 <= 0.01 / (d eps)``)."""
    D = v.array("diag", diag, "d")
    if v.is_tracer(D):
        return jnp.asarray(D, dtype=float)
    a = np.asarray(D, dtype=np.float64)
    if not np.all(a > 0):
        raise ValueError(f"diag must be a vector of positive numbers, got {diag!r}")
    dt = v.float_dtype()
    most = 0.01 / (a.size * np.finfo(dt).eps)
    ratio = float(a.max() / a.min())
    if sigma and ratio**2 > most:
        raise ValueError(
            f"diag's ratio max / min = {ratio:.3g} gives Sigma the condition number "
            f"{ratio**2:.3g}, more than {dt} holds to 1 % in its smallest eigenvalue "
            f"(0.01 / (d eps) = {most:.3g}); compute Sigma under jax.enable_x64(True)"
        )
    return jnp.asarray(D, dtype=float)


def paper_prompt_sigma(key: jax.Array, diag=(1.0, 1.0, 0.5, 0.25, 1.0)) -> jax.Array:
    """The ``(d, d)`` covariance ``Sigma = U^T D^2 U`` that :func:`sample_paper_prompts` draws from
    ``key`` (Secs. 5.3 and 6.1), bit for bit (jittable).

    ``U`` is Haar from ``fold_in(key, 0)`` and ``Sigma = (R R + (R R)^T) / 2`` with the root
    ``R = U^T D U``. (Not :func:`paper_sigma`, which draws ``U`` from ``key`` itself.)

    Args:
        key: a PRNG key (the one given to :func:`sample_paper_prompts`).
        diag: the diagonal of ``D``, ``(d,)`` positive numbers; ``(max / min)^2`` at most
            ``0.01 / (d eps)`` of JAX's float dtype, as for :func:`paper_sigma` (``ValueError``
            otherwise: use ``jax.enable_x64(True)``).

    Returns:
        ``(d, d)`` ``Sigma``.
    """
    v.prng_key("key", key)
    D = _diag(diag, sigma=True)
    U = haar_orthogonal(jax.random.fold_in(key, 0), D.shape[0])
    root = U.T @ (D[:, None] * U)  # Sigma^{1/2}
    Sigma = root @ root
    return (Sigma + Sigma.T) / 2


def sample_paper_prompts(
    key: jax.Array, n: int, batch: int, draw=0, diag=(1.0, 1.0, 0.5, 0.25, 1.0)
) -> TaskBatch:
    """``batch`` prompts of Secs. 5.3 / 6.1 with the ``Sigma`` of ``key``, all from one key
    (jittable).

    ``Sigma = U^T D^2 U`` with ``U`` Haar from ``fold_in(key, 0)`` (:func:`paper_prompt_sigma`),
    then ``x = Sigma^{1/2} x_bar``, ``w* = Sigma^{-1/2} w_bar`` with ``x_bar, w_bar`` standard
    normal from ``fold_in(key, 1 + draw)`` (``draw = 0``: the training batch; other values: fresh
    prompts of the same ``Sigma``), so ``x ~ N(0, Sigma)``, ``w* ~ N(0, Sigma^{-1})`` and
    ``y = <x, w*> = <x_bar, w_bar>`` (noise-free). Under ``jit``/``vmap`` over keys, every key gets
    its own ``Sigma`` (the paper's "each time we sample a different Sigma").
    :func:`embed_zero_query` of the result is the ``Z_0`` of eq. 1.

    Args:
        key: a PRNG key; n: context examples; batch: prompts; draw: which batch (an integer,
        may be traced); diag: the diagonal of ``D``.

    Returns:
        :class:`TaskBatch`: ``X (B, n, d)``, ``y (B, n)``, ``x_q (B, d)``, ``y_target (B,)`` (the
        query labels ``<w*, x^(n+1)>``), ``w (B, d)`` (the task weights ``w*``).
    """
    v.prng_key("key", key)
    n = v.positive_int("n", n)
    batch = v.positive_int("batch", batch)
    if not v.is_tracer(draw):
        v.positive_int("draw", draw, minimum=0)
    D = _diag(diag)
    d = D.shape[0]
    U = haar_orthogonal(jax.random.fold_in(key, 0), d)
    root = U.T @ (D[:, None] * U)  # Sigma^{1/2}
    inv_root = U.T @ ((1 / D)[:, None] * U)  # Sigma^{-1/2}
    z = jax.random.normal(jax.random.fold_in(key, 1 + draw), (batch, n + 2, d))
    xb, wb = z[:, : n + 1], z[:, n + 1]  # rows 0..n: x_bar, row n+1: w_bar
    X = xb @ root  # (B, n+1, d), rows x^(i)T
    yy = jnp.einsum("bcd,bd->bc", xb, wb)  # (B, n+1)
    return TaskBatch(X[:, :n], yy[:, :n], X[:, n], yy[:, n], wb @ inv_root)
