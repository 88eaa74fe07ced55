"""Unit-test fixtures shared by every test file: float64 for exact comparisons (the notebooks keep
JAX's float32 default), a ``float32`` fixture for the chapters' default-precision paths, and the
Agg backend for the figure tests."""

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

from iclgd import metrics, tasks

matplotlib.use("Agg")


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


# Part II (Yang et al.): the representation tasks shared by the tests of iclgd.tasks.representation,
# iclgd.models.softmax / transformer, iclgd.exact.representation, iclgd.baselines, iclgd.metrics
# and iclgd.training. The test files use the same sizes as module constants.
SOFTMAX_TASK = dict(K=10, d=4, m=5, N=3, tau=0.1)  # with H = 4 heads
RIDGE_TASK = dict(K=12, d=5, m=4, N=3, tau=0.1)
DEEP_TASK = dict(K=10, d=4, m=3, N=4, tau=0.3)


@pytest.fixture(scope="session")
def spec():
    """The task of the one-layer softmax model's tests (``K=10, d=4, m=5, N=3, tau=0.1``)."""
    return tasks.make_representation_spec(jax.random.PRNGKey(0), **SOFTMAX_TASK)


@pytest.fixture(scope="session")
def params():
    """Softmax-attention parameters for :func:`spec` with ``H = 4`` heads (not trained)."""
    d, K, H = SOFTMAX_TASK["d"], SOFTMAX_TASK["K"], 4
    rng1, rng2 = np.random.default_rng(1), np.random.default_rng(2)
    return {
        "Q": jnp.asarray(rng1.standard_normal((H, d, d)), dtype=jnp.float32),
        "w": jnp.asarray(rng2.standard_normal((H, K)), dtype=jnp.float32),
    }


@pytest.fixture(scope="session")
def big_batch(spec):
    """100,000 prompts of :func:`spec` (Monte Carlo checks of exact expectations)."""
    return tasks.sample_representation_tasks(jax.random.PRNGKey(9), spec, 100_000)


@pytest.fixture(scope="session")
def batch(big_batch):
    """The first 6 prompts of :func:`big_batch`."""
    return jax.tree_util.tree_map(lambda a: a[:6], big_batch)


@pytest.fixture(scope="session")
def rep_spec():
    """The task of the ridge-predictor and sampler tests (``K=12, d=5, m=4, N=3, tau=0.1``)."""
    return tasks.make_representation_spec(jax.random.PRNGKey(0), **RIDGE_TASK)


@pytest.fixture(scope="session")
def rep_batch(rep_spec):
    """64 prompts of :func:`rep_spec`."""
    return tasks.sample_representation_tasks(jax.random.PRNGKey(1), rep_spec, 64)


@pytest.fixture(scope="session")
def deep_spec():
    """The task of the Sec. 4 loss tests (``K=10, d=4, m=3, N=4, tau=0.3``)."""
    return tasks.make_representation_spec(jax.random.PRNGKey(0), **DEEP_TASK)


@pytest.fixture(scope="session")
def deep_sets(deep_spec):
    """Sec. 4's in-domain and out-of-domain test sets of :func:`deep_spec`, 4,000 prompts each."""
    return metrics.inference_sets(jax.random.PRNGKey(1), deep_spec, 4000)
