#!/usr/bin/env bash
# Run one chapter as Colab would: a fresh venv that already has jax (as Colab does) but not iclgd,
# holding only the notebook and a freshly built wheel of iclgd. The notebook's first cell must
# install iclgd (from the wheel, via ICLGD_PIP_SPEC) without reinstalling jax, then run to the end.
#
#     bash scripts/colab_check.sh [book/shared_setting.ipynb]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NB="${1:-book/shared_setting.ipynb}"
PY="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PY" -m pip wheel -q --no-deps -w "$work/dist" . >/dev/null
wheel="$(ls "$work"/dist/iclgd-*.whl)"
"$PY" -m venv "$work/venv"
. "$work/venv/bin/activate"
python -m pip install -q --upgrade pip
# What a Colab runtime already has: jax, numpy, sympy, matplotlib, optax, tqdm, a kernel.
python -m pip install -q jax numpy sympy matplotlib optax tqdm ipykernel nbclient nbformat
python -m ipykernel install --sys-prefix --name python3 >/dev/null
jax_before="$(python -c 'import jax, os; print(jax.__version__, os.path.getmtime(jax.__file__))')"
cp "$NB" "$work/chapter.ipynb"
cd "$work"   # away from the checkout, whose iclgd/ folder would be importable
python -c "import iclgd" 2>/dev/null && { echo "iclgd must not be installed yet"; exit 1; }
start=$(date +%s)
ICLGD_PIP_SPEC="$wheel" python - <<'PY'
import nbformat
from nbclient import NotebookClient
nb = nbformat.read("chapter.ipynb", as_version=4)
NotebookClient(nb, timeout=1800, kernel_name="python3").execute()
print(f"executed {sum(c.cell_type == 'code' for c in nb.cells)} code cells")
PY
jax_after="$(python -c 'import jax, os; print(jax.__version__, os.path.getmtime(jax.__file__))')"
python -c "import iclgd; print('iclgd', iclgd.__version__, 'installed by the notebook from', iclgd.__file__)"
[ "$jax_before" = "$jax_after" ] || { echo "jax was reinstalled: $jax_before -> $jax_after"; exit 1; }
echo "colab check passed for $NB in $(( $(date +%s) - start )) s (jax kept: $jax_after)"
