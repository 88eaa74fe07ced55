"""Tests of the fast task sampler (iclgd.tasks.sample_tasks / standard_normal).

The sampler computes JAX's own threefry normals with a fused, unrolled hash. These tests check that
the numbers are bit-identical to ``jax.random.normal`` (so the distribution is exactly JAX's
N(0, 1)), that the normals pass distributional tests, and that sampling is reproducible for every
key type.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from iclgd import tasks
from iclgd.tasks import standard_normal

_reference_sample = tasks.sample_tasks_reference


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (301, 11, 10), (1001, 3, 3)])
def test_standard_normal_is_bit_identical_to_jax(x64, shape):
    with jax.enable_x64(x64):
        for key in [
            jax.random.key(0),
            jax.random.fold_in(jax.random.key(12345), 7),
            jax.random.PRNGKey(3),
        ]:
            fast = standard_normal(key, shape)
            ref = jax.jit(jax.random.normal, static_argnums=1)(key, shape)
            assert fast.dtype == ref.dtype == (jnp.float64 if x64 else jnp.float32)
            np.testing.assert_array_equal(np.asarray(fast), np.asarray(ref))
        # eager call too
        np.testing.assert_array_equal(
            standard_normal(jax.random.key(5), shape), jax.random.normal(jax.random.key(5), shape)
        )


@pytest.mark.parametrize("identity", [True, False])
@pytest.mark.parametrize("noise", [0.0, 0.3])
def test_sample_tasks_equals_the_reference_algorithm(identity, noise):
    d = 3
    kw = (
        {}
        if identity
        else dict(
            Sigma=jnp.array([[2.0, 0.3, 0], [0.3, 1, 0.2], [0, 0.2, 0.5]]),
            Omega=jnp.array([[1.0, 0.5, 0], [0.5, 2, 0], [0, 0, 0.3]]),
        )
    )
    prior = tasks.make_prior(d, mu=jnp.array([1.0, -2.0, 0.5]), noise_std=noise, **kw)
    with jax.enable_x64(False):
        prior32 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), prior)
        for key in [jax.random.key(1), jax.random.key(2)]:
            new = jax.jit(tasks.sample_tasks, static_argnums=(2, 3))(key, prior32, 6, 257)
            ref = jax.jit(_reference_sample, static_argnums=(2, 3))(key, prior32, 6, 257)
            for a, b in zip(new, ref):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_normals_are_standard_normal():
    """KS, chi-square (40 equiprobable bins) and the first four moments, on 2e6 float32 draws."""
    with jax.enable_x64(False):
        z = np.asarray(
            standard_normal(jax.random.key(2024), (2000, 1000)), dtype=np.float64
        ).ravel()
    n = z.size
    assert stats.kstest(z, "norm").pvalue > 1e-3
    edges = stats.norm.ppf(np.linspace(0, 1, 41))
    counts, _ = np.histogram(z, edges)
    assert stats.chisquare(counts).pvalue > 1e-3
    # moments within 4 standard errors: mean (se 1), variance (se sqrt 2), skewness
    # (sqrt 6), kurtosis (sqrt 24)
    assert abs(z.mean()) < 4 / np.sqrt(n)
    assert abs(z.var() - 1) < 4 * np.sqrt(2 / n)
    assert abs(stats.skew(z)) < 4 * np.sqrt(6 / n)
    assert abs(stats.kurtosis(z)) < 4 * np.sqrt(24 / n)
    # a wrong generator fails these checks: uniforms scaled to unit variance
    u = (np.random.default_rng(0).random(n) - 0.5) * np.sqrt(12)
    assert stats.kstest(u, "norm").pvalue < 1e-6


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "unsafe_rbg"])
def test_sampling_reproducible_for_every_key_type(impl):
    prior = tasks.make_prior(2, mu=jnp.ones(2), noise_std=0.1)
    a = tasks.sample_tasks(jax.random.key(7, impl=impl), prior, 4, 100)
    b = tasks.sample_tasks(jax.random.key(7, impl=impl), prior, 4, 100)
    c = tasks.sample_tasks(jax.random.key(8, impl=impl), prior, 4, 100)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a.X, c.X)
    # the labels follow the model
    np.testing.assert_allclose(a.y_target, jnp.einsum("bd,bd->b", a.x_q, a.w), atol=1.0)


def test_sampling_under_vmap_matches_per_key_calls():
    prior = tasks.make_prior(3, mu=jnp.ones(3))
    keys = jax.random.split(jax.random.key(0), 4)
    batched = jax.vmap(lambda k: tasks.sample_tasks(k, prior, 5, 16))(keys)
    for i in range(4):
        single = tasks.sample_tasks(keys[i], prior, 5, 16)
        np.testing.assert_array_equal(batched.X[i], single.X)
        np.testing.assert_array_equal(batched.y_target[i], single.y_target)
