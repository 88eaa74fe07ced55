"""Tests of iclgd.exact: exact finite-C moments and risks against Monte Carlo, optima, closed forms.

Every Monte Carlo comparison uses >= 1e5 prompts in float64 (conftest enables x64) and asserts
agreement within 4 standard errors; every test can fail (see ``test_xie_eq27_is_refuted``, which
shows that the Monte Carlo checks have the power to reject a plausible wrong formula).
"""

import importlib
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclgd
from iclgd import baselines, exact, tasks

# the model modules (imported by path: a factory of iclgd.models may share a module's name)
lsa = importlib.import_module("iclgd.models.lsa")
linear_transformer = importlib.import_module("iclgd.models.linear_transformer")

N_MC = 100_000

CONFIGS = {
    # d = 1 and C = 1, noisy, non-unit covariances
    "d1C1": dict(d=1, C=1, mu=[0.7], Sigma=[[1.5]], Omega=[[0.8]], noise=0.3),
    # Part I (Xie et al.): Sigma = Omega = I, w* != 0, noise-free
    "partI": dict(d=2, C=3, mu=[1.0, 1.5], Sigma=None, Omega=None, noise=0.0),
    # everything general: correlated inputs and tasks, label noise
    "d3C5": dict(
        d=3,
        C=5,
        mu=[1.0, -2.0, 0.5],
        Sigma=[[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]],
        Omega=[[1.0, 0.5, 0.0], [0.5, 2.0, 0.0], [0.0, 0.0, 0.3]],
        noise=0.4,
    ),
}

_CACHE: dict = {}


def _prior(name):
    c = CONFIGS[name]
    return tasks.make_prior(
        c["d"], mu=jnp.array(c["mu"]), Sigma=c["Sigma"], Omega=c["Omega"], noise_std=c["noise"]
    )


def _ex(name):
    if ("ex", name) not in _CACHE:
        _CACHE[("ex", name)] = exact.prepare(_prior(name), CONFIGS[name]["C"])
    return _CACHE[("ex", name)]


def _tasks(name):
    if ("tb", name) not in _CACHE:
        _CACHE[("tb", name)] = tasks.sample_tasks(
            jax.random.key(zlib.crc32(name.encode()) % 1000), _prior(name), CONFIGS[name]["C"], N_MC
        )
    return _CACHE[("tb", name)]


@jax.jit
def _G(tb):
    C = tb.X.shape[1]
    Z = jnp.concatenate([tb.X, tb.y[..., None]], -1)
    return jnp.einsum("bci,bcj->bij", Z, Z) / C


def _check(exact_value, mean, se, what, k=4.0):
    e = np.asarray(exact_value, dtype=np.float64)
    dev = np.abs(np.asarray(mean) - e)
    bad = dev > k * np.asarray(se) + 1e-9 * (1 + np.abs(e))
    z = np.max(dev / np.maximum(se, 1e-300))
    assert not np.any(bad), (
        f"{what}: max |z| = {z:.2f}, exact {e[bad][:3]}, mc {np.asarray(mean)[bad][:3]}"
    )


def _assert_mc(exact_value, samples, what, k=4.0):
    """|mean(samples) - exact| < k standard errors (elementwise over trailing axes)."""
    s = np.asarray(samples, dtype=np.float64)
    _check(exact_value, s.mean(0), s.std(0, ddof=1) / np.sqrt(s.shape[0]), what, k)


@jax.jit
def _product_moments(a, b):
    """Mean and standard error of a_i b_j over the batch, without materialising the products."""
    n = a.shape[0]
    m1 = a.T @ b / n
    m2 = (a * a).T @ (b * b) / n
    return m1, jnp.sqrt(jnp.maximum(m2 - m1**2, 0.0) * n / (n - 1) / n)


