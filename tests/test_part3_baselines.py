"""Part III, chapter 'GD baselines done right': exact tuned k-step GD (exact.tuned_gd), figure."""

import matplotlib
import numpy as np
import pytest

import iclgd
from iclgd import baselines, exact

matplotlib.use("Agg")

SIG = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])


def test_tuned_gd_one_step_isotropic_closed_form():
    d, n = 3, 7
    r = exact.tuned_gd(1, n, np.eye(d))
    assert r.steps == pytest.approx([n / (n + d + 1)], rel=1e-12)  # Theorem 1, Sigma = I
    assert r.risk == pytest.approx(d * (d + 1) / (n + d + 1), rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_tuned_gd_preconditioned_is_optimum_on_S(k):
    n, d = 9, 3
    r = exact.tuned_gd(k, n, SIG, P=np.linalg.inv(SIG))
    opt = exact.optimal_scalars(k, n, d)
    assert r.risk == pytest.approx(float(opt.risk), rel=1e-11)
    assert np.allclose(r.steps, np.sort(-opt.a), rtol=1e-8)


@pytest.mark.parametrize("k", [1, 2])
def test_tuned_gd_plain_matches_sparse_risk_and_is_minimal(k):
    n = 8
    Om = np.linalg.inv(SIG)
    r = exact.tuned_gd(k, n, SIG)
    risk = lambda g: float(exact.pgd_risk([-gl * np.eye(3) for gl in g], n, SIG, Om))  # noqa: E731
    assert risk(r.steps) == pytest.approx(r.risk, rel=1e-10)
    for l in range(k):
        for s in (-0.03, 0.03):
            g = r.steps.copy()
            g[l] *= 1 + s
            assert risk(g) > r.risk
    # other Omega and P are honoured (P = 2 I halves the steps, same loss)
    r2 = exact.tuned_gd(k, n, SIG, P=2 * np.eye(3))
    assert np.allclose(r2.steps, r.steps / 2) and r2.risk == pytest.approx(r.risk, rel=1e-10)
    r3 = exact.tuned_gd(k, n, SIG, Omega=np.eye(3))
    g = r3.steps
    assert float(exact.pgd_risk([-gl * np.eye(3) for gl in g], n, SIG)) == pytest.approx(
        r3.risk, rel=1e-10
    )


def test_tuned_gd_shared_step():
    n = 8
    one = exact.tuned_gd(1, n, SIG)
    assert exact.tuned_gd(1, n, SIG, shared=True).risk == pytest.approx(one.risk, rel=1e-12)
    sh = exact.tuned_gd(2, n, SIG, shared=True)
    best = exact.tuned_gd(2, n, SIG)
    assert sh.steps.shape == (1,) and sh.risk > best.risk
    Om = np.linalg.inv(SIG)
    f = lambda g: float(exact.pgd_risk([-g * np.eye(3)] * 2, n, SIG, Om))  # noqa: E731
    assert f(sh.steps[0]) == pytest.approx(sh.risk, rel=1e-10)
    assert f(sh.steps[0] * 1.02) > sh.risk and f(sh.steps[0] * 0.98) > sh.risk


def test_tuned_gd_bad_input():
    with pytest.raises(ValueError, match="k must be at most 3"):
        exact.tuned_gd(4, 5, SIG)
    with pytest.raises(ValueError, match="k must be"):
        exact.tuned_gd(0, 5, SIG)
    with pytest.raises(TypeError, match="n must be"):
        exact.tuned_gd(1, 2.5, SIG)
    with pytest.raises(ValueError, match="Sigma"):
        exact.tuned_gd(1, 5, -SIG)
    with pytest.raises(ValueError, match="P must"):
        exact.tuned_gd(1, 5, SIG, P=np.eye(2))
    with pytest.raises(ValueError, match="P must be a symmetric"):
        exact.tuned_gd(1, 5, SIG, P=np.triu(np.ones((3, 3))))
    with pytest.raises(ValueError, match="finite"):
        exact.tuned_gd(1, 5, SIG, P=np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="Omega"):
        exact.tuned_gd(1, 5, SIG, Omega=np.ones((2, 2)))


def test_gd_baselines_figure():
    ks = [1, 2, 3]
    fig = iclgd.plot.pgd.gd_baselines(
        ks, {"a": [1.0, 0.5, 0.2], "b": [2.0, 1.5, 1.0]}, {"t": np.ones((3, 2))}, floor_label="a"
    )
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="at least one"):
        iclgd.plot.pgd.gd_baselines(ks, {})
    with pytest.raises(ValueError, match="rows"):
        iclgd.plot.pgd.gd_baselines(ks, {"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="floor_label"):
        iclgd.plot.pgd.gd_baselines(ks, {"a": [1.0, 2.0, 3.0]}, floor_label="b")


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
