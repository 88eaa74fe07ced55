"""Tests of iclgd.baselines: the Bayes posterior mean, ridge regression, multi-step preconditioned
GD (Ahn et al. Lemma 2), GD++ tuned by Monte Carlo, and Part II's ridge predictors (Yang et al. eq.
20-25)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _data import regression_tasks

from iclgd import baselines, exact, metrics, tasks
from iclgd.baselines import ridge_weights
from iclgd.tasks import embed_zero_query


def _prior(d=3, w=1.0, **kw):
    return tasks.make_prior(d, mu=w * jnp.arange(1.0, d + 1) / d, **kw)


def test_bayes_posterior_mean_beats_gd_and_interpolates():
    d, C = 3, 6
    prior = _prior(d=d, w=2.0)
    tb = tasks.sample_tasks(jax.random.key(8), prior, C, 200)
    np.testing.assert_allclose(
        baselines.bayes_posterior_mean(tb, prior), tb.y_target, rtol=1e-6, atol=1e-6
    )
    noisy = _prior(d=d, w=2.0, noise_std=0.5)
    tb = tasks.sample_tasks(jax.random.key(8), noisy, C, 100_000)
    bayes = np.mean(np.asarray(baselines.bayes_posterior_mean(tb, noisy) - tb.y_target) ** 2)
    eta, _ = exact.gd_optimal(exact.prepare(noisy, C))
    gd = np.mean(
        np.asarray(baselines.gd_one_step(tb.X, tb.y, tb.x_q, noisy.mu, eta) - tb.y_target) ** 2
    )
    assert bayes < gd


def test_bayes_posterior_mean_closed_form_small():
    # with noise, the posterior mean equals the precision-weighted formula
    d, C = 2, 3
    prior = tasks.make_prior(
        d, mu=jnp.array([1.0, 2.0]), Omega=jnp.array([[2.0, 0.5], [0.5, 1.0]]), noise_std=0.3
    )
    tb = tasks.sample_tasks(jax.random.key(1), prior, C, 4)
    Oi = np.linalg.inv(np.asarray(prior.Omega))
    for b in range(4):
        X, y = np.asarray(tb.X[b]), np.asarray(tb.y[b])
        w = np.linalg.solve(Oi + X.T @ X / 0.09, Oi @ np.asarray(prior.mu) + X.T @ y / 0.09)
        assert np.isclose(w @ np.asarray(tb.x_q[b]), baselines.bayes_posterior_mean(tb, prior)[b])


def test_ridge_matches_numpy():
    tb = tasks.sample_tasks(jax.random.key(0), _prior(d=3), 5, 4)
    for b in range(4):
        X, y = np.asarray(tb.X[b]), np.asarray(tb.y[b])
        w = np.linalg.solve(X.T @ X + 5 * 0.3 * np.eye(3), X.T @ y)  # 1/(2C) loss: C reg
        assert np.isclose(w @ np.asarray(tb.x_q[b]), baselines.ridge(tb.X, tb.y, tb.x_q, 0.3)[b])


RTOL = 1e-10


def _close(a, b, rtol: float = RTOL) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == np.float64 and b.dtype == np.float64
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


def test_preconditioned_gd_is_plain_gd_for_scaled_identity():
    """A_l = -gamma I gives w_{l+1} = w_l - gamma (1/n) X^T (X w_l - y), all n examples used."""
    t = regression_tasks(5)
    X, y = np.asarray(t.X), np.asarray(t.y)
    n, d = X.shape[1:]
    gamma = 0.3
    w = np.zeros((X.shape[0], d))
    for _ in range(2):
        w = w - gamma * np.einsum("bni,bn->bi", X, np.einsum("bni,bi->bn", X, w) - y) / n
    A = [-gamma * jnp.eye(d)] * 2  # a sequence is accepted too
    _close(
        baselines.preconditioned_gd(t.X, t.y, t.x_q, A), np.einsum("bi,bi->b", w, np.asarray(t.x_q))
    )


def _small():
    t = regression_tasks(70, B=2, n=3, d=2)
    return t, embed_zero_query(t)


def test_bad_A_list_and_regression_inputs():
    t, _ = _small()  # B = 2, n = 3, d = 2
    with pytest.raises(
        ValueError, match=r"A_list must have shape \(L, 2, 2\), got shape \(1, 2, 3\)"
    ):
        baselines.preconditioned_gd(t.X, t.y, t.x_q, jnp.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match=r"A_list must have shape \(L, 2, 2\), got shape \(2, 2\)"):
        baselines.preconditioned_gd(t.X, t.y, t.x_q, jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"L must be an integer >= 1: A_list holds no matrices"):
        baselines.preconditioned_gd(t.X, t.y, t.x_q, [])
    with pytest.raises(ValueError, match=r"B_list must have shape \(2, 2, 2\) like A_list"):
        baselines.gd_plus_plus(t.X, t.y, t.x_q, jnp.zeros((2, 2, 2)), jnp.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match=r"y must have shape \(2, 3\)"):
        baselines.preconditioned_gd(t.X, t.y[:, :2], t.x_q, jnp.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match=r"x_q must have shape \(2, 2\)"):
        baselines.gd_plus_plus(t.X, t.y, t.x_q[:1], jnp.zeros((1, 2, 2)), jnp.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match=r"X must have shape \(B, n, d\)"):
        baselines.preconditioned_gd_iterates(t.X[0], t.y, jnp.zeros((1, 2, 2)))


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


RK, RD, RM, RN, RTAU = 12, 5, 4, 3, 0.1


def test_y_star_y_best_and_limit_matrix(rep_spec, rep_batch):
    ys, yb = baselines.y_star(rep_spec, rep_batch.y), baselines.y_best(rep_spec, rep_batch.y)
    assert ys.shape == yb.shape == (64, RK)
    np.testing.assert_array_equal(ys[:, :RN], rep_batch.y)  # eq. 22: the given labels are kept
    np.testing.assert_allclose(
        ys[:, RN:],
        baselines.ridge_eq20(rep_spec.Z, rep_batch.y, rep_spec.tau) @ rep_spec.ZQ,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        yb[:, RN:],
        baselines.ridge_eq25(rep_spec.Z, rep_batch.y, rep_spec.tau) @ rep_spec.ZQ,
        atol=1e-5,
    )
    A = exact.limit_matrix(rep_spec)
    assert A.shape == (RN, RK)
    np.testing.assert_allclose(A[:, :RN], np.eye(RN), atol=1e-5)
    np.testing.assert_allclose(rep_batch.y @ A, ys, rtol=1e-4, atol=1e-4)  # eq. 27
    assert not np.allclose(ys, yb)  # m != N: the two regularisers differ


def test_y_star_equals_y_best_when_m_equals_N():
    rng = np.random.default_rng(2)
    t = rng.standard_normal((9, 4))
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    s = tasks.make_representation_spec(
        None, K=9, d=4, m=3, N=3, tau=0.2, tokens=t, features=rng.standard_normal((9, 3))
    )
    y = jnp.asarray(rng.standard_normal((5, 3)), dtype=jnp.float32)
    np.testing.assert_allclose(
        baselines.y_star(s, y), baselines.y_best(s, y), atol=1e-6
    )  # m tau / N = tau


def test_bad_ridge_inputs():
    Z = jnp.ones((3, 4))
    with pytest.raises(ValueError, match=r"y must have shape \(B, 4\)"):
        baselines.ridge_eq20(Z, jnp.ones((2, 3)), 0.1)
    with pytest.raises(ValueError, match="reg must be a finite number >= 0"):
        ridge_weights(Z.T, jnp.ones((2, 4)), -1.0)
    with pytest.raises(ValueError, match="singular"):
        ridge_weights(jnp.zeros((3, 2)).T, jnp.ones((1, 2)), 0.0)


def test_gdpp_sample_loss_and_monte_carlo_tuning():
    n, d = 20, 5
    Z = np.asarray(jax.random.normal(jax.random.key(2), (400, n, d)), np.float64)
    lam = np.linalg.eigvalsh(np.einsum("nci,ncj->nij", Z, Z) / n)
    a, b = np.array([-0.8, -0.6]), np.array([0.2, 0.0])
    per = metrics.gdpp_sample_loss(a, b, lam)
    assert per.shape == (400,)
    np.testing.assert_array_equal(per, np.sum(exact.gdpp_residual(a, b, lam) ** 2, -1))
    a_t, b_t = baselines.tune_gdpp_mc(2, lam, [(a, b), (a[::-1], b)])
    assert b_t[-1] == 0.0 and a_t.shape == (2,)
    assert metrics.gdpp_sample_loss(a_t, b_t, lam).mean() < per.mean()
    with pytest.raises(TypeError, match="starts must be a non-empty list"):
        baselines.tune_gdpp_mc(2, lam, [])
    with pytest.raises(ValueError, match=r"starts\[0\]\[0\] must have shape"):
        baselines.tune_gdpp_mc(2, lam, [(np.ones(3), b)])
    with pytest.raises(ValueError, match="lam must have shape"):
        metrics.gdpp_sample_loss(a, b, lam[0])
