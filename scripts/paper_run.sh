#!/usr/bin/env bash
# The whole book at ICLGD_SCALE=paper in one command, on the machine it is given (a lent GPU
# machine: CONTRIBUTING.md, "Paper-scale runs"), within a deadline:
#
#   bash scripts/paper_run.sh OUT [--deadline S] [--lanes N] [--commit C] [NOTEBOOK ...]
#
# 1. Where python3 lacks the kernels' stack (nbclient, ipykernel, myst-nb: the GPU machine), the
#    wheels carried in .whl/ (scripts/device_wheels.py) are installed into /tmp/paper_run/site
#    (the scratch folder, PAPER_RUN_SCRATCH, default /tmp/paper_run, emptied first).
# 2. The working tree is copied to /tmp/paper_run/tree: the notebooks are executed there, so the
#    checkout keeps its ci outputs. The kernels' stack is imported once (a missing wheel fails
#    here, before any lane starts).
# 3. The chapters of scripts/paper_run_plan.json (or the NOTEBOOKs given) are packed into lanes by
#    their last measured times (scripts/paper_run_plan.py: one lane per two cores with a GPU, per
#    four without, or --lanes N); the lanes run side by side, each one
#    `execute_notebooks.py --scale paper --deadline S --no-status` over its notebooks. At the
#    deadline (default 330 s after the lanes start) the running cell is interrupted and what is
#    left is not run; a lane still running 45 s later is killed.
# 4. OUT/paper_run.tgz holds paper_run/: run.json (device, commit, deadline, the run's wall time
#    and each lane's, each notebook's lane and result: scripts/paper_run_plan.py summary), the
#    executed notebooks under book/, the lanes' logs and device.txt. OUT/run.json is a copy.
#    Record it here with `python scripts/record_paper_run.py --run OUT/paper_run.tgz`.
#
# 5. paper_run/run_cache/ in the archive holds the training runs saved on the way
#    ($ICLGD_RUN_CACHE, unless set: iclgd.training.timed_train), with those of scripts/run_cache/
#    it started from; copied into scripts/run_cache/ (and committed, for a later session), they
#    let the next call resume a chapter that the deadline cut. A run the deadline cut midway
#    left a checkpoint (NAME-FINGERPRINT.partial.npz: its parameters and optimiser state, tens of
#    MB): it comes back as OUT/checkpoints.tgz.00, .01, ... (pieces of 15 MiB: the tool brings
#    back no file over 16 MiB); `cat OUT/checkpoints.tgz.* | tar xz -C scripts/run_cache` puts it
#    where the next call resumes it (it travels untracked; too large to commit).
#
# --commit C names the commit the tree is (where the copy has no .git to ask). Exit status: 0 when
# every notebook ran to its end with every cell passing, 1 otherwise, 2 for bad arguments.
set -u
started=$(date +%s.%N)
usage() {
    echo "usage: bash scripts/paper_run.sh OUT [--deadline S] [--lanes N] [--commit C] [NOTEBOOK ...]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
out=$1
shift
deadline=330
lanes=
commit=
notebooks=()
while [ $# -gt 0 ]; do
    case $1 in
        --deadline) [ $# -ge 2 ] || usage; deadline=$2; shift 2 ;;
        --lanes) [ $# -ge 2 ] || usage; lanes=$2; shift 2 ;;
        --commit) [ $# -ge 2 ] || usage; commit=$2; shift 2 ;;
        -*) usage ;;
        *) notebooks+=("$1"); shift ;;
    esac
done
[[ $deadline =~ ^[0-9]+$ ]] || { echo "--deadline must be whole seconds, got '$deadline'" >&2; exit 2; }
[[ -z $lanes || $lanes =~ ^[1-9][0-9]*$ ]] || { echo "--lanes must be a positive integer, got '$lanes'" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${PAPER_RUN_SCRATCH:-/tmp/paper_run}  # the copy, the wheels, the logs; emptied first
case $scratch in /tmp/?*) ;; *) echo "PAPER_RUN_SCRATCH must be a folder under /tmp" >&2; exit 2 ;; esac
rm -rf "$scratch"
mkdir -p "$scratch/logs" "$out" || exit 1
out=$(cd "$out" && pwd)
logs=$scratch/logs
work=$scratch/tree

