"""Argument checks shared by iclgd's modules: the one place for hand-written checks.

Every public function of iclgd validates its inputs with these helpers, so that bad input raises an
error naming the argument and what was expected -- never a silent NaN, nor a failure deep inside
JAX:

* an argument of the wrong **type** -- a list where a dict of parameters, a
  :class:`~iclgd.tasks.Prior` or a :class:`~iclgd.tasks.TaskBatch` is expected, an int where a PRNG
  key is expected, a complex or string array, a string where a number is expected -- raises
  :class:`ArgumentTypeError`, a ``TypeError`` (that is also a ``ValueError``, see there);
* an argument of the right type and a wrong **value** -- a shape, a size below 1, NaN or Inf, a
  covariance that is not positive definite in the dtype it is stored in -- raises ``ValueError``.

Value checks (finiteness, definiteness) need concrete values: inside ``jit`` the arguments are
tracers and those checks are skipped (:func:`is_tracer`). Shapes, dtypes, containers and PRNG keys
are static, so they are checked under ``jit`` and ``vmap`` too.

Shapes are written with named axes, e.g. ``"B C d"``; a :class:`Dims` (a dict) shared by the checks
of one call binds each name to the first size seen, so that later arguments must agree::

    dims = v.Dims()
    X = v.array("X", X, "B C d", dims)
    y = v.array("y", y, "B C", dims)      # "y must have shape (4, 5), got shape (4, 2)"

Why these are written by hand rather than with jaxtyping + beartype (evaluated on ``gd_one_step``,
``preconditioned_gd`` and ``lsa_predict``): jaxtyping checks bare array arguments well, under
``jit`` too, at 35-65 us per call (these shape and dtype checks: 15-40 us; finiteness, which no
library checks, adds ~10 us per array), but (1) the parameter dicts that every model takes are not
checked: beartype does not look inside ``dict[str, Float[...]]`` values nor a ``TypedDict``, and
``PyTree[Float[...]]`` checks leaves but not keys, at ~430 us per call; (2) sizes given as int
arguments (``make_prior(d, mu=...)``, ``lsa_model(d, guess=...)``) cannot be named in an
annotation; (3) it rejects lists and Python numbers where iclgd accepts array-likes; (4) its
``TypeError`` with a multi-line report replaces the one-line ``ValueError`` that iclgd documents
for a wrong shape. So iclgd keeps this one small module.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

__all__ = [
    "ArgumentTypeError",
    "Dims",
    "positive_int",
    "finite_float",
    "nonneg_float",
    "positive_float",
    "scalar",
    "is_tracer",
    "prng_key",
    "prng_keys",
    "container",
    "function",
    "param_dict",
    "array",
    "shape",
    "finite_array",
    "finite_tree",
    "spd_matrix",
    "float_dtype",
    "boolean",
    "names",
    "floating",
]


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type: a ``TypeError``.

    It is also a ``ValueError`` because iclgd first documented every bad argument as a
    ``ValueError``: code that catches ``ValueError`` keeps catching these (as NumPy's ``AxisError``
    is both a ``ValueError`` and an ``IndexError``).
    """


class Dims(dict):
    """Named axis sizes bound by the :func:`array` checks of one call (a plain ``dict``)."""