# ------------------------------------------------------------------------------------ moments
@pytest.mark.parametrize("name", list(CONFIGS))
def test_moments_match_monte_carlo(name):
    ex, tb = _ex(name), _tasks(name)
    G = _G(tb)
    m = ex.moments
    _assert_mc(m.EG, G, "E[G]")
    D = G.shape[-1]
    Gv = G.reshape(-1, D * D)
    mean, se = _product_moments(tb.w, Gv)
    _check(m.EwG.reshape(-1, D * D), mean, se, "E[w G]")
    mean, se = _product_moments(Gv, Gv)
    _check(m.EGG.reshape(D * D, D * D), mean, se, "E[G (x) G]")
    np.testing.assert_allclose(
        m.Eww, np.asarray(ex.prior.Omega) + np.outer(ex.prior.mu, ex.prior.mu), rtol=1e-12
    )


def test_xie_eq27_is_refuted():
    """Xie et al. eq. 27: (1-1/C) M (x) M + T/C treats the columns as independent; they share w."""
    name = "partI"
    ex, tb = _ex(name), _tasks(name)
    C = CONFIGS[name]["C"]
    M = ex.moments.EG
    T = exact.moments(
        _prior(name), 1
    ).EGG  # E[z (x) z (x) z (x) z] for one column = E[G (x) G] at C = 1
    paper = (1 - 1 / C) * np.einsum("ij,kl->ijkl", M, M) + T / C
    D = M.shape[0]
    Gv = _G(tb).reshape(-1, D * D)
    mean, se = _product_moments(Gv, Gv)
    mean, se = np.asarray(mean).reshape(D, D, D, D), np.asarray(se).reshape(D, D, D, D)
    z_paper = np.abs(mean - paper) / np.maximum(se, 1e-300)
    z_exact = np.abs(mean - ex.moments.EGG) / np.maximum(se, 1e-300)
    assert z_paper.max() > 10 and z_exact.max() < 4


# ------------------------------------------------------------------------------------ risks vs MC
_lsa_pred = jax.jit(lambda p, tb, yq: lsa.lsa_predict(p, tasks.embed(tb, yq)))
_lt_pred = jax.jit(
    lambda p, tb: linear_transformer.linear_transformer_predict(p, tasks.embed_zero_query(tb))
)
_gd_pred = jax.jit(lambda tb, w0, eta: baselines.gd_one_step(tb.X, tb.y, tb.x_q, w0, eta))
_bayes_pred = jax.jit(baselines.bayes_posterior_mean)
_yq_pred = jax.jit(lsa.yq_lsa_predict)


def _first_contexts(tb, C):
    """The same prompts with only their first C context examples (a valid sample for context C)."""
    return tasks.TaskBatch(tb.X[:, :C], tb.y[:, :C], tb.x_q, tb.y_target, tb.w)


