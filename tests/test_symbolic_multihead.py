"""Tests of iclgd.symbolic.multihead: multi-head LSA in the reduced parameters M_i, in sympy.

Each result is checked against an independent route: the App. A.1 weights against the literal
multi-head model and against iclgd.exact's construction, the symbolic Gram moments against
iclgd.exact.moments (at two context lengths, which pins both T and P), the symbolic head risks
against iclgd.exact's risk of the whole model and against the risk taken from the model's
definition, and the symbolic closed-form M_i against iclgd.exact.multihead_lsa_closed_form and
stationarity.
"""

import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from iclgd import exact, tasks
from iclgd.symbolic import (
    expect_product,
    frobenius,
    linear_regression_task,
    multihead_lsa_prediction_expr,
)
from iclgd.symbolic.multihead import (
    GramMoments,
    closed_form_M_expr,
    construction_heads,
    gram_moments_expr,
    head_risk_expr,
)

C_SYM = sp.Symbol("C", positive=True)


def _sym_Ms(D, prefix="M"):
    return [
        sp.Matrix(D, D, lambda m, n, i=i: sp.Symbol(f"{prefix}{i + 1}_{m + 1}{n + 1}", real=True))
        for i in range(D)
    ]


def _reduced_prediction(Ms, task):
    """y_q + sum_i <G, M_i> z_{q,i}, the model defined by M (eq. 6 in reduced form)."""
    C = task.C
    G = task.E[:, :C] * task.E[:, :C].T / C
    zq = task.E[:, C]
    return task.y_q + sum(frobenius(G, M) * zq[i] for i, M in enumerate(Ms))


@pytest.fixture(scope="module")
def task2():
    return linear_regression_task(2, 2, w_star="w")


@pytest.fixture(scope="module")
def moments2(task2):
    return gram_moments_expr(2, C_SYM, task2.w_star)


# ------------------------------------------------------------------------------ construction
@pytest.mark.parametrize("d,C", [(1, 3), (2, 2)])
def test_construction_heads_realise_any_M(d, C):
    g = sp.Matrix(sp.symbols(f"g1:{d + 1}", real=True))
    c = sp.Symbol("c", real=True)
    task = linear_regression_task(d, C, y_q=lambda xq, ws: (g.T * xq)[0, 0] + c)
    Ms = _sym_Ms(d + 1)
    f_heads = multihead_lsa_prediction_expr(construction_heads(Ms), task.E)
    assert sp.expand(f_heads - _reduced_prediction(Ms, task)) == 0
    # dropping a head changes the model (the identity is not vacuous)
    f_short = multihead_lsa_prediction_expr(construction_heads(Ms)[:-1], task.E)
    assert sp.expand(f_short - _reduced_prediction(Ms, task)) != 0


def test_construction_heads_match_exact_lsa_params_from_M():
    rng = np.random.default_rng(0)
    D = 3
    M = rng.normal(size=(D, D, D))  # M[:, :, i] = M_i
    heads = construction_heads([sp.Matrix(M[:, :, i]) for i in range(D)])
    p = exact.lsa_params_from_M(M)
    for h, (W_P, W_V, W_K, W_Q) in enumerate(heads):
        for name, W in [("WP", W_P), ("WV", W_V), ("WK", W_K), ("WQ", W_Q)]:
            np.testing.assert_allclose(np.array(W, dtype=float), p[name][h], atol=1e-14)


def test_construction_heads_bad_input():
    with pytest.raises(ValueError, match="non-empty"):
        construction_heads([])
    with pytest.raises(ValueError, match=r"Ms\[1\]"):
        construction_heads([sp.eye(2), sp.eye(3)])


# ------------------------------------------------------------------------------ moments
def test_gram_moments_match_exact_moments(task2, moments2):
    assert isinstance(moments2, GramMoments) and moments2.d == 2
    w = np.array([0.5, -1.5])
    prior = tasks.make_prior(2, mu=jnp.asarray(w))
    sub = {moments2.w_star[0]: w[0], moments2.w_star[1]: w[1]}
    idx = list(moments2.EGG)
    assert len(idx) == 3**4
    for C in (3, 11):  # EGG is affine in 1/C: two values of C pin both P and T
        mom = exact.moments(prior, C)
        EGG = np.array([float(moments2.EGG[k].subs(sub).subs(C_SYM, C)) for k in idx])
        np.testing.assert_allclose(EGG.reshape((3,) * 4), mom.EGG, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.array(moments2.EG.subs(sub), float), mom.EG, atol=1e-12)
        EwG = np.array([np.array(m.subs(sub), float) for m in moments2.EwG])
        np.testing.assert_allclose(EwG, mom.EwG, atol=1e-12)
    # E[G] is the paper's M (eq. 22); EGG = P + (T - P) / C exactly; T and P differ
    assert sp.expand(moments2.EG - moments2.M_paper) == sp.zeros(3, 3)
    for k in idx:
        P, T = moments2.P4[k], moments2.T4[k]
        assert sp.expand(moments2.EGG[k] - P - (T - P) / C_SYM) == 0
    assert sp.expand(moments2.T4[(2, 2, 2, 2)] - moments2.P4[(2, 2, 2, 2)]) != 0
    # one known value: lim_C E[G_13^2] = E[w_hat_1^2] = w_1^2 + 1
    assert sp.expand(moments2.P4[(0, 2, 0, 2)] - moments2.w_star[0] ** 2 - 1) == 0