def _short(x, n: int = 60) -> str:
    """``repr`` of a value, shortened; arrays by shape and dtype."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        kind = "a traced array" if is_tracer(x) else type(x).__name__
        return f"{kind} of shape {tuple(x.shape)} and dtype {x.dtype}"
    r = repr(x)
    return r if len(r) <= n else r[: n - 3] + "..."


def is_tracer(x) -> bool:
    """Is ``x`` a JAX tracer (a value inside ``jit``/``grad``/``vmap``, unknown until run time)?"""
    try:
        import jax

        return isinstance(x, jax.core.Tracer)
    except Exception:  # pragma: no cover
        return False


def float_dtype() -> np.dtype:
    """The dtype JAX stores floats in: float32, or float64 with ``jax_enable_x64``."""
    import jax

    return np.dtype(jax.dtypes.canonicalize_dtype(float))


# ----------------------------------------------------------------------------------------------
# Scalars
# ----------------------------------------------------------------------------------------------


def positive_int(name: str, value, minimum: int = 1) -> int:
    """Check that ``value`` is an integer >= ``minimum`` and return it as ``int``."""
    want = f"{name} must be an integer >= {minimum}"
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{want}, got {value!r}")
    try:
        i = operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{want}, got {_short(value)}") from None
    if i < minimum:
        raise ValueError(f"{want}, got {i}")
    return int(i)


def _real_number(name: str, value, want: str) -> float:
    if is_tracer(value):
        raise ArgumentTypeError(f"{name} must be {want} (a concrete value, not traced under jit)")
    if isinstance(value, (str, bytes, bool, np.bool_)):
        raise ArgumentTypeError(f"{name} must be {want}, got {value!r}")
    try:
        a = np.asarray(value)
    except Exception:
        raise ArgumentTypeError(f"{name} must be {want}, got {_short(value)}") from None
    if a.dtype.kind not in "fiu":
        raise ArgumentTypeError(f"{name} must be {want}, got {_short(value)}")
    if a.shape != ():
        raise ValueError(f"{name} must be {want} (a scalar), got an array of shape {a.shape}")
    return float(a)


def finite_float(name: str, value) -> float:
    """Check that ``value`` is a finite real number and return it as ``float``."""
    v = _real_number(name, value, "a finite number")
    if not np.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    return v


def nonneg_float(name: str, value) -> float:
    """Check that ``value`` is a finite real number >= 0 and return it as ``float``."""
    v = _real_number(name, value, "a finite number >= 0")
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    return v


def positive_float(name: str, value) -> float:
    """Check that ``value`` is a finite real number > 0 and return it as ``float``."""
    v = _real_number(name, value, "a finite number > 0")
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return v


def scalar(name: str, value, *, nonneg: bool = False):
    """A real scalar that may be traced: its shape and dtype are checked always, its value (finite,
    and ``>= 0`` if ``nonneg``) when concrete. Returns a ``float``, or the tracer unchanged."""
    if not is_tracer(value):
        return nonneg_float(name, value) if nonneg else finite_float(name, value)
    if value.shape != () or not _is_real_dtype(value.dtype):
        raise ValueError(f"{name} must be a real scalar, got shape {value.shape} {value.dtype}")
    return value


def boolean(name: str, value) -> bool:
    """Check that ``value`` is a bool (``True``/``False``, or a NumPy bool), never a string or a
    number taken for its truth value (``full="yes"``); return it as ``bool``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{name} must be a bool (True or False), got {_short(value)}")
    return bool(value)


def names(name: str, value, known: Sequence[str], *, allow_none: bool = True) -> list[str]:
    """Check that ``value`` is a list (or tuple, set) of names among ``known``; return it as a
    ``list``. A single string is refused (it would be iterated letter by letter), as are unknown
    names; ``None`` (if ``allow_none``) stands for all of ``known``."""
    known = list(known)
    if value is None and allow_none:
        return known
    if isinstance(value, (str, bytes)):
        raise ArgumentTypeError(
            f"{name} must be a list of names among {known}, got the string {value!r} "
            f"(pass [{value!r}])"
        )
    try:
        items = list(value)
    except TypeError:
        raise ArgumentTypeError(
            f"{name} must be a list of names among {known}, got {_short(value)}"
        ) from None
    bad = [n for n in items if not isinstance(n, str)]
    if bad:
        raise ArgumentTypeError(f"{name} must be a list of names (strings), got {_short(bad[0])}")
    unknown = [n for n in items if n not in known]
    if unknown:
        raise ValueError(f"{name} must be among {known}, got unknown {unknown}")
    return items