wheels="none: python3 has the kernels' stack"
if ! python3 -c "import nbclient, nbformat, ipykernel, myst_nb" 2>/dev/null \
    && compgen -G "$root/.whl/*.whl" >/dev/null; then
    # the carried wheels are the committed lock's, each sha256 as locked (relocked from the venv
    # before the call: python scripts/device_wheels.py)
    python3 "$root/scripts/device_wheels.py" --check --dest "$root/.whl" >"$logs/wheels.log" 2>&1 \
        || { echo "the carried wheels differ from scripts/device_wheels.txt:" >&2; cat "$logs/wheels.log" >&2; exit 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$scratch/site" "$root"/.whl/*.whl >"$logs/pip.log" 2>&1 || { cat "$logs/pip.log"; exit 1; }
    export PYTHONPATH=$scratch/site
    wheels="$(find "$root/.whl" -type f -name '*.whl' | wc -l) from .whl installed into $scratch/site"
fi
mkdir -p "$work"
tar -C "$root" --exclude=./.whl --exclude=./.git --exclude=./.venv --exclude=./_build \
    --exclude=./book/_build --exclude=./node_modules -cf - . | tar -C "$work" -xf - || exit 1
if [ -z "$commit" ]; then
    commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null) || commit=
fi
dirty=null
if git -C "$root" rev-parse HEAD >/dev/null 2>&1; then
    # (saved training runs aside: scripts/run_cache/ may hold a cut call's runs, not yet committed;
    # file modes aside: on 2026-11-27 a tree committed and clean here read as dirty on the GPU
    # machine, and a copy that loses the executable bits reads so. What git saw is kept in the
    # archive, git_status.txt.)
    changes=$(git -C "$root" -c core.fileMode=false status --porcelain -- iclgd book scripts \
        pyproject.toml ':!scripts/run_cache')
    [ -z "$changes" ] && dirty=false || dirty=true
    printf '%s\n' "$changes" >"$logs/git_status.txt"
