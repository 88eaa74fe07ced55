"""Tests of iclgd.metrics: the squared error and the function comparison of Xie et al. App. C.2."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import metrics


def test_mse_and_its_errors():
    assert float(metrics.mse(jnp.array([1.0, 3.0]), jnp.array([0.0, 1.0]))) == 2.5
    with pytest.raises(ValueError, match="same shape"):
        metrics.mse(jnp.zeros(3), jnp.zeros(4))
    with pytest.raises(ValueError, match="must not be empty"):
        metrics.mse(jnp.zeros(0), jnp.zeros(0))


def test_input_gradient_of_one_gd_step_is_its_weight_vector():
    d, C = 4, 7
    t = iclgd.sample_tasks(jax.random.key(0), iclgd.make_prior(d, mu=jnp.ones(d)), C, 32)
    w0, eta = jnp.ones(d), 0.3
    f = lambda tb: iclgd.gd_one_step(tb.X, tb.y, tb.x_q, w0, eta)
    # f = w1^T x_q, so d f / d x_q = w1 = w0 - (eta/C) X^T (X w0 - y), per prompt
    w1 = w0 - eta / C * jnp.einsum("bcd,bc->bd", t.X, jnp.einsum("bcd,d->bc", t.X, w0) - t.y)
    np.testing.assert_allclose(metrics.input_gradient(f, t), w1, rtol=1e-5)


def test_compare_predictors():
    d, C = 3, 50
    t = iclgd.sample_tasks(jax.random.key(1), iclgd.make_prior(d), C, 64)
    gd = lambda tb: iclgd.gd_one_step(tb.X, tb.y, tb.x_q, jnp.zeros(d), 1.0)
    same = metrics.compare_predictors(gd, gd, t)
    np.testing.assert_allclose(same["pred_diff"], 0.0)
    np.testing.assert_allclose(same["cos"], 1.0, rtol=1e-5)
    # with C = 50 >> d one GD step from 0 (eta = 1) nearly recovers w: cos_ref close to 1
    assert same["cos_ref"].mean() > 0.9
    flipped = metrics.compare_predictors(lambda tb: -gd(tb), gd, t)
    np.testing.assert_allclose(flipped["cos"], -1.0, rtol=1e-5)
    np.testing.assert_allclose(
        flipped["grad_diff"] / 2, np.linalg.norm(metrics.input_gradient(gd, t), axis=-1), rtol=1e-5
    )
