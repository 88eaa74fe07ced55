"""Tests of the trainer (iclgd.training): compile reuse, history, per-group
rates, multi-seed L-BFGS."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import iclgd
from iclgd import exact, tasks, training


def _quadratic(params, key, target):
    """A deterministic loss with a known minimiser: sum of (p - target)^2 over the groups."""
    del key
    return sum(jnp.sum((params[k] - target[k]) ** 2) for k in params)


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


def test_batch_loss_is_the_chapters_fixed_batch_loss_bit_for_bit():
    """``batch_loss(model)`` = ``mean((sparse_predict(sym(A), Z0) - y)**2)``, the loss Part III's
    chapters wrote by hand, to the last bit, also under ``jit``/``vmap``/``grad``."""
    from iclgd.models import linear_transformer as LT

    d, n, L, N = 3, 6, 2, 64
    keys = jax.random.split(jax.random.key(5), 2)
    batch = jax.vmap(lambda k: tasks.sample_paper_prompts(k, n, N, diag=(1.0, 0.5, 2.0)))(keys)
    model = iclgd.models.linear_transformer_model(d, L, form="pgd", symmetrize=True, init_std=0.1)
    params = jax.vmap(model.init)(keys)
    sym = lambda A: (A + jnp.swapaxes(A, -1, -2)) / 2
    Z0 = jax.vmap(tasks.embed_zero_query)(batch)
    by_hand = lambda p, key, Z, y: jnp.mean((LT.sparse_predict({"A": sym(p["A"])}, Z) - y) ** 2)
    loss = training.batch_loss(model)
    assert loss is not training.batch_loss(model)  # a builder: a new function each call
    vg = jax.jit(jax.vmap(jax.value_and_grad(loss), in_axes=(0, None, 0)))
    vg_hand = jax.jit(jax.vmap(jax.value_and_grad(by_hand), in_axes=(0, None, 0, 0)))
    (v1, g1), (v2, g2) = vg(params, None, batch), vg_hand(params, None, Z0, batch.y_target)
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(g1["A"], g2["A"])
    one = jax.tree_util.tree_map(lambda x: x[0], (params, batch))
    assert float(loss(*one[:1], jax.random.key(9), one[1])) == float(loss(one[0], None, one[1]))
    assert iclgd.batch_loss is training.batch_loss


def test_per_prompt_loss_and_gradient_stats():
    d, n, L = 3, 6, 2
    batch = tasks.sample_paper_prompts(jax.random.key(0), n, 50, diag=(1.0, 0.5, 2.0))
    model = iclgd.models.linear_transformer_model(d, L, form="gdpp", init_std=0.1)
    params = model.init(jax.random.key(1))
    errs = training.per_prompt_loss(model)
    e = errs(params, batch)
    assert e.shape == (50,)
    np.testing.assert_array_equal(e, (model.predict(params, batch) - batch.y_target) ** 2)
    np.testing.assert_array_equal(errs(params, *batch), e)  # the five arrays of the batch
    np.testing.assert_allclose(jnp.mean(e), training.batch_loss(model)(params, None, batch))
    st = iclgd.metrics.gradient_stats(errs, params, *batch, chunk=16)
    g = jax.grad(lambda p: jnp.mean(errs(p, batch)))(params)
    for k in "AB":
        np.testing.assert_allclose(st.grad[k], g[k], rtol=1e-4, atol=1e-6)
    errs_fn = training.per_prompt_loss(model.predict)  # a bare predict function works too
    np.testing.assert_array_equal(errs_fn(params, batch), e)


def test_batch_and_per_prompt_loss_bad_input():
    model = iclgd.models.linear_transformer_model(3, 1, form="pgd")
    params = model.init(jax.random.key(0))
    batch = tasks.sample_paper_prompts(jax.random.key(1), 4, 5, diag=(1.0, 0.5, 2.0))
    for build in (training.batch_loss, training.per_prompt_loss):
        with pytest.raises(TypeError, match="model must be"):
            build(3)
    with pytest.raises(TypeError, match="batch must be an iclgd.tasks.TaskBatch"):
        training.batch_loss(model)(params, None, tasks.embed_zero_query(batch))
    with pytest.raises(TypeError, match="batch must be an iclgd.tasks.TaskBatch"):
        training.per_prompt_loss(model)(params, batch.X)
    with pytest.raises(ValueError, match="its 5 arrays"):
        training.per_prompt_loss(model)(params, batch.X, batch.y)


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
