"""Tests of iclgd.symbolic.yq_lsa: Theorem 4 at finite C, the linear class, the LTB of Lemma 3.

The symbolic gradients are checked against the theorem exactly (sympy) and against the numeric
exact-risk engine (iclgd.exact, float64), an independent route; the symbolic LTB against its jax
twin iclgd.models.lsa.ltb_predict.
"""

import importlib

import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from iclgd import exact, tasks
from iclgd.symbolic import embedding, lsa_prediction_expr, weight_matrix
from iclgd.symbolic.yq_lsa import (
    linear_class_gradient,
    ltb_prediction_expr,
    theorem4_gradient,
    theorem4_kappa,
    yq_lsa_gd_point_gradient,
)

# imported by path: a factory of iclgd.models may share the module's name
lsa = importlib.import_module("iclgd.models.lsa")

ETA = sp.Symbol("eta", positive=True)


def _ex(d, C, mu):
    return exact.prepare(tasks.make_prior(d, mu=jnp.asarray(mu, float)), C)


@pytest.mark.parametrize("d, C, full, n_params", [(1, 1, True, 17), (2, 2, False, 14)])
def test_gd_point_gradient_is_the_theorem_and_vanishes_at_eta_star(d, C, full, n_params):
    r = yq_lsa_gd_point_gradient(d, C, full=full)
    assert len(r.params) == len(r.grad) == len(r.expected) == n_params
    assert all(sp.expand(g - e) == 0 for g, e in zip(r.grad, r.expected))
    e_star = sp.Rational(C, C + d + 1)
    assert sp.expand(r.kappa - (1 - ETA * sp.Rational(C + d + 1, C))) == 0
    assert all(g.subs(ETA, e_star) == 0 for g in r.grad)
    assert any(g.subs(ETA, 1) != 0 for g in r.grad)  # not stationary at eta = 1
    assert any(g.subs(ETA, e_star / 2) != 0 for g in r.grad)
    # the risk at the point is one GD step's, d (d+1) / (C+d+1) at eta*, whatever w*
    r_star = sp.simplify(r.risk.xreplace(r.point).subs(ETA, e_star))
    assert r_star == sp.Rational(d * (d + 1), C + d + 1)


def test_reduced_gradient_matches_the_exact_engine():
    d, C, mu, eta = 2, 2, [0.5, -1.25], 0.7
    r = yq_lsa_gd_point_gradient(d, C, full=False)
    num = {sp.Symbol(f"w_{j + 1}", real=True): sp.Float(m) for j, m in enumerate(mu)}
    num[ETA] = sp.Float(eta)
    sym = np.array([float(g.subs(num)) for g in r.grad])
    ex = _ex(d, C, mu)
    ref = exact.yq_lsa_gd_point_grad(ex, eta)
    assert np.allclose(sym, np.concatenate([ref.u, ref.Q.ravel(), ref.w]), atol=1e-10)
    risk = float(r.risk.xreplace(r.point).subs(num))
    assert risk == pytest.approx(float(exact.gd_risk(ex, eta)), rel=1e-10)


@pytest.mark.parametrize("eta", [0.3, 1.0])
def test_theorem4_gradient_matches_the_exact_engine(eta):
    d, C, mu = 3, 4, [0.5, -1.0, 2.0]
    g_u, g_Q, g_w = theorem4_gradient(d, C, mu, eta)
    ref = exact.yq_lsa_gd_point_grad(_ex(d, C, mu), eta)
    for a, b in [(g_u, ref.u), (g_Q, ref.Q), (g_w, ref.w)]:
        a = np.array(a.evalf(), dtype=float).reshape(np.shape(b))
        assert np.allclose(a, b, rtol=1e-9, atol=1e-9 * ref.norm())
    assert ref.norm() > 1.0


def test_theorem4_kappa():
    assert theorem4_kappa(10, 10, sp.Rational(10, 21)) == 0
    assert theorem4_kappa(10, 10, 1) == sp.Rational(-11, 10)
    assert theorem4_kappa(2, 2) == 1 - sp.Rational(5, 2) * ETA


