#!/usr/bin/env bash
# Run chapters as Colab would: a fresh venv that already has jax (as Colab does) but neither iclgd
# nor myst-nb, holding only the notebook and a freshly built wheel of iclgd. Each notebook's first
# cell must install iclgd (from the wheel, via ICLGD_PIP_SPEC) without reinstalling jax, then run
# to the end; each chapter runs in a fresh kernel of the same venv (the first one installs iclgd).
#
#     bash scripts/colab_check.sh [NOTEBOOK ...]     # default: book/shared_setting.ipynb
#
# .ci/run passes the reader notebook (_build/reader/...: what the Colab button opens) of one
# chapter per part.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ "$#" -gt 0 ] || set -- book/shared_setting.ipynb
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
i=0
for NB in "$@"; do cp "$NB" "$work/chapter$((i += 1)).ipynb"; done
cd "$work"   # away from the checkout, whose iclgd/ folder would be importable
python -c "import iclgd" 2>/dev/null && { echo "iclgd must not be installed yet"; exit 1; }
python -c "import myst_nb" 2>/dev/null && { echo "myst-nb must not be installed (Colab has none)"; exit 1; }
start=$(date +%s)
i=0
for NB in "$@"; do
    t0=$(date +%s)
    ICLGD_PIP_SPEC="$wheel" python - "chapter$((i += 1)).ipynb" <<'PY'
import sys

import nbformat
from nbclient import NotebookClient

nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=1800, kernel_name="python3").execute()
print(f"executed {sum(c.cell_type == 'code' for c in nb.cells)} code cells", end=" ")
PY
    echo "of $NB in $(( $(date +%s) - t0 )) s"
done
jax_after="$(python -c 'import jax, os; print(jax.__version__, os.path.getmtime(jax.__file__))')"
python -c "import iclgd; print('iclgd', iclgd.__version__, 'installed by the notebook from', iclgd.__file__)"
[ "$jax_before" = "$jax_after" ] || { echo "jax was reinstalled: $jax_before -> $jax_after"; exit 1; }
echo "colab check passed for $# chapter(s) in $(( $(date +%s) - start )) s (jax kept: $jax_after)"
