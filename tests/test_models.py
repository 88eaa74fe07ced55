"""Tests of the one model interface (iclgd.models): every family, init(key) /
predict(params, batch)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import baselines, tasks
from iclgd.models import lsa as lsa_mod
from iclgd.models import softmax as sm
from iclgd.models import transformer as tr

D, C, B = 3, 6, 16
TASKS = iclgd.sample_tasks(jax.random.key(0), iclgd.make_prior(D, mu=jnp.ones(D)), C, B)


def _spec():
    return tasks.make_representation_spec(jax.random.key(1), K=8, d=4, m=3, N=4, tau=0.1)


def test_every_factory_has_the_same_verbs():
    spec = _spec()
    rb = tasks.sample_representation_tasks(jax.random.key(2), spec, B)
    cases = [
        (iclgd.models.lsa_model(D, H=2), TASKS, (B,)),
        (iclgd.models.yq_lsa_model(D), TASKS, (B,)),
        (iclgd.models.linear_transformer_model(D, 2), TASKS, (B,)),
        (iclgd.models.linear_transformer_model(D, 2, form="pgd"), TASKS, (B,)),
        (iclgd.models.linear_transformer_model(D, 2, form="gdpp"), TASKS, (B,)),
        (iclgd.models.softmax_attention_model(spec, H=2), rb, (B, spec.K)),
        (iclgd.models.transformer_model(spec, d_model=8, H=2, d_ff=8, L=1), rb, (B, spec.K)),
    ]
    for model, batch, shape in cases:
        assert isinstance(model, iclgd.Model) and model.name
        params = model.init(jax.random.key(3))
        pred = jax.jit(model.predict)(params, batch)
        assert pred.shape == shape, model.name
        assert np.all(np.isfinite(np.asarray(pred)))
        # same key, same parameters
        same = model.init(jax.random.key(3))
        assert all(
            np.array_equal(a, b)
            for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(same))
        )


def test_factories_compute_the_family_functions():
    g, c = jnp.array([0.5, -1.0, 2.0]), 0.3
    m = iclgd.models.lsa_model(D, H=2, guess=g, bias=c)
    p = m.init(jax.random.key(0))
    ref = lsa_mod.lsa_predict(p, iclgd.embed(TASKS, TASKS.x_q @ g + c))
    np.testing.assert_allclose(m.predict(p, TASKS), ref, rtol=1e-6)
    m0 = iclgd.models.lsa_model(D)
    p0 = m0.init(jax.random.key(0))
    np.testing.assert_allclose(
        m0.predict(p0, TASKS),
        lsa_mod.lsa_output(p0, iclgd.embed(TASKS))[:, -1, -1],
        rtol=1e-5,
        atol=1e-6,
    )
    pgd = iclgd.models.linear_transformer_model(D, 3, form="pgd")
    pa = pgd.init(jax.random.key(1))
    np.testing.assert_allclose(
        pgd.predict(pa, TASKS),
        baselines.preconditioned_gd(TASKS.X, TASKS.y, TASKS.x_q, pa["A"]),
        rtol=1e-4,
        atol=1e-5,
    )
    spec = _spec()
    rb = tasks.sample_representation_tasks(jax.random.key(2), spec, B)
    sa = iclgd.models.softmax_attention_model(spec, H=3)
    ps = sa.init(jax.random.key(4))
    np.testing.assert_allclose(sa.predict(ps, rb), sm.softmax_predict(ps, spec, rb.y))
    tf = iclgd.models.transformer_model(spec, d_model=8, H=2, d_ff=8, L=1, prompt_keys_only=True)
    pt = tf.init(jax.random.key(5))
    np.testing.assert_allclose(
        tf.predict(pt, rb), tr.transformer_predict(pt, jnp.swapaxes(rb.E, 1, 2), n_keys=spec.N)
    )


def test_ltb_corrected_construction_equals_yq_lsa_and_the_papers_does_not():
    d = 4
    tasks = iclgd.sample_tasks(jax.random.key(0), iclgd.make_prior(d, mu=jnp.ones(d)), 8, 256)
    params = iclgd.init_yq_lsa(jax.random.key(1), d, H=1, init_std=0.3, w=0.5 * jnp.ones(d))
    ref = iclgd.yq_lsa_predict(params, tasks)
    E0 = iclgd.embed(tasks)
    fixed = lsa_mod.ltb_predict(lsa_mod.ltb_from_yq_lsa(params), E0)
    paper = lsa_mod.ltb_predict(lsa_mod.ltb_from_yq_lsa(params, paper=True), E0)
    scale = float(jnp.max(jnp.abs(ref)))
    assert float(jnp.max(jnp.abs(fixed - ref))) < 1e-4 * scale
    assert float(jnp.max(jnp.abs(paper - ref))) > 1e-2 * scale
    with pytest.raises(ValueError, match="c must differ"):
        lsa_mod.ltb_from_yq_lsa(params, c=float(params["w"] @ params["w"]))
    with pytest.raises(ValueError, match="one head"):
        lsa_mod.ltb_from_yq_lsa(iclgd.init_yq_lsa(jax.random.key(1), d, H=2))


def test_bad_model_input():
    with pytest.raises(TypeError, match="batch must be an iclgd.tasks.TaskBatch"):
        iclgd.models.lsa_model(D).predict(iclgd.init_lsa(jax.random.key(0), D), TASKS.X)
    with pytest.raises(ValueError, match="form must be one of"):
        iclgd.models.linear_transformer_model(D, 2, form="dense")
    with pytest.raises(ValueError, match=r"guess must have shape \(3,\)"):
        iclgd.models.lsa_model(D, guess=jnp.ones(4))
    with pytest.raises(ValueError, match="H must be an integer >= 1"):
        iclgd.models.lsa_model(D, H=0)
    with pytest.raises(TypeError, match="RepresentationBatch"):
        spec = _spec()
        m = iclgd.models.softmax_attention_model(spec, H=1)
        m.predict(m.init(jax.random.key(0)), TASKS)


def test_linear_transformer_model_init_draws_the_chapters_parameters():
    """``init`` draws ``init_std * normal(key, shape)``: the parameters Part III's chapters drew."""
    d, L, key = 3, 2, jax.random.key(7)
    pgd = iclgd.models.linear_transformer_model(d, L, form="pgd", init_std=0.1, symmetrize=True)
    np.testing.assert_array_equal(pgd.init(key)["A"], 0.1 * jax.random.normal(key, (L, d, d)))
    gdpp = iclgd.models.linear_transformer_model(d, L, form="gdpp", init_std=0.1, symmetrize=True)
    ref = dict(zip("AB", 0.1 * jax.random.normal(key, (2, L, d, d))))
    got = gdpp.init(key)
    assert set(got) == {"A", "B"}
    for k in "AB":
        np.testing.assert_array_equal(got[k], ref[k])
    # without symmetrize the drawn A_l are symmetric (eq. 9), from the same draw
    A = iclgd.models.linear_transformer_model(d, L, form="pgd", init_std=0.1).init(key)["A"]
    np.testing.assert_array_equal(A, np.swapaxes(A, 1, 2))
    np.testing.assert_allclose(A, iclgd.models.linear_transformer.symmetrize(pgd.init(key))["A"])


