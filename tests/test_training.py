"""Tests of iclgd.training.loop (train, train_seeds): compile reuse, history, per-group rates,
L-BFGS, divergence, multi-seed runs; and the Part II losses trained through it."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import iclgd
from iclgd import exact, metrics, tasks, training
from iclgd import training as train
from iclgd.models import lsa


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


def test_learning_rate_sweep_compiles_once():
    model = iclgd.models.lsa_model(3, H=1)
    loss = iclgd.sampled_loss(model, iclgd.make_prior(3), C=5, batch=32)
    p0 = model.init(jax.random.key(0))
    before = training.trace_count()
    finals = []
    for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2):
        res = iclgd.train(loss, p0, jax.random.key(1), steps=50, learning_rate=lr)
        finals.append(res.losses[-10:].mean())
    assert training.trace_count() - before == 1  # five values, one compilation
    assert finals[-1] < finals[0]  # and the rate really changed the run


def test_prior_sweep_through_args_compiles_once_and_matches_closure():
    model = iclgd.models.lsa_model(2, H=1)
    loss = iclgd.sampled_loss(model, None, C=4, batch=16)  # loss(params, key, prior)
    p0 = model.init(jax.random.key(0))
    priors = [iclgd.make_prior(2, mu=s * jnp.ones(2)) for s in (0.0, 0.5, 1.0, 1.5, 2.0)]
    before = training.trace_count()
    runs = [iclgd.train(loss, p0, jax.random.key(1), steps=30, args=(p,)) for p in priors]
    assert training.trace_count() - before == 1
    closed = iclgd.train(
        iclgd.sampled_loss(model, priors[3], 4, 16), p0, jax.random.key(1), steps=30
    )
    np.testing.assert_allclose(runs[3].losses, closed.losses, rtol=1e-5)
    assert runs[4].losses[0] > runs[0].losses[0]  # a larger prior mean: a larger initial loss


def _quadratic(params, key, target):
    """A deterministic loss with a known minimiser: sum of (p - target)^2 over the groups."""
    del key
    return sum(jnp.sum((params[k] - target[k]) ** 2) for k in params)


def test_history_records_params_and_metrics_at_chosen_steps():
    target = {"a": jnp.ones(3), "b": -jnp.ones(2)}
    p0 = {"a": jnp.zeros(3), "b": jnp.zeros(2)}
    dist = lambda p: jnp.sqrt(_quadratic(p, None, target))
    res = iclgd.train(
        _quadratic,
        p0,
        jax.random.key(0),
        steps=23,
        optimizer="sgd",
        learning_rate=0.1,
        args=(target,),
        record_every=5,
        metrics=dist,
    )
    h = res.history
    np.testing.assert_array_equal(h.steps, [0, 5, 10, 15, 20, 23])
    assert h.params["a"].shape == (6, 3)
    np.testing.assert_allclose(h.params["a"][0], 0.0)
    np.testing.assert_allclose(h.params["a"][-1], res.params["a"], rtol=1e-6)
    # SGD on this quadratic contracts the distance by (1 - 2 lr) per step: closed form
    np.testing.assert_allclose(h.metrics, np.sqrt(5.0) * 0.8**h.steps, rtol=1e-5)


def test_per_group_learning_rates():
    target = {"w": jnp.ones(2), "Q": jnp.ones(2)}
    p0 = {"w": jnp.zeros(2), "Q": jnp.zeros(2)}
    res = iclgd.train(
        _quadratic,
        p0,
        jax.random.key(0),
        steps=10,
        optimizer="sgd",
        learning_rate={"w": 0.25, "Q": 0.05},
        args=(target,),
    )
    # per coordinate p_t = 1 - (1 - 2 lr)^t, each group with its own rate
    np.testing.assert_allclose(res.params["w"], 1 - 0.5**10, rtol=1e-6)
    np.testing.assert_allclose(res.params["Q"], 1 - 0.9**10, rtol=1e-6)


def test_has_aux_returns_per_step_aux():
    def loss(p, key):
        per = (p["x"] - jnp.arange(3.0)) ** 2
        return jnp.sum(per), per

    res = iclgd.train(
        loss,
        {"x": jnp.zeros(3)},
        jax.random.key(0),
        steps=7,
        has_aux=True,
        optimizer="sgd",
        learning_rate=0.1,
    )
    assert res.aux.shape == (7, 3)
    np.testing.assert_allclose(res.aux.sum(1), res.losses, rtol=1e-6)


def test_lbfgs_refuses_a_stochastic_loss():
    model = iclgd.models.lsa_model(2)
    loss = iclgd.sampled_loss(model, iclgd.make_prior(2), 4, 16)
    with pytest.raises(ValueError, match="deterministic loss"):
        iclgd.train(
            loss, model.init(jax.random.key(0)), jax.random.key(1), steps=5, optimizer="lbfgs"
        )


def test_five_seed_lbfgs_on_part3_three_layer_model_with_history():
    """Part III's setting: 3 layers of eq. 9, exact-free fixed batch, 5 seeds, L-BFGS, history."""
    d, n, L = 3, 10, 3
    model = iclgd.models.linear_transformer_model(d, L, form="pgd", init_std=0.1)
    loss = iclgd.sampled_loss(model, iclgd.make_prior(d), C=n, batch=512)
    eye_dist = lambda p: jnp.linalg.norm(p["A"] + jnp.eye(d), axis=(1, 2))  # per layer
    keys = jax.random.split(jax.random.key(0), 5)
    before = training.trace_count()
    res = iclgd.train_seeds(
        loss,
        model,
        keys,
        steps=40,
        optimizer="lbfgs",
        fixed_key=True,
        record_every=10,
        metrics=eye_dist,
    )
    assert training.trace_count() - before == 1
    assert res.losses.shape == (5, 40) and not res.diverged.any()
    assert res.history.params["A"].shape == (5, 5, L, d, d)  # seeds, records, layers
    np.testing.assert_array_equal(res.history.steps, [0, 10, 20, 30, 40])
    assert res.history.metrics.shape == (5, 5, L)
    # L-BFGS with a line search never increases the fixed-batch loss, and it learns
    assert np.all(np.diff(res.losses, axis=1) <= 1e-6)
    assert np.all(res.losses[:, -1] < 0.5 * res.losses[:, 0])
    # seed 2 of the vmapped run equals a single run with the same keys
    single = iclgd.train(
        loss,
        model.init(jax.random.fold_in(keys[2], 0)),
        jax.random.fold_in(keys[2], 1),
        steps=40,
        optimizer="lbfgs",
        fixed_key=True,
    )
    np.testing.assert_allclose(res.losses[2], single.losses, rtol=1e-4)


