"""The float32 paths that the chapters run (JAX's default dtype; the other tests run in float64,
see conftest): sampling, every model's predict, training, an exact risk and the sampled loss."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import exact, tasks, training

pytestmark = pytest.mark.usefixtures("float32")

D, C, B = 3, 6, 64
EPS32 = float(np.finfo(np.float32).eps)  # 1.2e-7


def _prior():
    return iclgd.make_prior(D, mu=0.5 * jnp.ones(D), Sigma=np.diag([1.0, 0.5, 2.0]))


def _f64(tree):
    """``tree`` in float64 (call inside ``jax.enable_x64(True)``)."""
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a, jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree
    )


def _dtypes(tree) -> set:
    return {jnp.asarray(a).dtype for a in jax.tree_util.tree_leaves(tree)}


def test_fixture_turns_x64_off():
    assert jnp.zeros(1).dtype == jnp.float32
    assert jnp.asarray(np.zeros(1)).dtype == jnp.float32


def test_sample_tasks_in_float32():
    prior = _prior()
    assert _dtypes(prior) == {jnp.dtype(jnp.float32)}
    t = iclgd.sample_tasks(jax.random.key(0), prior, C, 20_000)
    assert _dtypes(t) == {jnp.dtype(jnp.float32)}
    assert t.X.shape == (20_000, C, D) and t.y.shape == (20_000, C) and t.w.shape == (20_000, D)
    X, y, w = (np.asarray(a, np.float64) for a in (t.X, t.y, t.w))
    # noise-free labels y = X w, to float32 rounding of the products
    assert np.abs(y - np.einsum("bcd,bd->bc", X, w)).max() < 1e-5 * np.abs(y).max()
    # E[y_q^2] = tr(Sigma (Omega + mu mu^T)), within 4 standard errors
    yq2 = np.asarray(t.y_target, np.float64) ** 2
    want = np.trace(np.diag([1.0, 0.5, 2.0]) @ (np.eye(D) + 0.25 * np.ones((D, D))))
    assert abs(yq2.mean() - want) < 4 * yq2.std() / np.sqrt(yq2.size)
    # the same key gives the same draw
    same = iclgd.sample_tasks(jax.random.key(0), prior, C, 20_000)
    assert all(np.array_equal(a, b) for a, b in zip(t, same))


def _models():
    spec = tasks.make_representation_spec(jax.random.key(1), K=8, d=4, m=3, N=4, tau=0.1)
    rb = tasks.sample_representation_tasks(jax.random.key(2), spec, 16)
    tb = iclgd.sample_tasks(jax.random.key(0), _prior(), C, 16)
    M = iclgd.models
    return [
        (M.lsa_model(D, H=2), tb),
        (M.lsa_model(D, H=2, guess=jnp.ones(D), bias=0.5), tb),
        (M.yq_lsa_model(D), tb),
        (M.linear_transformer_model(D, 2, init_std=0.1), tb),
        (M.linear_transformer_model(D, 2, form="pgd", init_std=0.1), tb),
        (M.linear_transformer_model(D, 2, form="gdpp", init_std=0.1), tb),
        (M.softmax_attention_model(spec, H=2), rb),
        (M.transformer_model(spec, d_model=8, H=2, d_ff=8, L=2), rb),
    ]


@pytest.mark.parametrize("i", range(8))
def test_model_predict_in_float32_matches_float64(i):
    model, batch = _models()[i]
    params = model.init(jax.random.key(3))
    assert _dtypes(params) == {jnp.dtype(jnp.float32)}, model.name
    # generic parameters (some inits are zero, e.g. the softmax model's output weights w)
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.key(4), len(leaves))
    noise = [0.3 * jax.random.normal(k, a.shape) for k, a in zip(keys, leaves)]
    params = jax.tree_util.tree_unflatten(tree, [a + n for a, n in zip(leaves, noise)])
    pred = jax.jit(model.predict)(params, batch)
    assert pred.dtype == jnp.float32 and np.all(np.isfinite(pred)), model.name
    with jax.enable_x64(True):
        ref = np.asarray(jax.jit(model.predict)(_f64(params), _f64(batch)))
        assert ref.dtype == np.float64
    err = np.abs(np.asarray(pred, np.float64) - ref).max() / np.abs(ref).max()
    assert err < 100 * EPS32, model.name  # measured: 1e-7 to 3e-7


def test_train_adam_in_float32():
    model = iclgd.models.lsa_model(D, H=1)
    prior = _prior()
    loss = iclgd.sampled_loss(model, prior, C=C, batch=256)
    p0 = model.init(jax.random.key(0))
    res = iclgd.train(loss, p0, jax.random.key(1), steps=200, learning_rate=1e-2, record_every=50)
    assert not res.diverged and res.message == "completed 200 steps"
    assert res.losses.dtype == np.float32 and res.losses.shape == (200,)
    assert _dtypes(res.params) == {jnp.dtype(jnp.float32)}
    assert _dtypes(res.history.params) == {jnp.dtype(jnp.float32)}
    ex = exact.prepare(prior, C)
    r0, r1 = (float(exact.risk64(exact.lsa_risk, p, ex)) for p in (p0, res.params))
    assert r1 < 0.9 * r0


def test_exact_lsa_risk_in_float32_matches_float64():
    prior = _prior()
    ex = exact.prepare(prior, C)
    rng = np.random.default_rng(0)
    for H in (1, 3):
        p = {
            k: jnp.asarray(0.3 * rng.normal(size=(H, D + 1, D + 1)), jnp.float32)
            for k in ("WK", "WQ", "WV", "WP")
        }
        r32 = exact.lsa_risk(p, ex)
        assert r32.dtype == jnp.float32
        with jax.enable_x64(True):
            r64 = float(exact.lsa_risk(_f64(p), ex))
        assert float(r32) == pytest.approx(r64, rel=100 * EPS32)  # measured: 2e-8


def test_sampled_loss_in_float32_estimates_the_exact_risk():
    model = iclgd.models.lsa_model(D, H=2)
    prior = _prior()
    p = model.init(jax.random.key(0))
    loss = training.sampled_loss(model, prior, C=C, batch=4096)
    val = loss(p, jax.random.key(1))
    assert val.dtype == jnp.float32 and val.shape == ()
    assert float(jax.jit(loss)(p, jax.random.key(1))) == pytest.approx(float(val), rel=1e-5)
    mean, se = training.evaluate(loss, p, jax.random.key(2), n_batches=20)
    risk = exact.risk64(exact.lsa_risk, p, exact.prepare(prior, C))
    assert abs(mean - risk) < 4 * se
