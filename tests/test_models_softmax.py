"""Tests of iclgd.models.softmax: the one-layer multi-head softmax attention of Yang et al. (eq.
5-8)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _data import numpy_spec

from iclgd import exact, metrics, models
from iclgd.models import softmax as S


def test_init_follows_paper():
    p = S.init_softmax(jax.random.PRNGKey(0), d=20, K=30, H=16, beta=1.0)
    assert p["Q"].shape == (16, 20, 20) and p["w"].shape == (16, 30)
    np.testing.assert_array_equal(p["w"], 0.0)  # w^(0) = 0 (Thm. 1)
    np.testing.assert_allclose(np.std(p["Q"]), 1.0, atol=0.05)  # Q_h(i,j) ~ N(0, 1) (Sec. 4)
    np.testing.assert_allclose(np.mean(p["Q"]), 0.0, atol=0.05)


K, D, M, N, TAU, H = 10, 4, 5, 3, 0.1, 4


def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype=jnp.float32)


def test_shapes_and_scores(spec, params, batch):
    s = S.attention_scores(params, spec)
    assert s.shape == (H, N, K)
    np.testing.assert_allclose(s.sum(axis=1), 1.0, atol=1e-6)
    assert S.attention_matrix(params, spec).shape == (N, K)
    assert S.softmax_predict(params, spec, batch.y).shape == (6, K)
    assert S.softmax_attention_map(params, batch.E, N).shape == (6, K, K)


def _softmax_np(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_efficient_equals_literal_eq5_to_8(spec, params, batch):
    """softmax_predict == diag T(E) (eq. 5-7) == a per-sample, per-token, per-head loop of eq. 8."""
    pred = np.asarray(S.softmax_predict(params, spec, batch.y))
    T = np.asarray(S.softmax_attention_map(params, batch.E, N))
    Q, w = np.asarray(params["Q"], np.float64), np.asarray(params["w"], np.float64)
    V = np.asarray(spec.tokens, np.float64)  # (K, d)
    y = np.asarray(batch.y, np.float64)
    loop = np.zeros((y.shape[0], K))
    full = np.zeros((y.shape[0], K, K))
    for b in range(y.shape[0]):
        for k in range(K):
            for h in range(H):
                s = _softmax_np(V[:N] @ Q[h] @ V[k])  # softmax(V^T Q_h v_k)
                loop[b, k] += y[b] @ (w[h, k] * s)
                full[b, :, k] += w[h] * (y[b] @ s)  # head_h = W^V_h E^P softmax(.) = w_h y^T s^h_k
    np.testing.assert_allclose(pred, loop, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.diagonal(T, axis1=1, axis2=2), loop, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(T, full, rtol=1e-4, atol=1e-5)


def test_uniform_attention_gives_mean_label(spec, batch):
    """One head with Q = 0: softmax is uniform over the N prompt tokens, so
    y_hat_k = w_k * mean(y)."""
    w = _normal(4, (1, K))
    p = {"Q": jnp.zeros((1, D, D)), "w": w}
    pred = S.softmax_predict(p, spec, batch.y)
    np.testing.assert_allclose(
        pred, w[0][None, :] * batch.y.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6
    )


def test_prediction_linear_in_labels(spec, params, batch):
    y1, y2 = batch.y[:3], batch.y[3:]
    lhs = S.softmax_predict(params, spec, 2.0 * y1 - 0.5 * y2)
    rhs = 2.0 * S.softmax_predict(params, spec, y1) - 0.5 * S.softmax_predict(params, spec, y2)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5, atol=1e-5)


def test_training_drives_A_hat_to_A():
    """Thm. 1-2 in miniature: GD on the population loss -> L*, A_hat(theta)
    -> A, y_hat -> y_star."""
    s = numpy_spec(6, K=6, d=3, m=3, N=2, tau=0.1)
    p = {"Q": _normal(7, (4, 3, 3)), "w": jnp.zeros((4, 6))}  # the paper's init: Q ~ N(0, 1), w = 0
    opt = optax.adam(0.05)

    @jax.jit
    def train(p):
        def step(carry, _):
            p, state = carry
            g = jax.grad(exact.softmax_risk)(p, s)
            up, state = opt.update(g, state)
            return (optax.apply_updates(p, up), state), None

        (p, _), _ = jax.lax.scan(step, (p, opt.init(p)), None, length=1500)
        return p

    L0 = float(exact.softmax_risk(p, s))
    p = train(p)
    gap0 = L0 - float(exact.optimal_loss(s))
    gap = float(exact.softmax_risk(p, s)) - float(exact.optimal_loss(s))
    assert gap < 1e-3 * gap0
    np.testing.assert_allclose(S.attention_matrix(p, s), exact.limit_matrix(s), atol=0.05)


def test_softmax_attention_model_draws_init_softmax(spec, batch):
    """The factory's ``init``/``predict`` are ``init_softmax(key, d, K, H)``/``softmax_predict``
    exactly: the chapters' numbers do not depend on which one they call."""
    key = jax.random.PRNGKey(5)
    model = models.softmax_attention_model(spec, H)
    p = model.init(key)
    q = S.init_softmax(key, D, K, H)
    assert all(bool(jnp.all(p[k] == q[k])) for k in ("Q", "w"))
    assert bool(jnp.all(model.predict(p, batch) == S.softmax_predict(q, spec, batch.y)))