fi
# Training runs a deadline could cut (iclgd.training.timed_train with store=: Part II deep's seven
# H) are saved in the scratch folder's run_cache/, started from scripts/run_cache/ (earlier calls'
# runs, copied there and committed) so that a chapter resumes them, and packed into the archive
# (the device tool brings back 8 files at most: one archive, not one file a run; CONTRIBUTING.md,
# "A session lent a GPU").
if [ -z "${ICLGD_RUN_CACHE:-}" ]; then
    export ICLGD_RUN_CACHE="$scratch/run_cache"
    mkdir -p "$ICLGD_RUN_CACHE" || exit 1
    if compgen -G "$root/scripts/run_cache/*.npz" >/dev/null; then
        cp -p "$root"/scripts/run_cache/*.npz "$ICLGD_RUN_CACHE"/ || exit 1
    fi
fi
export PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # the lanes share one GPU
cd "$work" || exit 1

gpu=false
nvidia-smi -L >/dev/null 2>&1 && gpu=true
cores=$(nproc)
{
    date -u
    if [ $gpu = true ]; then
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    else
        echo "no GPU (nvidia-smi -L failed)"
    fi
    lscpu 2>/dev/null | grep -E '^Model name'
    echo "ISA: $(grep -m1 -o -w -E 'avx512f|avx2|fma|neon|asimd' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')"
    free -g 2>/dev/null | head -2
    echo "cores: $cores"
    echo "wheels: $wheels"
} >"$logs/device.txt"
# the kernels' stack, imported once before the lanes start (a missing wheel fails here, at once)
if ! python3 -c "
import sys, nbclient, nbformat, ipykernel, IPython, myst_nb.ext.glue, yaml, jax, iclgd
print(sys.version)
print('nbclient', nbclient.__version__, 'ipykernel', ipykernel.__version__, 'IPython', IPython.__version__)
print('jax', jax.__version__, jax.devices())
" >>"$logs/device.txt" 2>"$logs/preflight.log"; then
    echo "the kernel stack does not import (carry .whl: scripts/device_wheels.py):" >&2
    cat "$logs/preflight.log" >&2
    exit 1
fi
cat "$logs/device.txt"
python3 scripts/paper_run_plan.py lanes --cores "$cores" $([ $gpu = true ] && echo --gpu) \
    ${lanes:+--lanes "$lanes"} "${notebooks[@]}" >"$logs/lanes.txt" || exit 1

i=0
while IFS= read -r lane; do
    i=$((i + 1))
    (
        echo "start $(date +%s.%N)" >"$logs/lane$i.time"
        # shellcheck disable=SC2086  # a lane is a space-separated list of notebooks
        timeout -k 10 $((deadline + 45)) python3 scripts/execute_notebooks.py --scale paper \
            --no-status --deadline "$deadline" $lane >"$logs/lane$i.log" 2>&1
        rc=$?
        printf 'end %s\nrc %s\n' "$(date +%s.%N)" "$rc" >>"$logs/lane$i.time"
    ) &
    echo "lane $i: $lane"
done <"$logs/lanes.txt"
wait

device=$(
    python3 - "$gpu" "$cores" <<'EOF'
import os, platform, subprocess, sys
gpu, cores = sys.argv[1] == "true", int(sys.argv[2])
if gpu:
    names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True).stdout.split("\n")
    names = [n.strip() for n in names if n.strip()]
    print(f"{len(names)} {names[0]}, {cores} CPU cores")
else:
    model, flags = platform.processor(), set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = " ".join(line.split(":", 1)[1].split())
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
            if model and flags:
                break
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    about = ", ".join(x for x in (model, isa) if x)
    print(f"{cores} CPU cores ({about}), no GPU" if about else f"{cores} CPU cores, no GPU")
EOF
)
stage=$scratch/paper_run
mkdir -p "$stage"
DEVICE=$device GPU=$gpu CORES=$cores COMMIT=$commit DIRTY=$dirty DEADLINE=$deadline \
    STARTED=$started LANES_FILE=$logs/lanes.txt python3 - "$logs/meta.json" <<'EOF' || exit 1
import json, os, sys
e = os.environ
meta = {
    "device": e["DEVICE"].strip(),
    "gpu": e["GPU"] == "true",
    "cores": int(e["CORES"]),
    "commit": e["COMMIT"] or None,
    "dirty": {"true": True, "false": False}.get(e["DIRTY"]),  # null: no git to ask
    "deadline_s": int(e["DEADLINE"]),
    "started": float(e["STARTED"]),
    "lanes": [line.split() for line in open(e["LANES_FILE"]).read().splitlines() if line.strip()],
}
json.dump(meta, open(sys.argv[1], "w"))
EOF
python3 scripts/paper_run_plan.py summary --work "$work" --logs "$logs" --meta "$logs/meta.json" \
    >"$stage/run.json" || exit 1
cp "$logs"/*.log "$logs"/*.time "$logs/device.txt" "$logs/lanes.txt" "$stage"/
[ -f "$logs/git_status.txt" ] && cp "$logs/git_status.txt" "$stage"/
tr ' ' '\n' <"$logs/lanes.txt" | grep . | while IFS= read -r nb; do
    mkdir -p "$stage/$(dirname "$nb")" && cp "$work/$nb" "$stage/$nb"
done
shopt -s nullglob
finished=() partial=()
for f in "$ICLGD_RUN_CACHE"/*.npz; do
    case $f in *.partial.npz) partial+=("$(basename "$f")") ;; *) finished+=("$f") ;; esac
done
if [ ${#finished[@]} -gt 0 ]; then
    mkdir -p "$stage/run_cache" && cp -p "${finished[@]}" "$stage/run_cache/"
fi
tar czf "$out/paper_run.tgz" -C "$scratch" paper_run || exit 1
# A run the deadline cut left its checkpoint (parameters and Adam's state: some 25 MB for Part II
# deep); the tool brings back files of 16 MiB at most, so it comes back in pieces,
# OUT/checkpoints.tgz.00, .01, ... (cat them into tar xz).
if [ ${#partial[@]} -gt 0 ]; then
    tar czf - -C "$ICLGD_RUN_CACHE" "${partial[@]}" | split -b 15m -d - "$out/checkpoints.tgz." ||
        exit 1
fi
shopt -u nullglob
cp "$stage/run.json" "$out/run.json"
grep -h -E '^\[(ok|FAILED|skipped)' "$logs"/lane*.log
python3 - "$stage/run.json" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))
for i, lane in enumerate(run["lanes"], start=1):
    print(f"lane {i}: {lane['wall_time_s']} s, rc {lane['rc']}: {' '.join(lane['notebooks'])}")
print(f"{run['device']}: {len(run['lanes'])} lanes, wall time {run['wall_time_s']} s "
      f"(deadline {run['deadline_s']} s), {run['total_s']} s with wheels, copy and summary")
ok = all(n["executed"] and not n["failed_cells"] and not n["not_run_cells"]
         for n in run["notebooks"].values())
sys.exit(0 if ok else 1)
EOF
rc=$?
ls -la "$out"
exit $rc
