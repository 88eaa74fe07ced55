"""Tests of iclgd.symbolic.representation: Lemmas 4-5 and Theorem 2's penalty of Yang et al. in
sympy."""

import pytest
import sympy as sp

from iclgd.symbolic import representation as SR


def test_lemma4_holds_with_variance_tau_only():
    l4 = SR.lemma4_expr(1, 2)
    assert sp.expand(l4.lhs - l4.rhs) == 0
    assert sp.expand(l4.lhs_tau2 - l4.rhs.subs(l4.tau, l4.tau**2)) == 0
    assert sp.expand(l4.lhs_tau2 - l4.rhs) != 0


def test_lemma5_loss_is_eq77_and_printed_L_star_misses_query_noise():
    lem = SR.lemma5_expr(1, 1, 3)
    assert sp.expand(lem.loss - lem.eq77) == 0
    assert sp.expand(lem.loss_tau2 - lem.eq77) != 0
    mini = SR.lemma5_minimum(lem, [[1, 2, -1]])
    assert (mini.A_min - mini.A_eq34).applyfunc(sp.cancel) == sp.zeros(1, 3)
    assert sp.cancel(mini.L_star - mini.L_star_printed - 2 * lem.tau / 6) == 0
    # numerically: at tau = 1/2 the minimum equals the loss at eq. 34's A
    at = {lem.tau: sp.Rational(1, 2)}
    A34 = dict(zip(lem.A_hat, mini.A_eq34.subs(at), strict=True))
    assert sp.simplify(mini.loss.subs(at).subs(A34) - mini.L_star.subs(at)) == 0


def test_lemma5_minimum_singular_and_bad_input():
    lem = SR.lemma5_expr(1, 1, 2)
    with pytest.raises(ValueError, match="numeric"):
        SR.lemma5_minimum(lem, [[1, 2, 3]])
    with pytest.raises(TypeError, match="Lemma5"):
        SR.lemma5_minimum("x", [[1, 2]])
    with pytest.raises(ValueError, match="N must satisfy"):
        SR.lemma5_expr(1, 2, 2)
    with pytest.raises(ValueError, match="m"):
        SR.lemma4_expr(0, 2)


def test_theorem2_penalty_is_m_tau_over_N():
    lem = SR.lemma5_expr(1, 2, 3)  # m = 1, N = 2, K = 3
    res = SR.theorem2_penalty(lem, [[1, 2, -1]])
    assert res.copies_prompt
    assert res.solutions == [lem.tau / 2]  # m tau / N, not tau (eq. 25)
    at = {res.rho: lem.tau / 2}
    diff = (res.y_model - res.y_ridge.subs(at)).applyfunc(sp.cancel)
    assert diff == sp.zeros(1, 3)
    with pytest.raises(ValueError, match="Z_hat"):
        SR.theorem2_penalty(lem, [[1, 2]])


def test_lemma5_isotropic_law_scales_the_loss():
    """Under E[lambda lambda^T] = s^2 I the loss of every linear predictor is s^2 times eq. 9's."""
    s = sp.Symbol("s", positive=True)
    lem, lem_s = SR.lemma5_expr(1, 1, 2), SR.lemma5_expr(1, 1, 2, lam_var=s**2)
    assert sp.expand(lem_s.loss - s**2 * lem.loss) == 0
    assert lem.lam_var == 1 and lem_s.lam_var == s**2
    with pytest.raises(ValueError, match="lam_var"):
        SR.lemma5_expr(1, 1, 2, lam_var=0)


def test_lemma5_printed_L_star_evaluates_the_printed_constant():
    """The printed L* at float features (exact rationals) is the minimum less (K-N) m tau/(2K)."""
    lem = SR.lemma5_expr(1, 1, 3)
    mini = SR.lemma5_minimum(lem, [[1, 2, -1]])
    printed = SR.lemma5_printed_L_star([[1.0, 2.0, -1.0]], 1, 0.5)
    assert printed == mini.L_star_printed.subs(lem.tau, sp.Rational(1, 2))
    assert sp.nsimplify(mini.L_star.subs(lem.tau, sp.Rational(1, 2)) - printed) == sp.Rational(1, 6)
    with pytest.raises(ValueError, match="N must"):
        SR.lemma5_printed_L_star([[1, 2]], 2, 0.5)
    with pytest.raises(ValueError, match="tau"):
        SR.lemma5_printed_L_star([[1, 2]], 1, 0)
    with pytest.raises(ValueError, match="numeric"):
        SR.lemma5_printed_L_star([[1, sp.Symbol("x")]], 1, 0.5)