def test_exact_loss_training_reaches_the_exact_optimum():
    d, C = 2, 6
    ex = exact.prepare(iclgd.make_prior(d, mu=jnp.ones(d)), C)
    model = iclgd.models.lsa_model(d, H=d + 1, init_std=0.3)
    res = iclgd.train(
        exact.lsa_loss(ex),
        model.init(jax.random.key(0)),
        jax.random.key(1),
        steps=3000,
        learning_rate=1e-2,
    )
    best = exact.lsa_optimum(ex).risk
    assert res.losses[-1] < best * 1.01 and res.losses[-1] > best * (1 - 1e-4)


def test_bad_trainer_input():
    p0 = {"x": jnp.zeros(2)}
    f = lambda p, k: jnp.sum(p["x"] ** 2)
    with pytest.raises(TypeError, match="key must be a JAX PRNG key"):
        iclgd.train(f, p0, 0, steps=3)
    with pytest.raises(ValueError, match="record_every must be an integer >= 1"):
        iclgd.train(f, p0, jax.random.key(0), steps=3, record_every=0)
    with pytest.raises(ValueError, match="multiple of record_every"):
        iclgd.train(f, p0, jax.random.key(0), steps=3, record_every=2, chunk=3)
    with pytest.raises(ValueError, match=r"learning_rate\['x'\] must be > 0"):
        iclgd.train(f, p0, jax.random.key(0), steps=3, learning_rate={"x": 0.0})
    with pytest.raises(TypeError, match="optimizer must be an optax"):
        iclgd.train(f, p0, jax.random.key(0), steps=3, optimizer=3)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        iclgd.train(f, p0, jax.random.key(0), steps=3, optimizer="rmsprop")
    assert iclgd.train(
        f, p0, jax.random.key(0), steps=3, optimizer=optax.sgd(0.1)
    ).losses.shape == (3,)


