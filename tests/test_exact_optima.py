"""Tests of iclgd.exact.optima: the closed-form optima of Part I (many heads, folding, stack rank,
the GD point of y_q-LSA, the optimal GD step)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import exact, tasks
from iclgd.models import lsa


def test_gd_optimal_part_one_closed_form():
    for d, C in [(1, 1), (10, 10), (5, 40)]:
        prior = tasks.make_prior(d, mu=jnp.ones(d))
        eta, r = exact.gd_optimal(exact.prepare(prior, C))
        assert np.isclose(eta, C / (C + d + 1)) and np.isclose(r, d * (d + 1) / (C + d + 1))


def _part1(d, C, mu):
    prior = tasks.make_prior(d, mu=jnp.asarray(mu))
    return exact.prepare(prior, C), np.asarray(prior.mu, np.float64)


# ------------------------------------------------------------------------------ closed form
@pytest.mark.parametrize("d,C", [(1, 1), (2, 3), (3, 10), (5, 4)])
def test_closed_form_equals_least_squares_optimum(d, C):
    rng = np.random.default_rng(10 * d + C)
    ex, mu = _part1(d, C, rng.normal(size=d))
    g = rng.normal(size=d)
    for gg, c in [(None, 0.0), (g, 0.0), (None, 0.7), (g, -1.3)]:
        cf = exact.multihead_lsa_closed_form(d, C, mu, gg, c)
        best = exact.lsa_optimum(ex, gg, c)
        assert cf.kappa == C / (C * d + 2) and cf.eta == C / (C + d + 1)
        np.testing.assert_allclose(cf.M, best.M, rtol=0, atol=1e-11 * np.abs(best.M).max())
        assert cf.risk == pytest.approx(best.risk, rel=1e-11)
    with pytest.raises(ValueError, match=r"w_star must have shape \(2,\)"):
        exact.multihead_lsa_closed_form(2, 3, np.ones(3))


# imported by path: a factory of iclgd.models may share the module's name


# ------------------------------------------------------------------------------ folding, rank
def test_fold_gives_the_same_model_with_d_heads():
    d, C = 3, 10
    ex, mu = _part1(d, C, 2.0 * np.ones(d))
    D = d + 1
    tb = tasks.sample_tasks(jax.random.key(0), ex.prior, C, 64)
    E = tasks.embed(tb, tb.x_q @ jnp.asarray(np.linspace(-1, 1, d)) + 0.5)
    rng = np.random.default_rng(0)
    for g, c in [(None, 0.0), (None, 1.0), (rng.normal(size=d), 0.5)]:
        floor = exact.lsa_optimum(ex, g, c)
        folded = exact.fold_last_row(floor.M)
        assert np.all(folded[d] == 0.0)
        p_d = exact.heads_from_M(folded, d)
        p_full = exact.lsa_params_from_M(floor.M)
        assert p_d["WQ"].shape == (d, D, D)
        # the same predictions on any prompt ...
        f_d, f_full = lsa.lsa_predict(p_d, E), lsa.lsa_predict(p_full, E)
        np.testing.assert_allclose(
            f_d, f_full, rtol=1e-11, atol=1e-11 * float(jnp.abs(f_full).max())
        )
        # ... hence the same exact risk, the floor, as the (d+1)-head construction
        assert exact.risk64(exact.lsa_risk, p_d, ex, g, c) == pytest.approx(floor.risk, rel=1e-11)
        # extra heads are zero heads
        p_pad = exact.heads_from_M(floor.M, D + 2)
        assert p_pad["WQ"].shape == (D + 2, D, D) and np.all(p_pad["WP"][D:] == 0)
        assert exact.risk64(exact.lsa_risk, p_pad, ex, g, c) == pytest.approx(floor.risk, rel=1e-11)
    M = rng.normal(size=(D, D, D))
    with pytest.raises(ValueError, match="uses G_yy"):
        exact.fold_last_row(M)
    with pytest.raises(ValueError, match="must be zero to drop heads"):
        exact.heads_from_M(M, 2)
    with pytest.raises(ValueError, match=r"M must have shape \(D, D, D\)"):
        exact.fold_last_row(np.zeros((2, 3, 3)))


def test_stack_rank():
    d, C = 3, 10
    D = d + 1
    ex, _ = _part1(d, C, 2.0 * np.ones(d))
    rng = np.random.default_rng(1)
    assert exact.stack_rank(rng.normal(size=(D, D, D))) == D
    assert exact.stack_rank(np.zeros((D, D, D))) == 0
    # sum_h b_h [a_1^h .. a_D^h]: rank = number of heads
    b = rng.normal(size=(2, D))
    A = rng.normal(size=(2, D, D))
    assert exact.stack_rank(np.einsum("hm,hni->mni", b, A)) == 2
    floor = exact.lsa_optimum(ex)
    assert exact.stack_rank(floor.M) == D
    assert exact.stack_rank(exact.fold_last_row(floor.M)) == d


# ------------------------------------------------------------------------------ GD point gradient
@pytest.mark.parametrize("d,C", [(1, 2), (3, 5)])
def test_yq_lsa_gd_point_grad(d, C):
    """Part I: the exact y_q-LSA gradient at the GD point vanishes at eta* = C/(C+d+1), and at
    eta = 1 equals g_u = -2 d kappa e_D, g_Q = -2 kappa P P^T, g_w = 0 (kappa = 1 - (C+d+1)/C,
    P = [I; w*^T])."""
    for mu in [np.zeros(d), np.linspace(1.0, 2.0, d)]:
        ex, w = _part1(d, C, mu)
        eta_s = C / (C + d + 1)
        g_star = exact.yq_lsa_gd_point_grad(ex, eta_s)
        g_one = exact.yq_lsa_gd_point_grad(ex, 1.0)
        assert (
            g_one.u.shape == (d + 1,) and g_one.Q.shape == (d + 1, d + 1) and g_one.w.shape == (d,)
        )
        assert g_one.norm() > 0.1
        assert g_star.norm() < 1e-10 * g_one.norm()
        kappa = 1 - (C + d + 1) / C
        P = np.vstack([np.eye(d), w[None]])
        scale = g_one.norm()
        np.testing.assert_allclose(g_one.u, -2 * d * kappa * np.eye(d + 1)[d], atol=1e-11 * scale)
        np.testing.assert_allclose(g_one.Q, -2 * kappa * P @ P.T, atol=1e-11 * scale)
        np.testing.assert_allclose(g_one.w, 0.0, atol=1e-11 * scale)
    # started away from the prior mean, the GD point is not stationary
    assert exact.yq_lsa_gd_point_grad(ex, eta_s, w + 0.5).norm() > 1e-3
