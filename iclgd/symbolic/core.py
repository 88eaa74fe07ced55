"""Symbols and input conversion shared by the modules of :mod:`iclgd.symbolic`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sympy as sp

from ..checks import positive_int

__all__ = [
    "ExprLike",
    "gaussian_vector",
    "weight_matrix",
    "flatten_params",
    "as_symbols",
    "as_expr",
    "as_vector",
    "as_matrix",
]

ExprLike = sp.Expr | int | float


def gaussian_vector(name: str, d: int) -> sp.Matrix:
    """Return a ``(d, 1)`` column of real symbols ``name_1, ..., name_d`` (1-based, as the papers).

    The symbols carry ``real=True``; sympy treats ``Symbol("x_1")`` (no assumption) as a *different*
    symbol, so reuse the returned objects rather than re-creating them by name.

    Example::

        >>> gaussian_vector("x", 2).T
        Matrix([[x_1, x_2]])
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    d = positive_int("d", d)
    return sp.Matrix(d, 1, [sp.Symbol(f"{name}_{i + 1}", real=True) for i in range(d)])


def weight_matrix(name: str, rows: int, cols: int | None = None) -> sp.Matrix:
    """Return a ``(rows, cols)`` matrix of real symbols ``name_{i,j}`` (1-based).

    ``cols`` defaults to ``rows``.

    Example::

        >>> weight_matrix("W^Q", 2).tolist()
        [[W^Q_{1,1}, W^Q_{1,2}], [W^Q_{2,1}, W^Q_{2,2}]]
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    rows = positive_int("rows", rows)
    cols = rows if cols is None else positive_int("cols", cols)
    return sp.Matrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{{{i + 1},{j + 1}}}", real=True))


def flatten_params(*params: sp.Symbol | sp.MatrixBase | Sequence[sp.Symbol]) -> list[sp.Symbol]:
    """Flatten Symbols, sympy matrices (row-major) and sequences of Symbols into one list.

    Example::

        >>> a = sp.Symbol("a"); flatten_params(a, sp.Matrix([[sp.Symbol("b"), sp.Symbol("c")]]))
        [a, b, c]
    """
    out: list[sp.Symbol] = []
    for p in params:
        if isinstance(p, sp.MatrixBase):
            out.extend(list(p))
        elif isinstance(p, sp.Basic):
            out.append(p)
        elif isinstance(p, (list, tuple)):
            out.extend(flatten_params(*p))
        else:
            raise ValueError(
                f"params must be sympy Symbols or matrices of Symbols, got {type(p).__name__}"
            )
    for s in out:
        if not isinstance(s, sp.Symbol):
            raise ValueError(f"params must be sympy Symbols or matrices of Symbols, got {s!r}")
    if len(set(out)) != len(out):
        raise ValueError("params must not contain the same symbol twice")
    return out


def as_symbols(name: str, variables: Any) -> tuple[sp.Symbol, ...]:
    """Distinct sympy Symbols from a Symbol, a list (of Symbols or matrices) or a Matrix."""
    if isinstance(variables, sp.Symbol):
        seq = [variables]
    elif isinstance(variables, sp.MatrixBase):
        seq = list(variables)
    elif isinstance(variables, (list, tuple)):
        seq = []
        for v in variables:
            seq.extend(list(v) if isinstance(v, sp.MatrixBase) else [v])
    else:
        raise ValueError(
            f"{name} must be a sympy Symbol, a list of Symbols or a sympy Matrix of Symbols, "
            f"got {type(variables).__name__}"
        )
    if not seq:
        raise ValueError(f"{name} must contain at least one Symbol")
    bad = [v for v in seq if not isinstance(v, sp.Symbol)]
    if bad:
        raise ValueError(
            f"{name} must contain only sympy Symbols, "
            f"got {bad[0]!r} of type {type(bad[0]).__name__}"
        )
    if len(set(seq)) != len(seq):
        raise ValueError(f"{name} must not contain the same Symbol twice")
    return tuple(seq)


def as_expr(name: str, value: Any) -> sp.Expr:
    """A scalar sympy expression from a number or an expression (``ValueError`` otherwise).

    A number must be finite (a NaN or infinite float is rejected); sympy's ``nan`` and ``zoo`` are
    rejected too, while ``sympy.oo`` passes, for limits such as ``C -> oo``.
    """
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    try:
        e = sp.sympify(value, strict=True) if not isinstance(value, sp.Basic) else value
    except (sp.SympifyError, TypeError):
        raise ValueError(f"{name} must be a number or a sympy expression, got {value!r}") from None
    if isinstance(e, sp.MatrixBase) or not isinstance(e, sp.Expr):
        raise ValueError(f"{name} must be a scalar number or sympy expression, got {value!r}")
    if e.has(sp.nan, sp.zoo):
        raise ValueError(f"{name} must not contain nan or zoo (complex infinity), got {value!r}")
    return e


def as_size(name: str, value: Any) -> sp.Expr:
    """A size (a context length ``C``, a dimension): an integer ``>= 1``, or a sympy expression
    not known to be below 1 or non-integer (a symbol such as ``C``); ``ValueError`` otherwise."""
    e = as_expr(name, value)
    if e.is_number:
        if not (e.is_integer and e >= 1):
            raise ValueError(f"{name} must be an integer >= 1 or a sympy symbol, got {value!r}")
    elif e.is_integer is False or e.is_positive is False:
        raise ValueError(f"{name} must be a size (an integer >= 1), got {value!r}")
    return e


def as_vector(name: str, value: Any, n: int | None, what: str = "") -> list[sp.Expr]:
    """A list of ``n`` scalar expressions from a list, tuple, 1-D array or vector Matrix."""
    if isinstance(value, sp.MatrixBase):
        if min(value.shape) > 1:
            raise ValueError(f"{name} must be a vector{what}, got a matrix of shape {value.shape}")
        seq = list(value)
    elif isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ValueError(
                f"{name} must be a 1-D vector{what}, got an array of shape {value.shape}"
            )
        seq = value.tolist()
    elif isinstance(value, (list, tuple)):
        seq = list(value)
    else:
        raise ValueError(
            f"{name} must be a list, tuple or sympy Matrix{what}, got {type(value).__name__}"
        )
    if n is not None and len(seq) != n:
        raise ValueError(f"{name} must have length {n}{what}, got length {len(seq)}")
    return [as_expr(f"{name}[{i}]", v) for i, v in enumerate(seq)]


def as_matrix(name: str, value: Any) -> sp.Matrix:
    """A sympy Matrix from a Matrix, a nested list or a 2-D array."""
    if isinstance(value, sp.MatrixBase):
        return sp.Matrix(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = np.asarray(value, dtype=object)
        if arr.ndim != 2:
            raise ValueError(
                f"{name} must be a 2-D matrix, got an array with {arr.ndim} dimension(s)"
            )
        return sp.Matrix(
            [
                [as_expr(f"{name}[{i},{j}]", v) for j, v in enumerate(row)]
                for i, row in enumerate(arr)
            ]
        )
    raise ValueError(
        f"{name} must be a sympy Matrix or a nested list (2-D), got {type(value).__name__}"
    )
