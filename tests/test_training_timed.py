"""Tests of iclgd.training.timed (timed_train and its run store, ICLGD_RUN_CACHE)."""

import re

import jax
import numpy as np
import optax
import pytest

from iclgd import config, tasks
from iclgd import training as train
from iclgd.models import lsa

PRIOR = tasks.make_prior(2)
LOSS = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), PRIOR, 4, 32)
INIT = lsa.init_lsa(jax.random.key(0), 2, 1, 0.3)
METRICS = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), PRIOR, 4, 8)
OPTS = dict(learning_rate=1e-2, record_every=5, chunk=5, progress=False)


def _metrics(params):
    """A dict of metrics, as Part II's inference metrics."""
    return {"held_out": METRICS(params, jax.random.key(9))}


def _no_training(*a, **k):
    raise AssertionError("trained")


def _run(**kw):
    args = dict(steps=20, warmup=5, metrics=_metrics, **OPTS)
    args.update(kw)
    return train.timed_train(LOSS, INIT, jax.random.key(1), **args)


def test_timed_train_is_train_plus_a_rate(monkeypatch):
    monkeypatch.delenv("ICLGD_RUN_CACHE", raising=False)
    res, rate = _run()
    ref = train.train(LOSS, INIT, jax.random.key(1), steps=20, metrics=_metrics, **OPTS)
    np.testing.assert_array_equal(res.losses, ref.losses)
    np.testing.assert_array_equal(res.history.metrics["held_out"], ref.history.metrics["held_out"])
    assert res.message == "completed 20 steps" and rate > 0


def test_store_without_the_variable_writes_nothing(monkeypatch, tmp_path):
    monkeypatch.delenv("ICLGD_RUN_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    _run(store="H1")
    assert not list(tmp_path.rglob("*"))


def test_a_stored_run_is_loaded_not_trained_again(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path / "cache"))
    first, rate = _run(store="H1")
    saved = list((tmp_path / "cache").glob("H1-*.npz"))
    assert len(saved) == 1 and not list((tmp_path / "cache").glob("*.tmp"))

    monkeypatch.setattr("iclgd.training.timed.train", _no_training)
    again, rate2 = _run(store="H1")
    np.testing.assert_array_equal(again.losses, first.losses)
    np.testing.assert_array_equal(again.history.steps, first.history.steps)
    np.testing.assert_array_equal(
        again.history.metrics["held_out"], first.history.metrics["held_out"]
    )
    assert rate2 == rate and again.diverged is False and again.stopped_at is None
    assert again.params is None and again.history.params is None
    assert re.fullmatch(
        r"completed 20 steps \(loaded from ICLGD_RUN_CACHE: trained on cpu, 20\d\d-\d\d-\d\d\)",
        again.message,
    ), again.message


@pytest.mark.parametrize(
    "change",
    [
        dict(steps=25),
        dict(warmup=10, chunk=10, record_every=10),
        dict(learning_rate=2e-2),
        dict(store="H2"),
    ],
    ids=["steps", "warmup", "learning_rate", "name"],
)
def test_another_setting_trains_again(monkeypatch, tmp_path, change):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    _run(store="H1")
    res, _ = _run(**{"store": "H1", **change})
    assert "loaded" not in res.message and res.params is not None
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_other_params_key_or_precision_train_again(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    _run(store="H1")
    other = lsa.init_lsa(jax.random.key(5), 2, 1, 0.3)
    res, _ = train.timed_train(
        LOSS, other, jax.random.key(1), steps=20, warmup=5, store="H1", **OPTS
    )
    assert "loaded" not in res.message
    res, _ = train.timed_train(
        LOSS, INIT, jax.random.key(2), steps=20, warmup=5, store="H1", **OPTS
    )
    assert "loaded" not in res.message
    with jax.default_matmul_precision("tensorfloat32"):
        res, _ = _run(store="H1")
    assert "loaded" not in res.message
    assert len(list(tmp_path.glob("*.npz"))) == 4


def test_run_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("ICLGD_RUN_CACHE", raising=False)
    assert config.run_cache_dir() is None
    monkeypatch.setenv("ICLGD_RUN_CACHE", "  ")
    assert config.run_cache_dir() is None
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path / "new"))
    assert config.run_cache_dir() == tmp_path / "new"
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path / "file"))
    with pytest.raises(ValueError, match="ICLGD_RUN_CACHE must name a folder"):
        config.run_cache_dir()


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(warmup=0), "warmup"),
        (dict(warmup=30), "warmup must be at most steps"),
        (dict(steps=0), "steps"),
        (dict(store="a/b"), "store must be a name"),
        (dict(store="../x"), "store must be a name"),
        (dict(store=""), "store must be a name"),
    ],
)
def test_bad_input(monkeypatch, tmp_path, kw, match):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match=match):
        _run(**kw)


def test_store_refuses_aux_and_non_dict_metrics(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="has_aux"):
        _run(store="H1", has_aux=True)
    monkeypatch.setattr("iclgd.training.timed.train", _no_training)
    with pytest.raises(ValueError, match="dict of arrays"):  # before any training
        _run(store="H1", metrics=lambda p: METRICS(p, jax.random.key(9)))
    assert not list(tmp_path.rglob("*"))


