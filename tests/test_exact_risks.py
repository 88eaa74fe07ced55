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


# ---------------------------------------------------------------- the LTB of Xie et al. eq. 30
def test_ltb_risk_against_monte_carlo_and_yq_lsa():
    from iclgd.models import lsa

    d, C = 3, 5
    prior = tasks.make_prior(d, mu=jnp.array([1.0, -0.5, 2.0]))
    ks = jax.random.split(jax.random.key(11), 6)
    P = {k: 0.5 * jax.random.normal(kk, (d + 1, d + 1)) for k, kk in zip(lsa._LTB_KEYS, ks)}
    n = 400_000
    tb = tasks.sample_tasks(jax.random.key(12), prior, C, n)
    err = np.asarray(lsa.ltb_predict(P, tasks.embed(tb)) - tb.y_target) ** 2
    ex = exact.prepare(prior, C)
    risk = float(exact.ltb_risk(P, ex))
    assert abs(err.mean() - risk) < 4 * err.std() / np.sqrt(n)
    # the block's own reduction agrees with the y_q-LSA that computes it
    assert abs(risk - float(exact.yq_lsa_risk(lsa.yq_lsa_from_ltb(P), ex))) < 1e-9 * risk


def test_ltb_at_the_gd_point_has_the_one_step_risk_and_zero_gradient():
    """One GD step from w* (eta* = C/(C+d+1)), built as an LTB: risk d(d+1)/(C+d+1), stationary."""
    from iclgd.models import lsa

    d, C = 4, 7
    prior = tasks.make_prior(d, mu=jnp.array([2.0, 0.0, -1.0, 0.5]))
    ex = exact.prepare(prior, C)
    gd = {"attn": lsa.gd_weights(prior.mu, C / (C + d + 1)), "w": prior.mu}
    L = lsa.ltb_from_yq_lsa(gd)
    assert abs(float(exact.ltb_risk(L, ex)) - d * (d + 1) / (C + d + 1)) < 1e-10
    grad = jax.grad(lambda p: exact.ltb_risk(p, ex))(L)
    assert max(float(jnp.max(jnp.abs(g))) for g in grad.values()) < 1e-9
    # a step off the GD point's step size is not stationary
    off = lsa.ltb_from_yq_lsa({"attn": lsa.gd_weights(prior.mu, 1.0), "w": prior.mu})
    grad_off = jax.grad(lambda p: exact.ltb_risk(p, ex))(off)
    assert max(float(jnp.max(jnp.abs(g))) for g in grad_off.values()) > 1e-2


def test_ltb_risk_rejects_bad_input():
    d = 2
    ex = exact.prepare(tasks.make_prior(d), 3)
    P = {k: jnp.eye(d + 1) for k in ("W1", "W2", "WP", "WV", "WK", "WQ")}
    with pytest.raises(ValueError, match="WK"):
        exact.ltb_risk({k: x for k, x in P.items() if k != "WK"}, ex)
    with pytest.raises(ValueError, match="W2"):
        exact.ltb_risk({**P, "W2": jnp.eye(d + 2)}, ex)
