"""Tests of iclgd.training.losses: the fixed-batch and per-prompt loss builders of the model
interface."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import tasks, training


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


def test_gdpp_batch_loss_prepares_its_fixed_batch_once():
    """GD++'s ``model.prepare``: the same predictions and loss from the batch's moments; ``train``
    and ``train_seeds`` prepare the batch (the prepared loss is the loss), and a loss without
    ``prepare`` trains the same way."""
    from iclgd.models import linear_transformer as LT

    d, n, L, N = 3, 6, 2, 64
    keys = jax.random.split(jax.random.key(6), 2)
    batch = jax.vmap(lambda k: tasks.sample_paper_prompts(k, n, N, diag=(1.0, 0.5, 2.0)))(keys)
    model = iclgd.models.linear_transformer_model(d, L, form="gdpp", symmetrize=True, init_std=0.3)
    assert iclgd.models.linear_transformer_model(d, L, form="full").prepare is None
    params = jax.vmap(model.init)(keys)
    one = jax.tree_util.tree_map(lambda x: x[0], (params, batch))
    m = model.prepare(one[1])
    assert isinstance(m, LT.PromptMoments) and m.G.shape == (N, d, d)
    np.testing.assert_array_equal(m.y_target, one[1].y_target)
    np.testing.assert_allclose(model.predict(one[0], m), model.predict(*one), rtol=1e-12)
    loss = training.batch_loss(model)
    assert loss.prepare is model.prepare
    np.testing.assert_allclose(loss(one[0], None, m), loss(one[0], None, one[1]), rtol=1e-12)
    plain = lambda p, key, b: loss(p, key, b)  # noqa: E731  (no prepare: moments at every call)
    opts = dict(steps=30, optimizer="lbfgs", learning_rate=1.0, fixed_key=True, progress=False)
    runs = [
        iclgd.train_seeds(f, model.init, keys, seed_args=(batch,), **opts) for f in (loss, plain)
    ]
    np.testing.assert_allclose(runs[0].losses, runs[1].losses, rtol=1e-9)
    assert runs[0].losses[0, -1] < 0.5 * runs[0].losses[0, 0]  # it trained
    single = [iclgd.train(f, one[0], keys[0], args=(one[1],), **opts) for f in (loss, plain)]
    np.testing.assert_allclose(single[0].losses, single[1].losses, rtol=1e-9)
    # the trainer hands the loss what prepare returns (a prepare that marks its output)
    marked = lambda p, key, b: jnp.mean(b[0]) * jnp.sum(p**2)  # noqa: E731
    marked.prepare = lambda b: (b.y_target * 0 + 7.0,)
    r = iclgd.train(
        marked, jnp.ones(2), keys[0], args=(one[1],), steps=1, optimizer="sgd", learning_rate=1e-9
    )
    assert float(r.losses[0]) == 14.0


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


def test_training_set_loss_is_eq9_on_the_fixed_set():
    """batch = n: the finite-sample loss of the whole set, for every key; batch < n: a minibatch of
    it, whose mean over many keys is that loss."""
    from iclgd import models

    spec = tasks.make_representation_spec(jax.random.PRNGKey(0), K=8, d=4, m=2, N=3, tau=0.1)
    model = models.softmax_attention_model(spec, 3)
    p = model.init(jax.random.PRNGKey(1))
    set_key, n = jax.random.PRNGKey(5), 40
    full = tasks.sample_training_prompts(set_key, spec, jnp.arange(n))
    want = 0.5 * float(jnp.mean((model.predict(p, full) - full.y_all) ** 2))
    whole = training.training_set_loss(model, n, n)
    for k in range(2):
        assert float(whole(p, jax.random.PRNGKey(k), spec, set_key)) == pytest.approx(want)
    mini = jax.jit(training.training_set_loss(model, n, 8))
    vals = [float(mini(p, jax.random.PRNGKey(k), spec, set_key)) for k in range(400)]
    assert len(set(vals)) > 1
    assert np.mean(vals) == pytest.approx(want, rel=0.05)
    r = iclgd.train(mini, p, jax.random.PRNGKey(2), steps=5, args=(spec, set_key), progress=False)
    assert not r.diverged


def test_training_set_loss_bad_input():
    from iclgd import models

    spec = tasks.make_representation_spec(jax.random.PRNGKey(0), K=8, d=4, m=2, N=3, tau=0.1)
    model = models.softmax_attention_model(spec, 3)
    with pytest.raises(ValueError, match="batch must be <= n"):
        training.training_set_loss(model, 4, 8)
    with pytest.raises(ValueError, match="n"):
        training.training_set_loss(model, 0, 1)
    with pytest.raises(TypeError, match="model"):
        training.training_set_loss(3, 4, 2)
