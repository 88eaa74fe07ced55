"""Tests of iclgd.metrics: the squared error, the function comparison of Xie et al. App. C.2,
Dist(M, I), gradient statistics, and Part II's inference loss on fixed test sets."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import baselines, exact, metrics, training


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


def _copy(params, batch):  # the copy baseline: prompt labels, then 0
    return jnp.concatenate([batch.y, jnp.zeros_like(batch.y_all[:, batch.y.shape[1] :])], axis=1)


def test_inference_sets_and_metrics(deep_spec, deep_sets):
    assert set(deep_sets) == {"in", "ood"}
    lam_in, lam_ood = np.asarray(deep_sets["in"].batch.lam), np.asarray(deep_sets["ood"].batch.lam)
    assert abs(lam_in.mean()) < 0.1 and abs(lam_in.std() - 1) < 0.05
    assert abs(lam_ood.mean() - 1) < 0.1 and abs(lam_ood.std() - 2) < 0.1
    for s in deep_sets.values():
        np.testing.assert_allclose(s.target, baselines.y_star(deep_spec, s.batch.y), rtol=1e-6)
    # y_star scores 0; the copy baseline scores what copy_prompt_gap says
    metrics_fn = metrics.inference_metrics(lambda p, b: baselines.y_star(deep_spec, b.y), deep_sets)
    assert all(float(x) < 1e-10 for x in metrics_fn(None).values())
    got = jax.jit(metrics.inference_metrics(_copy, deep_sets))(None)
    gap = metrics.copy_prompt_gap(deep_sets)
    for name in deep_sets:
        assert float(got[name]) == pytest.approx(gap[name], rel=1e-5)
    assert gap["ood"] > gap["in"] > 0


def test_bad_input(deep_spec, deep_sets):
    with pytest.raises(ValueError, match="batch"):
        training.sampled_population_loss(_copy, 0)
    with pytest.raises(TypeError, match="model"):
        training.sampled_population_loss(3, 8)
    with pytest.raises(TypeError, match="sets"):
        metrics.inference_metrics(_copy, [deep_sets["in"]])
    with pytest.raises(TypeError, match="sets"):
        metrics.copy_prompt_gap({})
    with pytest.raises(TypeError, match=r"sets\['in'\]"):
        metrics.copy_prompt_gap({"in": (1, 2)})
    with pytest.raises(ValueError, match="n"):
        metrics.inference_sets(jax.random.PRNGKey(0), deep_spec, 0)
    with pytest.raises(TypeError, match="key"):
        metrics.inference_sets(0, deep_spec)
    with pytest.raises(TypeError, match="spec"):
        exact.copy_prompt_loss({"K": 3})


def test_dist_to_identity():
    assert float(metrics.dist_to_identity(3 * jnp.eye(4))) < 1e-7
    M = jnp.diag(jnp.array([1.0, -1.0]))
    assert np.isclose(float(metrics.dist_to_identity(M)), 1.0)
    assert metrics.dist_to_identity(jnp.ones((3, 2, 2))).shape == (3,)
    with pytest.raises(ValueError, match="M must have shape"):
        metrics.dist_to_identity(jnp.ones(3))


def test_whitened_is_sigma_root_a_sigma_root():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(3, 4, 4))
    Sigma = M @ np.swapaxes(M, -1, -2) + np.eye(4)  # (seeds, d, d)
    A = rng.normal(size=(3, 2, 5, 4, 4))  # (seeds, records, L, d, d)
    out = metrics.whitened(A, Sigma)
    assert out.shape == A.shape and out.dtype == np.float64
    for s in range(3):
        w, V = np.linalg.eigh(Sigma[s])
        R = V @ np.diag(np.sqrt(w)) @ V.T
        assert np.allclose(R @ R, Sigma[s], rtol=1e-12, atol=1e-12)  # the symmetric root
        assert np.allclose(out[s, 1, 3], R @ A[s, 1, 3] @ R, rtol=1e-12, atol=1e-12)
    # a multiple of Sigma^{-1} whitens to the same multiple of I: Dist = 0 (Theorem 3's optimum)
    c = np.array([0.5, -2.0])[:, None, None]
    inv = np.linalg.inv(Sigma)[:, None] * c  # (3, 2, 4, 4)
    assert np.allclose(metrics.whitened(inv, Sigma), c * np.eye(4))
    assert np.asarray(metrics.dist_to_identity(metrics.whitened(inv, Sigma))).max() < 1e-6


def test_equal_budget_by_hand():
    x1 = np.arange(12, 0, -1).astype(np.float32)  # 12, 11, ..., 1: the fastest run
    x2 = np.arange(20.0, 0.0, -1.0)  # 20 steps, longer than `steps`: only the first 12 are read
    x3 = np.array([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0])  # integers
    x2[15] = np.nan  # after `steps`: not read
    eq = metrics.equal_budget(
        {"a": x1, "b": x2, "c": x3, "d": x1, "e": x3}, dict(a=6.0, b=3.0, c=1.0, d=6.0, e=0.1),
        steps=12, every=4,
    )  # fmt: skip
    assert eq.budget_s == 2.0  # 12 steps at 6 steps per second
    assert eq.cut == {"a": 12, "b": 6, "c": 2, "d": 12, "e": 0}  # rate ties: both get 12
    assert eq.at_time["a"] == np.mean([4, 3, 2, 1]) and eq.at_time["b"] == np.mean([18, 17, 16, 15])
    assert eq.at_time["c"] == np.mean([9, 8])  # cut < every: the first cut steps
    assert eq.at_time["e"] == 9.0  # cut = 0: the first step's loss
    assert np.array_equal(eq.curve["b"], [18.5, 14.5, 10.5])  # blocks of 4 of the first 12 steps
    assert eq.curve["a"].dtype == np.float32 and eq.curve["c"].dtype == np.float64
    assert eq.final == {"a": 2.5, "b": 10.5, "c": 0.25, "d": 2.5, "e": 0.25}


def test_gradient_stats_noise_and_signal():
    x = jax.random.normal(jax.random.key(0), (4000, 3))
    loss = lambda p, xs: jnp.sum((xs - p["m"]) ** 2, axis=1)  # noqa: E731
    at_mean = metrics.gradient_stats(loss, {"m": jnp.mean(x, 0)}, x)
    assert np.abs(np.asarray(at_mean.grad["m"])).max() < 1e-5 and at_mean.z2 < 1e-6
    off = metrics.gradient_stats(loss, {"m": jnp.ones(3)}, x)
    assert off.z2 > 100 and np.allclose(off.se["m"], 2 / np.sqrt(4000), rtol=0.1)
