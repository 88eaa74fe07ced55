"""Part II chapter 'Deeper transformers': the losses of Sec. 4 (iclgd.models.transformer) and the
figures of Figs. 2(b) and 5 (iclgd.plot.transformer)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import baselines, exact, metrics, tasks, training


@pytest.fixture(scope="module")
def spec():
    return tasks.make_representation_spec(jax.random.PRNGKey(0), K=10, d=4, m=3, N=4, tau=0.3)


@pytest.fixture(scope="module")
def sets(spec):
    return metrics.inference_sets(jax.random.PRNGKey(1), spec, 4000)


def _copy(params, batch):  # the copy baseline: prompt labels, then 0
    return jnp.concatenate([batch.y, jnp.zeros_like(batch.y_all[:, batch.y.shape[1] :])], axis=1)


def test_sampled_loss_matches_the_exact_population_loss(spec):
    model = iclgd.models.softmax_attention_model(spec, H=3)
    p = model.init(jax.random.PRNGKey(2))
    p = {"Q": p["Q"], "w": 0.3 * jax.random.normal(jax.random.PRNGKey(3), p["w"].shape)}
    loss = training.sampled_population_loss(model, 2000)
    mean, se = iclgd.evaluate(loss, p, jax.random.PRNGKey(4), n_batches=40, args=(spec,))
    exact_val = float(exact.softmax_risk(p, spec))
    assert abs(mean - exact_val) < 4 * se
    # the same Model's predict function works too, and the key matters
    loss2 = training.sampled_population_loss(model.predict, 8)
    a, b = (float(loss2(p, jax.random.PRNGKey(i), spec)) for i in (5, 6))
    assert a != b


def test_copy_prompt_loss_is_exact(spec):
    loss = training.sampled_population_loss(_copy, 4000)
    mean, se = iclgd.evaluate(loss, None, jax.random.PRNGKey(7), n_batches=40, args=(spec,))
    exact_val = exact.copy_prompt_loss(spec)
    assert abs(mean - exact_val) < 4 * se
    assert float(exact.optimal_loss(spec)) < exact_val  # ridge beats copying


def test_inference_sets_and_metrics(spec, sets):
    assert set(sets) == {"in", "ood"}
    lam_in, lam_ood = np.asarray(sets["in"].batch.lam), np.asarray(sets["ood"].batch.lam)
    assert abs(lam_in.mean()) < 0.1 and abs(lam_in.std() - 1) < 0.05
    assert abs(lam_ood.mean() - 1) < 0.1 and abs(lam_ood.std() - 2) < 0.1
    for s in sets.values():
        np.testing.assert_allclose(s.target, baselines.y_star(spec, s.batch.y), rtol=1e-6)
    # y_star scores 0; the copy baseline scores what copy_prompt_gap says
    metrics_fn = metrics.inference_metrics(lambda p, b: baselines.y_star(spec, b.y), sets)
    assert all(float(x) < 1e-10 for x in metrics_fn(None).values())
    got = jax.jit(metrics.inference_metrics(_copy, sets))(None)
    gap = metrics.copy_prompt_gap(sets)
    for name in sets:
        assert float(got[name]) == pytest.approx(gap[name], rel=1e-5)
    assert gap["ood"] > gap["in"] > 0


def test_transformer_trains_on_the_sampled_loss(spec):
    model = iclgd.models.transformer_model(spec, d_model=8, H=2, d_ff=8, L=1)
    sets = metrics.inference_sets(jax.random.PRNGKey(1), spec, 20)
    res = iclgd.train(
        training.sampled_population_loss(model, 16),
        model.init(jax.random.PRNGKey(0)),
        jax.random.PRNGKey(1),
        steps=40,
        learning_rate=1e-2,
        args=(spec,),
        record_every=20,
        metrics=metrics.inference_metrics(model, sets),
    )
    assert not res.diverged and res.history.metrics["in"].shape == (3,)
    assert res.losses[-10:].mean() < res.losses[:10].mean()


def test_bad_input(spec, sets):
    with pytest.raises(ValueError, match="batch"):
        training.sampled_population_loss(_copy, 0)
    with pytest.raises(TypeError, match="model"):
        training.sampled_population_loss(3, 8)
    with pytest.raises(TypeError, match="sets"):
        metrics.inference_metrics(_copy, [sets["in"]])
    with pytest.raises(TypeError, match="sets"):
        metrics.copy_prompt_gap({})
    with pytest.raises(TypeError, match=r"sets\['in'\]"):
        metrics.copy_prompt_gap({"in": (1, 2)})
    with pytest.raises(ValueError, match="n"):
        metrics.inference_sets(jax.random.PRNGKey(0), spec, 0)
    with pytest.raises(TypeError, match="key"):
        metrics.inference_sets(0, spec)
    with pytest.raises(TypeError, match="spec"):
        exact.copy_prompt_loss({"K": 3})


def test_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclgd import plot

    steps = np.arange(0, 30, 10)
    fig = plot.deep_losses(
        np.linspace(3, 1, 30), steps, {"in": np.array([3.0, 2, 1])}, {"L*": 0.1, "copy": 2.0}
    )
    assert len(fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="positive"):
        plot.deep_losses(-np.ones(30), steps, {"in": np.ones(3)}, {})
    with pytest.raises(ValueError, match="same length"):
        plot.deep_losses(np.ones(30), steps, {"in": np.ones(4)}, {})
    with pytest.raises(ValueError, match="inference must not be empty"):
        plot.deep_losses(np.ones(30), steps, {}, {})
    curves = {1: np.linspace(3, 1, 30), 4: np.linspace(3, 0.5, 30)}
    final = {"training": {1: 1.0, 4: 0.5}}
    fig = plot.heads_budget(final, curves, {1: 30, 4: 12})
    assert len(fig.axes) == 2
    plt.close(fig)
    plt.close(plot.heads_budget(final, curves))
    with pytest.raises(ValueError, match="final must not be empty"):
        plot.heads_budget({}, curves)