def test_a_changed_closure_or_test_set_trains_again(monkeypatch, tmp_path):
    """What a chapter closes over (a batch size, a test set) is in the traced loss and metrics."""
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    _run(store="H1")
    loss16 = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), PRIOR, 4, 16)
    res, _ = train.timed_train(
        loss16, INIT, jax.random.key(1), steps=20, warmup=5, metrics=_metrics, store="H1", **OPTS
    )
    assert "loaded" not in res.message
    other_set = train.sampled_loss(lambda p, t: lsa.lsa_predict(p, tasks.embed(t)), PRIOR, 4, 8)
    res, _ = _run(store="H1", metrics=lambda p: {"held_out": other_set(p, jax.random.key(8))})
    assert "loaded" not in res.message
    res, _ = _run(store="H1")  # the first run again: loaded
    assert "loaded" in res.message
    assert len(list(tmp_path.glob("*.npz"))) == 3


def test_store_refuses_an_optax_object(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="optimizer by name"):
        _run(store="H1", optimizer=optax.adam(1e-2))
    res, _ = _run(optimizer=optax.adam(1e-2))  # without store: any optimiser
    assert not res.diverged


class _Cut(Exception):
    """The deadline's interrupt, simulated."""


def _cut_after(monkeypatch, chunks: int):
    """Make the stored run checkpoint after every chunk and stop after ``chunks`` of them."""
    from iclgd.training import timed

    monkeypatch.setattr(timed, "_CHECKPOINT_S", 0.0)
    real, seen = timed._save_partial, []

    def save_then_cut(*args):
        real(*args)
        seen.append(args[2])
        if len(seen) == chunks:
            raise _Cut

    monkeypatch.setattr(timed, "_save_partial", save_then_cut)
    return seen


def test_a_cut_run_resumes_from_its_checkpoint_with_the_same_steps(monkeypatch, tmp_path):
    monkeypatch.delenv("ICLGD_RUN_CACHE", raising=False)
    ref, _ = _run()
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    seen = _cut_after(monkeypatch, 2)
    with pytest.raises(_Cut):
        _run(store="H1")
    assert seen == [5, 10]
    assert len(list(tmp_path.glob("H1-*.partial.npz"))) == 1 and not list(tmp_path.glob("*.tmp"))

    seen = _cut_after(monkeypatch, 99)  # the resumed run checkpoints at 15 only, then finishes
    res, rate = _run(store="H1")
    assert seen == [15] and rate > 0
    np.testing.assert_array_equal(res.losses, ref.losses)  # steps 0-9 saved, 10-19 resumed
    np.testing.assert_array_equal(res.history.steps, ref.history.steps)
    np.testing.assert_array_equal(res.history.metrics["held_out"], ref.history.metrics["held_out"])
    for a, b in zip(jax.tree_util.tree_leaves(res.params), jax.tree_util.tree_leaves(ref.params)):
        np.testing.assert_array_equal(a, b)  # Adam's state came back too, not a fresh one
    assert res.history.params is None
    assert res.message == "completed 20 steps (resumed from a checkpoint at step 10)"
    assert not list(tmp_path.glob("*.partial.npz"))  # the finished run replaces its checkpoint
    monkeypatch.setattr("iclgd.training.timed.train", _no_training)
    again, _ = _run(store="H1")
    np.testing.assert_array_equal(again.losses, ref.losses)
    assert "(resumed from a checkpoint at step 10) (loaded from ICLGD_RUN_CACHE" in again.message


def test_a_run_cut_twice_names_both_checkpoints(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    _cut_after(monkeypatch, 1)
    with pytest.raises(_Cut):
        _run(store="H1")
    _cut_after(monkeypatch, 1)
    with pytest.raises(_Cut):
        _run(store="H1")
    monkeypatch.setattr("iclgd.training.timed._CHECKPOINT_S", 1e9)
    res, _ = _run(store="H1")
    monkeypatch.delenv("ICLGD_RUN_CACHE")
    ref, _ = _run()
    np.testing.assert_array_equal(res.losses, ref.losses)
    assert res.message == "completed 20 steps (resumed from checkpoints at steps 5, 10)"


def test_a_checkpoint_from_another_device_is_not_resumed(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLGD_RUN_CACHE", str(tmp_path))
    _cut_after(monkeypatch, 1)
    with pytest.raises(_Cut):
        _run(store="H1")
    monkeypatch.setattr("iclgd.training.timed._CHECKPOINT_S", 1e9)
    monkeypatch.setattr("iclgd.training.timed._device", lambda: "another GPU")
    with pytest.warns(UserWarning, match="not on another GPU: the run starts again"):
        res, _ = _run(store="H1")
    assert res.message == "completed 20 steps"


def test_a_checkpoint_of_other_shapes_is_refused():
    import functools

    from iclgd.training.timed import _restore

    def resume(*saved):
        return functools.partial(_restore, saved)

    with pytest.raises(ValueError, match="not a chunk boundary"):
        train.train(
            LOSS, INIT, jax.random.key(1), steps=20, chunk=5, _resume=resume(7, [], [], 0, [])
        )
    leaves = jax.tree_util.tree_leaves(INIT)
    with pytest.raises(ValueError, match="does not match this run's shapes"):
        train.train(
            LOSS,
            INIT,
            jax.random.key(1),
            steps=20,
            chunk=5,
            _resume=resume(5, leaves[:1], [], 0, []),
        )
