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


# ---------------------------------------------------------------- LTB (eq. 30) <-> y_q-LSA
def _ltb_params(key, d, scale=1.0):
    ks = jax.random.split(key, 6)
    keys = ("W1", "W2", "WP", "WV", "WK", "WQ")
    return {k: scale * jax.random.normal(kk, (d + 1, d + 1)) for k, kk in zip(keys, ks)}


def test_yq_lsa_from_ltb_computes_the_block_on_every_prompt():
    """LTB -> y_q-LSA: the same prediction, also on labels that no linear task produced."""
    d, C = 3, 5
    tb = tasks.sample_tasks(jax.random.key(3), _prior(d=d), C, 32)
    tb = tb._replace(y=tb.y + jax.random.normal(jax.random.key(4), tb.y.shape))  # any labels
    P = _ltb_params(jax.random.key(5), d)
    f_ltb = lsa.ltb_predict(P, tasks.embed(tb))
    f_yq = lsa.yq_lsa_predict(lsa.yq_lsa_from_ltb(P), tb)
    np.testing.assert_allclose(f_yq, f_ltb, rtol=1e-10, atol=1e-10 * float(jnp.max(jnp.abs(f_ltb))))
    # the guess is the last row of W_2^T W_1 without its label entry
    np.testing.assert_allclose(lsa.yq_lsa_from_ltb(P)["w"], (P["W2"].T @ P["W1"])[-1, :d])


def test_ltb_and_yq_lsa_round_trip():
    """y_q-LSA -> LTB (Lemma 3, corrected) -> y_q-LSA: the predictor is unchanged."""
    d, C = 2, 4
    tb = tasks.sample_tasks(jax.random.key(6), _prior(d=d), C, 16)
    p = lsa.init_yq_lsa(jax.random.key(7), d, init_std=0.5, w=jnp.array([0.3, -1.2]))
    back = lsa.yq_lsa_from_ltb(lsa.ltb_from_yq_lsa(p))
    np.testing.assert_allclose(
        lsa.yq_lsa_predict(back, tb), lsa.yq_lsa_predict(p, tb), rtol=1e-9, atol=1e-9
    )


def test_yq_lsa_from_ltb_rejects_bad_input():
    P = _ltb_params(jax.random.key(8), 2)
    with pytest.raises(ValueError, match="W1"):
        lsa.yq_lsa_from_ltb({k: x for k, x in P.items() if k != "W1"})
    with pytest.raises(ValueError, match="WQ"):
        lsa.yq_lsa_from_ltb({**P, "WQ": jnp.ones((3, 4))})
