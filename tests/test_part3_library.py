"""Unit tests of Part III's helpers: the Wishart engine, iclgd.exact.pgd and iclgd.symbolic.pgd."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

import iclgd
from iclgd import exact, metrics, tasks
from iclgd.exact import wishart as W
from iclgd.models import linear_transformer as LT
from iclgd.symbolic import pgd as SP


def test_wishart_low_moments_closed_forms():
    n, d = sp.symbols("n d", positive=True)
    assert sp.expand(W.wishart_trace_moment(1) - n * d) == 0
    assert sp.expand(W.wishart_trace_moment(2) - n * d * (n + d + 1)) == 0
    m3 = n * d * (n**2 + d**2 + 3 * n * d + 3 * n + 3 * d + 4)
    assert sp.expand(W.wishart_trace_moment(3) - m3) == 0
    assert len(W.matching_structures(3)) == 15  # 5!!


def test_wishart_numeric_moment_matches_monte_carlo():
    rng = np.random.default_rng(0)
    d, n, N = 2, 3, 200_000
    Sig = np.array([[1.5, 0.3], [0.3, 0.6]])
    Ms = [rng.normal(size=(d, d)) for _ in range(2)]
    ex = W.expect_trace(Ms, n, Sig)
    X = rng.normal(size=(N, n, d)) @ np.linalg.cholesky(Sig).T
    S = np.einsum("bni,bnj->bij", X, X)
    v = np.einsum("bij,jk,bkl,li->b", S, Ms[0], S, Ms[1])
    assert abs(v.mean() - ex) < 5 * v.std() / np.sqrt(N)


def test_wishart_word_and_bad_input():
    eye = np.eye(2)
    a = W.expect_trace_word(["S", "S"], 3, eye=eye)
    assert np.isclose(a, 2 * 3 * (3 + 2 + 1))
    assert np.isclose(W.expect_trace_word([2 * eye], 3), 4.0)  # no S: a plain trace
    with pytest.raises(ValueError, match="k must be"):
        W.wishart_trace_moment(0)
    with pytest.raises(ValueError, match="eye is required"):
        W.expect_trace_word(["S", "S"], 3)


def test_dist_to_identity():
    assert float(metrics.dist_to_identity(3 * jnp.eye(4))) < 1e-7
    M = jnp.diag(jnp.array([1.0, -1.0]))
    assert np.isclose(float(metrics.dist_to_identity(M)), 1.0)
    assert metrics.dist_to_identity(jnp.ones((3, 2, 2))).shape == (3,)
    with pytest.raises(ValueError, match="M must have shape"):
        metrics.dist_to_identity(jnp.ones(3))


def test_paper_sigma_spectrum():
    S = tasks.paper_sigma(jax.random.key(0))
    ev = np.sort(np.linalg.eigvalsh(np.asarray(S)))
    assert np.allclose(ev, np.sort([1, 1, 0.25, 0.0625, 1]), atol=1e-5)
    with pytest.raises(ValueError, match="diag must be"):
        tasks.paper_sigma(jax.random.key(0), (1.0, -1.0))


def test_optimal_scalars_one_layer_and_risk_formula():
    o = exact.optimal_scalars(1, 20, 5)
    assert o.risk == sp.Rational(30, 26)  # d(d+1)/(n+d+1)
    assert np.isclose(o.a[0], -20 / 26)
    f, a = exact.scalar_risk_expr(2, 20, 5)
    o2 = exact.optimal_scalars(2, 20, 5)
    val = f.subs(dict(zip(a, o2.a, strict=True)))
    assert abs(float(val) - float(o2.risk)) < 1e-10
    with pytest.raises(ValueError, match="L must be at most 3"):
        exact.optimal_scalars(4, 20, 5)


def test_sparse_risk_exact_matches_model_monte_carlo():
    with jax.enable_x64(True):  # scoped: the float64 default of tests/conftest.py is kept after
        d, n = 2, 3
        Sig = jnp.array([[1.2, 0.4], [0.4, 0.8]])
        prior = iclgd.make_prior(d, Sigma=Sig)
        tasks = iclgd.sample_tasks(jax.random.key(1), prior, n, 200_000)
        A = [jnp.array([[-0.3, 0.1], [0.2, -0.5]]), jnp.array([[-0.2, 0.0], [0.1, -0.4]])]
        e = LT.sparse_predict({"A": jnp.stack(A)}, iclgd.embed_zero_query(tasks)) - tasks.y_target
        e = np.asarray(e) ** 2
        ex = float(exact.pgd_risk(A, n, Sig))
        assert abs(e.mean() - ex) < 5 * e.std() / np.sqrt(e.size)


def test_symbolic_single_layer_and_lemma2():
    s = SP.single_layer_expr(1, 2)
    assert sp.expand(s.out - s.eq15) == 0
    lm = SP.lemma2_expr(1, 2, 2)
    assert all(sp.expand(a - b) == 0 for a, b in zip(lm.transformer, lm.gd, strict=True))


def test_symbolic_single_layer_risk_isotropic_optimum():
    r = SP.single_layer_risk_expr(1, lam=[1])
    sub = {r.b[0]: 0, r.b[1]: 1, r.A[1, 0]: 0}
    fA = r.f.subs(sub)
    a = r.A[0, 0]
    sol = sp.solve(sp.diff(fA, a), a)
    assert sp.simplify(sol[0] + r.n / (r.n + 2)) == 0  # -n/(n+d+1), d = 1
    fj, X, n = SP.component_risk_expr(1, 0, lam=[1])
    assert fj.has(X[1, 0]) and fj.has(n)
    with pytest.raises(ValueError, match="j must be"):
        SP.component_risk_expr(1, 1)


def test_quadratic_min():
    g, m = exact.quadratic_min(lambda x: 3 * (x - 0.4) ** 2 + 1.5)
    assert np.isclose(g, 0.4) and np.isclose(m, 1.5)
    with pytest.raises(ValueError, match="convex quadratic"):
        exact.quadratic_min(lambda x: -(x**2))


def test_gradient_stats_noise_and_signal():
    x = jax.random.normal(jax.random.key(0), (4000, 3))
    loss = lambda p, xs: jnp.sum((xs - p["m"]) ** 2, axis=1)  # noqa: E731
    at_mean = metrics.gradient_stats(loss, {"m": jnp.mean(x, 0)}, x)
    assert np.abs(np.asarray(at_mean.grad["m"])).max() < 1e-5 and at_mean.z2 < 1e-6
    off = metrics.gradient_stats(loss, {"m": jnp.ones(3)}, x)
    assert off.z2 > 100 and np.allclose(off.se["m"], 2 / np.sqrt(4000), rtol=0.1)


def test_wishart_power_moments_loop_equation():
    sym = W.wishart_power_moments(6)
    assert all(sp.expand(sym[k] - W.wishart_trace_moment(k)) == 0 for k in range(1, 7))
    assert sym[0] == sp.Symbol("d", positive=True)
    # d = 1: chi^2_n moments; n = 1: |x|^(2k) moments; E tr (X^T X)^k = E tr (X X^T)^k
    assert W.wishart_power_moments(30, 7, 1)[30] == sp.prod([7 + 2 * j for j in range(30)])
    assert W.wishart_power_moments(20, 1, 4)[20] == sp.prod([4 + 2 * j for j in range(20)])
    assert W.wishart_power_moments(26, 10, 5)[1:] == W.wishart_power_moments(26, 5, 10)[1:]
    assert W.wishart_power_moments(2, 20, 5) == (5, 100, 2600)
    for bad in (-1, 41, True, 2.0):
        with pytest.raises(ValueError, match="k_max"):
            W.wishart_power_moments(bad, 3, 2)
    with pytest.raises(ValueError, match="both n and d"):
        W.wishart_power_moments(3, 4, None)
    with pytest.raises(ValueError, match="n"):
        W.wishart_power_moments(3, 0, 2)


def test_gdpp_risk_reduces_to_gd_on_b_zero():
    n, d = 10, 5
    for L in (1, 2, 3):
        f, a, b = exact.gdpp_risk_expr(L, n, d)
        assert len(a) == L and len(b) == L - 1
        f0 = sp.expand(f.subs({bi: 0 for bi in b}))
        assert (
            sp.expand(
                f0
                - exact.scalar_risk_expr(L, n, d)[0].subs(
                    dict(zip(exact.scalar_risk_expr(L, n, d)[1], a, strict=True))
                )
            )
            == 0
        )
    opt = exact.optimal_scalars(3, n, d)
    risk, g = exact.gdpp_risk(3, n, d, opt.a, None)
    assert abs(risk - float(opt.risk)) < 1e-12 and np.abs(g[:3]).max() < 1e-12
    assert np.abs(g[3:5]).max() > 0.1 and g[5] == 0  # B = 0 is not critical for GD++


def test_gdpp_risk_matches_residual_monte_carlo():
    rng = np.random.default_rng(0)
    n, d, N = 10, 3, 200_000
    X = rng.standard_normal((N, n, d))
    lam = np.linalg.eigvalsh(np.einsum("bni,bnj->bij", X, X) / n)
    a, b = np.array([-0.8, -0.4]), np.array([0.05, 0.0])
    e = np.sum(exact.gdpp_residual(a, b, lam) ** 2, -1)
    exact_val = exact.gdpp_risk(2, n, d, a, b)[0]
    assert abs(e.mean() - exact_val) < 4 * e.std() / np.sqrt(N)


def test_gdpp_critical_point_and_search():
    n, d = 10, 5
    c = exact.gdpp_critical_point(3, n, d, exact.optimal_scalars(3, n, d).a)
    assert c.grad_norm < 1e-25 and c.hess_eigs.min() > 0 and c.b[2] == 0
    assert c.risk < float(exact.optimal_scalars(3, n, d).risk)
    risk, g = exact.gdpp_risk(3, n, d, c.a, c.b)
    assert abs(risk - c.risk) < 1e-12 and np.abs(g).max() < 1e-12
    s = exact.gdpp_critical_points(2, n, d, jax.random.key(0), 3)
    assert s.starts == 3 and s.failed + len(s.points) <= 3 and len(s.points) >= 1
    assert all(p.grad_norm < 1e-25 for p in s.points)
    assert [p.risk for p in s.points] == sorted(p.risk for p in s.points)
    with pytest.raises(ValueError, match="L must be at most 3"):
        exact.gdpp_risk_expr(4, n, d)
    with pytest.raises(ValueError, match="dps"):
        exact.gdpp_risk(2, n, d, [0.1, 0.1], None, dps=10)
    with pytest.raises(ValueError, match="b"):
        exact.gdpp_risk(2, n, d, [0.1, 0.1], [0.1])
    with pytest.raises(ValueError, match="a"):
        exact.gdpp_critical_point(2, n, d, [0.1, np.nan])


def test_gdpp_critical_points_inits():
    n, d = 10, 3
    a_opt = exact.optimal_scalars(2, n, d).a
    s = exact.gdpp_critical_points(2, n, d, jax.random.key(1), 1, inits=[(a_opt, [0.2, 0.0])])
    assert s.starts == 2 and len(s.points) >= 1
    with pytest.raises(TypeError, match="inits"):
        exact.gdpp_critical_points(2, n, d, jax.random.key(1), 1, inits=3)
    with pytest.raises(ValueError, match="pairs"):
        exact.gdpp_critical_points(2, n, d, jax.random.key(1), 1, inits=[(a_opt,)])


def test_gdpp_gradient_on_S_and_z2_against():
    Sigma = np.diag([1.0, 2.0, 0.5])
    g = exact.gdpp_gradient_on_S([3.0, 6.0, -3.0, 0.0], Sigma)
    assert np.allclose(g["A"][1], 2.0 * Sigma) and np.allclose(g["B"][0], -np.eye(3))
    assert g["A"].shape == g["B"].shape == (2, 3, 3)
    with pytest.raises(ValueError, match="2L derivatives"):
        exact.gdpp_gradient_on_S([1.0, 2.0, 3.0], Sigma)
    st = metrics.GradStats({"x": jnp.array([1.0, 2.0])}, {"x": jnp.array([1.0, 1.0])}, 2.5)
    assert st.z2_against({"x": jnp.zeros(2)}) == pytest.approx(2.5)
    assert st.z2_against({"x": jnp.array([1.0, 2.0])}) == 0.0
