"""Unit tests of the helpers behind Part III's Figs. 1-4: prompts of Secs. 5.3 / 6.1, batched
Wishart moments, and the figure functions."""

import jax
import matplotlib
import numpy as np
import pytest

import iclgd
from iclgd import exact, tasks
from iclgd.exact import wishart as W

matplotlib.use("Agg")


def test_paper_prompts_law_and_keys():
    key = jax.random.key(0)
    pr = tasks.sample_paper_prompts(key, 4, 3)
    assert pr.Z0.shape == (3, 6, 5) and pr.y.shape == (3,)
    assert np.allclose(pr.Sigma, tasks.paper_sigma(jax.random.fold_in(key, 0)), atol=1e-5)
    assert np.all(pr.Z0[:, -1, -1] == 0)  # eq. 1: the query label is 0
    again = tasks.sample_paper_prompts(key, 4, 3)
    fresh = tasks.sample_paper_prompts(key, 4, 3, draw=1)
    assert np.array_equal(again.Z0, pr.Z0) and np.array_equal(fresh.Sigma, pr.Sigma)
    assert not np.allclose(fresh.Z0, pr.Z0)
    # y = <x, w*> with w* ~ N(0, Sigma^-1): y^2 has mean tr(Sigma Sigma^-1) = d
    big = tasks.sample_paper_prompts(jax.random.key(1), 2, 40_000)
    y2 = np.asarray(big.y) ** 2
    assert abs(y2.mean() - 5) < 4 * y2.std() / np.sqrt(y2.size)
    # x ~ N(0, Sigma): the sample covariance of the query inputs is Sigma
    xq = np.asarray(big.Z0[:, :5, -1])
    assert np.abs(xq.T @ xq / xq.shape[0] - np.asarray(big.Sigma)).max() < 0.05
    with pytest.raises(ValueError, match="n must"):
        tasks.sample_paper_prompts(key, 0, 3)


def test_paper_prompts_vmap_gives_each_key_its_sigma():
    keys = jax.random.split(jax.random.key(2), 3)
    Sig = jax.vmap(lambda k: tasks.sample_paper_prompts(k, 3, 2).Sigma)(keys)
    assert Sig.shape == (3, 5, 5) and not np.allclose(Sig[0], Sig[1])


def test_expect_trace_batched_equals_loop():
    rng = np.random.default_rng(0)
    Ms = [rng.normal(size=(4, 3, 3)) for _ in range(3)]
    Sig = np.diag([1.0, 2.0, 0.5])
    batched = W.expect_trace(Ms, 5, Sig)
    loop = [W.expect_trace([M[b] for M in Ms], 5, Sig) for b in range(4)]
    assert batched.shape == (4,) and np.allclose(batched, loop)
    A = [rng.normal(size=(2, 3, 3)) for _ in range(2)]
    r = exact.pgd_risk(A, 7)
    assert np.allclose(r, [exact.pgd_risk([a[b] for a in A], 7) for b in range(2)])
    with pytest.raises(ValueError, match="square"):
        W.expect_trace([np.ones((2, 3)), np.ones((2, 3))], 3)


def test_training_figures_draw():
    R, S = 4, 2
    dist = {"a": {"blue": np.full((S, R), 0.5), "red": np.full((S, R), 0.8)}}
    fig = iclgd.plot.training_dists(np.arange(R), dist, np.ones((S, 10)), {"floor": 0.5}, loss_at=1)
    assert len([a for a in fig.axes if a.get_visible()]) == 2
    with pytest.raises(ValueError, match="must be"):
        iclgd.plot.training_dists(np.arange(R + 1), dist, np.ones((S, 10)), loss_at=0)
    with pytest.raises(ValueError, match="loss_at"):
        iclgd.plot.training_dists(np.arange(R), dist, np.ones((S, 10)), loss_at=3)
    fig = iclgd.plot.weight_heatmaps({"A": np.eye(3), "B": -np.eye(3)}, ncols=2)
    assert len(fig.axes) >= 2
    with pytest.raises(ValueError, match="at least one"):
        iclgd.plot.weight_heatmaps({})
