"""The one scale knob of iclgd.

Every experiment in the book reads its size (training steps, batch sizes, seeds, sweep grids) from
:func:`pick`, which looks at the environment variable ``ICLGD_SCALE`` -- the only place in iclgd
that reads it.

* ``ci`` (default): small enough that ``pytest --nbval book`` finishes in minutes on 2 CPU cores,
  large enough that every figure still shows the paper's effect.
* ``paper``: the papers' exact settings.

Example::

    steps = iclgd.pick(ci=1000, paper=5000)
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

SCALES = ("ci", "paper")
ENV_VAR = "ICLGD_SCALE"


def scale() -> str:
    """Return the current scale name, ``'ci'`` or ``'paper'``.

    Raises:
        ValueError: if ``ICLGD_SCALE`` holds any other value.
    """
    value = os.environ.get(ENV_VAR, "ci").strip().lower() or "ci"
    if value not in SCALES:
        raise ValueError(
            f"ICLGD_SCALE must be one of {SCALES}, got {value!r}; "
            f"unset it or set ICLGD_SCALE=ci (default) or ICLGD_SCALE=paper"
        )
    return value


def pick(*, ci: T, paper: T) -> T:
    """Return ``ci`` or ``paper`` according to the current scale (see :func:`scale`)."""
    return ci if scale() == "ci" else paper
