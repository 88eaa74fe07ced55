"""Tests of iclgd.tasks.representation: the task family and ridge predictors of
Part II (Yang et al. 2024)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import baselines, exact, tasks
from iclgd.baselines import ridge_weights

K, D, M, N, TAU = 12, 5, 4, 3, 0.1


@pytest.fixture(scope="module")
def spec():
    return tasks.make_representation_spec(jax.random.PRNGKey(0), K=K, d=D, m=M, N=N, tau=TAU)


@pytest.fixture(scope="module")
def batch(spec):
    return tasks.sample_representation_tasks(jax.random.PRNGKey(1), spec, 64)


# ---------------------------------------------------------------- task family and sampler


def test_spec_shapes_and_unit_tokens(spec):
    assert (spec.K, spec.N, spec.d, spec.m) == (K, N, D, M)
    assert spec.tokens_P.shape == (N, D) and spec.tokens_Q.shape == (K - N, D)
    assert spec.Z.shape == (M, N) and spec.ZQ.shape == (M, K - N) and spec.Z_hat.shape == (M, K)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(spec.tokens), axis=1), 1.0, atol=1e-6)
    assert len(np.unique(np.asarray(spec.tokens).round(6), axis=0)) == K  # distinct tokens


def test_sampler_shapes(spec, batch):
    B = 64
    assert batch.lam.shape == (B, M)
    assert batch.eps.shape == (B, K, M)
    assert batch.y_all.shape == (B, K)
    assert batch.y.shape == (B, N)
    assert batch.E.shape == (B, D + 1, K)


def test_labels_equal_eq1(spec, batch):
    lam, eps = np.asarray(batch.lam, np.float64), np.asarray(batch.eps, np.float64)
    feats = np.asarray(spec.Z_hat, np.float64).T  # (K, m), row k = f(v_k)
    want = np.array(
        [[lam[b] @ (feats[k] + eps[b, k]) for k in range(K)] for b in range(lam.shape[0])]
    )
    np.testing.assert_allclose(batch.y_all, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(batch.y, batch.y_all[:, :N])


def test_embedding_eq2_eq4(spec, batch):
    E = np.asarray(batch.E)
    # the tokens are the same fixed dictionary in every prompt
    np.testing.assert_array_equal(
        E[:, :D, :], np.broadcast_to(np.asarray(spec.tokens).T, (E.shape[0], D, K))
    )
    np.testing.assert_array_equal(E[:, D, :N], batch.y)  # E^P carries the prompt labels
    np.testing.assert_array_equal(E[:, D, N:], 0.0)  # E^Q carries zeros


def test_sampler_reproducible_and_key_dependent(spec):
    a = tasks.sample_representation_tasks(jax.random.PRNGKey(7), spec, 64)
    b = tasks.sample_representation_tasks(jax.random.PRNGKey(7), spec, 64)
    c = tasks.sample_representation_tasks(jax.random.PRNGKey(8), spec, 64)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a.lam, c.lam)
    assert not np.allclose(a.y_all, c.y_all)


def test_spec_reproducible_and_key_dependent():
    s1 = tasks.make_representation_spec(jax.random.PRNGKey(3), K=K, d=D, m=M, N=N, tau=TAU)
    s2 = tasks.make_representation_spec(jax.random.PRNGKey(3), K=K, d=D, m=M, N=N, tau=TAU)
    s3 = tasks.make_representation_spec(jax.random.PRNGKey(4), K=K, d=D, m=M, N=N, tau=TAU)
    np.testing.assert_array_equal(s1.tokens, s2.tokens)
    np.testing.assert_array_equal(s1.Z_hat, s2.Z_hat)
    assert not np.allclose(s1.tokens, s3.tokens)


def test_lambda_and_noise_distribution(spec):
    B = 4000
    ind = tasks.sample_representation_tasks(jax.random.PRNGKey(5), spec, B)
    np.testing.assert_allclose(np.mean(ind.lam), 0.0, atol=0.05)
    np.testing.assert_allclose(np.std(ind.lam), 1.0, atol=0.05)
    np.testing.assert_allclose(
        np.var(ind.eps), TAU, rtol=0.05
    )  # eps_k ~ N(0, tau I): tau is a variance
    ood = tasks.sample_representation_tasks(jax.random.PRNGKey(5), spec, B, lam_mean=1.0, lam_std=2.0)
    np.testing.assert_allclose(np.mean(ood.lam), 1.0, atol=0.1)  # N(1_m, 4 I_m)
    np.testing.assert_allclose(np.std(ood.lam), 2.0, atol=0.1)


def test_user_tokens_and_callable_features():
    tokens = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.6, 0.8, 0], [0, 0.6, 0.8]], dtype=float)
    f = lambda x: jnp.stack([x[0], x[1] ** 2, jnp.sin(x[2])])
    spec = tasks.make_representation_spec(None, K=5, d=3, m=3, N=2, tau=0.0, tokens=tokens, f=f)
    np.testing.assert_allclose(spec.tokens, tokens, atol=1e-7)
    want = np.stack([tokens[:, 0], tokens[:, 1] ** 2, np.sin(tokens[:, 2])], axis=0)
    np.testing.assert_allclose(spec.Z_hat, want, atol=1e-6)
    # tau = 0: labels are exactly lambda^T f(v_k)
    b = tasks.sample_representation_tasks(jax.random.PRNGKey(0), spec, 3)
    np.testing.assert_allclose(b.y_all, np.asarray(b.lam) @ want, atol=1e-6)


def test_sampler_jits_with_spec_as_argument(spec):
    f = jax.jit(lambda k, s: tasks.sample_representation_tasks(k, s, 64).y_all)
    np.testing.assert_allclose(
        f(jax.random.PRNGKey(2), spec),
        tasks.sample_representation_tasks(jax.random.PRNGKey(2), spec, 64).y_all,
        atol=1e-5,
    )


# ---------------------------------------------------------------- ridge regression (eq. 20, 25)


@pytest.mark.parametrize("m,n", [(6, 4), (3, 7)])  # dual (N <= m) and primal (N > m) branches
def test_ridge_eq20_eq25_against_numpy(m, n):
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((m, n))
    y = rng.standard_normal((5, n))
    tau = 0.3
    got20 = np.asarray(baselines.ridge_eq20(jnp.asarray(Z), jnp.asarray(y), tau))
    got25 = np.asarray(baselines.ridge_eq25(jnp.asarray(Z), jnp.asarray(y), tau))
    # eq. 20: 1/(2N) sum (y_i - lam^T z_i)^2 + m tau / (2N) ||lam||^2  ->
    # (Z Z^T + m tau I) lam = Z y
    want20 = np.linalg.solve(Z @ Z.T + m * tau * np.eye(m), Z @ y.T).T
    # eq. 25: 1/(2N) sum (y_i - lam^T z_i)^2 + tau / 2 ||lam||^2  ->  (Z Z^T + N tau I) lam = Z y
    want25 = np.linalg.solve(Z @ Z.T + n * tau * np.eye(m), Z @ y.T).T
    np.testing.assert_allclose(got20, want20, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got25, want25, rtol=1e-4, atol=1e-5)
    # first-order condition of the objective as literally written (eq. 20)
    grad = -(Z @ (y - got20 @ Z).T).T / n + (m * tau / n) * got20
    np.testing.assert_allclose(grad, 0.0, atol=1e-4)


def test_ridge_interpolates_as_tau_to_zero():
    rng = np.random.default_rng(1)
    Z = jnp.asarray(rng.standard_normal((8, 5)))  # N = 5 <= m = 8, full column rank
    y = jnp.asarray(rng.standard_normal((3, 5)))
    for tau in (0.0, 1e-7):
        lam = baselines.ridge_eq20(Z, y, tau)
        np.testing.assert_allclose(lam @ Z, y, atol=1e-4)  # Z^T lam = y
    # reg = 0 gives the minimum-norm interpolant Z (Z^T Z)^{-1} y = pinv(Z^T) y
    np.testing.assert_allclose(
        ridge_weights(Z.T, y, 0.0), (np.linalg.pinv(np.asarray(Z).T) @ np.asarray(y).T).T, atol=1e-4
    )


def test_y_star_y_best_and_limit_matrix(spec, batch):
    ys, yb = baselines.y_star(spec, batch.y), baselines.y_best(spec, batch.y)
    assert ys.shape == yb.shape == (64, K)
    np.testing.assert_array_equal(ys[:, :N], batch.y)  # eq. 22: the given labels are kept
    np.testing.assert_allclose(
        ys[:, N:], baselines.ridge_eq20(spec.Z, batch.y, spec.tau) @ spec.ZQ, atol=1e-5
    )
    np.testing.assert_allclose(
        yb[:, N:], baselines.ridge_eq25(spec.Z, batch.y, spec.tau) @ spec.ZQ, atol=1e-5
    )
    A = exact.limit_matrix(spec)
    assert A.shape == (N, K)
    np.testing.assert_allclose(A[:, :N], np.eye(N), atol=1e-5)
    np.testing.assert_allclose(batch.y @ A, ys, rtol=1e-4, atol=1e-4)  # eq. 27
    assert not np.allclose(ys, yb)  # m != N: the two regularisers differ


def test_y_star_equals_y_best_when_m_equals_N():
    rng = np.random.default_rng(2)
    t = rng.standard_normal((9, 4))
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    s = tasks.make_representation_spec(
        None, K=9, d=4, m=3, N=3, tau=0.2, tokens=t, features=rng.standard_normal((9, 3))
    )
    y = jnp.asarray(rng.standard_normal((5, 3)), dtype=jnp.float32)
    np.testing.assert_allclose(baselines.y_star(s, y), baselines.y_best(s, y), atol=1e-6)  # m tau / N = tau


def test_optimal_loss_is_population_loss_at_A(spec):
    A = exact.limit_matrix(spec)
    Lstar = exact.optimal_loss(spec)
    np.testing.assert_allclose(exact.softmax_risk_from_A(A, spec), Lstar, rtol=1e-5)
    # the label noise of the K - N unseen tokens is irreducible: L* >= (K-N) m tau / (2K)
    assert Lstar >= (K - N) * M * TAU / (2 * K) - 1e-6
    # and A is the minimiser: zero gradient
    g = jax.grad(exact.softmax_risk_from_A)(A, spec)
    np.testing.assert_allclose(g, 0.0, atol=1e-5)


# ---------------------------------------------------------------- bad input


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


def test_bad_ridge_inputs():
    Z = jnp.ones((3, 4))
    with pytest.raises(ValueError, match=r"y must have shape \(B, 4\)"):
        baselines.ridge_eq20(Z, jnp.ones((2, 3)), 0.1)
    with pytest.raises(ValueError, match="reg must be a finite number >= 0"):
        ridge_weights(Z.T, jnp.ones((2, 4)), -1.0)
    with pytest.raises(ValueError, match="singular"):
        ridge_weights(jnp.zeros((3, 2)).T, jnp.ones((1, 2)), 0.0)


def test_bad_spec_and_batch(spec):
    with pytest.raises(ValueError, match="spec must be an iclgd.tasks.RepresentationSpec"):
        tasks.sample_representation_tasks(jax.random.PRNGKey(0), {"K": 3}, 4)
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        tasks.sample_representation_tasks(jax.random.PRNGKey(0), spec, 0)
    with pytest.raises(ValueError, match=r"y must have shape \(B, 3\)"):
        baselines.y_star(spec, jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="Assumption 1"):
        exact.optimal_loss(spec._replace(lam_std=jnp.asarray(2.0)))


def test_limit_matrix_tau0_is_pseudo_inverse():
    """Sec. 3.3, eq. 26: at tau = 0 and N > m, A = Z^dagger Z_hat (Z^T Z is singular)."""
    s = tasks.make_representation_spec(jax.random.PRNGKey(3), K=8, d=3, m=2, N=4, tau=0.0)
    A = np.asarray(exact.limit_matrix(s), np.float64)
    Z, Zh = np.asarray(s.Z, np.float64), np.asarray(s.Z_hat, np.float64)
    np.testing.assert_allclose(A, np.linalg.pinv(Z) @ Zh, atol=1e-4)
    np.testing.assert_allclose(Z @ A, Zh, atol=1e-4)  # every column solves Z a_k = z_k
    # eq. 26: noise-free labels are reproduced exactly, y_k = <y, A[:, k]>
    lam = np.asarray(tasks.sample_lambda(jax.random.PRNGKey(4), s, 5), np.float64)
    np.testing.assert_allclose((lam @ Z) @ A, lam @ Zh, atol=1e-4)
    # it is a minimiser of the noise-free loss (zero gradient) and not the tau -> 0+ limit's I_N
    g = jax.grad(exact.softmax_risk_from_A)(jnp.asarray(A, jnp.float32), s)
    np.testing.assert_allclose(g, 0.0, atol=1e-5)
    assert not np.allclose(A[:, :4], np.eye(4), atol=1e-2)
    # N <= m, Z of full column rank: tau = 0 agrees with eq. 34's solve at a tiny tau
    s2 = tasks.make_representation_spec(jax.random.PRNGKey(5), K=8, d=3, m=4, N=3, tau=0.0)
    A2 = exact.limit_matrix(s2)
    np.testing.assert_allclose(A2, exact.limit_matrix(s2._replace(tau=jnp.asarray(1e-7))), atol=1e-3)
    np.testing.assert_allclose(A2[:, :3], np.eye(3), atol=1e-4)


def test_limit_matrix_tiny_tau_singular_raises():
    s = tasks.make_representation_spec(jax.random.PRNGKey(3), K=8, d=3, m=2, N=4, tau=1e-30)
    with pytest.raises(ValueError, match="must be positive definite"):
        exact.limit_matrix(s)
