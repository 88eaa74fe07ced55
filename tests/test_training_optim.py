"""iclgd.training.optim: torch_lbfgs against a numpy transcription of torch.optim.LBFGS.step
without a line search (torch 2.x, torch/optim/lbfgs.py), iterate by iterate."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclgd import training


def _torch_lbfgs_iterates(grad, x, lr, history, iters):
    """torch's iterates, one per inner iteration (its early exits on small changes left out)."""
    xs, n_iter, state = [x.copy()], 0, {}
    for _ in range(iters):
        g = grad(x)
        n_iter += 1
        if n_iter == 1:
            d, dirs, stps, ro, h_diag = -g, [], [], [], 1.0
        else:
            d, t, dirs, stps, ro, h_diag = (state[k] for k in ("d", "t", "dirs", "stps", "ro", "h"))
            y, s = g - state["prev_g"], d * t
            ys = y @ s
            if ys > 1e-10:
                if len(dirs) == history:
                    dirs.pop(0), stps.pop(0), ro.pop(0)
                dirs.append(y), stps.append(s), ro.append(1.0 / ys)
                h_diag = ys / (y @ y)
            q, al = -g, [0.0] * len(dirs)
            for i in range(len(dirs) - 1, -1, -1):
                al[i] = (stps[i] @ q) * ro[i]
                q = q - al[i] * dirs[i]
            d = r = q * h_diag
            for i in range(len(dirs)):
                be = (dirs[i] @ r) * ro[i]
                r = r + stps[i] * (al[i] - be)
            d = r
        t = min(1.0, 1.0 / np.abs(g).sum()) * lr if n_iter == 1 else lr
        state.update(d=d, t=t, dirs=dirs, stps=stps, ro=ro, h=h_diag, prev_g=g)
        if g @ d > -1e-9:  # torch breaks: no step
            xs.append(x.copy())
            continue
        x = x + t * d
        xs.append(x.copy())
    return np.array(xs)


def _rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


@pytest.mark.parametrize("lr, history", [(0.1, 3), (1.0, 600)])
def test_torch_lbfgs_matches_torchs_algorithm(lr, history):
    x0 = np.array([-1.2, 1.0, -0.5, 0.8, 1.1, 0.3])
    grad = jax.jit(jax.grad(_rosenbrock))
    iters = 40
    ref = _torch_lbfgs_iterates(lambda x: np.asarray(grad(jnp.asarray(x))), x0, lr, history, iters)
    opt = training.torch_lbfgs(lr, history)
    params = {"a": jnp.asarray(x0[:2]), "b": jnp.asarray(x0[2:]).reshape(2, 2)}
    state = opt.init(params)
    flat = lambda p: np.concatenate([np.asarray(p["a"]), np.asarray(p["b"]).ravel()])
    got = [flat(params)]
    for _ in range(iters):
        g = jax.grad(lambda p: _rosenbrock(jnp.concatenate([p["a"], p["b"].ravel()])))(params)
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
        got.append(flat(params))
    got = np.array(got)
    assert np.abs(ref[-1] - ref[0]).max() > 0.1  # the iterates move
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-9)  # rounding, amplified
    assert int(state.stored) == min(history, iters - 1)


def test_torch_lbfgs_trains_through_the_trainer():
    """A least-squares fit by train() with the transformation: torch's fixed step converges."""
    X = jax.random.normal(jax.random.key(0), (50, 4))
    w = jnp.arange(1.0, 5.0)
    loss = lambda p, key: jnp.mean((X @ p["w"] - X @ w) ** 2)
    res = training.train(
        loss,
        {"w": jnp.zeros(4)},
        jax.random.key(1),
        steps=60,
        fixed_key=True,
        optimizer=training.torch_lbfgs(1.0, 10),
        progress=False,
    )
    assert float(jnp.abs(res.params["w"] - w).max()) < 1e-4


def test_value_and_grad_reuses_the_line_search():
    """optim._value_and_grad: without reuse jax.value_and_grad; with reuse the first step (state
    holding inf) evaluates, later steps take the line search's stored value and gradient, which
    are those at the accepted parameters; train's L-BFGS path follows optax's own loop."""
    from iclgd.training.optim import _value_and_grad

    target = jnp.array([1.0, -2.0, 0.5])

    def value(p, key):
        r = p["w"] - target
        return jnp.sum(r**2) + jnp.sum(r**4), None

    opt = optax.lbfgs()
    p = {"w": jnp.zeros(3)}
    state = opt.init(p)
    key = jax.random.key(0)
    (l0, aux), g0 = _value_and_grad(value, p, key, state, True)
    (l1, _), g1 = _value_and_grad(value, p, key, state, False)
    assert aux is None and float(l0) == float(l1) and np.array_equal(g0["w"], g1["w"])
    fn = lambda q: value(q, key)[0]  # noqa: E731
    losses = []
    for _ in range(5):
        (loss, _), g = _value_and_grad(value, p, key, state, True)
        (ref, _), g_ref = _value_and_grad(value, p, key, state, False)
        np.testing.assert_allclose(loss, ref, rtol=1e-6)
        np.testing.assert_allclose(g["w"], g_ref["w"], rtol=1e-5, atol=1e-6)
        losses.append(float(loss))
        updates, state = opt.update(g, state, p, value=loss, grad=g, value_fn=fn)
        p = optax.apply_updates(p, updates)
    assert losses[-1] < losses[0]
    res = training.train(
        lambda q, k: value(q, k)[0], {"w": jnp.zeros(3)}, key, steps=5, optimizer="lbfgs"
    )
    np.testing.assert_allclose(res.losses, losses, rtol=1e-6)