def _rand_lsa(rng, d, H, std=0.4):
    D = d + 1
    return {k: jnp.asarray(std * rng.normal(size=(H, D, D))) for k in ("WK", "WQ", "WV", "WP")}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_lsa_risks_match_monte_carlo(name):
    ex, tb = _ex(name), _tasks(name)
    d = CONFIGS[name]["d"]
    rng = np.random.default_rng(7)
    # multi-head LSA with y_q = x_q^T g + c
    p = _rand_lsa(rng, d, 2)
    g = jnp.asarray(0.5 * rng.normal(size=d))
    c = 0.3
    pred = _lsa_pred(p, tb, tb.x_q @ g + c)
    _assert_mc(exact.lsa_risk(p, ex, g, c), (pred - tb.y_target) ** 2, "multi-head LSA risk")
    # y_q = 0
    pred0 = _lsa_pred(p, tb, jnp.zeros_like(tb.y_target))
    _assert_mc(exact.lsa_risk(p, ex), (pred0 - tb.y_target) ** 2, "LSA risk, y_q = 0")
    # y_q-LSA (Definition 3): y_q = w^T x_q with the model's own w
    py = {"attn": _rand_lsa(rng, d, 1), "w": jnp.asarray(0.5 + 0.2 * rng.normal(size=d))}
    predy = _yq_pred(py, tb)
    _assert_mc(exact.yq_lsa_risk(py, ex), (predy - tb.y_target) ** 2, "y_q-LSA risk")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_part3_and_gd_risks_match_monte_carlo(name):
    ex, tb = _ex(name), _tasks(name)
    d = CONFIGS[name]["d"]
    rng = np.random.default_rng(3)
    # Part III one-layer linear transformer, full (P, Q)
    p = {
        "P": jnp.asarray(0.4 * rng.normal(size=(1, d + 1, d + 1))),
        "Q": jnp.asarray(0.4 * rng.normal(size=(1, d + 1, d + 1))),
    }
    pred = _lt_pred(p, tb)
    _assert_mc(exact.linear_transformer_risk(p, ex), (pred - tb.y_target) ** 2, "Part III risk")
    # one GD step from a w0 != mu, and from mu with the exact optimal step
    w0 = 0.3 * np.arange(d) - 0.2
    predg = _gd_pred(tb, jnp.asarray(w0), 0.35)
    _assert_mc(exact.gd_risk(ex, 0.35, w0), (predg - tb.y_target) ** 2, "GD risk")
    eta_s, r_s = exact.gd_optimal(ex)
    predg = _gd_pred(tb, ex.prior.mu, eta_s)
    _assert_mc(r_s, (predg - tb.y_target) ** 2, "optimal GD risk")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_optima_risks_match_monte_carlo(name):
    ex, tb = _ex(name), _tasks(name)
    best = exact.lsa_optimum(ex)
    pred = _lsa_pred(
        jax.tree_util.tree_map(jnp.asarray, best.params), tb, jnp.zeros_like(tb.y_target)
    )
    _assert_mc(best.risk, (pred - tb.y_target) ** 2, "best multi-head LSA risk")
    lt = exact.linear_transformer_optimum(ex)
    predl = _lt_pred(jax.tree_util.tree_map(jnp.asarray, lt.params), tb)
    _assert_mc(lt.risk, (predl - tb.y_target) ** 2, "best Part III risk")


# ------------------------------------------------------------------------------------ one GD step
@pytest.mark.parametrize("d,C", [(1, 1), (2, 3), (5, 4)])
def test_gd_risk_closed_form_part1(d, C):
    """Sigma = Omega = I, no noise, w0 = mu (any mu): w1 - w = (I - eta G_xx)(mu - w) with
    mu - w ~ N(0, I) independent of X, so R = d (1 - 2 eta + eta^2 (1 + (d+1)/C)) (Wishart)."""
    rng = np.random.default_rng(d + C)
    for mu in [np.zeros(d), rng.normal(size=d)]:
        prior = tasks.make_prior(d, mu=jnp.asarray(mu))
        ex = exact.prepare(prior, C)
        for eta in [0.0, 0.2, 1.3]:
            closed = d * (1 - 2 * eta + eta**2 * (1 + (d + 1) / C))
            assert float(exact.gd_risk(ex, eta)) == pytest.approx(closed, rel=1e-11)
        eta_s, r_s = exact.gd_optimal(ex)
        assert eta_s == pytest.approx(C / (C + d + 1), rel=1e-11)
        assert r_s == pytest.approx(d * (d + 1) / (C + d + 1), rel=1e-11)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_gd_optimal_minimises_the_quadratic(name):
    ex = _ex(name)
    d = CONFIGS[name]["d"]
    for w0 in [None, np.linspace(-1, 1, d)]:
        eta_s, r_s = exact.gd_optimal(ex, w0)
        assert float(exact.gd_risk(ex, eta_s, w0)) == pytest.approx(r_s, rel=1e-11)
        assert abs(float(jax.grad(lambda e, w0=w0: exact.gd_risk(ex, e, w0))(eta_s))) < 1e-9
        # the risk is a quadratic in eta: R(eta* + t) = R* + a t^2 with a > 0
        r1, r2 = (float(exact.gd_risk(ex, eta_s + t, w0)) for t in (0.1, 0.3))
        a = (r1 - r_s) / 0.01
        assert a > 0 and r2 == pytest.approx(r_s + a * 0.09, rel=1e-10)


