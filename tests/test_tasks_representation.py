"""Tests of iclgd.tasks.representation: Part II's task family, sampler and embedding (Yang et al.
eq. 1-4)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import baselines, exact, tasks

RK, RD, RM, RN, RTAU = 12, 5, 4, 3, 0.1


def test_spec_shapes_and_unit_tokens(rep_spec):
    assert (rep_spec.K, rep_spec.N, rep_spec.d, rep_spec.m) == (RK, RN, RD, RM)
    assert rep_spec.tokens_P.shape == (RN, RD) and rep_spec.tokens_Q.shape == (RK - RN, RD)
    assert (
        rep_spec.Z.shape == (RM, RN)
        and rep_spec.ZQ.shape == (RM, RK - RN)
        and rep_spec.Z_hat.shape == (RM, RK)
    )
    np.testing.assert_allclose(np.linalg.norm(np.asarray(rep_spec.tokens), axis=1), 1.0, atol=1e-6)
    assert len(np.unique(np.asarray(rep_spec.tokens).round(6), axis=0)) == RK  # distinct tokens


def test_sampler_shapes(rep_spec, rep_batch):
    B = 64
    assert rep_batch.lam.shape == (B, RM)
    assert rep_batch.eps.shape == (B, RK, RM)
    assert rep_batch.y_all.shape == (B, RK)
    assert rep_batch.y.shape == (B, RN)
    assert rep_batch.E.shape == (B, RD + 1, RK)


def test_labels_equal_eq1(rep_spec, rep_batch):
    lam, eps = np.asarray(rep_batch.lam, np.float64), np.asarray(rep_batch.eps, np.float64)
    feats = np.asarray(rep_spec.Z_hat, np.float64).T  # (K, m), row k = f(v_k)
    want = np.array(
        [[lam[b] @ (feats[k] + eps[b, k]) for k in range(RK)] for b in range(lam.shape[0])]
    )
    np.testing.assert_allclose(rep_batch.y_all, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rep_batch.y, rep_batch.y_all[:, :RN])


def test_embedding_eq2_eq4(rep_spec, rep_batch):
    E = np.asarray(rep_batch.E)
    # the tokens are the same fixed dictionary in every prompt
    np.testing.assert_array_equal(
        E[:, :RD, :], np.broadcast_to(np.asarray(rep_spec.tokens).T, (E.shape[0], RD, RK))
    )
    np.testing.assert_array_equal(E[:, RD, :RN], rep_batch.y)  # E^P carries the prompt labels
    np.testing.assert_array_equal(E[:, RD, RN:], 0.0)  # E^Q carries zeros


def test_sampler_reproducible_and_key_dependent(rep_spec):
    a = tasks.sample_representation_tasks(jax.random.PRNGKey(7), rep_spec, 64)
    b = tasks.sample_representation_tasks(jax.random.PRNGKey(7), rep_spec, 64)
    c = tasks.sample_representation_tasks(jax.random.PRNGKey(8), rep_spec, 64)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a.lam, c.lam)
    assert not np.allclose(a.y_all, c.y_all)


def test_spec_reproducible_and_key_dependent():
    s1 = tasks.make_representation_spec(jax.random.PRNGKey(3), K=RK, d=RD, m=RM, N=RN, tau=RTAU)
    s2 = tasks.make_representation_spec(jax.random.PRNGKey(3), K=RK, d=RD, m=RM, N=RN, tau=RTAU)
    s3 = tasks.make_representation_spec(jax.random.PRNGKey(4), K=RK, d=RD, m=RM, N=RN, tau=RTAU)
    np.testing.assert_array_equal(s1.tokens, s2.tokens)
    np.testing.assert_array_equal(s1.Z_hat, s2.Z_hat)
    assert not np.allclose(s1.tokens, s3.tokens)


def test_lambda_and_noise_distribution(rep_spec):
    B = 4000
    ind = tasks.sample_representation_tasks(jax.random.PRNGKey(5), rep_spec, B)
    np.testing.assert_allclose(np.mean(ind.lam), 0.0, atol=0.05)
    np.testing.assert_allclose(np.std(ind.lam), 1.0, atol=0.05)
    np.testing.assert_allclose(
        np.var(ind.eps), RTAU, rtol=0.05
    )  # eps_k ~ N(0, tau I): tau is a variance
    ood = tasks.sample_representation_tasks(
        jax.random.PRNGKey(5), rep_spec, B, lam_mean=1.0, lam_std=2.0
    )
    np.testing.assert_allclose(np.mean(ood.lam), 1.0, atol=0.1)  # N(1_m, 4 I_m)
    np.testing.assert_allclose(np.std(ood.lam), 2.0, atol=0.1)


def test_user_tokens_and_callable_features():
    tokens = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.6, 0.8, 0], [0, 0.6, 0.8]], dtype=float)
    f = lambda x: jnp.stack([x[0], x[1] ** 2, jnp.sin(x[2])])
    rep_spec = tasks.make_representation_spec(None, K=5, d=3, m=3, N=2, tau=0.0, tokens=tokens, f=f)
    np.testing.assert_allclose(rep_spec.tokens, tokens, atol=1e-7)
    want = np.stack([tokens[:, 0], tokens[:, 1] ** 2, np.sin(tokens[:, 2])], axis=0)
    np.testing.assert_allclose(rep_spec.Z_hat, want, atol=1e-6)
    # tau = 0: labels are exactly lambda^T f(v_k)
    b = tasks.sample_representation_tasks(jax.random.PRNGKey(0), rep_spec, 3)
    np.testing.assert_allclose(b.y_all, np.asarray(b.lam) @ want, atol=1e-6)


def test_sampler_jits_with_spec_as_argument(rep_spec):
    f = jax.jit(lambda k, s: tasks.sample_representation_tasks(k, s, 64).y_all)
    np.testing.assert_allclose(
        f(jax.random.PRNGKey(2), rep_spec),
        tasks.sample_representation_tasks(jax.random.PRNGKey(2), rep_spec, 64).y_all,
        atol=1e-5,
    )


def test_bad_N():
    with pytest.raises(ValueError, match="N must satisfy 1 <= N < K"):
        tasks.make_representation_spec(jax.random.PRNGKey(0), K=5, d=3, m=2, N=5, tau=0.1)


def test_bad_tokens_not_unit_norm():
    with pytest.raises(ValueError, match="tokens must be unit-norm"):
        tasks.make_representation_spec(
            jax.random.PRNGKey(0), K=4, d=3, m=2, N=2, tau=0.1, tokens=2 * np.eye(4, 3)
        )


def test_bad_tokens_repeated():
    t = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="distinct"):
        tasks.make_representation_spec(jax.random.PRNGKey(0), K=3, d=2, m=2, N=2, tau=0.1, tokens=t)


def test_bad_tau_and_features():
    with pytest.raises(ValueError, match="tau must be a finite number >= 0"):
        tasks.make_representation_spec(jax.random.PRNGKey(0), K=5, d=3, m=2, N=2, tau=-0.1)
    with pytest.raises(ValueError, match=r"features must have shape \(5, 2\)"):
        tasks.make_representation_spec(
            jax.random.PRNGKey(0), K=5, d=3, m=2, N=2, tau=0.1, features=np.ones((5, 3))
        )
    with pytest.raises(ValueError, match="at most one of f"):
        tasks.make_representation_spec(
            jax.random.PRNGKey(0),
            K=5,
            d=3,
            m=2,
            N=2,
            tau=0.1,
            f=lambda x: x[:2],
            features=np.ones((5, 2)),
        )
    with pytest.raises(ValueError, match=r"f\(tokens\) must have shape \(5, 2\)"):
        tasks.make_representation_spec(
            jax.random.PRNGKey(0), K=5, d=3, m=2, N=2, tau=0.1, f=lambda x: x
        )


def test_bad_spec_and_batch(rep_spec):
    with pytest.raises(ValueError, match="spec must be an iclgd.tasks.RepresentationSpec"):
        tasks.sample_representation_tasks(jax.random.PRNGKey(0), {"K": 3}, 4)
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        tasks.sample_representation_tasks(jax.random.PRNGKey(0), rep_spec, 0)
    with pytest.raises(ValueError, match=r"y must have shape \(B, 3\)"):
        baselines.y_star(rep_spec, jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="Assumption 1"):
        exact.optimal_loss(rep_spec._replace(lam_std=jnp.asarray(2.0)))


def test_training_prompts_are_a_fixed_set(rep_spec):
    """Prompt i of a training set depends only on (key, i): the same in every minibatch, different
    for another i or another set; its labels follow eq. 1."""
    key = jax.random.PRNGKey(3)
    a = tasks.sample_training_prompts(key, rep_spec, jnp.array([0, 7, 2]))
    b = tasks.sample_training_prompts(key, rep_spec, jnp.array([7]))
    np.testing.assert_array_equal(a.y_all[1], b.y_all[0])
    assert not np.allclose(a.y_all[0], a.y_all[2])
    c = tasks.sample_training_prompts(jax.random.PRNGKey(4), rep_spec, jnp.array([0]))
    assert not np.allclose(a.y_all[0], c.y_all[0])
    want = np.einsum("bi,bki->bk", a.lam, np.asarray(rep_spec.Z_hat).T[None] + a.eps)
    np.testing.assert_allclose(a.y_all, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a.y, a.y_all[:, : rep_spec.N])
    assert a.E.shape == (3, rep_spec.d + 1, rep_spec.K)
    jitted = jax.jit(tasks.sample_training_prompts)(key, rep_spec, jnp.array([0, 7, 2]))
    np.testing.assert_allclose(jitted.y_all, a.y_all, rtol=1e-6)


def test_training_prompts_bad_input(rep_spec):
    key = jax.random.PRNGKey(3)
    with pytest.raises(ValueError, match="index must be >= 0"):
        tasks.sample_training_prompts(key, rep_spec, jnp.array([-1, 2]))
    with pytest.raises(TypeError, match="index must hold integers"):
        tasks.sample_training_prompts(key, rep_spec, jnp.array([0.5]))
    with pytest.raises(ValueError, match="index"):
        tasks.sample_training_prompts(key, rep_spec, jnp.zeros((2, 2), int))
    with pytest.raises(TypeError, match="key"):
        tasks.sample_training_prompts(0, rep_spec, jnp.array([0]))


def test_spec_astype_keeps_the_draws_and_names_a_bad_dtype():
    """``RepresentationSpec.astype`` rounds the same draws (a spec built anew under float32 draws
    other tokens); a dtype that is not floating is a TypeError naming ``dtype``."""
    spec = tasks.make_representation_spec(jax.random.PRNGKey(0), K=8, d=3, m=2, N=5, tau=0.01)
    low = spec.astype(jnp.float32)
    assert all(x.dtype == jnp.float32 for x in low)
    assert low.N == spec.N and low.K == spec.K
    for a, b in zip(low, spec):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b), rtol=1e-6, atol=1e-7)
    for bad in (jnp.int32, "nope", bool):
        with pytest.raises(TypeError, match="dtype"):
            spec.astype(bad)
