"""Tests of iclgd.exact.core: float64 evaluation of any exact risk (risk64) and the minimum of a
convex quadratic (quadratic_min)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import exact, tasks


def test_quadratic_min():
    g, m = exact.quadratic_min(lambda x: 3 * (x - 0.4) ** 2 + 1.5)
    assert np.isclose(g, 0.4) and np.isclose(m, 1.5)
    with pytest.raises(ValueError, match="convex quadratic"):
        exact.quadratic_min(lambda x: -(x**2))


def _part1(d, C, mu):
    prior = tasks.make_prior(d, mu=jnp.asarray(mu))
    return exact.prepare(prior, C), np.asarray(prior.mu, np.float64)


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