def test_train_seeds_seed_args_and_vectorize():
    """Per-seed fixed batches (``seed_args``); vmapped and sequential seeds agree with ``train``."""
    d, n, L, N = 3, 8, 2, 256
    keys = jax.random.split(jax.random.key(3), 3)
    data_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    batch = jax.vmap(lambda k: tasks.sample_paper_prompts(k, n, N, diag=(1.0, 0.5, 2.0)))(data_keys)
    mse = training.batch_loss(iclgd.models.linear_transformer_model(d, L, form="pgd"))
    loss = lambda p, key, scale, pr: scale * mse(p, key, pr)
    init = lambda k: {"A": 0.1 * jax.random.normal(k, (L, d, d))}
    opts = dict(optimizer="lbfgs", learning_rate=1.0, steps=12, fixed_key=True, record_every=4)
    res = {
        vec: iclgd.train_seeds(
            loss, init, keys, args=(2.0,), seed_args=(batch,), vectorize=vec, **opts
        )
        for vec in (True, False)
    }
    for r in res.values():
        assert r.losses.shape == (3, 12) and not r.diverged.any()
        assert r.history.params["A"].shape == (3, 4, L, d, d)
        np.testing.assert_array_equal(r.history.steps, [0, 4, 8, 12])
    np.testing.assert_allclose(res[True].losses, res[False].losses, rtol=1e-4)
    one = jax.tree_util.tree_map(lambda x: x[1], batch)
    single = iclgd.train(
        loss, init(jax.random.fold_in(keys[1], 0)), data_keys[1], args=(2.0, one), **opts
    )
    np.testing.assert_allclose(res[False].losses[1], single.losses, rtol=1e-6)
    # the default on this CPU: seeds one after another for L-BFGS
    default = iclgd.train_seeds(loss, init, keys, args=(2.0,), seed_args=(batch,), **opts)
    np.testing.assert_array_equal(default.losses, res[jax.default_backend() != "cpu"].losses)
    with pytest.raises(ValueError, match="leading axis of length 3"):
        iclgd.train_seeds(loss, init, keys, args=(2.0,), seed_args=(one,), **opts)
    with pytest.raises(TypeError, match="vectorize"):
        iclgd.train_seeds(loss, init, keys, args=(2.0,), seed_args=(batch,), vectorize=1, **opts)


def test_train_seeds_has_aux_stacks_each_seeds_aux_as_train():
    """``has_aux``: ``aux`` of every step with a leading seed axis, both ways of running the seeds,
    equal to :func:`train`'s for each seed; a seed's steps after its divergence are NaN."""
    scale = jnp.array([1.0, 2.0, 1e3])  # the last seed diverges with sgd at rate 0.3

    def loss(p, key, s):
        del key
        return jnp.sum((s * p["x"] - 1.0) ** 2), {"x0": p["x"][0], "n": jnp.sum(p["x"] ** 2)}

    init = lambda k: {"x": jax.random.normal(k, (2,))}
    keys = jax.random.split(jax.random.key(5), 3)
    opts = dict(steps=30, optimizer="sgd", learning_rate=0.3, has_aux=True, chunk=8)
    for vec in (True, False):
        res = iclgd.train_seeds(loss, init, keys, seed_args=(scale,), vectorize=vec, **opts)
        assert res.aux["x0"].shape == (3, 30) and res.aux["n"].shape == (3, 30)
        np.testing.assert_array_equal(res.diverged, [False, False, True])
        for s in range(2):
            one = iclgd.train(
                loss, init(jax.random.fold_in(keys[s], 0)), keys[s], args=(scale[s],), **opts
            )
            np.testing.assert_allclose(res.losses[s], one.losses, rtol=1e-12)
            for k in ("x0", "n"):
                np.testing.assert_allclose(res.aux[k][s], one.aux[k], rtol=1e-12)
        assert np.isnan(res.losses[2, res.stopped_at[2] :]).all()


def test_sampled_loss_matches_the_exact_population_loss(deep_spec):
    model = iclgd.models.softmax_attention_model(deep_spec, H=3)
    p = model.init(jax.random.PRNGKey(2))
    p = {"Q": p["Q"], "w": 0.3 * jax.random.normal(jax.random.PRNGKey(3), p["w"].shape)}
    loss = training.sampled_population_loss(model, 2000)
    mean, se = iclgd.evaluate(loss, p, jax.random.PRNGKey(4), n_batches=40, args=(deep_spec,))
    exact_val = float(exact.softmax_risk(p, deep_spec))
    assert abs(mean - exact_val) < 4 * se
    # the same Model's predict function works too, and the key matters
    loss2 = training.sampled_population_loss(model.predict, 8)
    a, b = (float(loss2(p, jax.random.PRNGKey(i), deep_spec)) for i in (5, 6))
    assert a != b


