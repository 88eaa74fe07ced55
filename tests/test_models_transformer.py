"""Tests of iclgd.models.transformer: the pre-LN transformer of Yang et al. Sec. 4."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclgd import metrics
from iclgd.models import transformer as T

K, D, M, N, TAU, H = 10, 4, 5, 3, 0.1, 4


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


def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype=jnp.float32)


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