def test_bayes_risk_closed_forms_vs_monte_carlo():
    # noise-free, C >= d: the posterior mean interpolates, risk 0
    pI, tI = _prior("partI"), _tasks("partI")
    assert exact.bayes_risk(pI, CONFIGS["partI"]["C"]) == (0.0, 0.0, "closed form")
    assert float(jnp.max((_bayes_pred(tI, pI) - tI.y_target) ** 2)) < 1e-12
    # noise-free, C < d: (1 - C/d) tr(Sigma Omega), Part I and Part III's Omega = Sigma^{-1}
    assert exact.bayes_risk(pI, 1) == (pytest.approx(1.0), 0.0, "closed form")
    S = jnp.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    p3 = tasks.make_prior(3, Sigma=S, Omega=jnp.linalg.inv(S))
    t3 = tasks.sample_tasks(jax.random.key(11), p3, CONFIGS["d3C5"]["C"], N_MC)
    for pr, tb, C in [(pI, tI, 1), (p3, t3, 2)]:
        br = exact.bayes_risk(pr, C)
        assert br.method == "closed form"
        tbC = _first_contexts(tb, C)
        _assert_mc(br.risk, (_bayes_pred(tbC, pr) - tbC.y_target) ** 2, f"Bayes risk C={C}")


@pytest.mark.parametrize("name,C", [("d3C5", 5), ("d3C5", 2), ("d1C1", 1)])
def test_bayes_risk_monte_carlo(name, C):
    pr = _prior(name)
    tb = _first_contexts(_tasks(name), C)
    br = exact.bayes_risk(pr, C, n_mc=100_000, key=jax.random.key(5))
    assert br.method == "monte carlo" and br.stderr > 0
    e2 = np.asarray((_bayes_pred(tb, pr) - tb.y_target) ** 2)
    se = np.hypot(e2.std() / np.sqrt(len(e2)), br.stderr)
    assert abs(e2.mean() - br.risk) < 4 * se
    # the Rao-Blackwellised estimate is much more precise than averaging squared errors
    assert br.stderr < 0.5 * e2.std() / np.sqrt(100_000)


# ------------------------------------------------------------------------------------ optima
def _gnorm(tree):
    return float(np.sqrt(sum(float(jnp.sum(x * x)) for x in jax.tree_util.tree_leaves(tree))))


@pytest.mark.parametrize("name", ["d1C1", "d3C5", "partI"])
def test_best_multihead_lsa_is_stationary_and_optimal(name):
    ex = _ex(name)
    d = CONFIGS[name]["d"]
    rng = np.random.default_rng(0)
    for g, c in [(None, 0.0), (rng.normal(size=d), 0.0), (rng.normal(size=d), 0.7)]:
        best = exact.lsa_optimum(ex, g, c)
        p = jax.tree_util.tree_map(jnp.asarray, best.params)
        grad_fn = jax.jit(jax.grad(lambda q, g=g, c=c: exact.lsa_risk(q, ex, g, c)))
        grad = grad_fn(p)
        scale = _gnorm(grad_fn(_rand_lsa(rng, d, d + 1, 0.1)))
        assert _gnorm(grad) < 1e-8 * max(scale, 1.0)
        assert best.rank[0] == best.rank[1]  # T is positive definite on vech G
        # no random perturbation of the M_i does better (convex quadratic in M)
        for _ in range(3):
            dM = 0.05 * rng.normal(size=best.M.shape)
            q = exact.lsa_params_from_M(best.M + dM)
            assert float(exact.lsa_risk(q, ex, g, c)) > best.risk
    # the guess g* of the best multi-head y_q-LSA is stationary in (M, g) jointly
    by = exact.yq_lsa_optimum(ex)
    py = {"attn": jax.tree_util.tree_map(jnp.asarray, by.params), "w": jnp.asarray(by.y_q_guess)}
    assert (
        _gnorm(jax.jit(jax.grad(lambda q, ex=ex: exact.yq_lsa_risk(q, ex)))(py))
        < 1e-8 * max(by.risk, 1.0) * 10
    )
    assert by.risk <= exact.lsa_optimum(ex).risk + 1e-12


