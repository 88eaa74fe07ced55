"""Tests of iclgd.config: the scale knob ICLGD_SCALE, read in one place, and full-float32 matrix
products."""

import jax
import numpy as np

import iclgd
from iclgd import config


# ---------------------------------------------------------------- config
def test_scale_default_and_pick(monkeypatch):
    monkeypatch.delenv("ICLGD_SCALE", raising=False)
    assert config.scale() == "ci"
    assert config.pick(ci=1, paper=2) == 1
    monkeypatch.setenv("ICLGD_SCALE", "paper")
    assert config.scale() == "paper"
    assert config.pick(ci=1, paper=2) == 2


def test_importing_iclgd_asks_for_full_float32_matmuls(monkeypatch):
    # importing iclgd set it (no TensorFloat-32 on a GPU): a float32 product agrees with float64
    assert jax.config.jax_default_matmul_precision == "highest"
    x = jax.random.normal(jax.random.key(0), (64, 64))
    exact64 = np.asarray(x, np.float64) @ np.asarray(x, np.float64)
    assert np.max(np.abs(np.asarray(x @ x) - exact64)) < 1e-4
    # a user's choice is kept: the environment variable, or a value set before the call
    monkeypatch.setenv(config.PRECISION_ENV_VAR, "tensorfloat32")
    assert config.full_float32_matmuls() is False
    monkeypatch.delenv(config.PRECISION_ENV_VAR)
    with jax.default_matmul_precision("bfloat16"):
        assert config.full_float32_matmuls() is False
        assert jax.config.jax_default_matmul_precision == "bfloat16"
    assert jax.config.jax_default_matmul_precision == "highest"
    jax.config.update("jax_default_matmul_precision", None)
    try:
        assert config.full_float32_matmuls() is True
    finally:
        jax.config.update("jax_default_matmul_precision", "highest")
    assert jax.config.jax_default_matmul_precision == "highest"


def test_scale_is_read_in_one_place():
    import pathlib

    src = pathlib.Path(iclgd.__file__).parent
    readers = [
        p.name
        for p in src.glob("*.py")
        if "ICLGD_SCALE" in p.read_text() and "environ" in p.read_text()
    ]
    assert readers == ["config.py"]
