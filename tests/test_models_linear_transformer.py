"""Tests of iclgd.models.linear_transformer (Part III, Ahn et al. 2023)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _data import regression_tasks

from iclgd import baselines
from iclgd.models import linear_transformer as lt
from iclgd.tasks import embed, embed_zero_query

RTOL = 1e-10


def _rand_A(seed: int, L: int, d: int, symmetric: bool, scale: float = 0.4) -> jax.Array:
    G = scale * np.random.default_rng(100 + seed).normal(size=(L, d, d))
    return jnp.asarray((G + np.swapaxes(G, 1, 2)) / 2 if symmetric else G)


def _close(a, b, rtol: float = RTOL) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == np.float64 and b.dtype == np.float64
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_lemma2_sparse_transformer_is_preconditioned_gd(k):
    t = regression_tasks(k)
    A = _rand_A(k, k, t.X.shape[-1], symmetric=True)
    Z0 = embed_zero_query(t)
    pred_tf = lt.sparse_predict({"A": A}, Z0)
    pred_gd = baselines.preconditioned_gd(t.X, t.y, t.x_q, A)
    _close(pred_tf, pred_gd)
    assert float(jnp.abs(pred_gd).max()) > 1e-2  # not a trivial 0 == 0


def test_lemma2_after_every_layer():
    """Lemma 2: after layer l, [Z_l]_{d+1,n+1} = -<w_l, x^(n+1)> for every l = 0..k."""
    t = regression_tasks(4)
    A = _rand_A(4, 3, t.X.shape[-1], symmetric=True)
    Z0 = embed_zero_query(t)
    ws = baselines.preconditioned_gd_iterates(t.X, t.y, A)
    assert ws.shape == (4,) + t.x_q.shape
    np.testing.assert_array_equal(np.asarray(ws[0]), 0.0)
    for l in range(1, 4):
        Zl = lt.linear_transformer_output(lt.sparse_to_full({"A": A[:l]}), Z0)
        _close(Zl[:, -1, -1], -jnp.einsum("bi,bi->b", ws[l], t.x_q))


@pytest.mark.parametrize("k", [1, 3])
def test_lemma2_nonsymmetric_A_takes_the_transposed_step(k):
    """Attention score x^(j)T A x^(n+1): a non-symmetric A_l acts as A_l^T in eq. 11."""
    t = regression_tasks(10 + k)
    A = _rand_A(10 + k, k, t.X.shape[-1], symmetric=False)
    pred_tf = lt.sparse_predict({"A": A}, embed_zero_query(t))
    _close(pred_tf, baselines.preconditioned_gd(t.X, t.y, t.x_q, jnp.swapaxes(A, 1, 2)))
    assert float(jnp.abs(pred_tf - baselines.preconditioned_gd(t.X, t.y, t.x_q, A)).max()) > 1e-3


@pytest.mark.parametrize("k", [1, 2, 3])
def test_full_model_at_eq9_equals_sparse_predict(k):
    t = regression_tasks(20 + k)
    sp = {"A": _rand_A(20 + k, k, t.X.shape[-1], symmetric=True)}
    full = lt.sparse_to_full(sp)
    d = t.X.shape[-1]
    assert full["P"].shape == full["Q"].shape == (k, d + 1, d + 1)
    np.testing.assert_array_equal(np.asarray(full["P"][:, -1, -1]), 1.0)
    np.testing.assert_array_equal(np.asarray(full["P"][:, :d, :]), 0.0)
    Z0 = embed_zero_query(t)
    _close(lt.linear_transformer_predict(full, Z0), lt.sparse_predict(sp, Z0))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_gd_plus_plus_transformer_equals_algorithm(k):
    t = regression_tasks(30 + k)
    d = t.X.shape[-1]
    A = _rand_A(30 + k, k, d, symmetric=True)  # eq. 13 takes A_l symmetric
    Bm = jnp.asarray(0.5 * np.random.default_rng(200 + k).normal(size=(k, d, d)))  # B_l arbitrary
    sp = {"A": A, "B": Bm}
    Z0 = embed_zero_query(t)
    pred_sparse = lt.sparse_predict(sp, Z0)
    _close(pred_sparse, lt.linear_transformer_predict(lt.sparse_to_full(sp), Z0))
    _close(pred_sparse, baselines.gd_plus_plus(t.X, t.y, t.x_q, A, Bm))
    if k >= 2:  # B_0 matters from the second layer on: GD++ differs from plain PGD
        assert (
            float(jnp.abs(pred_sparse - baselines.preconditioned_gd(t.X, t.y, t.x_q, A)).max())
            > 1e-3
        )


def test_gd_plus_plus_with_B_zero_is_preconditioned_gd():
    t = regression_tasks(40)
    d = t.X.shape[-1]
    A = _rand_A(40, 3, d, symmetric=True)
    _close(
        baselines.gd_plus_plus(t.X, t.y, t.x_q, A, jnp.zeros_like(A)),
        baselines.preconditioned_gd(t.X, t.y, t.x_q, A),
    )


@pytest.mark.parametrize("L", [3])
def test_efficient_output_equals_literal(L):
    """The cheap forward equals eq. 4 with whole matrix products, on a
    general Z (nonzero y_q too)."""
    t = regression_tasks(50 + L)
    Z0 = embed(t, jnp.linspace(-1.0, 1.0, t.X.shape[0]))
    D = t.X.shape[-1] + 1
    PQ = 0.3 * np.random.default_rng(L).normal(size=(2, L, D, D))
    params = {"P": jnp.asarray(PQ[0]), "Q": jnp.asarray(PQ[1])}
    _close(
        lt.linear_transformer_output(params, Z0), lt.linear_transformer_output_literal(params, Z0)
    )
    _close(
        lt.linear_transformer_predict(params, Z0),
        -lt.linear_transformer_output_literal(params, Z0)[:, -1, -1],
    )


@pytest.mark.parametrize("B,d,n,L", [(1, 1, 1, 1), (6, 4, 9, 2), (2, 3, 20, 4)])
def test_output_shapes(B, d, n, L):
    t = regression_tasks(B + d + n + L, B=B, n=n, d=d)
    Z0 = embed_zero_query(t)
    full = lt.init_linear_transformer(jax.random.key(0), d, L)
    assert full["P"].shape == full["Q"].shape == (L, d + 1, d + 1)
    assert lt.linear_transformer_output(full, Z0).shape == (B, d + 1, n + 1)
    assert lt.linear_transformer_predict(full, Z0).shape == (B,)
    spB = lt.init_sparse(jax.random.key(1), d, L, with_B=True)
    assert set(spB) == {"A", "B"} and spB["A"].shape == spB["B"].shape == (L, d, d)
    sp = {"A": spB["A"]}
    assert lt.sparse_predict(sp, Z0).shape == (B,)
    assert lt.sparse_predict(spB, Z0).shape == (B,)
    assert baselines.preconditioned_gd(t.X, t.y, t.x_q, sp["A"]).shape == (B,)
    assert baselines.preconditioned_gd_iterates(t.X, t.y, sp["A"]).shape == (L + 1, B, d)
    assert baselines.gd_plus_plus(t.X, t.y, t.x_q, spB["A"], spB["B"]).shape == (B,)


def test_init_sparse_symmetry_and_scale():
    key = jax.random.key(3)
    d, L = 4, 2  # the shape of test_output_shapes[6-4-9-2]: no new compile
    A_sym = np.asarray(lt.init_sparse(key, d, L, init_std=0.5)["A"])
    A_gen = np.asarray(lt.init_sparse(key, d, L, init_std=0.5, symmetric=False)["A"])
    np.testing.assert_allclose(A_sym, np.swapaxes(A_sym, 1, 2))
    assert np.abs(A_gen - np.swapaxes(A_gen, 1, 2)).max() > 1e-3
    assert set(lt.init_sparse(key, d, L)) == {"A"}
    np.testing.assert_array_equal(np.asarray(lt.init_sparse(key, d, L, init_std=0.0)["A"]), 0.0)


def test_grad_through_full_model():
    t = regression_tasks(60)
    Z0 = embed_zero_query(t)
    full = lt.sparse_to_full(
        {"A": _rand_A(60, 2, t.X.shape[-1], True), "B": _rand_A(61, 2, t.X.shape[-1], False)}
    )

    def loss(p):
        return jnp.mean((lt.linear_transformer_predict(p, Z0) - t.y_target) ** 2)

    g = jax.jit(jax.grad(loss))(full)
    assert g["P"].shape == full["P"].shape and np.all(np.isfinite(np.asarray(g["Q"])))
    assert float(jnp.abs(g["Q"]).max()) > 0 and float(jnp.abs(g["P"]).max()) > 0


def _zeros_full(d: int, L: int) -> dict:
    return {"P": jnp.zeros((L, d + 1, d + 1)), "Q": jnp.zeros((L, d + 1, d + 1))}


def _small():
    t = regression_tasks(70, B=2, n=3, d=2)
    return t, embed_zero_query(t)


def test_bad_params_shape_vs_Z():
    _, Z0 = _small()  # d = 2
    params = _zeros_full(3, 2)
    with pytest.raises(ValueError, match=r"params\['P'\] must have shape \(L, 3, 3\) to match Z0"):
        lt.linear_transformer_predict(params, Z0)
    params = _zeros_full(2, 2)
    params["Q"] = params["Q"][:1]
    with pytest.raises(ValueError, match=r"params\['Q'\] must have shape \(2, 3, 3\)"):
        lt.linear_transformer_output_literal(params, Z0)
    with pytest.raises(ValueError, match=r"params\['A'\] must have shape \(L, 2, 2\) to match Z0"):
        lt.sparse_predict({"A": jnp.zeros((1, 3, 3))}, Z0)
    with pytest.raises(ValueError, match=r"params\['B'\] must have shape \(1, 2, 2\)"):
        lt.sparse_predict({"A": jnp.zeros((1, 2, 2)), "B": jnp.zeros((2, 2, 2))}, Z0)
    with pytest.raises(ValueError, match=r"params must be a dict \{'A'"):
        lt.sparse_predict({"A": jnp.zeros((1, 2, 2)), "C": jnp.zeros((1, 2, 2))}, Z0)
    with pytest.raises(ValueError, match=r"params must be a dict \{'P'"):
        lt.linear_transformer_predict({"P": jnp.zeros((1, 3, 3))}, Z0)


def test_bad_L():
    _, Z0 = _small()
    with pytest.raises(ValueError, match=r"L must be an integer >= 1"):
        lt.init_linear_transformer(jax.random.key(0), 2, 0)
    with pytest.raises(ValueError, match=r"L must be an integer >= 1"):
        lt.init_sparse(jax.random.key(0), 2, 1.5)
    with pytest.raises(
        ValueError, match=r"L must be an integer >= 1: params\['P'\] has shape \(0, 3, 3\)"
    ):
        lt.linear_transformer_predict({"P": jnp.zeros((0, 3, 3)), "Q": jnp.zeros((0, 3, 3))}, Z0)
    with pytest.raises(ValueError, match=r"L must be an integer >= 1: params\['A'\]"):
        lt.sparse_predict({"A": jnp.zeros((0, 2, 2))}, Z0)


def test_bad_Z_shape():
    t, Z0 = _small()
    params = _zeros_full(2, 1)
    with pytest.raises(
        ValueError, match=r"Z0 must have shape \(B, d\+1, n\+1\), got shape \(3, 4\)"
    ):
        lt.linear_transformer_predict(params, Z0[0])
    with pytest.raises(
        ValueError, match=r"Z0 must have shape \(B, d\+1, n\+1\) with d >= 1 and n >= 1"
    ):
        lt.sparse_predict({"A": jnp.zeros((1, 2, 2))}, Z0[:, :, -1:])


def test_non_finite_inputs():
    t, Z0 = _small()
    params = _zeros_full(2, 1)
    with pytest.raises(ValueError, match=r"Z0 must contain only finite values"):
        lt.linear_transformer_predict(params, Z0.at[0, 0, 0].set(jnp.nan))
    with pytest.raises(ValueError, match=r"params\['Q'\] must contain only finite values"):
        lt.linear_transformer_predict(
            {"P": params["P"], "Q": params["Q"].at[0, 0, 0].set(jnp.inf)}, Z0
        )
    with pytest.raises(ValueError, match=r"A_list must contain only finite values"):
        baselines.preconditioned_gd(t.X, t.y, t.x_q, jnp.full((1, 2, 2), jnp.nan))
    with pytest.raises(ValueError, match=r"y must contain only finite values"):
        baselines.preconditioned_gd(t.X, t.y.at[0, 0].set(jnp.inf), t.x_q, jnp.zeros((1, 2, 2)))


def test_bad_key_and_init_args():
    with pytest.raises(ValueError, match=r"key must be a single JAX PRNG key"):
        lt.init_linear_transformer(0, 2, 1)
    with pytest.raises(ValueError, match=r"key must be a single JAX PRNG key"):
        lt.init_sparse(jax.random.split(jax.random.key(0), 3), 2, 1)
    with pytest.raises(ValueError, match=r"key must be a single JAX PRNG key"):
        lt.init_sparse(jnp.zeros(2), 2, 1)  # float, not a uint32 raw key
    lt.init_sparse(jax.random.PRNGKey(0), 2, 1)  # raw uint32 keys are accepted
    with pytest.raises(ValueError, match=r"d must be an integer >= 1"):
        lt.init_linear_transformer(jax.random.key(0), 0, 1)
    with pytest.raises(ValueError, match=r"init_std must be a finite number >= 0"):
        lt.init_sparse(jax.random.key(0), 2, 1, init_std=-1.0)


def test_init_sparse_draws_one_normal_of_the_model_shape():
    """eq. 9: one ``(L, d, d)`` draw; eq. 13: one ``(2, L, d, d)`` draw (A from [0], B from [1])."""
    key, d, L = jax.random.key(5), 4, 2
    G = 0.5 * jax.random.normal(key, (L, d, d))
    np.testing.assert_array_equal(lt.init_sparse(key, d, L, 0.5, symmetric=False)["A"], G)
    np.testing.assert_array_equal(
        lt.init_sparse(key, d, L, 0.5)["A"], (G + jnp.swapaxes(G, 1, 2)) / 2
    )
    G2 = 0.5 * jax.random.normal(key, (2, L, d, d))
    both = lt.init_sparse(key, d, L, 0.5, with_B=True, symmetric=False)
    np.testing.assert_array_equal(both["A"], G2[0])
    np.testing.assert_array_equal(both["B"], G2[1])
    with pytest.raises(TypeError, match="with_B must be True or False"):
        lt.init_sparse(key, d, L, with_B="yes")
    with pytest.raises(TypeError, match="symmetric must be True or False"):
        lt.init_sparse(key, d, L, symmetric=None)


def test_symmetrize_effective_parameters():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(2, 3, 4, 4)), rng.normal(size=(2, 3, 4, 4))
    s = lt.symmetrize({"A": A})
    assert set(s) == {"A"}
    np.testing.assert_array_equal(s["A"], (A + np.swapaxes(A, -1, -2)) / 2)
    sB = lt.symmetrize({"A": A[0], "B": B[0]})
    np.testing.assert_array_equal(sB["B"], B[0])  # B unchanged
    np.testing.assert_array_equal(sB["A"], s["A"][0])  # leading axes (seeds, records) map
    np.testing.assert_array_equal(lt.symmetrize(s)["A"], s["A"])  # a projection
    g = jax.jit(lt.symmetrize)({"A": jnp.asarray(A)})["A"]
    np.testing.assert_allclose(g, s["A"])
    with pytest.raises(TypeError, match="params must be a dict"):
        lt.symmetrize({"P": A})
    with pytest.raises(ValueError, match=r"params\['A'\] must have shape"):
        lt.symmetrize({"A": A[0, 0]})  # (d, d): no layer axis
    with pytest.raises(ValueError, match=r"params\['A'\] must have shape"):
        lt.symmetrize({"A": np.zeros((2, 3, 4))})  # not square
    with pytest.raises(ValueError, match=r"params\['B'\] must have shape like params\['A'\]"):
        lt.symmetrize({"A": A, "B": B[0]})
    with pytest.raises(ValueError, match="L must be an integer >= 1"):
        lt.symmetrize({"A": np.zeros((0, 4, 4))})
    with pytest.raises(ValueError, match="NaN|finite"):
        lt.symmetrize({"A": np.full((1, 2, 2), np.nan)})


def _gdpp_case(seed: int, L: int, d: int = 4, n: int = 9):
    """Random eq. 13 parameters (non-symmetric A_l, B_l) and a general Z_0: y_q != 0."""
    t = regression_tasks(seed, n=n, d=d)
    Z0 = embed(t, jnp.linspace(-1.0, 1.0, t.X.shape[0]))
    sp = {"A": _rand_A(seed, L, d, symmetric=False), "B": _rand_A(seed + 1, L, d, False, 0.3)}
    return t, Z0, sp


@pytest.mark.parametrize("L,d", [(1, 4), (3, 4), (2, 9)])  # d = 9: the two-product sandwich
def test_gdpp_moment_recursion_equals_eq4_and_its_gradient(L, d):
    """sparse_predict's GD++ (moments, custom VJPs) against eq. 4 evaluated literally: values and
    gradients, on a general Z_0 and non-symmetric A_l."""
    t, Z0, sp = _gdpp_case(80 + L + d, L, d)

    def fast(p):
        return jnp.mean((lt.sparse_predict(p, Z0) - t.y_target) ** 2)

    def literal(p):
        out = lt.linear_transformer_output_literal(lt.sparse_to_full(p), Z0)
        return jnp.mean((-out[:, -1, -1] - t.y_target) ** 2)

    _close(
        lt.sparse_predict(sp, Z0),
        -lt.linear_transformer_output_literal(lt.sparse_to_full(sp), Z0)[:, -1, -1],
    )
    g_fast, g_lit = jax.grad(fast)(sp), jax.grad(literal)(sp)
    for k in ("A", "B") if L > 1 else ("A",):  # B_{L-1} never reaches the prediction
        assert float(jnp.abs(g_lit[k]).max()) > 1e-3
        _close(g_fast[k], g_lit[k])
    np.testing.assert_array_equal(np.asarray(g_fast["B"][-1]), 0.0)
    np.testing.assert_array_equal(np.asarray(g_lit["B"][-1]), 0.0)


def test_gdpp_moments_are_every_layer_of_eq4():
    """gdpp_moments: X_l = F_l X_0 and Y_l = Y_0 + c_l^T X_0 for every layer's Z_l of eq. 4."""
    L = 3
    t, Z0, sp = _gdpp_case(90, L)
    d = t.X.shape[-1]
    m = lt.gdpp_moments(sp, Z0)
    assert m["F"].shape == (L + 1,) + m["G"].shape and m["c"].shape == (L + 1,) + m["h"].shape
    X0, Y0 = Z0[:, :d, :], Z0[:, d, :]
    for l in range(1, L + 1):
        Zl = lt.linear_transformer_output_literal(
            lt.sparse_to_full({"A": sp["A"][:l], "B": sp["B"][:l]}), Z0
        )
        _close(jnp.einsum("bij,bjc->bic", m["F"][l], X0), Zl[:, :d, :])
        _close(Y0 + jnp.einsum("bi,bic->bc", m["c"][l], X0), Zl[:, d, :])
    with pytest.raises(ValueError, match="must hold 'B'"):
        lt.gdpp_moments({"A": sp["A"]}, Z0)