def test_softmax_loss_rejects_bad_input(spec, params):
    with pytest.raises(ValueError, match="spec must be an iclgd.tasks.RepresentationSpec"):
        exact.softmax_loss("spec")
    with pytest.raises(ValueError, match="spec must be an iclgd.tasks.RepresentationSpec"):
        exact.softmax_loss(None)(params, None, {"K": K})  # checked at the call
    with pytest.raises(ValueError, match=r"spec.lam_mean must have shape \(5,\)"):
        exact.softmax_loss(spec._replace(lam_mean=jnp.zeros(M + 1)))
    with pytest.raises(ValueError, match=r"params\['Q'\] must have shape \(H, 4, 4\)"):
        exact.softmax_loss(spec)({"Q": jnp.zeros((2, 3, 3)), "w": jnp.zeros((2, K))}, None)


def test_bad_softmax_params(spec, batch):
    with pytest.raises(ValueError, match=r"params\['Q'\] must have shape \(H, 4, 4\)"):
        S.softmax_predict({"Q": jnp.zeros((2, 3, 3)), "w": jnp.zeros((2, K))}, spec, batch.y)
    with pytest.raises(ValueError, match=r"params\['w'\] must have shape \(2, 10\)"):
        S.softmax_predict({"Q": jnp.zeros((2, D, D)), "w": jnp.zeros((2, K + 1))}, spec, batch.y)
    with pytest.raises(ValueError, match="params must be a dict"):
        S.softmax_predict({"Q": jnp.zeros((2, D, D))}, spec, batch.y)


def test_bad_softmax_inputs(spec, params, batch):
    with pytest.raises(ValueError, match=r"y must have shape \(B, 3\)"):
        S.softmax_predict(params, spec, batch.y_all)
    with pytest.raises(ValueError, match="N must satisfy 1 <= N < K"):
        S.softmax_attention_map(params, batch.E, K)
    with pytest.raises(ValueError, match="y_hat and y_all must have the same shape"):
        metrics.empirical_loss(batch.y_all, batch.y)
    with pytest.raises(ValueError, match=r"A_hat must have shape \(3, 10\)"):
        exact.softmax_risk_from_A(jnp.zeros((K, N)), spec)
    with pytest.raises(ValueError, match="H must be an integer >= 1"):
        S.init_softmax(jax.random.PRNGKey(0), D, K, 0)
