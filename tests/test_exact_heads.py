"""Tests of iclgd.exact's head-count tools: closed form, folding, the subspace search, risk64.

Each check compares two independent routes (a closed form against the least-squares optimum, a
folded model's predictions against the unfolded one's, the subspace search's excess formula against
the exact risk of the weights it returns, L-BFGS on the weights against the subspace search), so a
wrong formula or construction fails.
"""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import exact, tasks

# imported by path: a factory of iclgd.models may share the module's name
lsa = importlib.import_module("iclgd.models.lsa")


def _part1(d, C, mu):
    prior = tasks.make_prior(d, mu=jnp.asarray(mu))
    return exact.prepare(prior, C), np.asarray(prior.mu, np.float64)


def _general():
    """Correlated inputs and tasks, label noise (the d3C5 prior of test_exact.py)."""
    S = [[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]]
    Om = [[1.0, 0.5, 0.0], [0.5, 2.0, 0.0], [0.0, 0.0, 0.3]]
    prior = tasks.make_prior(3, mu=jnp.array([1.0, -2.0, 0.5]), Sigma=S, Omega=Om, noise_std=0.4)
    return exact.prepare(prior, 5)


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


# ------------------------------------------------------------------------------ lsa_search
def test_best_lsa_part1_subspace_beats_lbfgs_and_reaches_the_floor_at_d():
    """d = 3, C = 10, w* = (2, 2, 2), y_q = 0 (the theory chapter's setting)."""
    d, C = 3, 10
    D = d + 1
    ex, _ = _part1(d, C, 2.0 * np.ones(d))
    floor = exact.lsa_optimum(ex).risk
    risks = {}
    for H in range(1, d):
        sub = exact.lsa_search(ex, H, restarts=2, steps=300, key=jax.random.key(H))
        old = exact.lsa_search(ex, H, restarts=2, steps=200, key=jax.random.key(H), method="lbfgs")
        assert sub.method == "subspace" and old.method == "lbfgs"
        assert sub.params["WQ"].shape == (H, D, D) and sub.reduced["b"].shape == (H, D)
        assert sub.risk <= old.risk + 1e-9 * old.risk  # at least as good as L-BFGS on the weights
        assert sub.risk > floor * (1 + 1e-3)  # strictly above the floor below H = d
        # the search's closed-form excess equals the exact risk of the weights it returns
        assert sub.risks.min() == pytest.approx(sub.risk, rel=1e-9)
        assert float(exact.lsa_risk(sub.params, ex)) == pytest.approx(sub.risk, rel=1e-12)
        assert np.ptp(sub.risks) < 1e-7 * sub.risk  # every start found the optimum
        assert sub.grad_norm < 1e-6  # a stationary point of the weights
        risks[H] = sub.risk
    assert risks[1] > risks[2]
    for H, how in [(d, "fold"), (d + 1, "construction"), (d + 3, "construction")]:
        r = exact.lsa_search(ex, H)
        assert r.method == how and r.params["WQ"].shape == (H, D, D)
        assert r.risk == pytest.approx(floor, rel=1e-11)
        assert float(exact.lsa_risk(r.params, ex)) == pytest.approx(floor, rel=1e-11)
    # the subspace search alone also reaches the floor at H = d (the fold's subspace is a start)
    s = exact.lsa_search(ex, d, restarts=1, method="subspace")
    assert s.method == "subspace" and s.risk == pytest.approx(floor, rel=1e-9)


@pytest.mark.parametrize("c", [0.0, 0.7])
def test_best_lsa_subspace_general_prior(c):
    """Correlated Sigma and Omega, label noise, a linear guess: the weighted excess formula
    (W = diag(Sigma, 1)) and the c != 0 column must match the exact risk of the returned weights."""
    ex = _general()
    d = 3
    g = np.array([0.5, -1.0, 0.2])
    floor = exact.lsa_optimum(ex, g, c).risk
    for H in (1, 2):
        key = jax.random.key(H)
        sub = exact.lsa_search(ex, H, restarts=2, steps=300, y_q_guess=g, y_q_bias=c, key=key)
        assert sub.method == "subspace"
        assert sub.risks.min() == pytest.approx(sub.risk, rel=1e-9)
        assert float(exact.lsa_risk(sub.params, ex, g, c)) == pytest.approx(sub.risk, rel=1e-12)
        assert sub.risk >= floor * (1 - 1e-12)
        assert sub.grad_norm < 1e-6 * max(1.0, sub.risk)
        # never worse than L-BFGS on the weights: its local minima seed the subspace search
        key_w = jax.random.split(key)[1]
        old = exact.lsa_search(
            ex, H, restarts=2, steps=300, y_q_guess=g, y_q_bias=c, key=key_w, method="lbfgs"
        )
        assert sub.risk <= old.risk + 1e-9 * old.risk
    r = exact.lsa_search(ex, d, restarts=2, y_q_guess=g, y_q_bias=c)
    assert r.method in ("fold", "subspace") and r.risk >= floor * (1 - 1e-12)
    assert float(exact.lsa_risk(r.params, ex, g, c)) == pytest.approx(r.risk, rel=1e-12)


def test_best_lsa_bad_input():
    ex, _ = _part1(2, 3, np.ones(2))
    with pytest.raises(ValueError, match="method must be"):
        exact.lsa_search(ex, 1, method="adam")
    with pytest.raises(ValueError, match="needs H <= d"):
        exact.lsa_search(ex, 3, method="subspace")
    with pytest.raises(ValueError, match="restarts must be >= 1"):
        exact.lsa_search(ex, 1, restarts=0)
    with pytest.raises(ValueError, match=r"y_q_guess must have shape \(2,\)"):
        exact.lsa_search(ex, 1, y_q_guess=np.ones(3))


# ------------------------------------------------------------------------------ risk64
def test_risk64_evaluates_in_float64():
    d, C = 4, 6
    ex, mu = _part1(d, C, np.ones(4))
    best = exact.lsa_optimum(ex)
    g = np.linspace(-1, 1, d)
    with jax.enable_x64(False):
        p32 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), best.params)
        g32 = jnp.asarray(g, jnp.float32)
        r = exact.risk64(exact.lsa_risk, p32, ex, g32, 0.3)
        r_kw = exact.risk64(exact.lsa_risk, p32, ex, y_q_guess=g32, y_q_bias=0.3)
        r32 = float(exact.lsa_risk(p32, ex, g32, 0.3))
        y32 = {"attn": p32, "w": g32}
        ry = exact.risk64(exact.yq_lsa_risk, y32, ex)
    assert type(r) is float and r == r_kw
    # reference: the same float32-rounded numbers, evaluated in float64
    p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(np.asarray(a, np.float64)), p32)
    g64 = jnp.asarray(np.asarray(g32, np.float64))
    ref = float(exact.lsa_risk(p64, ex, g64, 0.3))
    assert r == pytest.approx(ref, rel=1e-13)
    assert abs(r32 - ref) < 1e-4 * ref  # float32 is close, but not float64-exact
    assert ry == pytest.approx(float(exact.yq_lsa_risk({"attn": p64, "w": g64}, ex)), rel=1e-13)
    with pytest.raises(ValueError, match="risk_fn must be callable"):
        exact.risk64("lsa_risk", p64, ex)


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
