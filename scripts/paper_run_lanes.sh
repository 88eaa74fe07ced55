#!/usr/bin/env bash
# Run the book at ICLGD_SCALE=paper on a machine lent for a fixed time (a GPU machine with the
# iclgd dependencies but without the Jupyter stack, see below), several notebooks side by side.
#
#   bash scripts/paper_run_lanes.sh DEADLINE_S OUT_DIR "lane1 notebooks" "lane2 notebooks" ...
#
# Each quoted lane is a list of notebooks run one after another by scripts/execute_notebooks.py
# --scale paper --deadline DEADLINE_S (the lanes run at the same time, each its own process and
# kernels). At the deadline the running cell is interrupted and the cells left are not run; the
# notebooks are still written, with their execution record. A lane still running 45 s after the
# deadline (a cell that does not answer the interrupt) is killed. Everything executed, the lanes'
# logs and the device's description end up in OUT_DIR/paper_run.tgz; record the run on this machine
# with scripts/record_paper_run.py --device ... --commit ....
#
# Wheels: where the machine lacks nbclient/ipykernel/myst-nb (and their dependencies), put them in
# .whl/ (see CONTRIBUTING.md, "Paper-scale runs"); they are installed into /tmp/site.
set -u
deadline=$1
out=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # the lanes share one GPU
logs=/tmp/paper_run_logs
mkdir -p "$out" "$logs"
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    python3 -c "import jax, sys; print(sys.version); print(jax.__version__, jax.devices())" 2>&1
    nproc
} >"$logs/device.txt"
cat "$logs/device.txt"
pids=()
i=0
for lane in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2086  # a lane is a space-separated list of notebooks
    timeout -k 10 $((${deadline%.*} + 45)) \
        python3 scripts/execute_notebooks.py --scale paper --deadline "$deadline" $lane \
        >"$logs/lane$i.log" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
grep -h -E '^\[(ok|FAILED|execute)' "$logs"/lane*.log
tar czf "$out/paper_run.tgz" -C / "${logs#/}" -C "$root" $(git ls-files 'book/*.ipynb' 2>/dev/null || find book -name '*.ipynb')
ls -la "$out"
