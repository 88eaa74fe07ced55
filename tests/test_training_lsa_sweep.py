"""Tests of iclgd.training.lsa_sweep: Part I's configurations trained together on one stream of
prompts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd.training.lsa_sweep import LSASweep, SweepConfig, along_ones

d, C, batch = 3, 5, 256

CONFIGS = [
    SweepConfig(1, 4.0),
    SweepConfig(4, 4.0),
    SweepConfig(4, 0.0, 2.0, 0.0),
    SweepConfig(4, 0.0, 0.0, 1.5),
    SweepConfig(2, 1.0, 0.5, 0.25),
]


@pytest.fixture(scope="module")
def sweep():
    return LSASweep(d, C, batch, CONFIGS)


def test_shared_batch_losses_equal_each_models_own_loss(sweep):
    P = sweep.init(jax.random.key(0), init_std=0.3)
    key = jax.random.key(1)
    shared = np.asarray(sweep.sampled_losses(P, key))
    t0 = iclgd.sample_tasks(key, iclgd.make_prior(d), C, batch)
    for j, c in enumerate(CONFIGS):
        mu, g = along_ones(d, c.w2), along_ones(d, c.g2)
        t = t0._replace(y=t0.y + t0.X @ mu, y_target=t0.y_target + t0.x_q @ mu)  # prior mean mu
        model = iclgd.models.lsa_model(d, c.H, guess=g, bias=np.sqrt(c.c2))
        direct = float(iclgd.mse(model.predict(sweep.params(P, j), t), t.y_target))
        assert abs(shared[j] - direct) < 1e-5 * direct, (c, shared[j], direct)


def test_exact_losses_equal_the_exact_risk_of_each_prior(sweep):
    P = sweep.init(jax.random.key(2), init_std=0.3)
    fast = np.asarray(sweep.exact_losses(P))
    own = sweep.exact_risks(P)  # float64, each configuration's own prior's moments
    np.testing.assert_allclose(fast, own, rtol=1e-4)


def test_training_together_equals_training_alone_and_keeps_padded_heads_zero(sweep):
    P0 = sweep.init(jax.random.key(3))
    res = iclgd.train(
        sweep.sampled_loss, P0, jax.random.key(4), steps=60, has_aux=True, learning_rate=1e-2
    )
    assert res.aux.shape == (60, len(CONFIGS))
    np.testing.assert_allclose(res.aux.sum(1), res.losses, rtol=1e-5)
    j = sweep.index(4, 4.0)
    c = CONFIGS[j]
    alone = iclgd.train(
        iclgd.sampled_loss(
            iclgd.models.lsa_model(d, c.H),
            iclgd.make_prior(d, mu=jnp.asarray(along_ones(d, c.w2))),
            C,
            batch,
        ),
        sweep.params(P0, j),
        jax.random.key(4),
        steps=60,
        learning_rate=1e-2,
    )
    np.testing.assert_allclose(res.aux[:, j], alone.losses, rtol=2e-3)
    for k, x in res.params.items():
        pad = np.asarray(x) * (1 - sweep.mask[:, :, None, None])
        assert np.all(pad == 0.0), k


def test_sweep_bad_input():
    with pytest.raises(ValueError, match="must not repeat"):
        LSASweep(d, C, batch, [SweepConfig(1), SweepConfig(1)])
    with pytest.raises(ValueError, match="no configuration"):
        LSASweep(d, C, batch, [SweepConfig(1)]).index(2)
    with pytest.raises(ValueError, match="w2 must be a finite number >= 0"):
        LSASweep(d, C, batch, [SweepConfig(1, -1.0)])


def test_init_params_and_index(sweep):
    key = jax.random.key(5)
    P = sweep.init(key, init_std=0.2)
    full = iclgd.models.lsa.init_lsa(key, d, sweep.HMAX, 0.2)
    for j, c in enumerate(CONFIGS):
        assert sweep.index(*c) == j
        p = sweep.params(P, j)
        for k, x in p.items():
            assert x.shape == (c.H, d + 1, d + 1)
            np.testing.assert_array_equal(np.asarray(x), np.asarray(full[k][: c.H]))
            assert np.all(np.asarray(P[k][j, c.H :]) == 0.0)


def test_sampled_losses_average_to_the_exact_risks(sweep):
    P = sweep.init(jax.random.key(6), init_std=0.3)
    keys = jax.random.split(jax.random.key(7), 64)
    per_batch = np.asarray(jax.jit(jax.vmap(lambda k: sweep.sampled_losses(P, k)))(keys))
    mean, se = per_batch.mean(0), per_batch.std(0, ddof=1) / np.sqrt(len(keys))
    exact_risks = sweep.exact_risks(P)
    assert np.all(np.abs(mean - exact_risks) < 5 * se), (mean, exact_risks, se)
    assert np.all(se < 0.05 * exact_risks)  # the test has power: 5 se is under 25 % of the risk
