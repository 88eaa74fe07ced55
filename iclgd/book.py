"""What a chapter needs of the book itself: :func:`glue`, and :func:`fmt` and :func:`bound` for the
text it glues.

Every chapter imports its glue from here (``from iclgd.book import glue``), never from ``myst_nb``
directly: in the book's own kernel (Jupyter Book, nbval) the value goes to myst-nb, which pastes it
where the markdown says ``{glue:text}`name```; where myst-nb is not installed (Colab, a bare
Jupyter) the call only remembers the value in :data:`GLUED`, so the chapter still runs to the end.

Example::

    >>> from iclgd.book import GLUED, glue
    >>> glue("p0_example", "0.1336")
    >>> GLUED["p0_example"]
    '0.1336'
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

from .checks import ArgumentTypeError

__all__ = ["glue", "fmt", "bound", "GLUED"]

GLUED: dict[str, object] = {}
"""Every value glued in this process, by name (the last one wins)."""


def glue(name: str, value, display: bool = False) -> None:
    """Glue ``value`` under ``name`` for the book's markdown (myst-nb), or just remember it.

    Args:
        name: the glue key, a non-empty string without whitespace (``{glue:text}`name```).
        value: what the page shows; the book glues strings formatted at the precision the
            computation guarantees (``f"{x:.3f}"``), so that the text is the same on every CPU.
        display: also show the value as the cell's output (myst-nb's ``display``).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: ``name`` is empty or holds whitespace.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if not name or any(ch.isspace() for ch in name):
        raise ValueError(f"name must be a non-empty glue key without whitespace, got {name!r}")
    if not isinstance(display, bool):
        raise ArgumentTypeError(f"display must be a bool (True or False), got {display!r}")
    GLUED[name] = value
    try:
        from myst_nb import glue as _myst_glue
    except ModuleNotFoundError:  # Colab or a bare Jupyter: nothing pastes glued values there
        return None
    _myst_glue(name, value, display=display)
    return None


def fmt(x, spec: str) -> str:
    """``format(x, spec)`` without a negative zero: ``fmt(-1e-9, ".0f") == "0"``, not ``"-0"``.

    A quantity that is zero in exact arithmetic comes out as ``+-1e-16`` in floating point, its sign
    set by the CPU's rounding; printed at any fixed precision it must read the same on every CPU.
    Every part of ``spec`` is kept (width, fill and alignment, a ``+`` or space sign flag,
    grouping, the types ``f``, ``e``, ``g``, ``%``): a value that rounds to zero is printed as
    ``format(0.0, spec)``.

    >>> fmt(-3e-13, ".2f"), fmt(-0.25, ".1f"), fmt(2.5e-7, ".1e")
    ('0.00', '-0.2', '2.5e-07')
    >>> fmt(-0.04, "8.1f"), fmt(-0.004, "+.2f")
    ('     0.0', '+0.00')

    Raises:
        iclgd.checks.ArgumentTypeError: ``x`` is not a real number, ``spec`` not a string.
        ValueError: ``spec`` is not a valid format specification for a float.
    """
    if not isinstance(spec, str):
        raise ArgumentTypeError(
            f"spec must be a format string such as '.3f', got {type(spec).__name__}"
        )
    value = _real(x)
    try:
        text = format(value, spec)
    except ValueError as e:
        raise ValueError(
            f"spec must be a format specification for a float, got {spec!r}: {e}"
        ) from None
    if text == format(-0.0, spec):  # rounds to a negative zero: print a zero the same way
        text = format(0.0, spec)
    return text


def _real(x) -> float:
    """``x`` as a ``float``: a real number or a 0-d real array, never a string or a bool."""
    import numpy as np

    if isinstance(x, (str, bytes, bool, np.bool_)):
        raise ArgumentTypeError(f"x must be a real number, got {x!r}")
    try:
        a = np.asarray(x)
    except Exception:
        a = None
    if a is None or a.dtype.kind not in "fiu" or a.shape != ():
        what = f"an array of shape {a.shape}" if a is not None and a.shape else type(x).__name__
        raise ArgumentTypeError(f"x must be a real number, got {what}")
    return float(a)


def bound(x, digits: int, side: str) -> str:
    """``x`` with ``digits`` decimals, rounded outward so that the text stays a bound.

    A largest excess printed as "within 0.4 %" is false when the excess is 0.44 %: an upper bound
    ("at most", "within", "≤") is rounded up, a lower bound ("at least", "≥") down. The decimal
    expansion of the float is rounded, not the float times ``10**digits``, so a value that prints
    as ``0.14`` stays ``0.14``.

    >>> bound(0.1401, 2, "upper"), bound(0.14, 2, "upper"), bound(0.7849, 2, "lower")
    ('0.15', '0.14', '0.78')
    >>> bound(13.0, 0, "upper"), bound(-0.001, 2, "upper")
    ('13', '0.00')

    Args:
        x: a finite real number.
        digits: decimals to print, an int ``>= 0``.
        side: ``"upper"`` (round up) or ``"lower"`` (round down).

    Raises:
        iclgd.checks.ArgumentTypeError: ``x`` is not a real number or ``digits`` not an int.
        ValueError: ``x`` is not finite, ``digits < 0``, or ``side`` is neither of the two.
    """
    if isinstance(digits, bool) or not isinstance(digits, int):
        raise ArgumentTypeError(f"digits must be an int, got {type(digits).__name__}")
    if digits < 0:
        raise ValueError(f"digits must be >= 0, got {digits}")
    if side not in ("upper", "lower"):
        raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
    value = _real(x)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"x must be finite, got {value}")
    rounding = ROUND_CEILING if side == "upper" else ROUND_FLOOR
    exact = Decimal(repr(value))
    with localcontext() as ctx:  # enough digits for any float at any number of decimals
        ctx.prec = max(28, exact.adjusted() + digits + 2)
        out = exact.quantize(Decimal(1).scaleb(-digits), rounding=rounding)
    if out == 0:
        out = abs(out)  # no "-0.00"
    return f"{out:f}"
