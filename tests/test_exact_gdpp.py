"""Tests of iclgd.exact.gdpp: GD++ on the set of Theorem 5 (Ahn et al. Sec. 6), exactly -- its
residual polynomial, risk, critical points and projected gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from iclgd import baselines, exact, metrics


def test_gdpp_residual_matches_model():
    import jax
    import jax.numpy as jnp

    d, n, B = 4, 9, 16
    k = jax.random.key(0)
    X, w, xq = (
        np.asarray(jax.random.normal(jax.random.fold_in(k, i), s), float)
        for i, s in enumerate([(B, n, d), (B, d), (B, d)])
    )
    y, yq = np.einsum("bnd,bd->bn", X, w), np.einsum("bd,bd->b", xq, w)
    a, b = np.array([-0.3, -0.6, -1.2]), np.array([0.5, 0.4, 0.3])
    I = jnp.eye(d)
    args = (jnp.asarray(X), jnp.asarray(y), jnp.asarray(xq), a[:, None, None] * I)
    pred = np.asarray(baselines.gd_plus_plus(*args, b[:, None, None] * I))
    lam, V = np.linalg.eigh(np.einsum("bni,bnj->bij", X, X) / n)
    err = -np.einsum("bi,bij,bj,bkj,bk->b", w, V, exact.gdpp_residual(a, b, lam), V, xq)
    assert np.allclose(pred - yq, err, atol=1e-4 * np.abs(err).max())
    lam1 = np.linspace(0, 3, 7)
    assert np.allclose(exact.gdpp_residual(a, 0 * b, lam1), np.prod(1 + a[:, None] * lam1, 0))
    assert np.allclose(
        exact.gdpp_residual(a, b + 7.0 * np.eye(3)[2], lam1), exact.gdpp_residual(a, b, lam1)
    )
    with pytest.raises(ValueError, match="b must"):
        exact.gdpp_residual(a, b[:2], lam1)
    with pytest.raises(ValueError, match="finite"):
        exact.gdpp_residual(a, b, [np.nan])
    with pytest.raises(ValueError, match="a must have shape"):
        exact.gdpp_residual([], [], lam1)


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


def test_gdpp_multistart_and_lowest():
    from iclgd.exact.gdpp import _LOWEST_FOUND, _gdpp_functions

    n, d = 10, 5
    fn = _gdpp_functions(2, n, d)
    x = np.array([-0.5, -2.0, 0.3])
    f, g = fn.fg64(x)
    assert abs(f - fn.f64(x)) < 1e-9 and np.allclose(g, fn.g64(x), rtol=1e-4, atol=1e-6)
    s = exact.gdpp_multistart(2, n, d, jax.random.key(5), 20, refine=2)
    assert s.starts == 20 and 1 <= len(s.points) <= 2
    assert all(p.grad_norm < 1e-25 for p in s.points)
    assert [p.risk for p in s.points] == sorted(p.risk for p in s.points)
    low = exact.gdpp_lowest(2, n, d)  # the stored search: nothing lower in a new one
    assert low.grad_norm < 1e-25 and low.hess_eigs.min() > 0
    assert low.risk <= s.points[0].risk * (1 + 1e-12)
    assert low.risk < float(exact.optimal_scalars(2, n, d).risk)
    assert (3, 10, 5) in _LOWEST_FOUND and (3, 20, 5) in _LOWEST_FOUND
    with pytest.raises(ValueError, match="not been searched"):
        exact.gdpp_lowest(2, 7, 3)
    with pytest.raises(ValueError, match="refine"):
        exact.gdpp_multistart(2, n, d, jax.random.key(5), 2, refine=0)


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


def test_gdpp_gram_eigenvalues_are_those_of_each_layers_covariates():
    # the covariates of layer l are F_l X_0 with F_{l+1} = (I + a_l b_l F_l^2 G) F_l (whitened):
    # build the matrices and compare the eigenvalues of their Gram matrices
    rng = np.random.default_rng(3)
    d, n = 4, 7
    X0 = rng.normal(size=(d, n))
    G = X0 @ X0.T / n
    a, b = np.array([-0.4, -1.3, -2.0]), np.array([0.6, 0.3, 0.0])
    F, expect = np.eye(d), []
    for al, bl in zip(a, b):
        X = F @ X0
        expect.append(np.linalg.eigvalsh(X @ X.T / n))
        F = (np.eye(d) + al * bl * F @ F @ G) @ F
    got = exact.gdpp_gram_eigenvalues(a, b, np.linalg.eigvalsh(G))  # (3, d)
    for g, e in zip(got, expect):
        assert np.allclose(np.sort(g), e, rtol=1e-10, atol=1e-12)
    assert np.allclose(
        exact.gdpp_gram_eigenvalues(a, np.zeros(3), np.linalg.eigvalsh(G)), np.linalg.eigvalsh(G)
    )
