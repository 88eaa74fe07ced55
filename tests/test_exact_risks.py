"""Tests of iclgd.exact.risks: exact risks of one GD step and of the one-layer sparse linear
transformer, against Monte Carlo and against the Wishart engine."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import baselines, exact, tasks


# ---------------------------------------------------------------- baselines
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_gd_exact_risk_and_optimal_eta_against_monte_carlo_grid(noise):
    d, C = 3, 4
    Sig = jnp.array([[1.5, 0.2, 0.0], [0.2, 1.0, 0.0], [0.0, 0.0, 0.5]])
    prior = tasks.make_prior(d, mu=jnp.array([1.0, 0.0, -1.0]), Sigma=Sig, noise_std=noise)
    n = 400_000
    tb = tasks.sample_tasks(jax.random.key(7), prior, C, n)
    etas = jnp.linspace(0.05, 0.8, 16)
    w0 = jnp.array([0.5, 0.5, 0.0])
    mc, se = [], []
    for eta in etas:
        err = np.asarray(baselines.gd_one_step(tb.X, tb.y, tb.x_q, w0, eta) - tb.y_target) ** 2
        mc.append(err.mean())
        se.append(err.std() / np.sqrt(n))
    mc, se = np.array(mc), np.array(se)
    ex = exact.prepare(prior, C)
    risk = np.array([float(exact.gd_risk(ex, float(eta), w0)) for eta in etas])
    assert np.all(np.abs(mc - risk) < 4 * se)
    eta_star, r_star = exact.gd_optimal(ex, w0)
    # the grid's best point brackets the optimum and no grid point beats the exact minimum
    i = int(np.argmin(mc))
    assert etas[max(i - 1, 0)] <= eta_star <= etas[min(i + 1, len(etas) - 1)]
    assert np.all(risk >= float(r_star) - 1e-9)


def test_sparse_linear_transformer_risk_agrees_with_the_wishart_engine():
    d, n = 3, 6
    Sig = np.array([[1.0, 0.3, 0.0], [0.3, 1.5, 0.2], [0.0, 0.2, 0.7]])
    A = np.asarray(jax.random.normal(jax.random.key(5), (d, d)), np.float64) / 3
    ex = exact.prepare(iclgd.make_prior(d, Sigma=Sig), n)
    one = exact.sparse_linear_transformer_risk(A, ex)  # Part I's moment engine
    two = float(exact.pgd_risk([A], n, Sig))  # Part III's Wishart engine
    assert abs(one / two - 1) < 1e-12
    with pytest.raises(ValueError, match="A must have shape"):
        exact.sparse_linear_transformer_risk(np.eye(d + 1), ex)