def test_theorem1_of_ahn_et_al_exactly():
    """Part III Theorem 1: with b = e_D the optimum is A = -[diag(1/((n+1)/n l_i + tr/n)); 0]."""
    d, n = 3, 5
    S = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    for Omega, w_cov in [(None, "identity"), (np.linalg.inv(S), "inverse_sigma")]:
        ex = exact.prepare(tasks.make_prior(d, Sigma=S, Omega=Omega), n)
        lt = exact.linear_transformer_optimum(ex)
        A = lt.params["Q"][0, :, :d]
        np.testing.assert_allclose(A[:d], exact.theorem1_optimal_A(S, n, w_cov), atol=1e-10)
        np.testing.assert_allclose(A[d], 0.0, atol=1e-10)
        # global: equals the best multi-head LSA (a superset of every single-layer (b, A))
        assert lt.risk == pytest.approx(exact.lsa_optimum(ex).risk, rel=1e-10)
        p = jax.tree_util.tree_map(jnp.asarray, lt.params)
        assert (
            _gnorm(jax.jit(jax.grad(lambda q, ex=ex: exact.linear_transformer_risk(q, ex)))(p))
            < 1e-9
        )


def test_yq_lsa_gd_point_is_exactly_stationary_at_finite_C():
    """Part I, Sigma = Omega = I: with the finite-C optimal step eta* = C/(C+d+1) the GD
    construction (eq. 7, w = w*) has zero gradient and its risk equals the best multi-head y_q-LSA:
    it is the global optimum of y_q-LSA at every C (not only as C -> infinity, cf. Xie et al.
    Theorem 4 / App. A.3)."""
    for d, C, w2 in [(1, 1, 2.0), (2, 3, 5.0), (3, 2, 4.0)]:
        mu = np.sqrt(w2 / d) * np.ones(d)
        ex = exact.prepare(tasks.make_prior(d, mu=mu), C)
        eta, r_gd = exact.gd_optimal(ex)
        assert eta == pytest.approx(C / (C + d + 1), rel=1e-12)
        p = {"attn": lsa.gd_weights(mu, eta), "w": jnp.asarray(mu)}
        assert float(exact.yq_lsa_risk(p, ex)) == pytest.approx(r_gd, rel=1e-12)
        assert _gnorm(jax.jit(jax.grad(lambda q, ex=ex: exact.yq_lsa_risk(q, ex)))(p)) < 1e-10
        assert exact.yq_lsa_optimum(ex).risk == pytest.approx(r_gd, rel=1e-10)
        # y_q = 0 multi-head LSA: gap 2 ||w*||^2 / (d C + 2) above one GD step (found exactly here)
        gap = exact.lsa_optimum(ex).risk - r_gd
        assert gap == pytest.approx(2 * w2 / (d * C + 2), rel=1e-9)


def test_lbfgs_optima_have_zero_gradient():
    ex = _ex("partI")
    y = exact.yq_lsa_search(ex, steps=150, restarts=1, key=jax.random.key(0))  # 2 starts
    assert y.grad_norm < 1e-7
    assert y.risk <= exact.gd_optimal(ex)[1] + 1e-10
    assert y.risk >= exact.yq_lsa_optimum(ex).risk - 1e-10
    r = float(exact.yq_lsa_risk(jax.tree_util.tree_map(jnp.asarray, y.params), ex))
    assert r == pytest.approx(y.risk, rel=1e-10)
    h1 = exact.lsa_search(ex, 1, restarts=1, steps=150, key=jax.random.key(1), method="lbfgs")
    assert h1.method == "lbfgs"
    assert h1.grad_norm < 1e-6
    assert h1.risk >= exact.lsa_optimum(ex).risk - 1e-10
    assert float(
        exact.lsa_risk(jax.tree_util.tree_map(jnp.asarray, h1.params), ex)
    ) == pytest.approx(h1.risk, rel=1e-10)


