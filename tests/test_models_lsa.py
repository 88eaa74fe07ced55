"""Tests of iclgd.models.lsa: multi-head LSA and y_q-LSA of Xie et al. (efficient vs literal
forward, the GD construction, eq. 7's scaling, shapes)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import baselines, tasks
from iclgd.models import lsa


def _prior(d=3, w=1.0, **kw):
    return tasks.make_prior(d, mu=w * jnp.arange(1.0, d + 1) / d, **kw)


# ---------------------------------------------------------------- LSA
@pytest.mark.parametrize("H", [1, 3])
def test_lsa_efficient_equals_literal(H):
    tb = tasks.sample_tasks(jax.random.key(0), _prior(d=3), C=5, batch=6)
    E = tasks.embed(tb, jax.random.normal(jax.random.key(9), (6,)))
    p = lsa.init_lsa(jax.random.key(1), 3, H, init_std=0.7)
    np.testing.assert_allclose(
        lsa.lsa_predict(p, E), lsa.lsa_output(p, E)[:, -1, -1], rtol=1e-10, atol=1e-10
    )


def test_lsa_gd_construction_is_one_gd_step():
    """Xie et al. eq. 7-9: LSA at the GD weights with y_q = w*^T x_q is one GD step from w*."""
    d, C = 4, 6
    prior = _prior(d=d, w=2.0)
    tb = tasks.sample_tasks(jax.random.key(2), prior, C, 16)
    for eta in [0.3, 1.1]:
        p = lsa.gd_weights(prior.mu, eta, H=2)
        pred = lsa.lsa_predict(p, tasks.embed(tb, tb.x_q @ prior.mu))
        ref = baselines.gd_one_step(tb.X, tb.y, tb.x_q, prior.mu, eta)
        np.testing.assert_allclose(pred, ref, rtol=1e-10, atol=1e-10)


def test_yq_lsa_at_gd_weights_with_w_star_is_gd():
    d, C = 3, 5
    prior = _prior(d=d, w=-1.5)
    tb = tasks.sample_tasks(jax.random.key(4), prior, C, 8)
    p = {"attn": lsa.gd_weights(prior.mu, 0.6), "w": prior.mu}
    np.testing.assert_allclose(
        lsa.yq_lsa_predict(p, tb),
        baselines.gd_one_step(tb.X, tb.y, tb.x_q, prior.mu, 0.6),
        rtol=1e-10,
        atol=1e-10,
    )


def test_paper_eq7_scaling_gives_eta_over_C():
    """With W^P = -(eta/C) I as printed in eq. 7, the step is eta/C, not eta
    (eq. 3 already has 1/C)."""
    d, C, eta = 2, 4, 0.8
    prior = _prior(d=d)
    tb = tasks.sample_tasks(jax.random.key(5), prior, C, 5)
    p = lsa.gd_weights(prior.mu, eta / C)  # W^P = -(eta/C) I
    pred = lsa.lsa_predict(p, tasks.embed(tb, tb.x_q @ prior.mu))
    np.testing.assert_allclose(
        pred, baselines.gd_one_step(tb.X, tb.y, tb.x_q, prior.mu, eta / C), rtol=1e-10
    )
    assert not np.allclose(pred, baselines.gd_one_step(tb.X, tb.y, tb.x_q, prior.mu, eta))


@pytest.mark.parametrize("B,C,d,H", [(1, 1, 1, 1), (3, 4, 2, 5), (2, 10, 10, 11)])
def test_output_shapes(B, C, d, H):
    prior = tasks.make_prior(d)
    tb = tasks.sample_tasks(jax.random.key(0), prior, C, B)
    p = lsa.init_lsa(jax.random.key(1), d, H)
    assert lsa.lsa_predict(p, tasks.embed(tb)).shape == (B,)
    assert lsa.lsa_output(p, tasks.embed(tb)).shape == (B, d + 1, C + 1)
    assert lsa.yq_lsa_predict(lsa.init_yq_lsa(jax.random.key(2), d, H), tb).shape == (B,)
    assert baselines.bayes_posterior_mean(tb, prior).shape == (B,)
    assert baselines.ridge(tb.X, tb.y, tb.x_q, 0.1).shape == (B,)
    b, A = lsa.lsa_reduced(p)
    assert b.shape == (H, d + 1) and A.shape == (H, d + 1, d + 1)
