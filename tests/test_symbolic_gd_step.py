"""Tests for iclgd.symbolic.gd_step: the one-step-GD construction of Xie et al. eq. 7-9 in sympy.

The symbolic identities are checked exactly (``sp.expand(...) == 0``) for several ``(d, C)``, and
the symbolic expressions are checked against the numeric JAX implementation
(:func:`iclgd.models.lsa.gd_weights`, :func:`iclgd.models.lsa.lsa_predict`,
:func:`iclgd.baselines.gd_one_step`) at random numeric prompts.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from iclgd.baselines import gd_one_step
from iclgd.models.lsa import gd_weights, lsa_predict
from iclgd.symbolic import embedding, lsa_prediction_expr
from iclgd.symbolic.gd_step import GDConstruction, gd_construction_expr, gd_weights_expr

SIZES = [(1, 1), (1, 4), (2, 3), (3, 2)]


@pytest.mark.parametrize("d,C", SIZES)
def test_fixed_weights_give_eq8_and_one_gd_step(d, C):
    g = gd_construction_expr(d, C)
    assert isinstance(g, GDConstruction)
    assert sp.expand(g.f_fixed - g.eq8) == 0  # eq. 8 with W^P = -eta I
    assert sp.expand(g.f_fixed.subs(g.y_q, g.y_q_prior) - g.gd_step) == 0  # eq. 9
    # not vacuous: the attention term is non-zero and linear in eta, the guess y_q passes through
    delta = sp.expand(g.f_fixed - g.y_q)
    assert delta != 0 and sp.degree(delta, g.eta) == 1 and not delta.has(g.y_q)


@pytest.mark.parametrize("d,C", SIZES)
def test_printed_eq7_takes_a_step_of_eta_over_C(d, C):
    g = gd_construction_expr(d, C)
    ratio = sp.cancel((g.f_printed - g.y_q) / (g.eq8 - g.y_q))
    assert ratio == sp.Rational(1, C)
    assert sp.expand(g.f_printed - g.f_fixed.subs(g.eta, g.eta / C)) == 0
    if C > 1:  # the two readings of eq. 7 differ
        assert sp.expand(g.f_printed - g.f_fixed) != 0


def test_shapes_and_free_symbols():
    d, C = 2, 3
    g = gd_construction_expr(d, C)
    assert g.X.shape == (C, d) and g.y.shape == (C, 1)
    assert g.x_q.shape == (d, 1) and g.w0.shape == (d, 1) and g.E.shape == (d + 1, C + 1)
    assert all(W.shape == (d + 1, d + 1) for W in g.weights_printed + g.weights_fixed)
    assert g.E == embedding(g.X, g.y, g.x_q, g.y_q)
    inputs = set(g.X) | set(g.y) | set(g.x_q) | set(g.w0) | {g.y_q, g.eta}
    assert len(inputs) == C * d + C + 2 * d + 2  # all distinct symbols
    assert g.f_fixed.free_symbols <= inputs and g.gd_step.free_symbols <= inputs - {g.y_q}
    assert g.y_q_prior == (g.w0.T * g.x_q)[0, 0]


def test_weights_match_numeric_gd_weights():
    w0, eta = [0.5, -1.25, 2.0], 0.7
    p = gd_weights(jnp.asarray(w0), eta)
    names = ("WP", "WV", "WK", "WQ")
    for W, nm in zip(gd_weights_expr(w0, eta), names, strict=True):
        np.testing.assert_allclose(np.array(W, dtype=float), np.asarray(p[nm][0]), rtol=1e-12)
    # the printed eq. 7 is the same construction with step eta/C
    C = 4
    P_printed = gd_construction_expr(3, C).weights_printed[0]
    assert P_printed == -sp.Symbol("eta", real=True) / C * sp.eye(4)


@pytest.mark.parametrize("d,C", [(2, 3), (3, 5)])
def test_symbolic_expressions_match_numeric_implementation(d, C):
    g = gd_construction_expr(d, C)
    rng = np.random.default_rng(d * 10 + C)
    X, y, xq, w0 = (rng.normal(size=s) for s in [(C, d), C, d, d])
    yq, eta = float(rng.normal()), 0.37
    vals = {g.eta: eta, g.y_q: yq}
    vals.update(zip(list(g.X), X.ravel(), strict=True))
    vals.update(zip(list(g.y), y, strict=True))
    vals.update(zip(list(g.x_q), xq, strict=True))
    vals.update(zip(list(g.w0), w0, strict=True))
    E = np.array(g.E.subs(vals), dtype=float)
    num = lsa_predict(gd_weights(jnp.asarray(w0), eta), jnp.asarray(E)[None])[0]
    np.testing.assert_allclose(float(g.f_fixed.subs(vals)), float(num), rtol=1e-10)
    num_printed = lsa_predict(gd_weights(jnp.asarray(w0), eta / C), jnp.asarray(E)[None])[0]
    np.testing.assert_allclose(float(g.f_printed.subs(vals)), float(num_printed), rtol=1e-10)
    gd = gd_one_step(jnp.asarray(X)[None], jnp.asarray(y)[None], jnp.asarray(xq)[None], w0, eta)
    np.testing.assert_allclose(float(g.gd_step.subs(vals)), float(gd[0]), rtol=1e-10)


def test_gd_weights_expr_in_lsa_prediction():
    # d = C = 1, w0 = 2, eta = 1: f = y_q - (w0 x - y) x x_q
    x, y, xq, yq = sp.symbols("x y xq yq", real=True)
    f = lsa_prediction_expr(gd_weights_expr([2], 1), embedding(sp.Matrix([[x]]), [y], [xq], yq))
    assert sp.expand(f - (yq - (2 * x - y) * x * xq)) == 0


@pytest.mark.parametrize("d,C", [(0, 2), (2, 0), (1.5, 2), (-1, 1)])
def test_gd_construction_rejects_bad_sizes(d, C):
    with pytest.raises((ValueError, TypeError)):
        gd_construction_expr(d, C)


@pytest.mark.parametrize("w0,eta", [([], 1), ("ab", 1), ([1, 2], [1]), (sp.eye(2), 1)])
def test_gd_weights_expr_rejects_bad_input(w0, eta):
    with pytest.raises(ValueError):
        gd_weights_expr(w0, eta)