def test_transformer_trains_on_the_sampled_loss(deep_spec):
    model = iclgd.models.transformer_model(deep_spec, d_model=8, H=2, d_ff=8, L=1)
    deep_sets = metrics.inference_sets(jax.random.PRNGKey(1), deep_spec, 20)
    res = iclgd.train(
        training.sampled_population_loss(model, 16),
        model.init(jax.random.PRNGKey(0)),
        jax.random.PRNGKey(1),
        steps=40,
        learning_rate=1e-2,
        args=(deep_spec,),
        record_every=20,
        metrics=metrics.inference_metrics(model, deep_sets),
    )
    assert not res.diverged and res.history.metrics["in"].shape == (3,)
    assert res.losses[-10:].mean() < res.losses[:10].mean()


def test_gtol_stops_each_converged_run_and_keeps_the_shapes():
    """``gtol``: a run whose gradient falls to ``gtol`` stops there (its later steps, and chunks
    once every seed has converged, are no-ops that repeat its loss, aux and parameters); the
    steps before are those of the run without ``gtol``; a diverged seed does not block the rest."""
    scale = jnp.array([1.0, 3.0, jnp.nan])  # the last seed's loss is NaN: it diverges at once

    def loss(p, key, s):
        del key
        r = s * p["x"] - jnp.arange(1.0, 4.0)
        return jnp.sum(r**2) + 0.1 * jnp.sum(r**4), {"x0": p["x"][0]}

    init = lambda k: {"x": jax.random.normal(k, (3,))}
    keys = jax.random.split(jax.random.key(2), 3)
    opts = dict(optimizer="lbfgs", learning_rate=1.0, steps=40, chunk=4, record_every=2)
    opts |= dict(fixed_key=True, has_aux=True, seed_args=(scale,), progress=False)
    for vec in (True, False):
        full = iclgd.train_seeds(loss, init, keys, vectorize=vec, **opts)
        res = iclgd.train_seeds(loss, init, keys, vectorize=vec, gtol=1e-4, **opts)
        assert full.converged_at is None and res.losses.shape == (3, 40)
        assert res.history.params["x"].shape == (3, 21, 3) and res.aux["x0"].shape == (3, 40)
        np.testing.assert_array_equal(res.diverged, [False, False, True])
        assert res.converged_at[2] == -1 and "2 converged" in res.message
        for s in range(2):
            c = int(res.converged_at[s])
            assert 0 < c < 20  # converged well before the end: the fill path ran
            np.testing.assert_allclose(res.losses[s, :c], full.losses[s, :c], rtol=1e-5)
            assert np.all(res.losses[s, c:] == res.losses[s, c])
            assert np.all(res.aux["x0"][s, c:] == res.aux["x0"][s, c])
            g = jax.grad(lambda p: loss(p, None, scale[s])[0])(
                jax.tree.map(lambda x: x[s], res.params)
            )
            assert float(jnp.abs(g["x"]).max()) <= 1e-4  # the returned parameters are converged
            after = res.history.steps > c
            np.testing.assert_array_equal(
                res.history.params["x"][s, after], res.params["x"][s][None].repeat(after.sum(), 0)
            )
            assert full.losses[s, -1] <= res.losses[s, -1] + 1e-4  # only a small gain left
        assert np.isnan(res.losses[2]).all()
    one = iclgd.train(
        loss,
        init(jax.random.fold_in(keys[1], 0)),
        keys[1],
        args=(scale[1],),
        gtol=1e-4,
        **{k: v for k, v in opts.items() if k not in ("seed_args", "progress")},
    )
    assert one.converged_at == res.converged_at[1] and "converged at step" in one.message
    np.testing.assert_allclose(one.losses, res.losses[1], rtol=1e-6)
    with pytest.raises(ValueError, match="gtol must be a finite number > 0"):
        iclgd.train(loss, init(keys[0]), keys[0], args=(1.0,), steps=3, has_aux=True, gtol=0.0)


def test_lbfgs_compiles_its_chunk_once():
    """optax's L-BFGS ``init`` state is weakly typed, its ``update``'s is not: the trainer makes
    the first chunk's state strong, so a run of several chunks compiles once."""
    loss = lambda p, key: jnp.sum((p["x"] - 1.0) ** 2 + 0.1 * p["x"] ** 4)
    before = training.trace_count()
    res = iclgd.train(
        loss,
        {"x": jnp.zeros(3)},
        jax.random.key(0),
        steps=12,
        chunk=4,
        optimizer="lbfgs",
        fixed_key=True,
    )
    assert training.trace_count() - before == 1 and not res.diverged
