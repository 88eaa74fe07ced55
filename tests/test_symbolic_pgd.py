"""Tests of iclgd.symbolic.pgd: the single-layer risk and Lemma 2 of Ahn et al. in sympy."""

import pytest
import sympy as sp

from iclgd.symbolic import pgd as SP


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
