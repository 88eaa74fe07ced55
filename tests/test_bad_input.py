"""Bad input to iclgd raises an error naming the argument and what was expected -- never a NaN.

One table per category: NaN/Inf, dtypes, PRNG keys, containers, degenerate sizes, near-singular
matrices. Each case is ``(id, call, exception type, regex of the message)`` and asserts the raise
with ``pytest.raises``, so that no case can pass on a silent NaN. A wrong *type* raises
``iclgd.checks.ArgumentTypeError`` (a ``TypeError``, also a ``ValueError``); a wrong *value*
raises ``ValueError``. The edge cases at the end must work.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

import iclgd
from iclgd import baselines, book, config, exact, metrics, tasks
from iclgd import checks as v
from iclgd import training as train
from iclgd.exact import wishart
from iclgd.models import linear_transformer as lt
from iclgd.models import lsa, softmax, transformer
from iclgd.symbolic import calculus, gaussian, gd_step
from iclgd.symbolic import pgd as SPG
from iclgd.training import lsa_sweep

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

TABLES = {
    "nan_inf": NAN_INF,
    "dtype": DTYPES,
    "key": KEYS,
    "container": CONTAINERS,
    "size": SIZES,
    "singular": SINGULAR,
    "issue28": ISSUE28,
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
