"""Unit tests of the helpers behind Part III's Figs. 1-4: prompts of Secs. 5.3 / 6.1, batched
Wishart moments, and the figure functions."""

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

import iclgd
from iclgd import exact, tasks
from iclgd.exact import wishart as W

matplotlib.use("Agg")


def _old_paper_prompts(key, n, batch, draw=0, diag=(1.0, 1.0, 0.5, 0.25, 1.0)):
    """The construction of ``Sigma``, ``Z0`` (eq. 1) and ``y`` that the chapters trained on before
    ``sample_paper_prompts`` returned a TaskBatch (the removed ``PaperPrompts``), verbatim."""
    D = jnp.asarray(diag, dtype=float)
    d = D.shape[0]
    k0, k1 = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1 + draw)
    U = tasks.haar_orthogonal(k0, d)
    root = U.T @ (D[:, None] * U)
    Sigma = root @ root
    z = jax.random.normal(k1, (batch, n + 2, d))
    xb, wb = z[:, : n + 1], z[:, n + 1]
    X = xb @ root
    yy = jnp.einsum("bcd,bd->bc", xb, wb)
    top = jnp.swapaxes(X, 1, 2)
    bottom = yy.at[:, n].set(0.0)[:, None, :]
    return (Sigma + Sigma.T) / 2, jnp.concatenate([top, bottom], 1), yy[:, n]


@pytest.mark.parametrize("args", [(20, 7), (10, 3, 1), (4, 5, 2, (1.0, 0.5, 2.0))])
def test_paper_prompts_are_bit_identical_to_the_old_construction(args):
    keys = jax.random.split(jax.random.key(11), 3)
    diag = {"diag": args[3]} if len(args) > 3 else {}
    new = jax.vmap(lambda k: tasks.sample_paper_prompts(k, *args))(keys)
    Sig = jax.vmap(lambda k: tasks.paper_prompt_sigma(k, **diag))(keys)
    old = jax.vmap(lambda k: _old_paper_prompts(k, *args))(keys)
    np.testing.assert_array_equal(Sig, old[0])
    np.testing.assert_array_equal(jax.vmap(tasks.embed_zero_query)(new), old[1])
    np.testing.assert_array_equal(new.y_target, old[2])
    one = tasks.sample_paper_prompts(keys[1], *args)  # without vmap too
    np.testing.assert_array_equal(tasks.embed_zero_query(one), old[1][1])
    np.testing.assert_array_equal(tasks.paper_prompt_sigma(keys[1], **diag), old[0][1])


def test_paper_prompts_law_and_keys():
    key = jax.random.key(0)
    pr = tasks.sample_paper_prompts(key, 4, 3)
    assert isinstance(pr, tasks.TaskBatch)
    assert pr.X.shape == (3, 4, 5) and pr.y.shape == (3, 4) and pr.x_q.shape == (3, 5)
    assert pr.y_target.shape == (3,) and pr.w.shape == (3, 5)
    Sigma = tasks.paper_prompt_sigma(key)
    assert np.allclose(Sigma, tasks.paper_sigma(jax.random.fold_in(key, 0)), atol=1e-5)
    assert np.array_equal(Sigma, Sigma.T)
    assert np.all(tasks.embed_zero_query(pr)[:, -1, -1] == 0)  # eq. 1: the query label is 0
    # noise-free labels of the task weights w* = Sigma^{-1/2} w_bar
    np.testing.assert_allclose(pr.y, np.einsum("bcd,bd->bc", pr.X, pr.w), atol=1e-4)
    np.testing.assert_allclose(pr.y_target, np.einsum("bd,bd->b", pr.x_q, pr.w), atol=1e-4)
    again = tasks.sample_paper_prompts(key, 4, 3)
    fresh = tasks.sample_paper_prompts(key, 4, 3, draw=1)
    assert np.array_equal(again.X, pr.X) and np.array_equal(again.w, pr.w)
    assert not np.allclose(fresh.X, pr.X)
    # y = <x, w*> with w* ~ N(0, Sigma^-1): y^2 has mean tr(Sigma Sigma^-1) = d
    big = tasks.sample_paper_prompts(jax.random.key(1), 2, 40_000)
    y2 = np.asarray(big.y_target) ** 2
    assert abs(y2.mean() - 5) < 4 * y2.std() / np.sqrt(y2.size)
    # x ~ N(0, Sigma): the sample covariance of the query inputs is Sigma
    xq = np.asarray(big.x_q)
    Sig1 = np.asarray(tasks.paper_prompt_sigma(jax.random.key(1)))
    assert np.abs(xq.T @ xq / xq.shape[0] - Sig1).max() < 0.05
    # w* ~ N(0, Sigma^-1): the sample covariance of the task weights is Sigma^-1
    w = np.asarray(big.w)
    assert np.abs(w.T @ w / w.shape[0] - np.linalg.inv(Sig1)).max() < 0.3
    with pytest.raises(ValueError, match="n must"):
        tasks.sample_paper_prompts(key, 0, 3)


def test_paper_prompt_sigma_bad_input():
    with pytest.raises(TypeError, match="key"):
        tasks.paper_prompt_sigma(1)
    with pytest.raises(ValueError, match="diag must"):
        tasks.paper_prompt_sigma(jax.random.key(0), diag=(1.0, -1.0))
    with pytest.raises(ValueError, match="diag"):
        tasks.paper_prompt_sigma(jax.random.key(0), diag=(1.0, np.nan))
    assert not hasattr(tasks, "PaperPrompts")


def test_paper_prompts_vmap_gives_each_key_its_sigma():
    keys = jax.random.split(jax.random.key(2), 3)
    Sig = jax.vmap(tasks.paper_prompt_sigma)(keys)
    assert Sig.shape == (3, 5, 5) and not np.allclose(Sig[0], Sig[1])
    X = jax.vmap(lambda k: tasks.sample_paper_prompts(k, 3, 2).X)(keys)
    assert X.shape == (3, 2, 3, 5)


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
