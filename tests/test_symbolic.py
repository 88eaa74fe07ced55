"""Tests for iclgd.symbolic: exact Gaussian moments, symbolic LSA risks and their gradients.

Every exact result is checked either against a known closed form or against an independent
numpy/jax Monte Carlo estimate (fixed seed, >= 1e5 samples, within 4 standard errors).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp

from iclgd.symbolic import (
    GaussianBlock,
    attention_head_expr,
    bottom_right,
    embedding,
    expect_independent,
    expect_nested,
    expect_product,
    flatten_params,
    frobenius,
    gaussian_block,
    gaussian_expectation,
    gaussian_vector,
    gradient,
    lambdify_gradient,
    lambdify_risk,
    linear_regression_task,
    lsa_output_expr,
    lsa_prediction_expr,
    lsa_prediction_uq_expr,
    mask_matrix,
    multihead_lsa_prediction_expr,
    symbolic_risk,
    weight_matrix,
)

N_MC = 200_000


def assert_mc(exact, samples, k: float = 4.0, what: str = ""):
    """|exact - mean(samples)| <= k standard errors (per entry; samples along axis 0)."""
    samples = np.asarray(samples, dtype=float)
    mean = samples.mean(axis=0)
    se = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    exact = np.asarray(exact, dtype=float)
    z = np.abs(exact - mean) / np.maximum(se, 1e-12)
    assert np.all(z <= k), f"{what}: exact {exact} vs MC {mean} +- {se} (max z = {z.max():.2f})"


def random_polynomial(variables, rng, degree: int = 4, n_terms: int = 8):
    expr = sp.Integer(int(rng.integers(-3, 4)))
    for _ in range(n_terms):
        powers = [0] * len(variables)
        for _ in range(int(rng.integers(1, degree + 1))):
            powers[int(rng.integers(len(variables)))] += 1
        c = int(rng.integers(1, 4)) * int(rng.choice([-1, 1]))
        expr += c * sp.Mul(*[v**p for v, p in zip(variables, powers, strict=True)])
    return expr


# ------------------------------------------------------------------------------------------
# Known moments
# ------------------------------------------------------------------------------------------


def test_known_moments_exact():
    x, y = sp.symbols("x y", real=True)
    rho = sp.Symbol("rho", real=True)
    mu, s = sp.symbols("mu sigma", real=True)
    assert gaussian_expectation(x**4, [x]) == 3
    assert gaussian_expectation(x**6 + x**3, [x]) == 15
    cov = sp.Matrix([[1, rho], [rho, 1]])
    assert sp.expand(gaussian_expectation(x**2 * y**2, [x, y], cov=cov) - (1 + 2 * rho**2)) == 0
    assert sp.expand(gaussian_expectation(x**3 * y, [x, y], cov=cov) - 3 * rho) == 0
    assert (
        sp.expand(
            gaussian_expectation(x**3, [x], [mu], sp.Matrix([[s**2]])) - (mu**3 + 3 * mu * s**2)
        )
        == 0
    )
    m4 = gaussian_expectation(x**4, [x], [mu], sp.Matrix([[s**2]]))
    assert sp.expand(m4 - (mu**4 + 6 * mu**2 * s**2 + 3 * s**4)) == 0
    # elementwise over a matrix, coefficients carrying other symbols
    a = sp.Symbol("a")
    out = gaussian_expectation(sp.Matrix([[a * x**2, x * y], [y**2, 1]]), [x, y], cov=cov)
    assert out == sp.Matrix([[a, rho], [1, 1]])
    # independent blocks: E[(w x)^2] = (w*^2 + 1) * 1
    w, ws = sp.Symbol("w"), sp.Symbol("w_star")
    assert (
        sp.expand(
            expect_independent((w * x) ** 2, [([w], [ws], None), ([x], None, None)]) - ws**2 - 1
        )
        == 0
    )


def test_identity_fast_path_matches_general_path():
    """cov=None (per-variable closed form) and an explicit identity cov (Stein recursion) agree."""
    v = list(gaussian_vector("v", 3))
    m = sp.symbols("m1:4")
    expr = random_polynomial(v, np.random.default_rng(1), degree=6, n_terms=12)
    fast = expect_independent(expr, [gaussian_block(v, m, None)])
    slow = expect_independent(
        expr, [GaussianBlock(tuple(v), tuple(m), sp.ImmutableMatrix(sp.eye(3)))]
    )
    assert sp.expand(fast - slow) == 0


def test_gradient_matches_sympy_diff():
    a, b, c = sp.symbols("a b c")
    expr = sp.expand((a - 2 * b + c) ** 3 * (a + c**2) + 3 * a * b) * sp.Symbol("k")
    assert all(
        sp.expand(g - sp.diff(expr, p)) == 0
        for g, p in zip(gradient(expr, [a, b, c]), [a, b, c], strict=True)
    )
    nonpoly = sp.sin(a) * b
    assert gradient(nonpoly, [a, b]) == [sp.cos(a) * b, sp.sin(a)]
    f = lambdify_gradient(nonpoly, [a, b], backend="numpy")
    np.testing.assert_allclose(f([0.0, 2.0]), [2.0, 0.0])


def test_expect_product_matches_expanded():
    v = list(gaussian_vector("v", 2))
    c = sp.Symbol("c")
    rng = np.random.default_rng(2)
    a = random_polynomial(v, rng) * c + v[0]
    b = random_polynomial(v, rng) - c
    groups = [(v, [1, c], sp.Matrix([[2, 1], [1, 3]]))]
    assert (
        sp.expand(expect_product(a, b, groups) - expect_independent(sp.expand(a * b), groups)) == 0
    )
    assert (
        sp.expand(expect_product(a, a, groups) - expect_independent(sp.expand(a * a), groups)) == 0
    )


# ------------------------------------------------------------------------------------------
# Monte Carlo checks of each expectation helper
# ------------------------------------------------------------------------------------------


def test_gaussian_expectation_vs_monte_carlo():
    rng = np.random.default_rng(0)
    v = list(gaussian_vector("v", 3))
    expr = random_polynomial(v, rng)
    mean = [sp.Rational(1, 2), -1, 0]
    cov = sp.Matrix(
        [
            [1, sp.Rational(1, 2), 0],
            [sp.Rational(1, 2), 2, sp.Rational(-1, 3)],
            [0, sp.Rational(-1, 3), 1],
        ]
    )
    exact = gaussian_expectation(expr, v, mean, cov)
    assert exact.is_Rational
    s = rng.multivariate_normal(np.array(mean, float), np.array(cov, float), size=N_MC)
    f = sp.lambdify(v, expr, "numpy")
    assert_mc(exact, f(*s.T), what=str(expr))


def test_expect_independent_vs_monte_carlo():
    rng = np.random.default_rng(1)
    a = list(gaussian_vector("a", 2))
    b = sp.Symbol("b", real=True)
    expr = random_polynomial(a + [b], rng)
    cov_a = sp.Matrix([[2, -1], [-1, 1]])
    exact = expect_independent(expr, [(a, [1, 0], cov_a), ([b], [sp.Rational(-1, 2)], None)])
    sa = rng.multivariate_normal([1.0, 0.0], np.array(cov_a, float), size=N_MC)
    sb = rng.normal(-0.5, 1.0, size=N_MC)
    f = sp.lambdify(a + [b], expr, "numpy")
    assert_mc(exact, f(sa[:, 0], sa[:, 1], sb), what=str(expr))


def test_expect_nested_vs_joint_and_monte_carlo():
    """Conditional Gaussian z = (x, w x) | w, then w ~ N(1/2, 1): nested == joint == MC."""
    rng = np.random.default_rng(2)
    x, w = sp.symbols("x w", real=True)
    z = list(gaussian_vector("z", 2))
    expr = random_polynomial(z, rng, degree=4)
    nested = expect_nested(
        expr, [[(z, None, sp.Matrix([[1, w], [w, w**2]]))], [([w], [sp.Rational(1, 2)], None)]]
    )
    unconditional = expr.subs({z[0]: x, z[1]: w * x}, simultaneous=True)
    joint = expect_independent(unconditional, [([x],), ([w], [sp.Rational(1, 2)])])
    assert sp.expand(nested - joint) == 0
    sw = rng.normal(0.5, 1.0, size=N_MC)
    sx = rng.normal(size=N_MC)
    assert_mc(nested, sp.lambdify(z, expr, "numpy")(sx, sw * sx), what=str(expr))


# ------------------------------------------------------------------------------------------
# G = (1/C) sum_i z_i z_i^T, z_i = (x_i, w^T x_i), d = 2, C = 2
# ------------------------------------------------------------------------------------------


def test_G_moments_vs_monte_carlo():
    d, C = 2, 2
    w_star = [sp.Rational(1, 2), -1]
    t = linear_regression_task(d, C, w_star=w_star)
    Z = [t.X[i, :].T.col_join(sp.Matrix([t.y[i]])) for i in range(C)]
    G = sum((z * z.T for z in Z), sp.zeros(d + 1)) / C
    EG = expect_independent(G, t.groups)
    ws = sp.Matrix(w_star)
    assert EG == sp.Matrix(sp.BlockMatrix([[sp.eye(d), ws], [ws.T, ws.T * ws + sp.Matrix([[d]])]]))

    idx = list(itertools.combinations_with_replacement(range((d + 1) ** 2), 2))
    Gf = list(G)
    second_joint = expect_independent([Gf[a] * Gf[b] for a, b in idx], t.groups)
    # nested: given w the z_i are i.i.d. N(0, [[I, w], [w^T, w^T w]]); then w ~ N(w_star, I)
    w = sp.Matrix(sp.symbols("u1:3", real=True))
    zs = [gaussian_vector(f"z{i}", d + 1) for i in range(C)]
    Gz = sum((z * z.T for z in zs), sp.zeros(d + 1)) / C
    cond_cov = sp.eye(d).row_join(w).col_join(w.T.row_join(w.T * w))
    inner = [(z, None, cond_cov) for z in zs]
    second_nested = expect_nested(
        [list(Gz)[a] * list(Gz)[b] for a, b in idx], [inner, [(w, w_star)]]
    )
    assert all(sp.expand(p - q) == 0 for p, q in zip(second_joint, second_nested, strict=True))
    # the columns are independent only given w: unconditionally y_1^2 and y_2^2 are correlated,
    # Cov(y_1^2, y_2^2) = Var(|w|^2) = 2 d + 4 |w_star|^2
    y1, y2 = t.y
    cov_y = expect_independent(y1**2 * y2**2, t.groups) - expect_independent(y1**2, t.groups) ** 2
    assert cov_y == 2 * d + 4 * (ws.T * ws)[0, 0]

    rng = np.random.default_rng(3)
    n = 100_000
    sw = rng.normal(size=(n, d)) + np.array(w_star, float)
    sx = rng.normal(size=(n, C, d))
    sz = np.concatenate([sx, np.einsum("ncd,nd->nc", sx, sw)[..., None]], axis=2)  # (n, C, d+1)
    sG = np.einsum("nci,ncj->nij", sz, sz).reshape(n, -1) / C
    assert_mc(np.array(EG, float).ravel(), sG, what="E[G]")
    prods = np.stack([sG[:, a] * sG[:, b] for a, b in idx], axis=1)
    assert_mc(np.array(second_joint, float), prods, what="E[G_mn G_pq]")


# ------------------------------------------------------------------------------------------
# LSA model and risk
# ------------------------------------------------------------------------------------------


def lsa_numpy(E, heads):
    """Independent numpy implementation of Part I eqs. 3/6 on a batch E of shape (n, d+1, C+1)."""
    C = E.shape[-1] - 1
    M = np.diag([1.0] * C + [0.0])
    out = E.copy()
    Et = np.swapaxes(E, 1, 2)
    for P, V, K, Q in heads:
        out = out + (P @ V @ E @ M @ Et @ K.T @ Q @ E) / C
    return out[:, -1, -1]


def sample_prompts(rng, n, d, C, w_star, noise_std=0.0):
    w = rng.normal(size=(n, d)) + w_star
    X = rng.normal(size=(n, C, d))
    xq = rng.normal(size=(n, d))
    y = np.einsum("ncd,nd->nc", X, w) + noise_std * rng.normal(size=(n, C))
    target = np.einsum("nd,nd->n", xq, w) + noise_std * rng.normal(size=n)
    yq = xq @ w_star
    E = np.concatenate(
        [
            np.concatenate([np.swapaxes(X, 1, 2), xq[:, :, None]], axis=2),
            np.concatenate([y, yq[:, None]], axis=1)[:, None, :],
        ],
        axis=1,
    )
    return E, target


def test_lsa_prediction_forms_agree():
    d, C = 1, 2
    t = linear_regression_task(d, C, y_q="prior", w_star="m")
    P, V, K, Q = (weight_matrix(n, d + 1) for n in ("P", "V", "K", "Q"))
    pred = lsa_prediction_expr((P, V, K, Q), t.E)
    assert sp.expand(pred - bottom_right(lsa_output_expr([(P, V, K, Q)], t.E))) == 0
    assert sp.expand(pred - t.E[-1, -1] - bottom_right(attention_head_expr((P, V, K, Q), t.E))) == 0
    assert sp.expand(pred - lsa_prediction_uq_expr(((P * V)[-1, :], K.T * Q), t.E)) == 0
    assert sp.expand(frobenius(P, V) - (P.T * V).trace()) == 0
    assert t.E * mask_matrix(C) * t.E.T == t.E[:, :C] * t.E[:, :C].T


def test_lsa_risk_closed_form_d1_c1():
    """Hand-derived: with W^P=W^V=W^K=I, W^Q=diag(eta, 0), d=C=1, w_star=0, y_q=0 the prediction is
    eta y_1 x_1 x_q and E[(pred - y)^2] = (3 eta^2 - 2 eta + 1) + eta^2 s^2 + s^2 (noise std s)."""
    eta, s = sp.symbols("eta s", positive=True)
    t = linear_regression_task(1, 1, noise_std=s)
    I2 = sp.eye(2)
    pred = lsa_prediction_expr((I2, I2, I2, sp.diag(eta, 0)), t.E)
    assert sp.expand(pred - eta * t.y[0] * t.X[0, 0] * t.x_q[0]) == 0
    assert sp.expand(t.risk(pred) - (3 * eta**2 - 2 * eta + 1 + eta**2 * s**2 + s**2)) == 0


@pytest.mark.parametrize(
    "d, C, H, noise_std",
    [(2, 2, 1, None), (1, 3, 2, sp.Rational(1, 2))],
)
def test_lsa_risk_vs_monte_carlo(d, C, H, noise_std):
    rng = np.random.default_rng(10 + d)
    w_star = [sp.Rational(1, 2), sp.Rational(-1, 3)][:d]
    t = linear_regression_task(d, C, w_star=w_star, y_q="prior", noise_std=noise_std)
    # near a one-step-GD construction (so attention matters), plus random eighths
    n, eta = d + 1, sp.Rational(C, H * (C + d + 1))
    base = (sp.eye(n), sp.eye(n), sp.eye(n), sp.diag(*([eta] * d + [0])))
    heads = [
        tuple(
            B + sp.Matrix(n, n, [sp.Rational(int(k), 8) for k in rng.integers(-2, 3, n * n)])
            for B in base
        )
        for _ in range(H)
    ]
    risk = t.risk(multihead_lsa_prediction_expr(heads, t.E))
    assert risk.is_Rational and risk > 0
    # 4e5 samples: the loss is a degree-12 Gaussian polynomial, heavy-tailed; this many samples
    # resolve e.g. a mask or label-noise error by > 6 standard errors
    E, target = sample_prompts(rng, 2 * N_MC, d, C, np.array(w_star, float), float(noise_std or 0))
    pred = lsa_numpy(E, [tuple(np.array(W, float) for W in h) for h in heads])
    assert_mc(risk, (pred - target) ** 2, what=f"LSA risk d={d} C={C} H={H}")


def test_lsa_risk_gradient_vs_finite_differences_and_jax():
    import jax
    import jax.numpy as jnp

    d, C = 1, 2
    t = linear_regression_task(d, C, w_star="m", y_q="prior")
    P, V, K, Q = (weight_matrix(n, d + 1) for n in ("P", "V", "K", "Q"))
    params = flatten_params(P, V, K, Q)
    risk = t.risk(lsa_prediction_expr((P, V, K, Q), t.E))
    m_val = 0.5
    const = {t.w_star[0]: sp.Rational(1, 2)}
    rng = np.random.default_rng(4)
    theta = rng.normal(size=len(params)) * 0.4

    f = lambdify_risk(risk, params, constants=const, backend="numpy")
    g = lambdify_gradient(risk, params, constants=const, backend="numpy")
    gv = g(theta)
    h = 1e-6
    fd = np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(len(params))])
    np.testing.assert_allclose(gv, fd, rtol=1e-6, atol=1e-8)
    # the symbolic gradient() (as sympy expressions) gives the same numbers
    at = {p: sp.Float(v, 30) for p, v in zip(params, theta, strict=True)}
    sym = [float(e.xreplace(at)) for e in gradient(risk.xreplace(const), params)]
    np.testing.assert_allclose(sym, gv, rtol=1e-10, atol=1e-12)

    with jax.enable_x64(True):
        # jax backend: exact gradient == autodiff of the lambdified risk
        fj = lambdify_risk(risk, params, constants=const)
        gj = jax.jit(lambdify_gradient(risk, params, constants=const))
        tj = jnp.asarray(theta)
        np.testing.assert_allclose(
            np.asarray(gj(tj)), np.asarray(jax.jit(jax.grad(fj))(tj)), rtol=1e-10, atol=1e-12
        )
        np.testing.assert_allclose(np.asarray(gj(tj)), gv, rtol=1e-10, atol=1e-12)

        # independent jax Monte Carlo risk of the same model, differentiated with jax.grad
        n = 100_000
        w = jnp.asarray(rng.normal(size=(n, d)) + m_val)
        X = jnp.asarray(rng.normal(size=(n, C, d)))
        xq = jnp.asarray(rng.normal(size=(n, d)))
        y = jnp.einsum("ncd,nd->nc", X, w)
        E = jnp.concatenate(
            [
                jnp.concatenate([jnp.swapaxes(X, 1, 2), xq[:, :, None]], axis=2),
                jnp.concatenate([y, m_val * xq], axis=1)[:, None, :],
            ],
            axis=1,
        )
        target = jnp.einsum("nd,nd->n", xq, w)
        Mmask = jnp.diag(jnp.array([1.0] * C + [0.0]))

        def sample_loss(th, Ei, yi):
            Pm, Vm, Km, Qm = (th[4 * k : 4 * k + 4].reshape(2, 2) for k in range(4))
            out = Ei + Pm @ Vm @ Ei @ Mmask @ Ei.T @ Km.T @ Qm @ Ei / C
            return (out[-1, -1] - yi) ** 2

        per_sample = np.asarray(
            jax.jit(jax.vmap(jax.grad(sample_loss), in_axes=(None, 0, 0)))(tj, E, target)
        )
    assert_mc(gv, per_sample, what="dR/dtheta vs jax.grad of MC risk")


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------


def test_embedding_and_helpers():
    X = sp.Matrix([[1, 2], [3, 4]])
    E = embedding(X, [5, 6], [7, 8], 9)
    assert E == sp.Matrix([[1, 3, 7], [2, 4, 8], [5, 6, 9]])
    assert bottom_right(E) == 9
    assert mask_matrix(2) == sp.diag(1, 1, 0)
    assert frobenius(sp.eye(2), X) == 5
    assert gaussian_vector("x", 3).shape == (3, 1)
    t = linear_regression_task(2, 3, w_star="m", y_q="prior", noise_std=sp.Symbol("s"))
    assert t.E.shape == (3, 4) and t.X.shape == (3, 2)
    assert t.y_q == (t.w_star.T * t.x_q)[0, 0]
    assert len(t.groups) == len(t.task_groups) + len(t.data_groups)
    # risk of the trivial predictor y_q = w_star^T x_q: E[((w - w_star)^T x_q + s eps)^2] = d + s^2
    assert sp.expand(symbolic_risk(t.y_q, t.target, t.groups) - 2 - sp.Symbol("s") ** 2) == 0


# ------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------


def test_bad_inputs():
    x, y = sp.symbols("x y")
    with pytest.raises(ValueError, match=r"cov must be a square matrix of shape \(2, 2\)"):
        gaussian_expectation(x * y, [x, y], cov=sp.Matrix([[1, 0, 0], [0, 1, 0]]))
    with pytest.raises(ValueError, match=r"cov must be a square matrix of shape \(2, 2\)"):
        gaussian_expectation(x * y, [x, y], cov=sp.eye(3))
    with pytest.raises(ValueError, match="mean must have length 2"):
        gaussian_expectation(x * y, [x, y], mean=[0, 0, 1])
    with pytest.raises(ValueError, match="must contain only sympy Symbols"):
        gaussian_expectation(x, [x, x + y])
    with pytest.raises(ValueError, match="must be a polynomial in the Gaussian variables"):
        gaussian_expectation(sp.sin(x), [x])
    with pytest.raises(ValueError, match="must be a polynomial in the Gaussian variables"):
        expect_independent(1 / x, [([x],)])
    with pytest.raises(ValueError, match="cov must be symmetric"):
        gaussian_expectation(x, [x, y], cov=sp.Matrix([[1, 1], [0, 1]]))
    with pytest.raises(ValueError, match="positive semi-definite"):
        gaussian_expectation(x, [x, y], cov=sp.Matrix([[1, 2], [2, 1]]))
    with pytest.raises(ValueError, match="groups must be disjoint"):
        expect_independent(x, [([x],), ([x, y],)])
    with pytest.raises(ValueError, match="expect_nested"):
        expect_independent(x * y, [([x], [y]), ([y],)])
    with pytest.raises(ValueError, match="own variables"):
        gaussian_expectation(x, [x], mean=[x])
    with pytest.raises(ValueError, match="groups must be a non-empty list"):
        expect_independent(x, [])
    with pytest.raises(ValueError, match=r"y must have length 2"):
        embedding(sp.eye(2), [1, 2, 3], [1, 2], 0)
    with pytest.raises(ValueError, match=r"W_P must have shape \(3, 3\)"):
        lsa_prediction_expr(
            (sp.eye(2), sp.eye(3), sp.eye(3), sp.eye(3)), embedding(sp.eye(2), [1, 2], [1, 2], 0)
        )
    with pytest.raises(ValueError, match="d must be an integer >= 1"):
        linear_regression_task(0, 2)
    a, b = sp.symbols("a b")
    with pytest.raises(ValueError, match=r"free symbols \['b'\]"):
        lambdify_risk(a * b, [a], backend="numpy")
    with pytest.raises(ValueError, match=r"theta must have shape \(1,\)"):
        lambdify_gradient(a**2, [a], backend="numpy")(np.zeros(2))
    with pytest.raises(ValueError, match="backend must be 'jax' or 'numpy'"):
        lambdify_risk(a, [a], backend="torch")
    with pytest.raises(ValueError, match="A and B must have the same shape"):
        frobenius(sp.eye(2), sp.eye(3))


def test_model_expressions_take_parameters_first():
    E = embedding(sp.Matrix([[1]]), [2], [3], 0)
    I2 = sp.eye(2)
    with pytest.raises(ValueError, match=r"weights must be a tuple \(W_P, W_V, W_K, W_Q\)"):
        lsa_prediction_expr((I2, I2, I2), E)
    with pytest.raises(ValueError, match=r"weights must be a tuple \(W_P, W_V, W_K, W_Q\)"):
        attention_head_expr(E, (I2, I2, I2, I2))
    with pytest.raises(ValueError, match="heads must be a non-empty list"):
        multihead_lsa_prediction_expr(E, [(I2, I2, I2, I2)])
    with pytest.raises(ValueError, match="heads must be a non-empty list"):
        lsa_output_expr(E, [(I2, I2, I2, I2)])
    with pytest.raises(ValueError, match=r"params must be a tuple \(u, Q\)"):
        lsa_prediction_uq_expr([0, 1, 2], E)
    assert lsa_prediction_uq_expr(([0, 1], sp.Matrix([[1, 0], [0, 0]])), E) == 6


def test_symbolic_names_do_not_collide_with_numeric_names():
    """iclgd.symbolic builds sympy expressions: none of its names may shadow a numeric function."""
    import importlib
    import inspect
    import pkgutil

    import iclgd
    from iclgd import symbolic

    numeric = set()
    for info in pkgutil.walk_packages(iclgd.__path__, "iclgd."):
        if info.name.startswith("iclgd.symbolic"):
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            own = getattr(obj, "__module__", None) == info.name
            if (
                own
                and not name.startswith("_")
                and (inspect.isfunction(obj) or inspect.isclass(obj))
            ):
                numeric.add(name)
    assert "lsa_output" in numeric and "lsa_predict" in numeric  # the walk found the models
    assert not set(symbolic.__all__) & numeric
