"""Tests of iclgd.tasks.linear: priors, the fast sampler (bit-identical to jax.random.normal),
embeddings, and Part III's prompts (sample_paper_prompts, paper_prompt_sigma, paper_sigma)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from iclgd import tasks
from iclgd.tasks import standard_normal


def _prior(d=3, w=1.0, **kw):
    return tasks.make_prior(d, mu=w * jnp.arange(1.0, d + 1) / d, **kw)


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


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (301, 11, 10), (1001, 3, 3)])
def test_standard_normal_is_bit_identical_to_jax(x64, shape):
    with jax.enable_x64(x64):
        for key in [
            jax.random.key(0),
            jax.random.fold_in(jax.random.key(12345), 7),
            jax.random.PRNGKey(3),
        ]:
            fast = standard_normal(key, shape)
            ref = jax.jit(jax.random.normal, static_argnums=1)(key, shape)
            assert fast.dtype == ref.dtype == (jnp.float64 if x64 else jnp.float32)
            np.testing.assert_array_equal(np.asarray(fast), np.asarray(ref))
        # eager call too
        np.testing.assert_array_equal(
            standard_normal(jax.random.key(5), shape), jax.random.normal(jax.random.key(5), shape)
        )


_reference_sample = tasks.sample_tasks_reference


@pytest.mark.parametrize("identity", [True, False])
@pytest.mark.parametrize("noise", [0.0, 0.3])
def test_sample_tasks_equals_the_reference_algorithm(identity, noise):
    d = 3
    kw = (
        {}
        if identity
        else dict(
            Sigma=jnp.array([[2.0, 0.3, 0], [0.3, 1, 0.2], [0, 0.2, 0.5]]),
            Omega=jnp.array([[1.0, 0.5, 0], [0.5, 2, 0], [0, 0, 0.3]]),
        )
    )
    prior = tasks.make_prior(d, mu=jnp.array([1.0, -2.0, 0.5]), noise_std=noise, **kw)
    with jax.enable_x64(False):
        prior32 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), prior)
        for key in [jax.random.key(1), jax.random.key(2)]:
            new = jax.jit(tasks.sample_tasks, static_argnums=(2, 3))(key, prior32, 6, 257)
            ref = jax.jit(_reference_sample, static_argnums=(2, 3))(key, prior32, 6, 257)
            for a, b in zip(new, ref):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_normals_are_standard_normal():
    """KS, chi-square (40 equiprobable bins) and the first four moments, on 2e6 float32 draws."""
    with jax.enable_x64(False):
        z = np.asarray(
            standard_normal(jax.random.key(2024), (2000, 1000)), dtype=np.float64
        ).ravel()
    n = z.size
    assert stats.kstest(z, "norm").pvalue > 1e-3
    edges = stats.norm.ppf(np.linspace(0, 1, 41))
    counts, _ = np.histogram(z, edges)
    assert stats.chisquare(counts).pvalue > 1e-3
    # moments within 4 standard errors: mean (se 1), variance (se sqrt 2), skewness
    # (sqrt 6), kurtosis (sqrt 24)
    assert abs(z.mean()) < 4 / np.sqrt(n)
    assert abs(z.var() - 1) < 4 * np.sqrt(2 / n)
    assert abs(stats.skew(z)) < 4 * np.sqrt(6 / n)
    assert abs(stats.kurtosis(z)) < 4 * np.sqrt(24 / n)
    # a wrong generator fails these checks: uniforms scaled to unit variance
    u = (np.random.default_rng(0).random(n) - 0.5) * np.sqrt(12)
    assert stats.kstest(u, "norm").pvalue < 1e-6


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "unsafe_rbg"])
def test_sampling_reproducible_for_every_key_type(impl):
    prior = tasks.make_prior(2, mu=jnp.ones(2), noise_std=0.1)
    a = tasks.sample_tasks(jax.random.key(7, impl=impl), prior, 4, 100)
    b = tasks.sample_tasks(jax.random.key(7, impl=impl), prior, 4, 100)
    c = tasks.sample_tasks(jax.random.key(8, impl=impl), prior, 4, 100)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a.X, c.X)
    # the labels follow the model
    np.testing.assert_allclose(a.y_target, jnp.einsum("bd,bd->b", a.x_q, a.w), atol=1.0)


def test_sampling_under_vmap_matches_per_key_calls():
    prior = tasks.make_prior(3, mu=jnp.ones(3))
    keys = jax.random.split(jax.random.key(0), 4)
    batched = jax.vmap(lambda k: tasks.sample_tasks(k, prior, 5, 16))(keys)
    for i in range(4):
        single = tasks.sample_tasks(keys[i], prior, 5, 16)
        np.testing.assert_array_equal(batched.X[i], single.X)
        np.testing.assert_array_equal(batched.y_target[i], single.y_target)


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


def test_paper_sigma_spectrum():
    S = tasks.paper_sigma(jax.random.key(0))
    ev = np.sort(np.linalg.eigvalsh(np.asarray(S)))
    assert np.allclose(ev, np.sort([1, 1, 0.25, 0.0625, 1]), atol=1e-5)
    with pytest.raises(ValueError, match="diag must be"):
        tasks.paper_sigma(jax.random.key(0), (1.0, -1.0))
