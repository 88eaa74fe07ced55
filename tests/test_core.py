"""Unit tests of iclgd.config, iclgd.tasks, iclgd.models.lsa, iclgd.baselines and iclgd.training."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import iclgd
from iclgd import baselines, config, exact, tasks
from iclgd import training as train
from iclgd.models import lsa


def _prior(d=3, w=1.0, **kw):
    return tasks.make_prior(d, mu=w * jnp.arange(1.0, d + 1) / d, **kw)


# ---------------------------------------------------------------- config
def test_scale_default_and_pick(monkeypatch):
    monkeypatch.delenv("ICLGD_SCALE", raising=False)
    assert config.scale() == "ci"
    assert config.pick(ci=1, paper=2) == 1
    monkeypatch.setenv("ICLGD_SCALE", "paper")
    assert config.scale() == "paper"
    assert config.pick(ci=1, paper=2) == 2


def test_importing_iclgd_asks_for_full_float32_matmuls(monkeypatch):
    # importing iclgd set it (no TensorFloat-32 on a GPU): a float32 product agrees with float64
    assert jax.config.jax_default_matmul_precision == "highest"
    x = jax.random.normal(jax.random.key(0), (64, 64))
    exact64 = np.asarray(x, np.float64) @ np.asarray(x, np.float64)
    assert np.max(np.abs(np.asarray(x @ x) - exact64)) < 1e-4
    # a user's choice is kept: the environment variable, or a value set before the call
    monkeypatch.setenv(config.PRECISION_ENV_VAR, "tensorfloat32")
    assert config.full_float32_matmuls() is False
    monkeypatch.delenv(config.PRECISION_ENV_VAR)
    with jax.default_matmul_precision("bfloat16"):
        assert config.full_float32_matmuls() is False
        assert jax.config.jax_default_matmul_precision == "bfloat16"
    assert jax.config.jax_default_matmul_precision == "highest"
    jax.config.update("jax_default_matmul_precision", None)
    try:
        assert config.full_float32_matmuls() is True
    finally:
        jax.config.update("jax_default_matmul_precision", "highest")
    assert jax.config.jax_default_matmul_precision == "highest"


def test_scale_is_read_in_one_place():
    import pathlib

    src = pathlib.Path(iclgd.__file__).parent
    readers = [
        p.name
        for p in src.glob("*.py")
        if "ICLGD_SCALE" in p.read_text() and "environ" in p.read_text()
    ]
    assert readers == ["config.py"]


# ---------------------------------------------------------------- tasks
def test_sample_shapes_and_labels():
    prior = _prior(d=4, noise_std=0.0)
    tb = tasks.sample_tasks(jax.random.key(0), prior, C=7, batch=5)
    assert tb.X.shape == (5, 7, 4) and tb.y.shape == (5, 7) and tb.x_q.shape == (5, 4)
    assert tb.y_target.shape == (5,) and tb.w.shape == (5, 4)
    np.testing.assert_allclose(tb.y, jnp.einsum("bcd,bd->bc", tb.X, tb.w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        tb.y_target, jnp.einsum("bd,bd->b", tb.x_q, tb.w), rtol=1e-12, atol=1e-12
    )


def test_sample_reproducible_and_key_dependent():
    prior = _prior()
    a = tasks.sample_tasks(jax.random.key(1), prior, 5, 3)
    b = tasks.sample_tasks(jax.random.key(1), prior, 5, 3)
    c = tasks.sample_tasks(jax.random.key(2), prior, 5, 3)
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.allclose(a.X, c.X)


def test_sample_moments_match_prior():
    d = 3
    A = jnp.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    Om = jnp.array([[1.0, 0.5, 0.0], [0.5, 2.0, 0.0], [0.0, 0.0, 0.3]])
    prior = tasks.make_prior(d, mu=jnp.array([1.0, -2.0, 0.5]), Sigma=A, Omega=Om, noise_std=0.7)
    n = 200_000
    tb = tasks.sample_tasks(jax.random.key(3), prior, C=2, batch=n)
    x = np.asarray(tb.X[:, 0])
    w = np.asarray(tb.w)
    # 4-standard-error bands for the empirical mean and covariance entries
    assert np.all(np.abs(w.mean(0) - prior.mu) < 4 * np.sqrt(np.diag(Om) / n))
    assert np.allclose(np.cov(x.T), A, atol=4 * 2 * 2.0 / np.sqrt(n))
    assert np.allclose(np.cov(w.T), Om, atol=4 * 2 * 2.0 / np.sqrt(n))
    noise = np.asarray(tb.y[:, 0] - jnp.einsum("bd,bd->b", tb.X[:, 0], tb.w))
    assert abs(noise.var() - 0.49) < 4 * 0.49 * np.sqrt(2 / n)


def test_embed_layout():
    tb = tasks.sample_tasks(jax.random.key(0), _prior(d=2), C=3, batch=4)
    yq = jnp.arange(4.0)
    E = tasks.embed(tb, yq)
    assert E.shape == (4, 3, 4)
    np.testing.assert_array_equal(E[:, :2, :3], jnp.swapaxes(tb.X, 1, 2))
    np.testing.assert_array_equal(E[:, 2, :3], tb.y)
    np.testing.assert_array_equal(E[:, :2, 3], tb.x_q)
    np.testing.assert_array_equal(E[:, 2, 3], yq)
    np.testing.assert_array_equal(tasks.embed_zero_query(tb)[:, 2, 3], 0.0)
    X, y, xq, yq2 = tasks.unembed(E)
    np.testing.assert_array_equal(X, tb.X)
    np.testing.assert_array_equal(yq2, yq)


def test_linear_guess():
    xq = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(tasks.linear_guess(xq, jnp.array([1.0, -1.0]), 0.5), [-0.5, -0.5])


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


# ---------------------------------------------------------------- baselines
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_gd_exact_risk_and_optimal_eta_against_monte_carlo_grid(noise):
    d, C = 3, 4
    Sig = jnp.array([[1.5, 0.2, 0.0], [0.2, 1.0, 0.0], [0.0, 0.0, 0.5]])
    prior = tasks.make_prior(d, mu=jnp.array([1.0, 0.0, -1.0]), Sigma=Sig, noise_std=noise)
    n = 400_000
    tb = tasks.sample_tasks(jax.random.key(7), prior, C, n)
    etas = jnp.linspace(0.05, 0.8, 16)
    w0 = jnp.array([0.5, 0.5, 0.0])
    mc, se = [], []
    for eta in etas:
        err = np.asarray(baselines.gd_one_step(tb.X, tb.y, tb.x_q, w0, eta) - tb.y_target) ** 2
        mc.append(err.mean())
        se.append(err.std() / np.sqrt(n))
    mc, se = np.array(mc), np.array(se)
    ex = exact.prepare(prior, C)
    risk = np.array([float(exact.gd_risk(ex, float(eta), w0)) for eta in etas])
    assert np.all(np.abs(mc - risk) < 4 * se)
    eta_star, r_star = exact.gd_optimal(ex, w0)
    # the grid's best point brackets the optimum and no grid point beats the exact minimum
    i = int(np.argmin(mc))
    assert etas[max(i - 1, 0)] <= eta_star <= etas[min(i + 1, len(etas) - 1)]
    assert np.all(risk >= float(r_star) - 1e-9)


def test_gd_optimal_part_one_closed_form():
    for d, C in [(1, 1), (10, 10), (5, 40)]:
        prior = tasks.make_prior(d, mu=jnp.ones(d))
        eta, r = exact.gd_optimal(exact.prepare(prior, C))
        assert np.isclose(eta, C / (C + d + 1)) and np.isclose(r, d * (d + 1) / (C + d + 1))


def test_bayes_posterior_mean_beats_gd_and_interpolates():
    d, C = 3, 6
    prior = _prior(d=d, w=2.0)
    tb = tasks.sample_tasks(jax.random.key(8), prior, C, 200)
    np.testing.assert_allclose(
        baselines.bayes_posterior_mean(tb, prior), tb.y_target, rtol=1e-6, atol=1e-6
    )
    noisy = _prior(d=d, w=2.0, noise_std=0.5)
    tb = tasks.sample_tasks(jax.random.key(8), noisy, C, 100_000)
    bayes = np.mean(np.asarray(baselines.bayes_posterior_mean(tb, noisy) - tb.y_target) ** 2)
    eta, _ = exact.gd_optimal(exact.prepare(noisy, C))
    gd = np.mean(
        np.asarray(baselines.gd_one_step(tb.X, tb.y, tb.x_q, noisy.mu, eta) - tb.y_target) ** 2
    )
    assert bayes < gd


def test_bayes_posterior_mean_closed_form_small():
    # with noise, the posterior mean equals the precision-weighted formula
    d, C = 2, 3
    prior = tasks.make_prior(
        d, mu=jnp.array([1.0, 2.0]), Omega=jnp.array([[2.0, 0.5], [0.5, 1.0]]), noise_std=0.3
    )
    tb = tasks.sample_tasks(jax.random.key(1), prior, C, 4)
    Oi = np.linalg.inv(np.asarray(prior.Omega))
    for b in range(4):
        X, y = np.asarray(tb.X[b]), np.asarray(tb.y[b])
        w = np.linalg.solve(Oi + X.T @ X / 0.09, Oi @ np.asarray(prior.mu) + X.T @ y / 0.09)
        assert np.isclose(w @ np.asarray(tb.x_q[b]), baselines.bayes_posterior_mean(tb, prior)[b])


def test_ridge_matches_numpy():
    tb = tasks.sample_tasks(jax.random.key(0), _prior(d=3), 5, 4)
    for b in range(4):
        X, y = np.asarray(tb.X[b]), np.asarray(tb.y[b])
        w = np.linalg.solve(X.T @ X + 5 * 0.3 * np.eye(3), X.T @ y)  # 1/(2C) loss: C reg
        assert np.isclose(w @ np.asarray(tb.x_q[b]), baselines.ridge(tb.X, tb.y, tb.x_q, 0.3)[b])


# ---------------------------------------------------------------- training
def test_train_reaches_gd_risk_zero_prior_mean():
    """One-head LSA trained on w* = 0 approaches the optimal one-step GD
    risk (von Oswald et al.)."""
    d, C = 1, 8
    prior = tasks.make_prior(d)
    loss = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), prior, C, 1024)
    res = train.train(
        loss,
        lsa.init_lsa(jax.random.key(0), d, 1, 0.3),
        jax.random.key(1),
        steps=1500,
        learning_rate=3e-3,
        progress=False,
    )
    assert not res.diverged and res.losses.shape == (1500,)
    _, r_gd = exact.gd_optimal(exact.prepare(prior, C))
    final, se = train.evaluate(loss, res.params, jax.random.key(2), 40)
    assert final < float(r_gd) * 1.1
    assert res.losses[:20].mean() > 2 * final


def test_train_is_reproducible_and_partial_chunk_is_exact():
    prior = tasks.make_prior(2)
    loss = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), prior, 4, 32)
    p0 = lsa.init_lsa(jax.random.key(0), 2, 1)
    a = train.train(loss, p0, jax.random.key(1), steps=70, chunk=30, progress=False)
    b = train.train(loss, p0, jax.random.key(1), steps=70, chunk=7, progress=False)
    np.testing.assert_array_equal(a.losses, b.losses)  # same data stream whatever the chunking
    for k in p0:
        np.testing.assert_allclose(a.params[k], b.params[k], rtol=1e-12)


def test_train_detects_divergence():
    prior = tasks.make_prior(3, mu=3 * jnp.ones(3))
    loss = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), prior, 5, 64)
    res = train.train(
        loss,
        lsa.init_lsa(jax.random.key(0), 3, 1, 1.0),
        jax.random.key(1),
        steps=200,
        optimizer=optax.sgd(10.0),
        progress=False,
    )
    assert res.diverged and res.stopped_at is not None and res.stopped_at < 200
    assert "diverged" in res.message and len(res.losses) == res.stopped_at
    assert all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(res.params))


def test_train_lbfgs_on_fixed_batch():
    prior = tasks.make_prior(2)
    loss = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), prior, 6, 256)
    res = train.train(
        loss,
        lsa.init_lsa(jax.random.key(0), 2, 1, 0.5),
        jax.random.key(1),
        steps=60,
        optimizer="lbfgs",
        fixed_key=True,
        progress=False,
    )
    assert not res.diverged
    # the zoom line search makes every step a descent step on the fixed batch
    assert np.all(np.diff(res.losses) <= 1e-9) and res.losses[-1] < 0.7 * res.losses[0]
    g = jax.grad(loss)(res.params, jax.random.key(1))
    assert (
        max(float(jnp.abs(x).max()) for x in jax.tree_util.tree_leaves(g)) < 1e-3
    )  # a stationary point


def test_train_seeds_vmapped_matches_single_runs():
    prior = tasks.make_prior(2)
    loss = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), prior, 4, 16)
    init = lambda k: lsa.init_lsa(k, 2, 1)
    keys = jax.random.split(jax.random.key(0), 3)
    res = train.train_seeds(loss, init, keys, steps=40, learning_rate=1e-2)
    losses = res.losses
    assert losses.shape == (3, 40) and not res.diverged.any()
    single = train.train(
        loss,
        init(jax.random.fold_in(keys[1], 0)),
        jax.random.fold_in(keys[1], 1),
        steps=40,
        learning_rate=1e-2,
        progress=False,
    )
    np.testing.assert_allclose(losses[1], single.losses, rtol=1e-6)
