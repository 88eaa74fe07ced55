"""What a chapter needs of the book itself: :func:`glue`, and :func:`fmt` for the text it glues.

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

__all__ = ["glue", "fmt", "GLUED"]

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

    >>> fmt(-3e-13, ".2f"), fmt(-0.25, ".1f"), fmt(2.5e-7, ".1e")
    ('0.00', '-0.2', '2.5e-07')
    """
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a format string such as '.3f', got {type(spec).__name__}")
    text = format(float(x), spec)
    mantissa = text.split("e")[0].split("E")[0]
    if text.startswith("-") and not any(ch in "123456789" for ch in mantissa):
        text = text[1:]
    return text
