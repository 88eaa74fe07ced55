"""Tests of iclgd.exact.representation: Part II's exact quantities (Yang et al.) -- the population
loss of the softmax model (eq. 9, 74-77, Lemma 5), zeta0 and Theorem 1's constants, the limit matrix
and L*, ridge moments and gaps (Fig. 2-3), the one-head bound and the copy baseline."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _data import numpy_spec

import iclgd
from iclgd import baselines, exact, metrics, tasks, training
from iclgd.models import softmax as S

K, D, M, N, TAU, H = 10, 4, 5, 3, 0.1, 4


def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype=jnp.float32)


@pytest.mark.parametrize("lam_mean,lam_std", [(0.0, 1.0), (1.0, 2.0)])
def test_population_loss_matches_monte_carlo(spec, params, big_batch, lam_mean, lam_std):
    s = spec._replace(lam_mean=jnp.full((M,), lam_mean), lam_std=jnp.asarray(lam_std))
    exact_val = float(exact.softmax_risk(params, s))
    big = (
        big_batch
        if (lam_mean, lam_std) == (0.0, 1.0)
        else tasks.sample_representation_tasks(jax.random.PRNGKey(9), s, 100_000)
    )
    mc = float(metrics.softmax_sample_loss(params, s, big))
    np.testing.assert_allclose(mc, exact_val, rtol=0.03)


def test_lemma5_decomposition(spec, params):
    """L(theta) = 1/(2K) sum_k ||Z_bar delta_k||^2 + L* (eq. 36), delta_k
    = a_hat_k - A[:, k] (eq. 33)."""
    A_hat = np.asarray(S.attention_matrix(params, spec), np.float64)
    A = np.asarray(exact.limit_matrix(spec), np.float64)
    Z = np.asarray(spec.Z, np.float64)
    G = Z.T @ Z + M * TAU * np.eye(N)  # Z_bar^2
    delta = A_hat - A
    want = np.einsum("ik,ij,jk->", delta, G, delta) / (2 * K) + float(exact.optimal_loss(spec))
    np.testing.assert_allclose(exact.softmax_risk(params, spec), want, rtol=1e-4)
    assert exact.softmax_risk(params, spec) > exact.optimal_loss(spec)


def test_zeta0_needs_H_at_least_N(spec, params):
    """Assumption 2 / Prop. 1: B_k = Z_bar C_k (N x H) has full row rank only if H >= N."""
    assert H >= N
    few = {"Q": params["Q"][: N - 1], "w": params["w"][: N - 1]}
    many = params
    assert float(exact.zeta0(few, spec)) < 1e-5
    assert float(exact.zeta0(many, spec)) > 1e-4


def test_softmax_loss_is_the_exact_risk_in_one_call_shape(spec, params):
    """``exact.softmax_loss(spec)`` is ``loss(params, key)``, ``softmax_loss(None)`` is
    ``loss(params, key, spec)``; both equal ``softmax_risk`` bit for bit (eager and under jit,
    value and gradient), and a sweep over tasks of the same shapes compiles once."""
    want = exact.softmax_risk(params, spec)
    fixed, free = exact.softmax_loss(spec), exact.softmax_loss(None)
    assert fixed(params, jax.random.PRNGKey(0)) == want and fixed(params) == want
    assert free(params, None, spec) == want
    # the lambdas the chapters wrote before (spec an argument, or closed over), compiled alike
    refs = (
        (free, lambda p, key, s: exact.softmax_risk(p, s), (params, None, spec)),
        (fixed, lambda p, key: exact.softmax_risk(p, spec), (params, None)),
    )
    for loss, ref, args in refs:
        got, exp = (jax.jit(jax.value_and_grad(f))(*args) for f in (loss, ref))
        same = jax.tree_util.tree_map(lambda a, b: bool(jnp.all(a == b)), got, exp)
        assert jax.tree_util.tree_all(same)
    s2 = numpy_spec(11, K=K, d=D, m=M, N=N, tau=0.3)  # same shapes, another task
    before = training.trace_count()
    runs = [
        training.train(free, params, jax.random.PRNGKey(1), steps=2, args=(s,)) for s in (spec, s2)
    ]
    assert training.trace_count() - before == 1
    for run, s in zip(runs, (spec, s2)):
        assert run.losses[0] == pytest.approx(float(exact.softmax_risk(params, s)), rel=1e-6)


RK, RD, RM, RN, RTAU = 12, 5, 4, 3, 0.1


def test_optimal_loss_is_population_loss_at_A(rep_spec):
    A = exact.limit_matrix(rep_spec)
    Lstar = exact.optimal_loss(rep_spec)
    np.testing.assert_allclose(exact.softmax_risk_from_A(A, rep_spec), Lstar, rtol=1e-5)
    # the label noise of the K - N unseen tokens is irreducible: L* >= (K-N) m tau / (2K)
    assert Lstar >= (RK - RN) * RM * RTAU / (2 * RK) - 1e-6
    # and A is the minimiser: zero gradient
    g = jax.grad(exact.softmax_risk_from_A)(A, rep_spec)
    np.testing.assert_allclose(g, 0.0, atol=1e-5)


def test_limit_matrix_tau0_is_pseudo_inverse():
    """Sec. 3.3, eq. 26: at tau = 0 and N > m, A = Z^dagger Z_hat (Z^T Z is singular)."""
    s = tasks.make_representation_spec(jax.random.PRNGKey(3), K=8, d=3, m=2, N=4, tau=0.0)
    A = np.asarray(exact.limit_matrix(s), np.float64)
    Z, Zh = np.asarray(s.Z, np.float64), np.asarray(s.Z_hat, np.float64)
    np.testing.assert_allclose(A, np.linalg.pinv(Z) @ Zh, atol=1e-4)
    np.testing.assert_allclose(Z @ A, Zh, atol=1e-4)  # every column solves Z a_k = z_k
    # eq. 26: noise-free labels are reproduced exactly, y_k = <y, A[:, k]>
    lam = np.asarray(tasks.sample_lambda(jax.random.PRNGKey(4), s, 5), np.float64)
    np.testing.assert_allclose((lam @ Z) @ A, lam @ Zh, atol=1e-4)
    # it is a minimiser of the noise-free loss (zero gradient) and not the tau -> 0+ limit's I_N
    g = jax.grad(exact.softmax_risk_from_A)(jnp.asarray(A, jnp.float32), s)
    np.testing.assert_allclose(g, 0.0, atol=1e-5)
    assert not np.allclose(A[:, :4], np.eye(4), atol=1e-2)
    # N <= m, Z of full column rank: tau = 0 agrees with eq. 34's solve at a tiny tau
    s2 = tasks.make_representation_spec(jax.random.PRNGKey(5), K=8, d=3, m=4, N=3, tau=0.0)
    A2 = exact.limit_matrix(s2)
    np.testing.assert_allclose(
        A2, exact.limit_matrix(s2._replace(tau=jnp.asarray(1e-7))), atol=1e-3
    )
    np.testing.assert_allclose(A2[:, :3], np.eye(3), atol=1e-4)


def test_limit_matrix_tiny_tau_singular_raises():
    s = tasks.make_representation_spec(jax.random.PRNGKey(3), K=8, d=3, m=2, N=4, tau=1e-30)
    with pytest.raises(ValueError, match="must be positive definite"):
        exact.limit_matrix(s)


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
        assert c.delta0 == pytest.approx(
            float(exact.softmax_risk(p, small) - exact.optimal_loss(small))
        )
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


def test_theorem2_steps(small):
    """Eq. 21 against a hand computation at the small task, its monotonicity in eps, delta and B,
    and the contraction's log1p where 1 - rate is below float64's resolution."""
    with jax.enable_x64(True):
        c = exact.theorem1_constants(S.init_softmax(jax.random.PRNGKey(1), 4, 8, 6), small)
        T = exact.theorem2_steps(c, small, B=2.0, eps=1e-2, delta=0.05)
        Z = np.asarray(small.Z, np.float64)  # (m, N) = (2, 3)
        ld = np.log(20.0)
        inner = (
            np.linalg.svd(Z, compute_uv=False)[0]
            + np.sqrt(0.5 * (2 * np.sqrt(3 * ld) + 2 * ld + 3))
        ) ** 2
        want = np.log(4.0 * c.delta0 * inner / (2 * 0.5 * 1e-2)) / np.log(1 / c.rate)
        assert T == pytest.approx(want, rel=1e-9)
        steps = [
            exact.theorem2_steps(c, small, B=2.0, eps=e, delta=0.05) for e in (1e-1, 1e-2, 1e-3)
        ]
        assert steps[0] < steps[1] < steps[2]  # a tighter eps needs more steps
        assert exact.theorem2_steps(c, small, B=2.0, eps=1e-2, delta=0.01) > T
        assert exact.theorem2_steps(c, small, B=4.0, eps=1e-2, delta=0.05) > T
        assert exact.theorem2_steps(c, small, B=1e-9, eps=1e3, delta=0.5) == 0.0  # log < 0
        tiny = c._replace(eta_w=1e-15 * 2 * small.K / c.zeta0, rate=1.0)  # 1 - 1e-15 per step
        T_tiny = exact.theorem2_steps(tiny, small, B=2.0, eps=1e-2, delta=0.05)
        assert T_tiny == pytest.approx(np.log(4.0 * c.delta0 * inner / 1e-2) / 1e-15, rel=1e-9)


def test_theorem2_steps_bad_input(small):
    with jax.enable_x64(True):
        c = exact.theorem1_constants(S.init_softmax(jax.random.PRNGKey(1), 4, 8, 6), small)
        ok = dict(B=2.0, eps=1e-2, delta=0.05)
        with pytest.raises(TypeError, match="constants"):
            exact.theorem2_steps(tuple(c), small, **ok)
        for name, bad in [("B", 0.0), ("eps", -1.0), ("delta", 0.0), ("delta", 1.0), ("B", np.nan)]:
            with pytest.raises(ValueError, match=name):
                exact.theorem2_steps(c, small, **{**ok, name: bad})
        with pytest.raises(ValueError, match="tau must be > 0"):
            exact.theorem2_steps(c, small._replace(tau=np.float64(0.0)), **ok)
        with pytest.raises(ValueError, match="must be < 1"):
            exact.theorem2_steps(c._replace(eta_w=1e9), small, **ok)
        with pytest.raises(ValueError, match="delta0"):
            exact.theorem2_steps(c._replace(delta0=0.0), small, **ok)


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


def _spec(N, m=3, K=10, tau=0.3, seed=0):
    return tasks.make_representation_spec(jax.random.PRNGKey(seed), K=K, d=4, m=m, N=N, tau=tau)


def test_ridge_matrix_is_A_and_y_best():
    with jax.enable_x64(True):
        for N in (2, 3, 5):  # N < m, N = m, N > m
            spec = _spec(N)
            A = exact.ridge_matrix(spec, spec.m * 0.3 / N)
            assert np.allclose(A, exact.limit_matrix(spec), atol=1e-12)  # eq. 66
            y = tasks.sample_representation_tasks(jax.random.PRNGKey(1), spec, 7).y
            assert np.allclose(
                y @ exact.ridge_matrix(spec, 0.3), baselines.y_best(spec, y), atol=1e-12
            )
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
                exact.prediction_gap(
                    exact.limit_matrix(spec), exact.ridge_matrix(spec, spec.tau), spec
                )
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


def _copy(params, batch):  # the copy baseline: prompt labels, then 0
    return jnp.concatenate([batch.y, jnp.zeros_like(batch.y_all[:, batch.y.shape[1] :])], axis=1)


def test_copy_prompt_loss_is_exact(deep_spec):
    loss = training.sampled_population_loss(_copy, 4000)
    mean, se = iclgd.evaluate(loss, None, jax.random.PRNGKey(7), n_batches=40, args=(deep_spec,))
    exact_val = exact.copy_prompt_loss(deep_spec)
    assert abs(mean - exact_val) < 4 * se
    assert float(exact.optimal_loss(deep_spec)) < exact_val  # ridge beats copying


def test_softmax_risk_xi_is_lemma6_reparameterisation(spec, params):
    """ell(xi) = L(theta) at w = gamma alpha (eq. 39-40), and one GD step on xi with eta_Q is
    eq. 10's step with eta_Q on Q and eta_w = gamma^2 eta_Q on w (eq. 41)."""
    gamma, eta_Q = 1.7, 0.05
    xi = {"Q": params["Q"], "alpha": params["w"] / gamma}
    np.testing.assert_allclose(
        float(exact.softmax_risk_xi(xi, spec, gamma)),
        float(exact.softmax_risk(params, spec)),
        rtol=1e-6,
    )
    g_th = jax.grad(exact.softmax_risk)(params, spec)
    g_xi = jax.grad(exact.softmax_risk_xi)(xi, spec, gamma)
    w_next = params["w"] - gamma**2 * eta_Q * g_th["w"]
    alpha_next = xi["alpha"] - eta_Q * g_xi["alpha"]
    np.testing.assert_allclose(gamma * alpha_next, w_next, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_xi["Q"], g_th["Q"], rtol=1e-5, atol=1e-7)
    with pytest.raises(TypeError, match="alpha"):
        exact.softmax_risk_xi(params, spec, gamma)
    with pytest.raises(ValueError, match="gamma"):
        exact.softmax_risk_xi(xi, spec, 0.0)


