"""The one scale knob of iclgd.

Every experiment in the book reads its size (training steps, batch sizes, seeds, sweep grids) from
:func:`pick`, which looks at the environment variable ``ICLGD_SCALE`` -- the only place in iclgd
that reads it.

* ``ci`` (default): small enough that ``pytest --nbval book`` finishes in minutes on 2 CPU cores,
  large enough that every figure still shows the paper's effect.
* ``paper``: the papers' exact settings.

Example::

    steps = iclgd.pick(ci=1000, paper=5000)

It also reads ``ICLGD_RUN_CACHE`` (:func:`run_cache_dir`: where a paper-scale run saves the
training runs a deadline could cut, :func:`iclgd.training.timed_train`; unset: nowhere), and holds
the one other process-wide setting iclgd makes, :func:`full_float32_matmuls`, applied when iclgd is
imported: float32 matrix products in full float32 on every device. JAX's default on
recent NVIDIA GPUs (A100, L4, H100, ...) rounds their inputs to TensorFloat-32 (10-bit mantissa),
which broke the book's float32 checks (relative errors of 3e-5 against an allowed 1e-5) on an H200.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

SCALES = ("ci", "paper")
ENV_VAR = "ICLGD_SCALE"
PRECISION_ENV_VAR = "JAX_DEFAULT_MATMUL_PRECISION"
RUN_CACHE_ENV_VAR = "ICLGD_RUN_CACHE"


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


def run_cache_dir() -> Path | None:
    """The folder named by ``ICLGD_RUN_CACHE`` (``None`` when unset or empty).

    ``scripts/paper_run.sh`` sets it for a paper-scale run on a lent GPU, so that the training runs
    of :func:`iclgd.training.timed_train` with ``store=`` survive a deadline and a later call
    resumes them.

    Raises:
        ValueError: if it names something that exists and is not a folder.
    """
    value = os.environ.get(RUN_CACHE_ENV_VAR, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{RUN_CACHE_ENV_VAR} must name a folder, got the file {str(path)!r}")
    return path


def full_float32_matmuls() -> bool:
    """Make JAX compute float32 matrix products in full float32 on every device.

    Sets ``jax_default_matmul_precision`` to ``"highest"`` unless the user already chose a
    precision (the ``JAX_DEFAULT_MATMUL_PRECISION`` environment variable, or
    ``jax.config.update("jax_default_matmul_precision", ...)`` before importing iclgd), which is
    kept. On a CPU this changes nothing (its float32 products are full float32 already); on a GPU
    with tensor cores it turns off TensorFloat-32, so the book's checks hold to float32 precision
    there too. Called once when iclgd is imported.

    Returns:
        True if this call set the precision, False if a user's choice was kept.
    """
    import jax

    if os.environ.get(PRECISION_ENV_VAR) or jax.config.jax_default_matmul_precision is not None:
        return False
    jax.config.update("jax_default_matmul_precision", "highest")
    return True
