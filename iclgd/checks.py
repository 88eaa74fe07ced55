"""Argument checks shared by iclgd's modules.

Every public function validates its inputs with these helpers so that bad input raises a
``ValueError`` naming the argument and what was expected, never a silent wrong result or a NaN.
Checks run on concrete (non-traced) values only; inside ``jit`` shapes are still checked because
shapes are static.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def positive_int(name: str, value, minimum: int = 1) -> int:
    """Check that ``value`` is an integer >= ``minimum`` and return it as ``int``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def nonneg_float(name: str, value) -> float:
    """Check that ``value`` is a finite real number >= 0 and return it as ``float``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}") from None
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def finite_float(name: str, value) -> float:
    """Check that ``value`` is a finite real number and return it as ``float``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number, got {value!r}") from None
    if not np.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return v


def is_tracer(x) -> bool:
    try:
        import jax

        return isinstance(x, jax.core.Tracer)
    except Exception:  # pragma: no cover
        return False


def shape(name: str, x, expected: Sequence[int | None], what: str | None = None):
    """Check that ``x`` has ``len(expected)`` axes and the given sizes (``None`` = any size).

    ``what`` is a human-readable description of the expected shape, e.g. ``"(d,)"``.
    Returns ``x`` unchanged.
    """
    s = getattr(x, "shape", None)
    if s is None:
        x = np.asarray(x)
        s = x.shape
    desc = what or "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
    if len(s) != len(expected) or any(e is not None and e != a for e, a in zip(expected, s)):
        raise ValueError(f"{name} must have shape {desc}, got shape {tuple(s)}")
    return x


def finite_array(name: str, x):
    """Check that a concrete array has only finite entries (skipped for traced values)."""
    if is_tracer(x):
        return x
    a = np.asarray(x)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must contain only finite values")
    return x


def spd_matrix(name: str, m, d: int | None = None, psd: bool = False):
    """Check that ``m`` is a symmetric positive-definite (or semi-definite) ``(d, d)`` matrix."""
    s = getattr(m, "shape", np.shape(m))
    if len(s) != 2 or s[0] != s[1] or (d is not None and s[0] != d):
        want = f"({d}, {d})" if d is not None else "(d, d)"
        raise ValueError(f"{name} must be a square matrix of shape {want}, got shape {tuple(s)}")
    if is_tracer(m):
        return m
    a = np.asarray(m, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must contain only finite values")
    if not np.allclose(a, a.T, atol=1e-6 * (1 + np.abs(a).max())):
        raise ValueError(f"{name} must be symmetric")
    eig = np.linalg.eigvalsh((a + a.T) / 2)
    tol = 1e-10 * max(1.0, float(np.abs(eig).max()))
    if psd:
        if eig.min() < -tol:
            raise ValueError(
                f"{name} must be positive semi-definite; smallest eigenvalue {eig.min():.3g}"
            )
    elif eig.min() <= tol:
        raise ValueError(f"{name} must be positive definite; smallest eigenvalue {eig.min():.3g}")
    return m