# ----------------------------------------------------------------------------------------------
# PRNG keys and containers
# ----------------------------------------------------------------------------------------------


def _key_kind(key) -> tuple[str | None, tuple]:
    """``("typed" | "raw" | None, batch shape)`` of a (batch of) PRNG key(s)."""
    import jax

    dt, shp = getattr(key, "dtype", None), getattr(key, "shape", None)
    if dt is None or shp is None:
        return None, ()
    shp = tuple(shp)
    if jax.dtypes.issubdtype(dt, jax.dtypes.prng_key):
        return "typed", shp
    if np.dtype(dt) == np.uint32 and shp[-1:] in ((2,), (4,)):
        return "raw", shp[:-1]
    return None, ()


_PASS_KEY = "pass jax.random.key(seed) (a legacy uint32 jax.random.PRNGKey(seed) works too)"


def prng_key(name: str, key, *, single: bool = False):
    """Check that ``key`` is one JAX PRNG key: a typed key of shape ``()`` (``jax.random.key``) or
    a legacy raw ``uint32`` key of shape ``(2,)`` (``jax.random.PRNGKey``; ``(4,)`` for rbg).
    Static: checked under ``jit`` too. ``single`` only words the message ("a single key")."""
    kind, batch = _key_kind(key)
    a = "a single JAX PRNG key" if single else "a JAX PRNG key"
    if kind is not None and batch == ():
        return key
    if kind is not None:
        raise ArgumentTypeError(
            f"{name} must be a single JAX PRNG key, got a batch of keys of shape {batch}: "
            "pass one key (e.g. jax.random.split(key)[0])"
        )
    raise ArgumentTypeError(f"{name} must be {a}: {_PASS_KEY}; got {_short(key)}")


def prng_keys(name: str, keys) -> int:
    """Check that ``keys`` is a 1-D batch of PRNG keys (``jax.random.split(key, S)``); return
    ``S``."""
    kind, batch = _key_kind(keys)
    if kind is None or len(batch) != 1:
        raise ArgumentTypeError(
            f"{name} must be a batch of JAX PRNG keys of shape (S,), e.g. "
            f"jax.random.split(jax.random.key(seed), S); got {_short(keys)}"
        )
    if batch[0] < 1:
        raise ValueError(f"{name} must hold at least one key, got a batch of shape {batch}")
    return int(batch[0])


def container(name: str, x, kind: type | tuple, what: str):
    """Check ``isinstance(x, kind)``; ``what`` names the expected type, e.g. ``"an
    iclgd.tasks.Prior (use make_prior)"``."""
    if not isinstance(x, kind):
        raise ArgumentTypeError(f"{name} must be {what}, got {type(x).__name__}")
    return x


def function(name: str, f, what: str):
    """Check that ``f`` is callable; ``what`` describes it, e.g. ``"a function loss_fn(params,
    key) -> ()"``."""
    if not callable(f):
        raise ArgumentTypeError(f"{name} must be {what}, got {_short(f)}")
    return f


def param_dict(
    name: str, params, keys: Sequence[str], what: str, *, optional: Sequence[str] | None = None
) -> dict:
    """Check that ``params`` is a dict holding ``keys`` (and, if ``optional`` is given, no keys
    but ``keys`` and ``optional``); ``what`` describes it, e.g. ``"a dict with keys ('WK', 'WQ',
    'WV', 'WP') (see init_lsa)"``."""
    if not isinstance(params, dict):
        raise ArgumentTypeError(f"{name} must be {what}, got {type(params).__name__}")
    missing = [k for k in keys if k not in params]
    allowed = None if optional is None else (*keys, *optional)
    unknown = [] if allowed is None else [k for k in params if k not in allowed]
    if missing or unknown:
        got = f"a dict with keys {sorted(map(str, params))}"
        raise ArgumentTypeError(f"{name} must be {what}, got {got}")
    return params


# ----------------------------------------------------------------------------------------------
# Arrays
# ----------------------------------------------------------------------------------------------


