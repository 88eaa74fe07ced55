"""Unit-test fixtures: float64 for exact comparisons (the notebooks keep JAX's float32 default)."""

import jax
import pytest


@pytest.fixture(autouse=True, scope="session")
def _x64():
    jax.config.update("jax_enable_x64", True)
    yield


@pytest.fixture
def float32():
    """Run a test in JAX's default float32 (x64 off), as the chapters do: the other tests run in
    float64 (``_x64``), so the float32 paths are tested only where a test asks for this fixture
    (``pytestmark = pytest.mark.usefixtures("float32")`` for a whole module)."""
    with jax.enable_x64(False):
        yield
