"""Bad input to iclgd raises ValueError naming the argument and what was expected."""

import jax
import jax.numpy as jnp
import pytest

import iclgd
from iclgd import baselines, config, tasks
from iclgd import training as train
from iclgd.models import lsa

KEY = jax.random.key(0)
PRIOR = tasks.make_prior(3)
TB = tasks.sample_tasks(KEY, PRIOR, 4, 2)
P = lsa.init_lsa(KEY, 3, 2)


def _bad_params():
    p = dict(P)
    p["WV"] = jnp.zeros((2, 3, 3))
    return p


CASES = [
    # (description, callable, regex the message must match)
    ("d = 0", lambda: tasks.make_prior(0), r"d must be an integer >= 1"),
    ("d not an int", lambda: tasks.make_prior(2.5), r"d must be an integer"),
    ("mu wrong length", lambda: tasks.make_prior(3, mu=jnp.ones(2)), r"mu must have shape \(3,\)"),
    (
        "mu with NaN",
        lambda: tasks.make_prior(2, mu=jnp.array([0.0, jnp.nan])),
        r"mu must contain only finite",
    ),
    (
        "Sigma not square",
        lambda: tasks.make_prior(2, Sigma=jnp.ones((2, 3))),
        r"Sigma must be a square matrix of shape \(2, 2\)",
    ),
    (
        "Sigma wrong size",
        lambda: tasks.make_prior(2, Sigma=jnp.eye(3)),
        r"Sigma must be a square matrix of shape \(2, 2\)",
    ),
    (
        "Sigma not PD",
        lambda: tasks.make_prior(2, Sigma=jnp.array([[1.0, 2.0], [2.0, 1.0]])),
        r"Sigma must be positive definite",
    ),
    (
        "Sigma not symmetric",
        lambda: tasks.make_prior(2, Sigma=jnp.array([[1.0, 0.5], [0.0, 1.0]])),
        r"Sigma must be symmetric",
    ),
    (
        "Omega not PSD",
        lambda: tasks.make_prior(2, Omega=-jnp.eye(2)),
        r"Omega must be positive semi-definite",
    ),
    (
        "negative noise",
        lambda: tasks.make_prior(2, noise_std=-0.1),
        r"noise_std must be a finite number >= 0",
    ),
    ("C < 1", lambda: tasks.sample_tasks(KEY, PRIOR, 0, 5), r"C must be an integer >= 1"),
    ("batch < 1", lambda: tasks.sample_tasks(KEY, PRIOR, 3, 0), r"batch must be an integer >= 1"),
    (
        "prior not a Prior",
        lambda: tasks.sample_tasks(KEY, {"mu": 0}, 3, 2),
        r"prior must be an iclgd.tasks.Prior",
    ),
    ("y_q wrong shape", lambda: tasks.embed(TB, jnp.zeros(5)), r"y_q must have shape \(2,\)"),
    (
        "guess wrong shape",
        lambda: tasks.linear_guess(TB.x_q, jnp.ones(4)),
        r"guess must have shape \(3,\)",
    ),
    ("H < 1", lambda: lsa.init_lsa(KEY, 3, 0), r"H must be an integer >= 1"),
    (
        "negative init_std",
        lambda: lsa.init_lsa(KEY, 3, 1, -1.0),
        r"init_std must be a finite number >= 0",
    ),
    (
        "params for other d",
        lambda: lsa.lsa_predict(lsa.init_lsa(KEY, 2, 1), tasks.embed(TB)),
        r"params\['WK'\] must have shape \(H, 4, 4\)",
    ),
    (
        "params inconsistent heads",
        lambda: lsa.lsa_predict(_bad_params(), tasks.embed(TB)),
        r"params\['WV'\] must have shape \(2, 4, 4\)",
    ),
    (
        "params missing key",
        lambda: lsa.lsa_predict({"WK": 1}, tasks.embed(TB)),
        r"params must be a dict with keys",
    ),
    (
        "E not 3-D",
        lambda: lsa.lsa_predict(P, jnp.zeros((4, 5))),
        r"E must have shape \(B, d\+1, C\+1\)",
    ),
    (
        "E without context",
        lambda: lsa.lsa_predict(P, jnp.zeros((2, 4, 1))),
        r"E must have shape \(B, d\+1, C\+1\) with d >= 1 and C >= 1",
    ),
    (
        "gd_weights w0 not a vector",
        lambda: lsa.gd_weights(jnp.ones((2, 2)), 0.1),
        r"w0 must have shape \(d,\)",
    ),
    (
        "gd_weights eta NaN",
        lambda: lsa.gd_weights(jnp.ones(2), float("nan")),
        r"eta must be a finite number",
    ),
    (
        "yq-LSA w wrong shape",
        lambda: lsa.yq_lsa_predict({"attn": lsa.init_lsa(KEY, 3), "w": jnp.ones(2)}, TB),
        r"params\['w'\] must have shape \(3,\)",
    ),
    (
        "mse shape mismatch",
        lambda: iclgd.mse(jnp.zeros(3), jnp.zeros(4)),
        r"pred and target must have the same shape",
    ),
    (
        "gd_one_step X 2-D",
        lambda: baselines.gd_one_step(TB.X[0], TB.y, TB.x_q, jnp.zeros(3), 0.1),
        r"X must have shape \(B, C, d\)",
    ),
    (
        "gd_one_step y mismatched",
        lambda: baselines.gd_one_step(TB.X, TB.y[:, :2], TB.x_q, jnp.zeros(3), 0.1),
        r"y must have shape \(2, 4\)",
    ),
    (
        "gd_one_step w0 mismatched",
        lambda: baselines.gd_one_step(TB.X, TB.y, TB.x_q, jnp.zeros(2), 0.1),
        r"w0 must have shape \(3,\) or \(2, 3\)",
    ),
    (
        "ridge reg < 0",
        lambda: baselines.ridge(TB.X, TB.y, TB.x_q, -1.0),
        r"reg must be a finite number >= 0",
    ),
    (
        "bayes prior of other d",
        lambda: baselines.bayes_posterior_mean(TB, tasks.make_prior(2)),
        r"prior must have dimension d = 3",
    ),
    ("unknown optimizer", lambda: train.make_optimizer("rmsprop"), r"optimizer must be one of"),
    ("learning rate 0", lambda: train.make_optimizer("adam", 0.0), r"learning_rate must be > 0"),
    (
        "steps 0",
        lambda: train.train(lambda p, k: 0.0, P, KEY, steps=0),
        r"steps must be an integer >= 1",
    ),
    (
        "evaluate n_batches 1",
        lambda: train.evaluate(lambda p, k: 0.0, P, KEY, 1),
        r"n_batches must be an integer >= 2",
    ),
    (
        "sampled_loss C 0",
        lambda: train.sampled_loss(lambda p, t: t.y_target, PRIOR, 0, 4),
        r"C must be an integer >= 1",
    ),
]


@pytest.mark.parametrize("desc,call,match", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_value_error(desc, call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_unknown_scale_name(monkeypatch):
    monkeypatch.setenv("ICLGD_SCALE", "huge")
    with pytest.raises(ValueError, match=r"ICLGD_SCALE must be one of \('ci', 'paper'\)"):
        config.pick(ci=1, paper=2)


def test_at_least_twenty_bad_input_cases():
    assert len(CASES) >= 20
