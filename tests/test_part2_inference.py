"""Part II chapter 'Inference': ridge matrices, exact expected gaps (Fig. 2-3) and Theorem 2's
penalty derived in sympy (iclgd.tasks.representation, iclgd.symbolic.representation, iclgd.plot)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from iclgd import baselines, exact, tasks
from iclgd.symbolic import representation as SR


def _spec(N, m=3, K=10, tau=0.3, seed=0):
    return tasks.make_representation_spec(jax.random.PRNGKey(seed), K=K, d=4, m=m, N=N, tau=tau)


def test_ridge_matrix_is_A_and_y_best():
    with jax.enable_x64(True):
        for N in (2, 3, 5):  # N < m, N = m, N > m
            spec = _spec(N)
            A = exact.ridge_matrix(spec, spec.m * 0.3 / N)
            assert np.allclose(A, exact.limit_matrix(spec), atol=1e-12)  # eq. 66
            y = tasks.sample_representation_tasks(jax.random.PRNGKey(1), spec, 7).y
            assert np.allclose(y @ exact.ridge_matrix(spec, 0.3), baselines.y_best(spec, y), atol=1e-12)
            assert np.allclose(y @ A, baselines.y_star(spec, y), atol=1e-12)
        with pytest.raises(ValueError, match="reg"):
            exact.ridge_matrix(spec, 0.0)
        with pytest.raises(ValueError, match="reg"):
            exact.ridge_matrix(spec, float("nan"))


def test_label_moment_and_prediction_gap_against_monte_carlo():
    with jax.enable_x64(True):
        spec = _spec(4)
        M = exact.label_moment(spec)
        Z = np.asarray(spec.Z)
        assert np.allclose(M, Z.T @ Z + 3 * 0.3 * np.eye(4))  # Z_bar^2 under Assumption 1
        A = exact.limit_matrix(spec)
        A1 = A + 0.3 * jax.random.normal(jax.random.PRNGKey(2), A.shape)
        for mean, std in ((None, None), (1.0, 2.0)):
            b = tasks.sample_representation_tasks(
                jax.random.PRNGKey(3), spec, 200_000, lam_mean=mean, lam_std=std
            )
            per = np.sum(np.asarray(b.y @ (A1 - A)) ** 2, axis=1) / spec.K
            exact_val = float(exact.prediction_gap(A1, A, spec, lam_mean=mean, lam_std=std))
            assert abs(per.mean() - exact_val) < 4 * per.std() / np.sqrt(per.size)
            Mc = np.asarray(b.y).T @ np.asarray(b.y) / b.y.shape[0]
            Me = np.asarray(exact.label_moment(spec, lam_mean=mean, lam_std=std))
            assert np.allclose(Mc, Me, rtol=0.05, atol=0.05 * np.abs(Me).max())
        # Lemma 5: in domain the gap to A is twice the excess loss
        excess = float(exact.softmax_risk_from_A(A1, spec) - exact.optimal_loss(spec))
        assert float(exact.prediction_gap(A1, A, spec)) == pytest.approx(2 * excess, rel=1e-10)
        with pytest.raises(ValueError, match="A2"):
            exact.prediction_gap(A1, A[:, :-1], spec)
        with pytest.raises(ValueError, match="lam_mean"):
            exact.prediction_gap(A1, A, spec, lam_mean=np.ones(5))
        with pytest.raises(ValueError, match="A1"):
            exact.prediction_gap(A1.at[0, 0].set(np.nan), A, spec)


def test_ridge_gap_sweep_matches_the_matrices():
    with jax.enable_x64(True):
        Ns = [2, 3, 4, 6, 8]
        sweep = np.asarray(exact.ridge_gap_sweep(_spec(2, m=4).Z_hat, Ns, 0.3))
        for N, g in zip(Ns, sweep, strict=True):
            spec = _spec(N, m=4)  # same key: same dictionary, prompt = first N tokens
            direct = float(
                exact.prediction_gap(exact.limit_matrix(spec), exact.ridge_matrix(spec, spec.tau), spec)
            )
            assert g == pytest.approx(direct, rel=1e-9, abs=1e-15)
        assert sweep[Ns.index(4)] == 0.0  # N = m
        assert np.all(np.delete(sweep, Ns.index(4)) > 0)
        Zh = _spec(2, m=4).Z_hat
        with pytest.raises(ValueError, match="Ns"):
            exact.ridge_gap_sweep(Zh, [0, 3], 0.3)
        with pytest.raises(ValueError, match="Ns"):
            exact.ridge_gap_sweep(Zh, [10], 0.3)
        with pytest.raises(ValueError, match="Ns"):
            exact.ridge_gap_sweep(Zh, [2.5], 0.3)
        with pytest.raises(ValueError, match="Ns"):
            exact.ridge_gap_sweep(Zh, [], 0.3)
        with pytest.raises(ValueError, match="tau"):
            exact.ridge_gap_sweep(Zh, [3], 0.0)
        with pytest.raises(ValueError, match="Z_hat"):
            exact.ridge_gap_sweep(np.ones(5), [3], 0.3)
        with pytest.raises(ValueError, match="Z_hat"):
            exact.ridge_gap_sweep(Zh.at[0, 0].set(np.inf), [3], 0.3)


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


def test_inference_figures_and_bad_input():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclgd.plot import representation as P

    t = np.arange(5.0)
    curves = {"in": np.linspace(2, 1, 5), "ood": np.linspace(4, 2, 5)}
    fig = P.fig2a_inference(t, np.linspace(3, 1, 5), curves, curves, 0.5)
    assert len(fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty"):
        P.fig2a_inference(t, t + 1, {}, {}, 0.5)
    with pytest.raises(ValueError, match="same length"):
        P.fig2a_inference(t, t + 1, {"a": np.ones(3)}, {}, 0.5)
    fig = P.fig3_gap([1, 2, 3], jnp.asarray([[1.0, 0.0, 2.0], [1.5, 0.0, 1.0]]), 2)
    plt.close(fig)
    with pytest.raises(ValueError, match="shape"):
        P.fig3_gap([1, 2], np.ones((2, 3)), 2)
    with pytest.raises(ValueError, match=">= 0"):
        P.fig3_gap([1, 2], -np.ones((1, 2)), 2)