# ------------------------------------------------------------------------------------ sympy
def test_agrees_with_symbolic_for_d2():
    sp = pytest.importorskip("sympy")
    from iclgd import symbolic

    d, C = 2, 2
    u = [sp.Rational(1, 3), sp.Rational(-1, 2), sp.Rational(2, 5)]
    Q = sp.Matrix(
        [
            [sp.Rational(1, 2), sp.Rational(1, 5), 0],
            [sp.Rational(-1, 3), 1, sp.Rational(1, 4)],
            [sp.Rational(1, 7), 0, sp.Rational(-1, 2)],
        ]
    )
    b = jnp.array([[float(x) for x in u]])
    A = jnp.array(np.array(Q.tolist(), dtype=float))[None]
    ws = [sp.Integer(1), sp.Rational(-1, 2)]
    for y_q, noise in [(0, None), ("prior", sp.Rational(1, 2))]:
        t = symbolic.linear_regression_task(d, C, w_star=ws, y_q=y_q, noise_std=noise)
        R = t.risk(symbolic.lsa_prediction_uq_expr((u, Q), t.E))
        prior = tasks.make_prior(
            d, mu=jnp.array([1.0, -0.5]), noise_std=0.0 if noise is None else 0.5
        )
        g = None if y_q == 0 else jnp.array([1.0, -0.5])
        assert float(exact.lsa_risk_reduced(b, A, exact.prepare(prior, C), g)) == pytest.approx(
            float(R), rel=1e-12
        )


# ------------------------------------------------------------------------------------ training
def test_training_on_exact_risk_and_float32_accuracy():
    name = "partI"
    ex = _ex(name)
    d = CONFIGS[name]["d"]
    p0 = _rand_lsa(np.random.default_rng(0), d, 1, 0.1)
    res = iclgd.train(exact.lsa_loss(ex), p0, jax.random.key(1), steps=300, learning_rate=1e-2)
    assert not res.diverged
    assert res.losses[0] == pytest.approx(float(exact.lsa_risk(p0, ex)), rel=1e-12)
    assert res.losses[-1] < 0.8 * res.losses[0]
    # the sum-of-squares form keeps float32 risks accurate near an optimum (w*||^2 = 40, d = C = 10)
    prior = tasks.make_prior(10, mu=2 * jnp.ones(10))
    ex10 = exact.prepare(prior, 10)
    best = exact.lsa_optimum(ex10)
    with jax.enable_x64(False):
        p32 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), best.params)
        r32 = exact.lsa_risk(p32, ex10)
        assert r32.dtype == jnp.float32
    assert float(r32) == pytest.approx(best.risk, rel=2e-5)