def test_gram_moments_bad_input():
    with pytest.raises(ValueError, match="w_star"):
        gram_moments_expr(2, 3, [1.0])
    with pytest.raises(ValueError, match="C"):
        gram_moments_expr(1, -2, [1.0])
    with pytest.raises(ValueError, match="d"):
        gram_moments_expr(0, 3, [])


# ------------------------------------------------------------------------------ head risks
def test_head_risk_equals_risk_from_the_model_definition(task2, moments2):
    """At C = 2, L_i from the moments = E[(<G, M_i> - w_hat_i)^2] from the prompt's symbols."""
    Ms = _sym_Ms(3)
    C = task2.C
    G = task2.E[:, :C] * task2.E[:, :C].T / C
    for i in range(2):
        r = frobenius(G, Ms[i]) - task2.w_hat[i]
        L_def = expect_product(r, r, task2.groups)
        L_mom = head_risk_expr(Ms[i], i, moments2).subs(C_SYM, C)
        assert sp.expand(L_mom - L_def) == 0


def test_head_risks_sum_to_exact_lsa_risk(moments2):
    """y_q = 0: the risk of the model is sum_i L_i(M_i) (eq. 18); compare with iclgd.exact."""
    rng = np.random.default_rng(1)
    w, C = np.array([1.0, -0.5]), 5
    M = rng.normal(size=(3, 3, 3))
    sub = {moments2.w_star[0]: w[0], moments2.w_star[1]: w[1], C_SYM: C}
    total = sum(float(head_risk_expr(sp.Matrix(M[:, :, i]), i, moments2).subs(sub)) for i in (0, 1))
    ex = exact.prepare(tasks.make_prior(2, mu=jnp.asarray(w)), C)
    ref = exact.risk64(exact.lsa_risk, exact.lsa_params_from_M(M), ex)
    assert abs(total - ref) < 1e-10 * ref


def test_head_risk_bad_input(moments2):
    with pytest.raises(ValueError, match="moments"):
        head_risk_expr(sp.zeros(3, 3), 0, {})
    with pytest.raises(ValueError, match="Mi"):
        head_risk_expr(sp.zeros(2, 2), 0, moments2)
    with pytest.raises(ValueError, match="i must be < d"):
        head_risk_expr(sp.zeros(3, 3), 2, moments2)


# ------------------------------------------------------------------------------ closed form
@pytest.mark.parametrize("d,C", [(1, 1), (2, 3), (3, 10)])
def test_closed_form_M_matches_exact(d, C):
    w = np.linspace(-1.0, 2.0, d)
    ref = exact.multihead_lsa_closed_form(d, C, w).M
    for i in range(d + 1):
        Mi = np.array(closed_form_M_expr(i, C, [sp.nsimplify(x) for x in w]), dtype=float)
        np.testing.assert_allclose(Mi, ref[:, :, i], atol=1e-14)


def test_closed_form_M_is_a_stationary_point(moments2):
    """Symbolic C and w*: grad L_i(M_i*) = 0 and sum_i L_i(M_i*) = the closed-form risk."""
    w = moments2.w_star
    N = sp.Matrix(3, 3, lambda m, n: sp.Symbol(f"N{m}{n}"))
    total = 0
    for i in range(2):
        L = head_risk_expr(N, i, moments2)
        at = dict(zip(list(N), list(closed_form_M_expr(i, C_SYM, w))))
        assert all(sp.cancel(sp.diff(L, s).subs(at)) == 0 for s in N)
        # a perturbed M is not stationary (the check is not vacuous)
        off = dict(zip(list(N), list(closed_form_M_expr(i, C_SYM + 1, w))))
        assert any(sp.cancel(sp.diff(L, s).subs(off)) != 0 for s in N)
        total += L.subs(at)
    R = sp.Rational(6) / (C_SYM + 3) + 2 * (w[0] ** 2 + w[1] ** 2) / (2 * C_SYM + 2)
    assert sp.cancel(total - R) == 0


def test_closed_form_M_bad_input():
    with pytest.raises(ValueError, match="i must be <= d"):
        closed_form_M_expr(3, 4, [1, 2])
    with pytest.raises(ValueError, match="w_star"):
        closed_form_M_expr(0, 4, "w")
