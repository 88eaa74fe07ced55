"""Part II chapter 'Training': Theorem 1's constants (iclgd.exact.theorem1_constants)."""

import jax
import numpy as np
import pytest

from iclgd import exact, tasks
from iclgd.models import softmax as S


@pytest.fixture(scope="module")
def small():
    with jax.enable_x64(True):
        spec = tasks.make_representation_spec(jax.random.PRNGKey(0), K=8, d=4, m=2, N=3, tau=0.5)
        yield spec


def test_theorem1_constants_consistent(small):
    with jax.enable_x64(True):
        p = S.init_softmax(jax.random.PRNGKey(1), 4, 8, 6)
        c = exact.theorem1_constants(p, small)
        assert c.zeta0 == pytest.approx(float(exact.zeta0(p, small)))
        assert c.delta0 == pytest.approx(float(exact.softmax_risk(p, small) - exact.optimal_loss(small)))
        assert c.eta_w == pytest.approx(c.gamma**2 * c.eta_Q)
        assert c.eta_Q == pytest.approx(1 / c.L_smooth)
        assert 0 < c.rate < 1
        assert c.rate == pytest.approx(1 - c.eta_w * c.zeta0 / (2 * 8))
        # larger Delta0 (w != 0) needs a larger gamma (eq. 15 grows with Delta0)
        p2 = {"Q": p["Q"], "w": p["w"] + 1.0}
        assert exact.theorem1_constants(p2, small).gamma > c.gamma
        # GD at these rates never does worse than the bound (eq. 18), a few steps
        g = jax.grad(exact.softmax_risk)
        q = p
        for t in range(1, 4):
            gr = g(q, small)
            q = {"Q": q["Q"] - c.eta_Q * gr["Q"], "w": q["w"] - c.eta_w * gr["w"]}
            gap = float(exact.softmax_risk(q, small) - exact.optimal_loss(small))
            assert gap <= c.rate**t * c.delta0 + 1e-12


def test_theorem1_constants_bad_input(small):
    with jax.enable_x64(True):
        p = S.init_softmax(jax.random.PRNGKey(1), 4, 8, 2)  # H < N: zeta0 = 0
        with pytest.raises(ValueError, match="zeta0 must be > 0"):
            exact.theorem1_constants(p, small)
        p = S.init_softmax(jax.random.PRNGKey(1), 4, 8, 6)
        with pytest.raises(ValueError, match="tau must be > 0"):
            exact.theorem1_constants(p, small._replace(tau=np.float64(0.0)))
        with pytest.raises(ValueError, match="params"):
            exact.theorem1_constants({"Q": p["Q"]}, small)


def test_training_figures_and_bad_input():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclgd import plot

    t = np.arange(10.0)
    fig = plot.theorem1_rate(t, np.exp(-t), t[5:], np.exp(-t[5:]), np.exp(-0.1 * t))
    plt.close(fig)
    with pytest.raises(ValueError, match="positive"):
        plot.theorem1_rate(t, -np.ones(10), t, np.ones(10), np.ones(10))
    fig = plot.heads_sweep({1: np.ones(5), 4: np.linspace(2, 1, 5)}, 0.5)
    assert len(fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty"):
        plot.heads_sweep({}, 0.5)


def test_one_head_lower_bound(small):
    bound = exact.one_head_lower_bound(small)
    assert bound > float(exact.optimal_loss(small))  # A has mixed-sign columns
    # any one-head model is above it, e.g. random ones and a trained one
    for seed in range(3):
        p = S.init_softmax(jax.random.PRNGKey(seed), 4, 8, 1)
        p = {"Q": p["Q"], "w": jax.random.normal(jax.random.PRNGKey(9 + seed), (1, 8))}
        assert float(exact.softmax_risk(p, small)) >= bound - 1e-12
    with pytest.raises(ValueError, match="spec"):
        exact.one_head_lower_bound("spec")