def _is_real_dtype(dt) -> bool:
    try:
        return np.dtype(dt).kind in "fiu"
    except TypeError:  # a JAX key dtype, an extended dtype
        return False


def _parse(spec) -> list:
    if isinstance(spec, str):
        return spec.replace(",", " ").split()
    return list(spec)


def _shape_text(tokens: Sequence, dims: dict) -> str:
    def show(t):
        if t is None:
            return "*"
        if isinstance(t, str) and t != "...":
            return str(dims.get(t, t))
        return str(t)

    items = [show(t) for t in tokens]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _check_shape(name: str, s: tuple, spec, dims: dict | None, what: str) -> None:
    """Match the shape ``s`` against ``spec`` (names, ints, ``None`` = any; a leading ``"..."``
    allows any leading axes), binding new names in ``dims``; every named axis must be >= 1."""
    tokens = _parse(spec)
    dims = {} if dims is None else dims
    shown = _shape_text(tokens, dims)  # names bound by earlier arguments show as sizes
    ellipsis = bool(tokens) and tokens[0] == "..."
    body = tokens[1:] if ellipsis else tokens
    axes = s[len(s) - len(body) :] if ellipsis else s
    suffix = f" {what}" if what else ""
    ok = len(s) >= len(body) if ellipsis else len(s) == len(body)
    new: dict = {}
    if ok:
        for t, n in zip(body, axes):
            if isinstance(t, str):
                want = dims.get(t, new.get(t))
                if want is None:
                    new[t] = n
                elif want != n:
                    ok = False
            elif t is not None and t != n:
                ok = False
    if not ok:
        raise ValueError(f"{name} must have shape {shown}{suffix}, got shape {tuple(s)}")
    empty = [t for t, n in zip(body, axes) if isinstance(t, str) and n < 1]
    if empty:
        raise ValueError(
            f"{name} must have shape {shown} with {', '.join(empty)} >= 1{suffix}, "
            f"got shape {tuple(s)}"
        )
    dims.update(new)


def array(
    name: str,
    x,
    spec=None,
    dims: dict | None = None,
    *,
    finite: bool = True,
    what="",
    promote: bool = False,
):
    """Check a real array argument: its dtype (float or integer), its shape against ``spec`` (see
    the module docstring) and, when concrete and ``finite``, that it holds no NaN or Inf.

    Lists and numbers are accepted and returned as NumPy arrays; arrays are returned unchanged,
    unless ``promote``: then integer and float16 arrays are returned as :func:`floating` ones
    (for a function that does arithmetic on them in their own dtype). ``what`` is appended to a
    shape message, e.g. ``"to match Z0"``.
    """
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        try:
            x = np.asarray(x)
        except Exception:
            raise ArgumentTypeError(f"{name} must be a real array, got {_short(x)}") from None
    if not _is_real_dtype(x.dtype):
        raise ArgumentTypeError(
            f"{name} must be a real (float or integer) array, got dtype {x.dtype}"
        )
    if spec is not None:
        _check_shape(name, tuple(x.shape), spec, dims, what)
    if finite:
        finite_array(name, x)
    return floating(x) if promote else x


