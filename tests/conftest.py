"""Unit-test fixtures: float64 for exact comparisons (the notebooks keep JAX's float32 default)."""

import jax
import pytest


@pytest.fixture(autouse=True, scope="session")
def _x64():
    jax.config.update("jax_enable_x64", True)
    yield
