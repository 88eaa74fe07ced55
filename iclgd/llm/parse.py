"""A strict parser of the LLM's answers: a score in ``[0, 5]`` or a recorded failure.

The prompt asks for the score alone. The parser reads the answer's first non-empty line; after
removing Markdown emphasis (``*``, ``_``, backticks) and a final period it accepts

* a plain decimal number, ``3``, ``3.8``, ``.5``, ``4.00``;
* optionally after a label of words ending in ``score``, ``answer``, ``rating`` or ``similarity``
  and ``:``, ``=`` or ``is`` (``Score: 3.8``, ``The refined similarity score is 3.80``);
* optionally followed by ``/5`` or ``out of 5``.

Anything else -- no number, two numbers, a word for a number, a range, a sign, an exponent, a
decimal comma, a value outside ``[0, 5]`` -- is *unparsed*: :func:`parse_score` returns it with the
reason, it is never guessed at and never raises, and the runner counts it.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

__all__ = ["Answer", "parse_score", "REASONS"]

REASONS = ("ok", "empty", "not a score", "out of range")

_LABEL = r"(?:(?:[a-z]+\s+)*?(?:score|answer|rating|similarity)\s*(?::|=|\bis\b)\s*)?"
_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_SCALE = r"(?:\s*/\s*5(?:\.0+)?|\s+out\s+of\s+5(?:\.0+)?)?"
_PATTERN = re.compile(rf"^{_LABEL}{_NUMBER}{_SCALE}$", re.IGNORECASE)


class Answer(NamedTuple):
    """A parsed answer: ``value`` (NaN unless ``ok``), ``ok``, the ``reason`` (one of
    :data:`REASONS`) and the raw ``text``."""

    value: float
    ok: bool
    reason: str
    text: str


def parse_score(text: str) -> Answer:
    """Parse an answer strictly (see the module docstring); never raises on a string.

    Raises:
        TypeError: ``text`` is not a string (a programming error, not a bad answer).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string (the model's answer), got {type(text).__name__}")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return Answer(math.nan, False, "empty", text)
    line = re.sub(r"[*_`]", "", lines[0]).strip().rstrip(".").strip()
    m = _PATTERN.match(line)
    if m is None:
        return Answer(math.nan, False, "not a score", text)
    value = float(m.group(1))
    if not 0.0 <= value <= 5.0:
        return Answer(math.nan, False, "out of range", text)
    return Answer(value, True, "ok", text)