def floating(x, dtype=None):
    """``x`` in a floating dtype of at least 32 bits, so that arithmetic on it neither wraps
    (integers: ``uint8(0) - uint8(20) = 236``) nor overflows early (float16: ``300**2 = inf``):
    float32 and float64 arrays are returned unchanged; integer, bool, float16 and bfloat16 ones
    are cast to ``dtype`` (default :func:`float_dtype`: float32, or float64 with
    ``jax_enable_x64``). A NumPy array stays NumPy, a JAX array (or tracer) stays JAX."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        x = np.asarray(x)
    dt = np.dtype(x.dtype)
    if dt in (np.float32, np.float64) and dtype is None:
        return x
    to = np.dtype(dtype) if dtype is not None else float_dtype()
    if dt == to:
        return x
    return x.astype(to)


def shape(name: str, x, expected, what: str | None = None):
    """Check the shape of ``x`` only (``expected``: sizes, ``None`` = any, or axis names); return
    ``x`` (a NumPy array if ``x`` was a list). ``what`` replaces the expected shape in the message.
    """
    if not hasattr(x, "shape"):
        x = np.asarray(x)
    try:
        _check_shape(name, tuple(x.shape), expected, None, "")
    except ValueError:
        if what is None:
            raise
        raise ValueError(f"{name} must have shape {what}, got shape {tuple(x.shape)}") from None
    return x


def finite_array(name: str, x):
    """Check that a concrete array holds only finite values (skipped for traced values)."""
    if is_tracer(x):
        return x
    a = np.asarray(x)
    if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))[0]
        val = a[tuple(bad)]
        at = f" at index {tuple(int(i) for i in bad)}" if a.ndim else ""
        raise ValueError(f"{name} must contain only finite values, got {val}{at}")
    return x


def finite_tree(name: str, tree):
    """:func:`array` (real dtype, finite when concrete) on every leaf of a pytree, each named by its
    path, e.g. ``params['WK']``."""
    import jax

    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        array(name + jax.tree_util.keystr(path), leaf)
    return tree


# ----------------------------------------------------------------------------------------------
# Covariances
# ----------------------------------------------------------------------------------------------


def spd_matrix(
    name: str, m, d: int | None = None, psd: bool = False, dtype=None, hint: str = ""
) -> np.ndarray | object:
    """Check that ``m`` is a symmetric positive-definite (or, with ``psd``, semi-definite)
    ``(d, d)`` matrix **in the dtype it is stored in** (``dtype``, default :func:`float_dtype`).

    ``m`` is rounded to ``dtype`` first; then, with eigenvalues ``lam`` of the rounded matrix, PD
    means ``lam_min > n eps lam_max`` (``eps`` of ``dtype``, ``n = d``) -- a relative floor, so
    ``1e-12 I`` is PD while a matrix whose smallest eigenvalue is lost to float32 rounding (its
    Cholesky factor would be NaN) is not; PSD means ``lam_min >= -n eps lam_max``. ``hint`` is
    appended to a definiteness message. Returns ``m`` (skipped, but for the shape, if traced).
    """
    s = tuple(getattr(m, "shape", np.shape(m)))
    if len(s) != 2 or s[0] != s[1] or (d is not None and s[0] != d) or s[0] < 1:
        want = f"({d}, {d})" if d is not None else "(d, d) with d >= 1"
        raise ValueError(f"{name} must be a square matrix of shape {want}, got shape {s}")
    m = array(name, m)
    if is_tracer(m):
        return m
    dt = np.dtype(dtype) if dtype is not None else float_dtype()
    with np.errstate(over="ignore"):
        a = np.asarray(m).astype(dt)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must contain only values finite in {dt} (its stored dtype)")
    a = a.astype(np.float64)
    scale = float(np.abs(a).max())
    if np.abs(a - a.T).max() > max(1e-6, 100 * np.finfo(dt).eps) * scale:
        raise ValueError(f"{name} must be symmetric")
    eig = np.linalg.eigvalsh((a + a.T) / 2)
    floor = s[0] * np.finfo(dt).eps * max(float(eig.max()), 0.0)
    hint = f" ({hint})" if hint else ""
    if psd and eig.min() < -floor:
        raise ValueError(
            f"{name} must be positive semi-definite; smallest eigenvalue {eig.min():.3g}{hint}"
        )
    if not psd and (eig.max() <= 0 or eig.min() <= floor):
        raise ValueError(
            f"{name} must be positive definite in {dt} (the dtype it is stored in): smallest "
            f"eigenvalue {eig.min():.3g}, largest {eig.max():.3g}; it needs smallest > "
            f"{s[0]} * eps * largest = {floor:.3g}{hint}"
        )
    return m