@pytest.mark.parametrize("H_", [2, 6])
def test_frozen_q_gap_is_gd_on_w(small, H_):
    """frozen_q_gap equals GD on w alone (jax.grad of the exact risk, Q fixed), for H >= N and for
    H < N (where part of the residual cannot be reached), from w = 0 and from w != 0."""
    with jax.enable_x64(True):
        p = S.init_softmax(jax.random.PRNGKey(1), 4, 8, H_)
        p = {"Q": p["Q"], "w": 0.3 * jax.random.normal(jax.random.PRNGKey(2), (H_, 8))}
        L_star = float(exact.optimal_loss(small))
        eta = 0.7
        gw = jax.grad(lambda w: exact.softmax_risk({"Q": p["Q"], "w": w}, small))
        w, gaps = p["w"], []
        for _ in range(6):
            gaps.append(float(exact.softmax_risk({"Q": p["Q"], "w": w}, small)) - L_star)
            w = w - eta * gw(w)
        got = exact.frozen_q_gap(p, small, eta, np.arange(6))
        np.testing.assert_allclose(got, gaps, rtol=1e-9)
        # the asymptotic factor per step is (1 - eta zeta / K)^2 when H >= N
        if H_ >= small.N:
            far = exact.frozen_q_gap(p, small, eta, [4000, 4001])
            z = float(exact.zeta0(p, small))
            assert far[1] / far[0] == pytest.approx((1 - eta * z / 8) ** 2, rel=1e-9)


def test_frozen_q_gap_bad_input(small):
    with jax.enable_x64(True):
        p = S.init_softmax(jax.random.PRNGKey(1), 4, 8, 6)
        with pytest.raises(ValueError, match="eta_w"):
            exact.frozen_q_gap(p, small, 0.0, [0, 1])
        with pytest.raises(ValueError, match="t must be >= 0"):
            exact.frozen_q_gap(p, small, 0.1, [-1, 1])
        with pytest.raises(ValueError, match="t"):
            exact.frozen_q_gap(p, small, 0.1, [[0, 1]])
        with pytest.raises(ValueError, match="params"):
            exact.frozen_q_gap({"Q": p["Q"]}, small, 0.1, [0])