def test_exact_losses_have_one_call_shape():
    """``*_loss(ex)`` is ``loss(params, key)``; ``*_loss(None)`` is ``loss(params, key, ex)``, and
    both equal the risk bit for bit, eager and under jit; a sweep over ``ex`` compiles once."""
    rng = np.random.default_rng(3)
    d = 2
    p = _rand_lsa(rng, d, 2)
    pyq = lsa.init_yq_lsa(jax.random.key(0), d, 1, w=jnp.asarray(rng.normal(size=d)))
    p_lt = linear_transformer.init_linear_transformer(jax.random.key(1), d, 1, 0.3)
    g, c = jnp.asarray(rng.normal(size=d)), 0.4
    cases = [
        (lambda e: exact.lsa_loss(e), lambda q, e: exact.lsa_risk(q, e), p),
        (lambda e: exact.lsa_loss(e, g, c), lambda q, e: exact.lsa_risk(q, e, g, c), p),
        (exact.yq_lsa_loss, exact.yq_lsa_risk, pyq),
        (exact.linear_transformer_loss, exact.linear_transformer_risk, p_lt),
    ]
    ex = _ex("partI")
    for build, risk, q in cases:
        want = risk(q, ex)
        fixed, free = build(ex), build(None)
        assert fixed(q, jax.random.key(5)) == want and fixed(q) == want
        assert free(q, None, ex) == want
        assert jax.jit(free)(q, None, ex) == jax.jit(lambda q_, e: risk(q_, e))(q, ex)
    # the moments as an argument: two priors of the same d and C, one compilation
    ex2 = exact.prepare(tasks.make_prior(d, mu=jnp.array([0.0, 2.0])), CONFIGS["partI"]["C"])
    loss = exact.lsa_loss(None)
    before = iclgd.training.trace_count()
    runs = [iclgd.train(loss, p, jax.random.key(1), steps=3, args=(e,)) for e in (ex, ex2)]
    assert iclgd.training.trace_count() - before == 1
    for run, e in zip(runs, (ex, ex2)):
        assert run.losses[0] == pytest.approx(float(exact.lsa_risk(p, e)), rel=1e-12)


def test_exact_losses_reject_bad_input():
    ex = _ex("partI")
    p = _rand_lsa(np.random.default_rng(0), 2, 1)
    builds = {
        exact.lsa_loss: p,
        exact.yq_lsa_loss: lsa.init_yq_lsa(jax.random.key(0), 2),
        exact.linear_transformer_loss: linear_transformer.init_linear_transformer(
            jax.random.key(0), 2, 1
        ),
    }
    for build, q in builds.items():
        with pytest.raises(ValueError, match="ex must be an iclgd.exact.Exact"):
            build("ex")
        with pytest.raises(ValueError, match="ex must be an iclgd.exact.Exact"):
            build(None)(q, None, {"d": 2})  # the moments given at the call are checked there
    with pytest.raises(ValueError, match=r"y_q_guess must have shape \(2,\)"):
        exact.lsa_loss(ex, y_q_guess=jnp.ones(3))
    with pytest.raises(ValueError, match=r"y_q_guess must have shape \(d,\)"):
        exact.lsa_loss(None, y_q_guess=jnp.ones((2, 2)))
    with pytest.raises(ValueError, match=r"y_q_guess must have shape \(2,\)"):
        exact.lsa_loss(None, y_q_guess=jnp.ones(3))(p, None, ex)  # its length, at the call
    with pytest.raises(ValueError, match="y_q_bias must be a scalar"):
        exact.lsa_loss(None, y_q_bias=jnp.ones(2))
    with pytest.raises(ValueError, match="y_q_guess"):
        exact.lsa_loss(None, y_q_guess=[1.0, float("nan")])
    with pytest.raises(TypeError, match="y_q_bias must be a real"):
        exact.lsa_loss(None, y_q_bias="c")


# ------------------------------------------------------------------------------------ bad input
def test_bad_inputs_raise_value_errors():
    ex = _ex("partI")
    d, D = 2, 3
    p = _rand_lsa(np.random.default_rng(0), d, 2)
    with pytest.raises(ValueError, match="prior"):
        exact.prepare("not a prior", 3)
    with pytest.raises(ValueError, match="C must be"):
        exact.prepare(_prior("partI"), 0)
    with pytest.raises(ValueError, match="ex must be"):
        exact.lsa_risk(p, "ex")
    with pytest.raises(ValueError, match=r"params\['WQ'\] must have shape"):
        exact.lsa_risk({**p, "WQ": jnp.zeros((2, 4, 4))}, ex)
    with pytest.raises(ValueError, match=r"y_q_guess must have shape \(2,\)"):
        exact.lsa_risk(p, ex, y_q_guess=jnp.ones(3))
    with pytest.raises(ValueError, match=r"Mt must have shape \(3, 3, 3\)"):
        exact.predictor_risk(jnp.zeros((2, 2, 2)), jnp.zeros(D), ex)
    with pytest.raises(ValueError, match=r"params\['P'\] must have shape \(1, 3, 3\)"):
        exact.linear_transformer_risk({"P": jnp.zeros((2, D, D)), "Q": jnp.zeros((2, D, D))}, ex)
    with pytest.raises(ValueError, match=r"w0 must have shape \(2,\)"):
        exact.gd_risk(ex, 0.1, w0=jnp.ones(4))
    with pytest.raises(ValueError, match="n_mc"):
        exact.bayes_risk(_prior("d3C5"), 3, n_mc=1)
    with pytest.raises(ValueError, match="H must be"):
        exact.lsa_search(ex, 0)
    with pytest.raises(ValueError, match=r"M must have shape \(D, D, D\)"):
        exact.lsa_params_from_M(jnp.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match="eta must be a scalar"):
        exact.gd_risk(ex, jnp.ones(2))


