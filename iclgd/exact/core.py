"""Numerical helpers shared by the modules of :mod:`iclgd.exact`: float64, PSD factors, vech."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from ..tasks import Prior
from ..tasks import check_prior as _check_prior

__all__ = [
    "enable_x64",
    "check_prior",
    "vech_index",
    "psd_factor_rows",
    "pinv_psd",
    "to_float64",
    "risk64",
    "quadratic_min",
]


def enable_x64():
    """Context manager enabling float64 locally (``jax.enable_x64`` or the older API)."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is not None:
        try:
            return ctx(True)
        except TypeError:  # pragma: no cover
            pass
    try:  # pragma: no cover - older JAX
        from jax.experimental import enable_x64 as old_enable_x64

        return old_enable_x64()
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()


def check_prior(prior) -> Prior:
    """:func:`iclgd.tasks.check_prior`: raise unless ``prior`` is a valid
    :class:`iclgd.tasks.Prior`; return it."""
    return _check_prior(prior)


def vech_index(D: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the ``D (D + 1) / 2`` upper-triangle entries (``vech`` order)."""
    return np.triu_indices(D)


def psd_factor_rows(m: np.ndarray, rtol: float) -> np.ndarray:
    """``F`` with ``F^T F = m`` (rows: eigenvectors scaled by sqrt of kept eigenvalues).

    Eigenvalues below ``rtol * max`` are dropped, so ``F`` has shape ``(rank, n)``.
    """
    m = (m + m.T) / 2
    lam, vec = np.linalg.eigh(m)
    keep = lam > rtol * max(float(lam.max()), 0.0)
    return (vec[:, keep] * np.sqrt(lam[keep])).T


def pinv_psd(m: np.ndarray, rtol: float = 1e-12) -> tuple[np.ndarray, int]:
    """Pseudo-inverse of a symmetric PSD matrix and its rank (eigenvalues < ``rtol * max``: 0)."""
    m = (m + m.T) / 2
    lam, vec = np.linalg.eigh(m)
    keep = lam > rtol * max(float(lam.max()), 0.0)
    return (vec[:, keep] / lam[keep]) @ vec[:, keep].T, int(keep.sum())


def to_float64(tree):
    """Every leaf of a pytree as a NumPy float64 array."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float64), tree)


def risk64(risk_fn: Callable, params, *args, **kwargs) -> float:
    """Evaluate an exact risk function in float64 and return a Python float.

    ``params`` (a pytree, of any precision: float32 weights of a trained model, NumPy arrays ...)
    and every array among ``args``/``kwargs`` are converted to float64 inside ``jax.enable_x64``;
    other arguments (the :class:`~iclgd.exact.Exact`, Python scalars) are passed unchanged. Whatever
    the global precision, the value is then accurate to float64 rounding.

    Example::

        exact.risk64(exact.lsa_risk, trained_params, ex, g, c)
        exact.risk64(exact.yq_lsa_risk, yq_params, ex)

    Args:
        risk_fn: ``risk_fn(params, *args, **kwargs) -> ()`` (e.g. :func:`~iclgd.exact.lsa_risk`).
        params: the model parameters (any pytree of arrays).
        *args: further positional arguments of ``risk_fn``.
        **kwargs: keyword arguments of ``risk_fn``.

    Returns:
        The risk as a float.
    """
    v.function("risk_fn", risk_fn, "callable, risk_fn(params, *args) -> ()")
    v.finite_tree("params", params)

    def conv(a):
        if isinstance(a, (jax.Array, np.ndarray)):
            return jnp.asarray(np.asarray(a, np.float64))
        return a

    with enable_x64():
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(np.asarray(a, np.float64)), params)
        a64 = [conv(a) for a in args]
        k64 = {k: conv(a) for k, a in kwargs.items()}
        return float(risk_fn(p64, *a64, **k64))


def quadratic_min(f) -> tuple[float, float]:
    """Minimiser and minimum over ``gamma`` of a convex quadratic ``f(gamma)`` (e.g. an exact risk
    along a fixed direction), from ``f(-1), f(0), f(1)``.

    Args:
        f: callable ``gamma -> float``, a quadratic with positive curvature.

    Returns:
        ``(gamma*, f(gamma*))``.
    """
    v.function("f", f, "a function gamma -> float (a convex quadratic)")
    fm, f0, fp = (float(f(g)) for g in (-1.0, 0.0, 1.0))
    if not np.all(np.isfinite([fm, f0, fp])):
        raise ValueError(f"f must be finite at gamma = -1, 0, 1, got {fm}, {f0}, {fp}")
    curv = (fp + fm) / 2 - f0
    if not curv > 0:
        raise ValueError(f"f must be a convex quadratic in gamma; curvature {curv:.3g}")
    g = -(fp - fm) / 2 / (2 * curv)
    return g, float(f(g))
