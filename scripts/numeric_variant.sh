#!/usr/bin/env bash
# Run a command in the book's second numeric configuration: the floating-point paths of another
# CPU, on this one. Every output that nbval compares must be the same here as in the committed
# notebooks (executed on whatever CPU ran them last), so `.ci/run` re-runs the notebooks under this
# script and fails on any difference.
#
#     bash scripts/numeric_variant.sh python -m pytest --nbval book ...
#     bash scripts/numeric_variant.sh --print      # show the configuration and exit
#
# The configuration, one level below this CPU's instruction set and one thread per kernel:
# - AVX-512 Intel CPU -> the AVX2 kernels (what an AMD EPYC or an older Intel runs); AVX-512 AMD
#   CPU -> AVX without FMA, with OpenBLAS's Intel AVX-512 kernels (below); AVX2 CPU -> AVX
#   without FMA; other CPUs (ARM, ...) keep their instruction set;
# - the libraries that pick kernels by CPU are all capped: XLA's code generator
#   (--xla_cpu_max_isa), oneDNN (ONEDNN_MAX_CPU_ISA: JAX's and torch's matrix products), MKL,
#   OpenBLAS (numpy, scipy) and torch's vectorised kernels (ATEN_CPU_CAPABILITY);
# - one thread per kernel (XLA's Eigen pool, OpenMP, OpenBLAS, MKL): the reductions of a 1-core
#   machine.
# Measured on an AVX-512 Xeon (2026-11-26): this reproduces, cell for cell, the five outputs that
# differed between an AVX2 EPYC and an AVX-512 Xeon (issue "Outputs that hold on any machine").
# An AVX-512 AMD EPYC (Zen 5, 2026-11-27) runs a third path, XLA's AVX-512 code with OpenBLAS's
# AVX2 (Haswell/Zen) kernels; there one compared output differed (a BFGS run on a Monte Carlo
# sample reached another local minimum, Part III baselines) and was redesigned to print only what
# every CPU shares. Outputs of chaotic computations are designed out, not sampled: no set of
# configurations covers every CPU.
set -euo pipefail

# ICLGD_VARIANT_ISA=AVX2|AVX picks the cap by hand (e.g. to try on an AVX-512 machine what CI on an
# AVX2 machine runs).
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
vendor=$(grep -m1 '^vendor_id' /proc/cpuinfo 2>/dev/null | awk '{print $3}' || true)
if [ "${ICLGD_VARIANT_ISA:-}" = AVX2 ]; then
    cap=AVX2 openblas=Haswell aten=avx2
elif [ "${ICLGD_VARIANT_ISA:-}" = AVX ]; then
    cap=AVX openblas=SandyBridge aten=default
elif [ -n "${ICLGD_VARIANT_ISA:-}" ]; then
    echo "ICLGD_VARIANT_ISA must be AVX2 or AVX, got $ICLGD_VARIANT_ISA" >&2
    exit 2
elif [[ " $flags " == *" avx512f "* && $vendor == AuthenticAMD ]]; then
    # an AVX-512 AMD EPYC (Zen 5, 2026-11-27): XLA's code for it gave the same bits as its AVX2
    # code (tests/test_numeric_variant.py's probe) and OpenBLAS ran its AVX2 kernels (that
    # machine's environment sets OPENBLAS_CORETYPE=Haswell), so the AVX2 cap would change
    # nothing; the other path: AVX without FMA for XLA, oneDNN and MKL, and OpenBLAS's AVX-512
    # kernels (SkylakeX, what an Intel Xeon runs)
    cap=AVX openblas=SkylakeX aten=default
elif [[ " $flags " == *" avx512f "* ]]; then
    cap=AVX2 openblas=Haswell aten=avx2
elif [[ " $flags " == *" avx2 "* ]]; then
    cap=AVX openblas=SandyBridge aten=default
else
    cap="" openblas="" aten=""
fi

xla="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
if [ -n "$cap" ]; then
    xla="--xla_cpu_max_isa=$cap $xla"
    export ONEDNN_MAX_CPU_ISA="$cap" MKL_ENABLE_INSTRUCTIONS="$cap"
    export OPENBLAS_CORETYPE="$openblas" ATEN_CPU_CAPABILITY="$aten"
fi
export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }$xla"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export ICLGD_NUMERIC_VARIANT="${cap:-native ISA}, one thread per kernel"

if [ "${1:-}" = "--print" ]; then
    echo "second numeric configuration: $ICLGD_NUMERIC_VARIANT (XLA_FLAGS=$XLA_FLAGS)"
    exit 0
fi
[ "$#" -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...] | --print" >&2; exit 2; }
echo "[numeric variant: $ICLGD_NUMERIC_VARIANT]" >&2
exec "$@"