# ------------------------------------------------------------------ accuracy at any ||w*|| (#28)
@pytest.mark.parametrize("s2", [0.0, 3e4, 1e8])
def test_exact_quantities_keep_their_accuracy_as_the_prior_mean_grows(s2):
    """Part I (Sigma = Omega = I, no noise), d = 3, C = 5: closed forms that hold for every w*.

    The engine computes on the centred prompt (G = W G0 W^T), so at ||w*||^2 = 1e8 every exact
    quantity agrees with its closed form to 1e-10 relative, as at 0 (before, the error grew like
    ||w*||^4 eps: eta* = 0.081 instead of 5/9 at 3e6, a "flat" risk at 3e8)."""
    d, C = 3, 5
    ex = exact.prepare(tasks.make_prior(d, mu=jnp.asarray(np.sqrt(s2 / d) * np.ones(d))), C)
    mu = np.asarray(ex.prior.mu, np.float64)  # the stored (float32-rounded) mean
    eta_cf, risk_cf = C / (C + d + 1), d * (d + 1) / (C + d + 1)
    rel = lambda a, b: abs(a - b) / abs(b)
    eta, risk = exact.gd_optimal(ex)
    assert rel(eta, eta_cf) < 1e-10 and rel(risk, risk_cf) < 1e-10
    # one GD step from w* as an LSA (y_q = x_q^T w*), in float64 and in float32
    b = np.zeros((1, d + 1))
    b[0] = eta_cf * np.append(-mu, 1.0)
    A = np.zeros((1, d + 1, d + 1))
    A[0, :d, :d] = np.eye(d)
    p = exact.reduced_to_lsa_params(b, A)
    assert rel(exact.risk64(exact.lsa_risk, p, ex, mu, 0.0), risk_cf) < 1e-10
    assert rel(float(exact.gd_risk(ex, eta_cf)), risk_cf) < 1e-5  # float32
    # the zero predictor: E[y^2] = tr(Omega) + ||w*||^2
    zero = jax.tree_util.tree_map(np.zeros_like, p)
    assert rel(exact.risk64(exact.lsa_risk, zero, ex), d + mu @ mu) < 1e-10
    # the best multi-head LSA and its closed form; the best y_q-LSA bound is one GD step
    cf = exact.multihead_lsa_closed_form(d, C, mu)
    best = exact.lsa_optimum(ex)
    assert rel(best.risk, cf.risk) < 1e-10
    assert rel(exact.risk64(exact.lsa_risk, best.params, ex), cf.risk) < 1e-10
    assert rel(exact.yq_lsa_optimum(ex).risk, risk_cf) < 1e-10
    # the GD point is stationary for y_q-LSA at eta*; the gradient in A_DD multiplies
    # G_yy ~ ||w*||^2, so its rounding is relative to that scale (before: of order 1 at 1e8)
    assert exact.yq_lsa_gd_point_grad(ex, eta_cf).norm() < 1e-11 * (1 + mu @ mu)
