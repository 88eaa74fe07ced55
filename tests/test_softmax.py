"""Tests of iclgd.models.softmax and iclgd.models.transformer: the one-layer multi-head softmax
attention of Yang et al. (eq. 5-8), its loss (eq. 9, Lemma 5), and the pre-LN transformer used for
the paper's 4-layer runs."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclgd import exact, metrics, models, tasks, training
from iclgd.models import softmax as S
from iclgd.models import transformer as T

K, D, M, N, TAU, H = 10, 4, 5, 3, 0.1, 4


def _rng_spec(seed, K, d, m, N, tau):
    """A spec from NumPy randomness (cheap: no extra threefry compilation)."""
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((K, d))
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    return tasks.make_representation_spec(
        None, K=K, d=d, m=m, N=N, tau=tau, tokens=t, features=rng.standard_normal((K, m))
    )


def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype=jnp.float32)


@pytest.fixture(scope="module")
def spec():
    return tasks.make_representation_spec(jax.random.PRNGKey(0), K=K, d=D, m=M, N=N, tau=TAU)


@pytest.fixture(scope="module")
def params():
    return {"Q": _normal(1, (H, D, D)), "w": _normal(2, (H, K))}


@pytest.fixture(scope="module")
def big_batch(spec):
    return tasks.sample_representation_tasks(jax.random.PRNGKey(9), spec, 100_000)


@pytest.fixture(scope="module")
def batch(big_batch):
    return jax.tree_util.tree_map(lambda a: a[:6], big_batch)


def _softmax_np(x):
    e = np.exp(x - x.max())
    return e / e.sum()


# ---------------------------------------------------------------- one-layer model, eq. 5-8


def test_init_follows_paper():
    p = S.init_softmax(jax.random.PRNGKey(0), d=20, K=30, H=16, beta=1.0)
    assert p["Q"].shape == (16, 20, 20) and p["w"].shape == (16, 30)
    np.testing.assert_array_equal(p["w"], 0.0)  # w^(0) = 0 (Thm. 1)
    np.testing.assert_allclose(np.std(p["Q"]), 1.0, atol=0.05)  # Q_h(i,j) ~ N(0, 1) (Sec. 4)
    np.testing.assert_allclose(np.mean(p["Q"]), 0.0, atol=0.05)


def test_shapes_and_scores(spec, params, batch):
    s = S.attention_scores(params, spec)
    assert s.shape == (H, N, K)
    np.testing.assert_allclose(s.sum(axis=1), 1.0, atol=1e-6)
    assert S.attention_matrix(params, spec).shape == (N, K)
    assert S.softmax_predict(params, spec, batch.y).shape == (6, K)
    assert S.softmax_attention_map(params, batch.E, N).shape == (6, K, K)


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


# ---------------------------------------------------------------- loss (eq. 9, 74-77, Lemma 5)


@pytest.mark.parametrize("lam_mean,lam_std", [(0.0, 1.0), (1.0, 2.0)])
def test_population_loss_matches_monte_carlo(spec, params, big_batch, lam_mean, lam_std):
    s = spec._replace(lam_mean=jnp.full((M,), lam_mean), lam_std=jnp.asarray(lam_std))
    exact_val = float(exact.softmax_risk(params, s))
    big = (
        big_batch
        if (lam_mean, lam_std) == (0.0, 1.0)
        else tasks.sample_representation_tasks(jax.random.PRNGKey(9), s, 100_000)
    )
    mc = float(training.softmax_loss(params, s, big))
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


def test_training_drives_A_hat_to_A():
    """Thm. 1-2 in miniature: GD on the population loss -> L*, A_hat(theta)
    -> A, y_hat -> y_star."""
    s = _rng_spec(6, K=6, d=3, m=3, N=2, tau=0.1)
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
    s2 = _rng_spec(11, K=K, d=D, m=M, N=N, tau=0.3)  # same shapes, another task
    before = training.trace_count()
    runs = [
        training.train(free, params, jax.random.PRNGKey(1), steps=2, args=(s,)) for s in (spec, s2)
    ]
    assert training.trace_count() - before == 1
    for run, s in zip(runs, (spec, s2)):
        assert run.losses[0] == pytest.approx(float(exact.softmax_risk(params, s)), rel=1e-6)


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


# ---------------------------------------------------------------- pre-LN transformer


@pytest.fixture(scope="module")
def tparams():
    return T.init_transformer(jax.random.PRNGKey(10), d_in=D + 1, d_model=16, H=4, d_ff=32, L=2)


def test_transformer_shapes(tparams, batch):
    x = jnp.swapaxes(batch.E, 1, 2)  # (B, K, d+1)
    assert T.transformer_predict(tparams, x).shape == (6, K)
    assert tparams["layers"]["Wq"].shape == (2, 16, 4, 4)
    p = T.init_transformer(
        jax.random.PRNGKey(0), D + 1, 16, 4, 32, 3, seq_len=K, pos_encoding="learned"
    )
    assert p["pos"].shape == (K, 16) and T.transformer_predict(p, x).shape == (6, K)


def test_layer_norm_standardises():
    x = 3.0 + 5.0 * _normal(0, (4, 7, 32))
    out = T.layer_norm(x, jnp.ones(32), jnp.zeros(32))
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.var(-1), 1.0, atol=1e-3)
    out2 = T.layer_norm(x, 2.0 * jnp.ones(32), jnp.ones(32))
    np.testing.assert_allclose(out2, 2.0 * out + 1.0, atol=1e-5)


def test_transformer_jit_equals_eager(tparams, batch):
    x = jnp.swapaxes(batch.E, 1, 2)
    eager = T.transformer_predict(tparams, x)
    jitted = jax.jit(T.transformer_predict, static_argnames=("causal", "n_keys"))(tparams, x)
    np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-5)


def test_transformer_masks(tparams):
    x = _normal(11, (6, K, D + 1))  # same shape as the embedded batch: shares compilations
    j = 5
    x2 = x.at[:, j].add(1.0)
    # causal: positions before j cannot see position j
    a, b = (
        T.transformer_predict(tparams, x, causal=True),
        T.transformer_predict(tparams, x2, causal=True),
    )
    np.testing.assert_allclose(a[:, :j], b[:, :j], atol=1e-6)
    assert not np.allclose(a[:, j:], b[:, j:])
    # n_keys = 3 (keys = prompt only, as in eq. 5): changing a non-key
    # position j only changes output j
    a, b = T.transformer_predict(tparams, x, n_keys=3), T.transformer_predict(tparams, x2, n_keys=3)
    others = [t for t in range(K) if t != j]
    np.testing.assert_allclose(a[:, others], b[:, others], atol=1e-6)
    assert not np.allclose(a[:, j], b[:, j])
    # no mask: every output depends on position j
    a, b = T.transformer_predict(tparams, x), T.transformer_predict(tparams, x2)
    assert np.all(np.abs(np.asarray(a - b)) > 0)


def test_transformer_permutation_equivariant_without_positions(tparams):
    x = _normal(12, (6, K, D + 1))
    perm = np.random.default_rng(0).permutation(K)
    np.testing.assert_allclose(
        T.transformer_predict(tparams, x[:, perm]),
        T.transformer_predict(tparams, x)[:, perm],
        atol=1e-5,
    )


def test_transformer_gradients_flow(tparams, spec, batch):
    def loss(p):
        return metrics.empirical_loss(
            T.transformer_predict(p, jnp.swapaxes(batch.E, 1, 2)), batch.y_all
        )

    g = jax.grad(loss)(tparams)
    for path, leaf in jax.tree_util.tree_leaves_with_path(g):
        assert np.all(np.isfinite(leaf)), path
        assert np.any(leaf != 0), path


# ---------------------------------------------------------------- bad input


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


def test_bad_transformer_config_and_inputs(tparams):
    with pytest.raises(ValueError, match="d_model must be divisible by H"):
        T.init_transformer(jax.random.PRNGKey(0), 3, d_model=10, H=4)
    with pytest.raises(ValueError, match="seq_len must be given"):
        T.init_transformer(jax.random.PRNGKey(0), 3, 16, 4, 32, 1, pos_encoding="learned")
    with pytest.raises(ValueError, match="pos_encoding must be 'none' or 'learned'"):
        T.init_transformer(jax.random.PRNGKey(0), 3, 16, 4, 32, 1, pos_encoding="sinusoid")
    with pytest.raises(ValueError, match=r"inputs must have shape \(B, T, 5\)"):
        T.transformer_predict(tparams, jnp.zeros((2, 8, 4)))
    with pytest.raises(ValueError, match="n_keys must satisfy"):
        T.transformer_predict(tparams, jnp.zeros((2, 8, 5)), n_keys=9)
    with pytest.raises(ValueError, match="params must be the nested dict"):
        T.transformer_predict({"embed": {}}, jnp.zeros((2, 8, 5)))