def test_gdpp_float32_stays_float32():
    t, Z0, sp = _gdpp_case(95, 2)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    out = lt.sparse_predict(jax.tree_util.tree_map(f32, sp), f32(Z0))
    assert out.dtype == jnp.float32
    ref = np.asarray(lt.sparse_predict(sp, Z0))
    np.testing.assert_allclose(np.asarray(out), ref, rtol=0, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("L", [1, 3])
def test_pgd_moments_equal_eq4_and_its_gradient(L):
    """Eq. 9 through the moments, from Z_0 and from prompt_moments: eq. 4 literally, with its
    gradient (a general Z_0, non-symmetric A_l)."""
    t, Z0, sp = _gdpp_case(100 + L, L)
    sp = {"A": sp["A"]}
    m = lt.prompt_moments(Z0, t.y_target)

    def literal(p):
        out = lt.linear_transformer_output_literal(lt.sparse_to_full(p), Z0)
        return jnp.mean((-out[:, -1, -1] - t.y_target) ** 2)

    g_lit = jax.grad(literal)(sp)["A"]
    assert float(jnp.abs(g_lit).max()) > 1e-3
    for x in (Z0, m):
        _close(
            jax.grad(lambda p: jnp.mean((lt.sparse_predict(p, x) - t.y_target) ** 2))(sp)["A"],
            g_lit,
        )
    _close(lt.sparse_predict(sp, m), lt.sparse_predict(sp, Z0))