@pytest.mark.parametrize("d, C, n_params", [(1, 1, 5), (2, 2, 20)])
def test_linear_class_gradient_vanishes_at_gd(d, C, n_params):
    r = linear_class_gradient(d, C)
    assert r.n_params == len(r.grad) == n_params
    assert all(g == 0 for g in r.grad)
    assert sp.simplify(r.risk - sp.Rational(d * (d + 1), C + d + 1)) == 0


def test_linear_class_away_from_eta_star():
    d, C, w, eta = 1, 3, 0.8, sp.Rational(1, 2)
    r = linear_class_gradient(d, C, eta)
    assert any(g != 0 for g in r.grad)
    risk = float(r.risk.subs(sp.Symbol("w_1", real=True), w))
    assert risk == pytest.approx(float(exact.gd_risk(_ex(d, C, [w]), 0.5)), rel=1e-10)


def test_ltb_is_lsa_with_identity_mlp():
    E = embedding(sp.Matrix([[1, 2], [0, -1], [3, 1]]), [1, -2, 4], [2, 1], sp.Rational(1, 3))
    rng = np.random.default_rng(0)
    W = [sp.Matrix(rng.integers(-3, 4, (3, 3))) for _ in range(4)]
    assert ltb_prediction_expr((sp.eye(3), sp.eye(3), *W), E) == lsa_prediction_expr(W, E)


def test_ltb_matches_the_jax_block():
    rng = np.random.default_rng(1)
    d, C = 2, 4
    p = {k: rng.normal(size=(d + 1, d + 1)) for k in ("W1", "W2", "WP", "WV", "WK", "WQ")}
    X, y, xq = rng.normal(size=(C, d)), rng.normal(size=C), rng.normal(size=d)
    E = embedding(sp.Matrix(X), list(y), list(xq), 0.4)
    mats = [sp.Matrix(p[k]) for k in ("W1", "W2", "WP", "WV", "WK", "WQ")]
    sym = float(ltb_prediction_expr(mats, E))
    num = lsa.ltb_predict(
        {k: jnp.asarray(a) for k, a in p.items()}, jnp.asarray(np.array(E, float))[None]
    )
    assert sym == pytest.approx(float(num[0]), rel=1e-10)


def test_lemma3_corrected_construction_symbolic():
    """The corrected LTB weights reproduce y_q-LSA for every prompt (d = 1, C = 1)."""
    X, y = sp.Matrix([[sp.Symbol("x_1")]]), sp.Matrix([sp.Symbol("y_1")])
    xq, w, c = sp.Symbol("x_q"), sp.Symbol("w"), sp.Symbol("c")
    WP, WV, WK, WQ = (weight_matrix(n, 2) for n in ("P", "V", "K", "Q"))
    f_yq = lsa_prediction_expr((WP, WV, WK, WQ), embedding(X, y, [xq], w * xq))
    E0 = embedding(X, y, [xq], 0)
    W1, W3 = sp.Matrix([[1, w], [w, c]]), sp.Matrix([[1, 0], [w, 0]])
    fixed = ltb_prediction_expr((W1, sp.eye(2), W1.inv() * WP, WV, WK, WQ * W3), E0)
    paper = ltb_prediction_expr((W1, sp.eye(2), W1.inv() * WP, WV * W3, WK * W3, WQ * W3), E0)
    assert sp.cancel(fixed - f_yq) == 0
    assert sp.cancel(paper - f_yq) != 0


def test_bad_input():
    E = sp.Matrix([[1, 3], [2, 0]])
    with pytest.raises(ValueError, match="params must be a tuple"):
        ltb_prediction_expr((sp.eye(2),) * 4, E)
    with pytest.raises(ValueError, match="W_K must have shape"):
        ltb_prediction_expr((sp.eye(2),) * 4 + (sp.eye(3), sp.eye(2)), E)
    with pytest.raises(ValueError, match="w_star"):
        theorem4_gradient(2, 2, [1.0])
    with pytest.raises(ValueError):
        linear_class_gradient(0, 2)
