"""The second numeric configuration (scripts/numeric_variant.sh), which `.ci/run` re-runs the
notebooks in: it must change the floating-point path (else it checks nothing), catch an output
printed at more digits than its computation guarantees, and pass one printed at the precision it
has. Also the §5.3 embeddings, which the variant run of the book leaves out (their chapter runs a
language model for minutes): the same in both configurations to float64 rounding."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "numeric_variant.sh"
CPUINFO = Path("/proc/cpuinfo")
FLAGS = CPUINFO.read_text().split("\nflags", 1)[-1].split("\n", 1)[0] if CPUINFO.exists() else ""
X86_AVX2 = " avx2 " in f" {FLAGS} "
needs_x86 = pytest.mark.skipif(not X86_AVX2, reason="the ISA cap needs an x86-64 CPU with AVX2")

# float32 products and reductions of the kinds the book's chapters use; their bits change with
# the kernels XLA and oneDNN pick for the CPU
SETUP = """
import hashlib, jax, jax.numpy as jnp, numpy as np
k = jax.random.key(0)
x = jax.random.normal(k, (64, 200, 60))
A = jax.random.normal(jax.random.fold_in(k, 1), (60, 60))
outs = [jnp.einsum("bnd,de,bme->bnm", x, A, x), jnp.einsum("bnd,bne->bde", x, x),
        jnp.linalg.solve(A @ A.T + jnp.eye(60), x[0].T), jnp.tanh(x @ A).sum(-1)]
"""
BITS = SETUP + 'print(hashlib.sha256(b"".join(np.asarray(o).tobytes() for o in outs)).hexdigest())'
# a mean of 200 squares of standard normals, 1.0442...: two digits hold on any CPU
STABLE = SETUP + 'print(f"{float(outs[1][0, 0, 0]) / 200:.2f}")'


def _run(code, variant):
    cmd = [sys.executable, "-c", code]
    if variant:
        cmd = ["bash", str(SCRIPT), *cmd]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


@needs_x86
def test_the_variant_changes_the_floating_point_path():
    assert _run(BITS, False) != _run(BITS, True)


def _notebook(tmp_path, name, source):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def _nbval_in_variant(path):
    cmd = ["bash", str(SCRIPT), sys.executable, "-m", "pytest", "--nbval", str(path), "-q"]
    cmd += ["-p", "no:cacheprovider", "-n", "0", "--rootdir", str(path.parent)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=path.parent)


@needs_x86
def test_the_variant_catches_an_unstable_output_and_passes_a_stable_one(tmp_path):
    unstable = _notebook(tmp_path, "unstable.ipynb", BITS)  # every bit printed
    stable = _notebook(tmp_path, "stable.ipynb", STABLE)
    assert "".join(json.loads(stable.read_text())["cells"][0]["outputs"][0]["text"]) == "1.04\n"
    bad = _nbval_in_variant(unstable)
    assert bad.returncode != 0 and "1 failed" in bad.stdout, bad.stdout[-1500:]
    good = _nbval_in_variant(stable)
    assert good.returncode == 0, good.stdout[-1500:]


@needs_x86
def test_embeddings_and_guesses_are_the_same_in_the_variant():
    pytest.importorskip("transformers")
    from iclgd.llm import assets

    try:
        assets.asset_path(assets.MINILM_DIR)
    except Exception as e:  # noqa: BLE001 - the assets are fetched by scripts/fetch_llm_assets.py
        pytest.skip(f"MiniLM not fetched: {e}")
    code = """
import jax, numpy as np
from iclgd import llm
s = ["A man is playing a guitar.", "A man plays the guitar.", "The stock market fell.",
     "Two dogs run on the beach.", "A dog runs in the sand.", "A woman slices an onion."] * 4
E = llm.embed_sentences(s, use_cache=False)
with jax.enable_x64(True):
    fit = llm.train_guess_model(jax.random.key(0), E[:12], E[12:], np.linspace(0, 5, 12), epochs=20)
    g = llm.guess_mlp(fit.params, E[:12], E[12:])
print(repr(np.r_[E.ravel()[:50], E.sum(), g].tolist()))
"""
    a = np.array(eval(_run(code, False)))  # noqa: S307 - our own repr of a list of floats
    b = np.array(eval(_run(code, True)))  # noqa: S307
    assert np.abs(a - b).max() < 1e-12
