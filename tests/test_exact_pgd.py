"""Tests of iclgd.exact.pgd: the exact risk of the sparse multi-layer linear transformer (Ahn et al.
eq. 9), its optimum on Theorem 4's set, tuned preconditioned GD and Theorem 1's optimal A."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

import iclgd
from iclgd import exact
from iclgd.models import linear_transformer as LT

RTOL = 1e-10


def _close(a, b, rtol: float = RTOL) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == np.float64 and b.dtype == np.float64
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


def test_theorem1_isotropic_matches_paper_special_case():
    """Eq. 8 at Sigma = I equals the paper's isotropic display -1/((n-1)/n + (d+2)/n) I."""
    d, n = 3, 7
    A = exact.theorem1_optimal_A(np.eye(d), n)
    _close(A, -1.0 / ((n - 1) / n + (d + 2) / n) * np.eye(d))
    _close(exact.theorem1_optimal_A(np.eye(d), n, w_cov="inverse_sigma"), A)


def test_theorem1_rotation_and_inverse_sigma():
    d, n = 4, 10
    lam = np.array([2.0, 1.0, 0.5, 0.25])
    U = np.linalg.qr(np.random.default_rng(0).normal(size=(d, d)))[0]
    Sigma = U @ np.diag(lam) @ U.T
    want = -U @ np.diag(1.0 / ((n + 1) / n * lam + lam.sum() / n)) @ U.T
    _close(exact.theorem1_optimal_A(Sigma, n), want)
    _close(
        exact.theorem1_optimal_A(Sigma, n, w_cov="inverse_sigma"),
        -n / (n + d + 1) * np.linalg.inv(Sigma),
    )


def test_bad_theorem1_args():
    with pytest.raises(ValueError, match=r"Sigma must be positive definite"):
        exact.theorem1_optimal_A(np.diag([1.0, 0.0]), 5)
    with pytest.raises(ValueError, match=r"Sigma must be a square matrix"):
        exact.theorem1_optimal_A(np.ones((2, 3)), 5)
    with pytest.raises(ValueError, match=r"n must be an integer >= 1"):
        exact.theorem1_optimal_A(np.eye(2), 0)
    with pytest.raises(ValueError, match=r"w_cov must be 'identity' or 'inverse_sigma'"):
        exact.theorem1_optimal_A(np.eye(2), 5, w_cov="sigma")


def test_tuned_gd_one_step_isotropic_closed_form():
    d, n = 3, 7
    r = exact.tuned_gd(1, n, np.eye(d))
    assert r.steps == pytest.approx([n / (n + d + 1)], rel=1e-12)  # Theorem 1, Sigma = I
    assert r.risk == pytest.approx(d * (d + 1) / (n + d + 1), rel=1e-12)


SIG = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])


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


def test_optimal_scalars_one_layer_and_risk_formula():
    o = exact.optimal_scalars(1, 20, 5)
    assert o.risk == sp.Rational(30, 26)  # d(d+1)/(n+d+1)
    assert np.isclose(o.a[0], -20 / 26)
    f, a = exact.scalar_risk_expr(2, 20, 5)
    o2 = exact.optimal_scalars(2, 20, 5)
    val = f.subs(dict(zip(a, o2.a, strict=True)))
    assert abs(float(val) - float(o2.risk)) < 1e-10
    # exact: the minimum is 1 / (H^-1)_00 for the Hankel matrix H of E tr (S/n)^k (an nsimplify
    # once turned this Rational into a nearby product of surds)
    o3 = exact.optimal_scalars(3, 20, 3)
    pm = exact.wishart.wishart_power_moments(6, 20, 3)
    mom = [sp.Rational(m, 20**k) for k, m in enumerate(pm)]
    H = sp.Matrix(4, 4, lambda j, k: mom[j + k])
    assert isinstance(o3.risk, sp.Rational) and o3.risk == 1 / H.inv()[0, 0]
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


def test_pgd_loss_is_the_exact_risk_of_the_symmetrised_model():
    A = jax.random.normal(jax.random.key(3), (2, 3, 3))
    Sig = np.diag([1.0, 0.5, 2.0])
    loss = exact.pgd_loss(7, Sig, np.linalg.inv(Sig), symmetrize=True)
    As = (A + jnp.swapaxes(A, -1, -2)) / 2
    want = exact.pgd_risk(list(As), 7, Sig, np.linalg.inv(Sig))
    assert float(loss({"A": A}, None)) == float(want)
    plain = exact.pgd_loss(7)({"A": A}, jax.random.key(0))  # the key is ignored
    assert float(plain) == float(exact.pgd_risk(list(A), 7))
    assert float(plain) != float(exact.pgd_loss(7, symmetrize=True)({"A": A}, None))
    with pytest.raises(ValueError, match="n must be"):
        exact.pgd_loss(0)
    with pytest.raises(TypeError, match="symmetrize must be True or False"):
        exact.pgd_loss(5, symmetrize="yes")
    with pytest.raises(ValueError, match="Sigma"):
        exact.pgd_loss(5, Sigma=-np.eye(3))
