"""Tests of iclgd.exact.wishart: exact Wishart trace moments (closed forms, Monte Carlo, batched
words, the loop equation)."""

import numpy as np
import pytest
import sympy as sp

from iclgd import exact
from iclgd.exact import wishart as W


def test_expect_trace_batched_equals_loop():
    rng = np.random.default_rng(0)
    Ms = [rng.normal(size=(4, 3, 3)) for _ in range(3)]
    Sig = np.diag([1.0, 2.0, 0.5])
    batched = W.expect_trace(Ms, 5, Sig)
    loop = [W.expect_trace([M[b] for M in Ms], 5, Sig) for b in range(4)]
    assert batched.shape == (4,) and np.allclose(batched, loop)
    A = [rng.normal(size=(2, 3, 3)) for _ in range(2)]
    r = exact.pgd_risk(A, 7)
    assert np.allclose(r, [exact.pgd_risk([a[b] for a in A], 7) for b in range(2)])
    with pytest.raises(ValueError, match="square"):
        W.expect_trace([np.ones((2, 3)), np.ones((2, 3))], 3)


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