def test_linear_transformer_model_symmetrize_predicts_with_the_symmetric_part():
    from iclgd.models import linear_transformer as LT

    d, L = D, 2
    Z0 = iclgd.embed_zero_query(TASKS)
    for form in ("pgd", "gdpp"):
        m = iclgd.models.linear_transformer_model(d, L, form=form, symmetrize=True, init_std=0.3)
        p = m.init(jax.random.key(1))
        assert np.abs(p["A"] - np.swapaxes(p["A"], 1, 2)).max() > 1e-3  # i.i.d., not symmetric
        eff = LT.symmetrize(p)
        np.testing.assert_array_equal(m.predict(p, TASKS), LT.sparse_predict(eff, Z0))
        plain = iclgd.models.linear_transformer_model(d, L, form=form)
        np.testing.assert_array_equal(m.predict(p, TASKS), plain.predict(eff, TASKS))
        assert not np.allclose(plain.predict(p, TASKS), m.predict(p, TASKS))
        assert "symmetrize=True" in m.name
        # under jit and with a gradient: dA of the loss is symmetric
        g = jax.grad(lambda q: jnp.sum(m.predict(q, TASKS) ** 2))(p)["A"]
        np.testing.assert_allclose(g, np.swapaxes(g, 1, 2), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(jax.jit(m.predict)(p, TASKS), m.predict(p, TASKS), rtol=1e-6)


@pytest.mark.parametrize("form", ["full", "pgd", "gdpp"])
def test_linear_transformer_model_layers_masks_the_last_layers(form):
    d, L = D, 3
    full = iclgd.models.linear_transformer_model(d, L, form=form, init_std=0.3)
    p = full.init(jax.random.key(2))
    for k in (1, 2, 3):
        m = iclgd.models.linear_transformer_model(d, L, form=form, init_std=0.3, layers=k)
        short = iclgd.models.linear_transformer_model(d, k, form=form)
        want = short.predict(jax.tree_util.tree_map(lambda x: x[:k], p), TASKS)
        np.testing.assert_allclose(m.predict(p, TASKS), want, rtol=1e-5, atol=1e-6)
        assert f"layers={k}" in m.name
        assert jax.tree_util.tree_map(jnp.shape, m.init(jax.random.key(0))) == (
            jax.tree_util.tree_map(jnp.shape, p)
        )  # the parameters keep L layers
    # the masked layers get no gradient
    m1 = iclgd.models.linear_transformer_model(d, L, form=form, layers=1)
    g = jax.grad(lambda q: jnp.sum(m1.predict(q, TASKS) ** 2))(p)
    acting = "P" if form == "full" else "A"
    assert np.all(np.asarray(g[acting][1:]) == 0) and np.abs(g[acting][0]).max() > 0


def test_linear_transformer_model_layers_and_symmetrize_compose():
    from iclgd.models import linear_transformer as LT

    m = iclgd.models.linear_transformer_model(D, 3, form="pgd", symmetrize=True, layers=2)
    p = m.init(jax.random.key(4))
    eff = {"A": LT.symmetrize(p)["A"] * jnp.array([1.0, 1.0, 0.0])[:, None, None]}
    np.testing.assert_array_equal(
        m.predict(p, TASKS), LT.sparse_predict(eff, iclgd.embed_zero_query(TASKS))
    )


@pytest.mark.parametrize("form", ["full", "pgd", "gdpp"])
def test_layer_masked_loss_is_the_loss_of_the_shorter_model(form):
    from iclgd.models import linear_transformer as LT

    m = iclgd.models.linear_transformer_model(D, 3, form=form, init_std=0.3)
    p = m.init(jax.random.key(5))
    masked = jax.jit(iclgd.training.layer_masked_loss(iclgd.training.batch_loss(m)))
    for k in (1, 2, 3):
        on = (np.arange(3) < k).astype(float)
        short = iclgd.models.linear_transformer_model(D, 3, form=form, layers=k)
        want = iclgd.training.batch_loss(short)(p, None, TASKS)
        np.testing.assert_allclose(masked(p, None, on, TASKS), want, rtol=1e-6)
    assert masked._cache_size() == 1  # one compilation for every depth
    # a masked layer's parameters change nothing and get no gradient
    acting = "P" if form == "full" else "A"
    on = np.array([1.0, 0.0, 1.0])
    p2 = {**p, acting: p[acting].at[1].set(7.0)}
    assert masked(p2, None, on, TASKS) == masked(p, None, on, TASKS)
    assert not np.allclose(LT.mask_layers(p, on)[acting][1], p[acting][1])
    g = jax.grad(masked)(p, None, on, TASKS)
    assert np.all(np.asarray(g[acting][1]) == 0) and np.abs(g[acting][2]).max() > 0


def test_linear_transformer_model_bad_input():
    lt_model = iclgd.models.linear_transformer_model
    with pytest.raises(ValueError, match="symmetrize=True needs form 'pgd' or 'gdpp'"):
        lt_model(D, 2, symmetrize=True)
    with pytest.raises(TypeError, match="symmetrize must be True or False"):
        lt_model(D, 2, form="pgd", symmetrize="yes")
    with pytest.raises(ValueError, match=r"layers must be an integer with 1 <= layers <= L = 2"):
        lt_model(D, 2, form="pgd", layers=3)
    with pytest.raises(ValueError, match="layers must be an integer >= 1"):
        lt_model(D, 2, form="pgd", layers=0)
    with pytest.raises(ValueError, match="layers must be an integer"):
        lt_model(D, 2, form="pgd", layers=1.5)
    m = lt_model(D, 2, form="pgd")
    with pytest.raises(ValueError, match=r"params\['A'\] must have L = 2 layers"):
        m.predict({"A": jnp.zeros((3, D, D))}, TASKS)
    with pytest.raises(ValueError, match=r"params\['P'\] must have L = 2 layers"):
        lt_model(D, 2).predict(lt_model(D, 1).init(jax.random.key(0)), TASKS)
    with pytest.raises(TypeError, match="batch must be an iclgd.tasks.TaskBatch"):
        m.predict(m.init(jax.random.key(0)), iclgd.embed_zero_query(TASKS))
    with pytest.raises(ValueError, match=r"params\['A'\] must have shape"):
        m.predict({"A": jnp.zeros((2, D + 1, D + 1))}, TASKS)
