"""Tests of iclgd.exact.search: the best LSA with H <= d heads (subspace search vs L-BFGS)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import exact, tasks


def _part1(d, C, mu):
    prior = tasks.make_prior(d, mu=jnp.asarray(mu))
    return exact.prepare(prior, C), np.asarray(prior.mu, np.float64)


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


def _general():
    """Correlated inputs and tasks, label noise (the d3C5 prior of test_exact.py)."""
    S = [[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]]
    Om = [[1.0, 0.5, 0.0], [0.5, 2.0, 0.0], [0.0, 0.0, 0.3]]
    prior = tasks.make_prior(3, mu=jnp.array([1.0, -2.0, 0.5]), Sigma=S, Omega=Om, noise_std=0.4)
    return exact.prepare(prior, 5)


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
