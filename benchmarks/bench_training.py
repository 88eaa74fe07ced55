"""Benchmark: iclgd's training at the Part I setting, against itself and a PyTorch peer.

Run from the repository root (see benchmarks/README.md)::

    python benchmarks/bench_training.py --quick    # smoke run, ~1 minute on 2 loaded cores
    python benchmarks/bench_training.py            # full run, ~20 minutes on 2 quiet cores

Setting (Xie et al. / von Oswald et al.): d = 10, C = 10, batch 2048, Adam (lr 5e-4), prior mean
w* = 1 (||w*||^2 = 10), Sigma = Omega = I, noise-free; multi-head LSA with H = 1 and H = 11 heads.

Contenders (each trains the same model for N steps, one call = one ``iclgd.train(...)`` or one
``torch_peer.train(...)``):

* ``iclgd sampled``: ``iclgd.train(iclgd.sampled_loss(predict, prior, C, batch), ...)``, a fresh
  batch of prompts every step;
* ``iclgd sampled, jax.random.normal``: the same with ``iclgd.tasks.sample_tasks_reference`` (the
  sampler iclgd's fast one replaced; the same numbers bit for bit), H = 1 only;
* ``iclgd exact``: ``iclgd.train(iclgd.exact.lsa_loss(ex), ...)``, ``ex = iclgd.exact.prepare(prior,
  C)``: the population risk, no sampling;
* ``torch peer``: ``benchmarks/torch_peer.py`` (only if torch is installed), the model computed the
  way the papers' public PyTorch code does, with 1 thread and with 2 threads
  (``OMP_WAIT_POLICY=PASSIVE`` unless set otherwise in the environment).

Protocol. Within a group (one H), the contenders run one after the other in this process, A, B, C,
A, B, C, ...: round 0 is each contender's *first call* in this process (its compilation and, for
``iclgd exact``, ``exact.prepare``), then ``--reps`` rounds of *later calls* (the same loss
function, optimizer and shapes: ``iclgd.train``'s compile cache makes them skip compilation).
Reported: medians [min, max] over the rounds; speed-ups are medians [min, max] of the per-round
ratios; the load average before and after each section. ``compile`` is the time JAX spent tracing,
lowering and compiling inside the call (JAX's own monitoring events); ``steady s/1000`` = (call -
compile - prepare) / N * 1000 of the later calls. Then ``--fresh-reps`` rounds of *fresh processes*
(child processes, interleaved the same way), each timing one first call: what a new script or
notebook kernel pays. Last, one exact risk evaluation against a Monte Carlo estimate of a given
standard error.

Full mode (no ``--quick``): N = 1000 steps per call at H = 1, 250 at H = 11 (the peer needs ~0.15 s
per step there), 5 later rounds, 3 fresh-process rounds, Monte Carlo batches of 65536 prompts.
``--quick``: N = 50 / 10, 2 later rounds, 1 fresh-process round, Monte Carlo batches of 4096, no
``jax.random.normal`` row (``--reference`` adds it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import iclgd
from iclgd import exact

try:  # iclgd after the models refactor: a factory (d, H) -> Model(init, predict, name)
    from iclgd import models as _models

    _lsa_factory = getattr(_models, "lsa_model", None) or getattr(_models, "lsa", None)
    if not callable(_lsa_factory):  # e.g. only the module iclgd.models.lsa
        raise ImportError("no LSA model factory in iclgd.models")
    LSA_API = f"iclgd.models.{_lsa_factory.__name__}(d, H)"

    def lsa_model(d: int, H: int) -> tuple[Callable, Callable]:
        model = _lsa_factory(d, H)
        return model.init, model.predict

except ImportError:  # before: iclgd.init_lsa(key, d, H) and iclgd.lsa_predict(params, E)
    try:
        from iclgd import init_lsa, lsa_predict
    except ImportError:
        from iclgd.models.lsa import init_lsa, lsa_predict
    LSA_API = "iclgd.init_lsa / iclgd.lsa_predict"

    def lsa_model(d: int, H: int) -> tuple[Callable, Callable]:
        return (lambda key: init_lsa(key, d, H)), (lambda p, t: lsa_predict(p, iclgd.embed(t)))


try:
    from iclgd import gd_weights
except ImportError:
    from iclgd.models.lsa import gd_weights

sample_tasks_reference = getattr(iclgd.tasks, "sample_tasks_reference", None)

D_IN, C, BATCH, LR = 10, 10, 2048, 5e-4
HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------------------------------ timing tools


class CompileClock:
    """Seconds JAX spends tracing, lowering and compiling (its monitoring events, nesting once)."""

    EVENTS = (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )

    def __init__(self):
        self.spans: list[tuple[float, float]] = []
        self.durations: list[float] = []
        if hasattr(jax.monitoring, "register_event_time_span_listener"):
            jax.monitoring.register_event_time_span_listener(self._span)
        else:  # older JAX: durations only (a nested trace would be counted twice)
            jax.monitoring.register_event_duration_secs_listener(self._duration)

    def _span(self, event, start, end, **kwargs):
        if event in self.EVENTS:
            self.spans.append((start, end))

    def _duration(self, event, duration, **kwargs):
        if event in self.EVENTS:
            self.durations.append(duration)

    def mark(self) -> tuple[int, int]:
        return len(self.spans), len(self.durations)

    def since(self, mark: tuple[int, int]) -> float:
        """Compile seconds since ``mark``: the union of the event spans."""
        total, end = sum(self.durations[mark[1] :]), -np.inf
        for a, b in sorted(self.spans[mark[0] :]):
            if b > end:
                total += b - max(a, end)
                end = b
        return total


CLOCK = CompileClock()


class Call(NamedTuple):
    """One timed call: wall seconds of the whole call, of which exact.prepare and compilation."""

    wall: float
    prepare: float
    compile: float
    steps: int

    @property
    def steady(self) -> float:
        """Seconds per 1000 steps, compilation and prepare excluded."""
        return (self.wall - self.prepare - self.compile) / self.steps * 1000


def stats(xs, unit: str = "") -> str:
    """``median [min, max]`` (just the value for one sample)."""
    xs = [x for x in xs if x is not None and np.isfinite(x)]
    if not xs:
        return "-"
    med = fmt(statistics.median(xs)) + unit
    return med if len(xs) == 1 else f"{med} [{fmt(min(xs))}, {fmt(max(xs))}]"


def median(xs) -> str:
    return fmt(statistics.median(xs)) if xs else "-"


def fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# ------------------------------------------------------------------------------------ contenders


def iclgd_contender(build_loss: Callable, init: Callable, steps: int) -> Callable[[], Call]:
    """Each call trains the same initial params for ``steps``; the loss is built in the first call.

    ``build_loss() -> (loss, prepare seconds)``; later calls reuse that loss function object.
    """
    params = jax.block_until_ready(init(jax.random.key(1)))  # not timed
    state: dict = {}

    def call() -> Call:
        t0 = time.perf_counter()
        prepare = 0.0
        if "loss" not in state:
            state["loss"], prepare = build_loss()
        mark = CLOCK.mark()
        res = iclgd.train(
            state["loss"],
            params,
            jax.random.key(0),
            steps=steps,
            learning_rate=LR,
            progress=False,
        )
        jax.block_until_ready(res.params)
        wall = time.perf_counter() - t0
        if not np.all(np.isfinite(res.losses)):
            raise RuntimeError(f"training diverged: {res.message}")
        return Call(wall, prepare, CLOCK.since(mark), steps)

    return call


def sampled_builder(predict: Callable, prior) -> Callable:
    return lambda: (iclgd.sampled_loss(predict, prior, C, BATCH), 0.0)


def reference_builder(predict: Callable, prior) -> Callable:
    def loss(p, k):
        t = sample_tasks_reference(k, prior, C, BATCH)
        return jnp.mean((predict(p, t) - t.y_target) ** 2)

    return lambda: (loss, 0.0)


def exact_builder(prior) -> Callable:
    def build():
        t0 = time.perf_counter()
        ex = exact.prepare(prior, C)
        t_prep = time.perf_counter() - t0
        return exact.lsa_loss(ex), t_prep

    return build


def peer_contender(peer, H: int, threads: int, steps: int) -> Callable[[], Call]:
    def call() -> Call:
        r = peer.train(steps, d=D_IN, C=C, batch=BATCH, H=H, learning_rate=LR, threads=threads)
        return Call(r["seconds"], 0.0, 0.0, steps)

    return call


def peer_label(threads: int) -> str:
    if threads == 1:
        return "torch peer, 1 thread"
    return f"torch peer, {threads} threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"


def contenders_for(H: int, steps: int, peer, threads: list[int], reference: bool) -> list:
    prior = iclgd.make_prior(D_IN, mu=jnp.ones(D_IN))
    init, predict = lsa_model(D_IN, H)
    out = [("iclgd sampled", iclgd_contender(sampled_builder(predict, prior), init, steps))]
    if reference and sample_tasks_reference is not None:
        out.append(
            (
                "iclgd sampled, jax.random.normal",
                iclgd_contender(reference_builder(predict, prior), init, steps),
            )
        )
    out.append(("iclgd exact", iclgd_contender(exact_builder(prior), init, steps)))
    if peer is not None:
        out += [(peer_label(t), peer_contender(peer, H, t, steps)) for t in threads]
    return out


# ------------------------------------------------------------------------------------ reports


def ratio_pairs(labels: list[str]) -> list[tuple[str, str]]:
    """(slower, faster) pairs whose speed-up t_slower / t_faster is reported."""
    pairs = [(lab, "iclgd sampled") for lab in labels if lab.startswith("torch peer")]
    pairs += [(lab, "iclgd exact") for lab in labels if lab.startswith("torch peer")]
    pairs.append(("iclgd sampled", "iclgd exact"))
    if "iclgd sampled, jax.random.normal" in labels:
        pairs.append(("iclgd sampled, jax.random.normal", "iclgd sampled"))
    return [p for p in pairs if p[0] in labels and p[1] in labels]


def per_round_ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=True) if y > 0]


def run_group(H: int, steps: int, reps: int, contenders: list, record: dict) -> None:
    print(
        f"\n=== H = {H}: {steps} steps per call; round 0 = first call in this process, "
        f"then {reps} rounds of later calls ==="
    )
    load_before = load()
    print(f"load average (1/5/15 min) before: {load_before}")
    t_group = time.perf_counter()
    first: dict[str, Call] = {}
    later: dict[str, list[Call]] = {lab: [] for lab, _ in contenders}
    for lab, call in contenders:
        first[lab] = call()
    for _ in range(reps):
        for lab, call in contenders:
            later[lab].append(call())
    load_after, elapsed = load(), time.perf_counter() - t_group
    print(f"load average (1/5/15 min) after:  {load_after}   ({elapsed:.0f} s)")
    w = max(len(lab) for lab, _ in contenders)
    print(
        f"{'':{w}s}  {'first call in this process':^28s}  {'later calls':^35s}\n"
        f"{'contender':{w}s}  {'call s':>8s} {'prepare':>9s} {'compile':>9s}  "
        f"{'call s [min, max]':>24s} {'compile':>10s}  {'steady s/1000 [min, max]':>24s}"
    )
    for lab, _ in contenders:
        f, ls = first[lab], later[lab]
        print(
            f"{lab:{w}s}  {fmt(f.wall):>8s} {fmt(f.prepare):>9s} {fmt(f.compile):>9s}  "
            f"{stats([c.wall for c in ls]):>24s} {median([c.compile for c in ls]):>10s}  "
            f"{stats([c.steady for c in ls]):>24s}"
        )
    print("speed-up of A over B = t_B / t_A, median [min, max] of the per-round ratios:")
    for slow, fast in ratio_pairs([lab for lab, _ in contenders]):
        s_first = first[slow].wall / first[fast].wall
        s_later = per_round_ratios([c.wall for c in later[slow]], [c.wall for c in later[fast]])
        s_steady = per_round_ratios(
            [c.steady for c in later[slow]], [c.steady for c in later[fast]]
        )
        print(
            f"  {fast} over {slow}: steady {stats(s_steady, 'x')}; per call: "
            f"later {stats(s_later, 'x')}, first {fmt(s_first)}x"
        )
    record[f"H={H}"] = {
        "steps": steps,
        "load_before": load_before,
        "load_after": load_after,
        "first": {lab: c._asdict() for lab, c in first.items()},
        "later": {lab: [c._asdict() for c in cs] for lab, cs in later.items()},
    }


# -------------------------------------------------------------------------------- fresh processes


def child(spec: dict) -> None:
    """Child process: time the first ``iclgd.train`` call of this process, print it as JSON."""
    H, steps = spec["H"], spec["steps"]
    prior = iclgd.make_prior(D_IN, mu=jnp.ones(D_IN))
    init, predict = lsa_model(D_IN, H)
    build = exact_builder(prior) if spec["kind"] == "exact" else sampled_builder(predict, prior)
    print(json.dumps(iclgd_contender(build, init, steps)()._asdict()))


def run_fresh(groups: list[tuple[int, int]], reps: int, peer_ok: bool, record: dict) -> None:
    """``reps`` rounds; in each, one fresh process per contender and H, in a fixed order."""
    specs = []
    for H, steps in groups:
        for kind in ("sampled", "exact"):
            spec = json.dumps({"kind": kind, "H": H, "steps": steps})
            argv = [HERE + "/bench_training.py", "--child", spec]
            specs.append((H, steps, f"iclgd {kind}", argv))
        if peer_ok:
            specs.append(
                (
                    H,
                    steps,
                    "torch peer, 1 thread",
                    [
                        HERE + "/torch_peer.py",
                        "--json",
                        "--steps",
                        str(steps),
                        "--H",
                        str(H),
                        "--threads",
                        "1",
                    ],
                )
            )
    print(
        f"\n=== Fresh processes: the first call of a new process, {reps} rounds "
        f"(process s: the whole `python ...` incl. start-up and imports) ==="
    )
    print(f"load average (1/5/15 min) before: {load()}")
    t0 = time.perf_counter()
    res: dict[tuple[int, str], list[dict]] = {(H, lab): [] for H, _, lab, _ in specs}
    for _ in range(reps):
        for H, _, lab, argv in specs:
            t = time.perf_counter()
            out = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
            proc = time.perf_counter() - t
            if out.returncode != 0:
                raise RuntimeError(f"child {argv} failed:\n{out.stderr[-2000:]}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            r["process"] = proc
            res[(H, lab)].append(r)
    print(f"load average (1/5/15 min) after:  {load()}   ({time.perf_counter() - t0:.0f} s)")
    print(
        f"{'H':>3s} {'contender':22s} {'steps':>5s} {'process s [min, max]':>24s} "
        f"{'first call s [min, max]':>24s} {'prepare':>8s} {'compile':>8s}"
    )
    for (H, lab), rs in res.items():
        steps = rs[0]["steps"]
        print(
            f"{H:3d} {lab:22s} {steps:5d} {stats([r['process'] for r in rs]):>24s} "
            f"{stats([r['wall'] for r in rs]):>24s} {median([r['prepare'] for r in rs]):>8s} "
            f"{median([r['compile'] for r in rs]):>8s}"
        )
    print("speed-up of A over B = t_B / t_A, median [min, max] of the per-round ratios:")
    for H, _ in groups:
        for slow, fast in ratio_pairs([lab for h, lab in res if h == H]):
            a, b = res[(H, slow)], res[(H, fast)]
            s_call = per_round_ratios([r["wall"] for r in a], [r["wall"] for r in b])
            s_proc = per_round_ratios([r["process"] for r in a], [r["process"] for r in b])
            print(
                f"  H={H}: {fast} over {slow}: first call {stats(s_call, 'x')}, "
                f"whole process {stats(s_proc, 'x')}"
            )
    record["fresh"] = {f"H={H} {lab}": rs for (H, lab), rs in res.items()}


# ------------------------------------------------------------------------------------ exact vs MC


def risk_section(reps: int, n_mc: int, n_calls: int, record: dict) -> None:
    print(
        "\n=== One evaluation of the risk: exact vs a Monte Carlo estimate of a given standard "
        f"error (times: median of {reps} interleaved rounds) ==="
    )
    print(f"load average (1/5/15 min) before: {load()}")
    t0 = time.perf_counter()
    prior = iclgd.make_prior(D_IN, mu=jnp.ones(D_IN))
    ex = exact.prepare(prior, C)
    best = exact.lsa_optimum(ex)
    _, r_gd = exact.gd_optimal(ex)
    models = {
        "best multi-head LSA (H=11)": jax.tree_util.tree_map(
            lambda a: jnp.asarray(a, jnp.float32), best.params
        ),
        "GD from 0 (H=1)": gd_weights(jnp.zeros(D_IN), exact.gd_optimal(ex, np.zeros(D_IN))[0]),
    }
    _, predict = lsa_model(D_IN, 1)  # the predictor does not depend on H (taken from params)

    @jax.jit
    def sq_err(p, k):
        t = iclgd.sample_tasks(k, prior, C, n_mc)
        return (predict(p, t) - t.y_target) ** 2

    risk = jax.jit(lambda p: exact.lsa_risk(p, ex))
    gap = best.risk - r_gd
    rows = []
    for name, p in models.items():
        r_exact = float(risk(p))
        e2 = sq_err(p, jax.random.key(0)).block_until_ready()
        sd = float(jnp.std(e2))
        t_ex, t_mc = [], []
        for i in range(reps):  # interleaved: n_calls exact risks, then one Monte Carlo batch
            t = time.perf_counter()
            for _ in range(n_calls):
                out = risk(p)
            out.block_until_ready()
            t_ex.append((time.perf_counter() - t) / n_calls)
            t = time.perf_counter()
            sq_err(p, jax.random.key(i + 1)).block_until_ready()
            t_mc.append(time.perf_counter() - t)
        rows.append((name, r_exact, statistics.median(t_ex), sd, statistics.median(t_mc)))
    print(f"load average (1/5/15 min) after:  {load()}   ({time.perf_counter() - t0:.0f} s)")
    print(
        f"{'model':28s} {'exact risk':>11s} {'t_exact':>10s} {'sd(err^2)':>10s} "
        f"{'target SE':>12s} {'MC tasks':>10s} {'t_MC':>9s} {'t_MC/t_exact':>13s}"
    )
    for name, r_exact, t_exact, sd, t_batch in rows:
        for label, se in [("1e-3 x risk", 1e-3 * r_exact), ("gap/4", gap / 4)]:
            n = (sd / se) ** 2
            t_mc = n / n_mc * t_batch
            print(
                f"{name:28s} {r_exact:11.5f} {t_exact * 1e6:8.1f}us {sd:10.3f} {label:>12s} "
                f"{n:10.3g} {t_mc:8.3g}s {t_mc / t_exact:13.3g}"
            )
    print(
        f"(gap = best multi-head LSA - one GD step from w* = {gap:.5f}; Monte Carlo timed on "
        f"batches of {n_mc} prompts and scaled to the tasks needed)"
    )
    fields = ("model", "risk", "t_exact", "sd_err2", "t_mc_batch")
    record["risk"] = [dict(zip(fields, r, strict=True)) for r in rows]


# ------------------------------------------------------------------------------------ main


def header(mode: str, peer, threads: list[int], steps_by_h: dict, args) -> None:
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    print(f"iclgd training benchmark ({mode} mode), {time.strftime('%Y-%m-%d %H:%M')}")
    print(
        f"machine: {platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores "
        f"({affinity} usable by this process), load average (1/5/15 min) {load()}"
    )
    print(
        f"Python {platform.python_version()}, JAX {jax.__version__} (backend "
        f"{jax.default_backend()}), model API: {LSA_API}"
    )
    if peer is None:
        print(
            "torch not installed: peer skipped (pip install torch==2.13.0)"
            if not args.no_peer
            else "torch peer skipped (--no-peer)"
        )
    else:
        runs = ", ".join(peer_label(t).removeprefix("torch peer, ") for t in threads)
        print(f"torch {peer.version()}: the peer runs with {runs}")
    per_h = ", ".join(f"H={h}: {s}" for h, s in steps_by_h.items())
    print(
        f"setting: d = {D_IN}, C = {C}, batch = {BATCH}, Adam lr {LR}, w* = 1, "
        f"Sigma = Omega = I, noise-free; steps per call: {per_h}"
    )
    print("times: medians [min, max]; steady s/1000 = (call - compile - prepare) / steps * 1000")


def check_peer(peer) -> None:
    prior = iclgd.make_prior(D_IN, mu=jnp.ones(D_IN))
    t = iclgd.sample_tasks(jax.random.key(2), prior, C, 256)
    init, predict = lsa_model(D_IN, 3)
    p = init(jax.random.key(3))
    diff = peer.max_abs_diff(
        {k: np.asarray(v) for k, v in p.items()},
        np.asarray(iclgd.embed(t)),
        np.asarray(predict(p, t)),
    )
    ok = "ok" if diff < 1e-3 else "MISMATCH"
    print(
        f"peer check: torch peer vs iclgd, same params (H = 3) and batch: "
        f"max |prediction diff| = {diff:.1e} ({ok}; iclgd computes in float32)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, 2 rounds")
    ap.add_argument("--reps", type=int, help="rounds of later calls (default 5, quick 2)")
    ap.add_argument("--fresh-reps", type=int, help="rounds of fresh processes (default 3, quick 1)")
    ap.add_argument("--steps", type=int, help="steps per call at H = 1 (default 1000, quick 50)")
    ap.add_argument("--steps-h11", type=int, help="steps per call at H > 1 (default 250, quick 10)")
    ap.add_argument("--heads", default="1,11", help="comma-separated head counts (default 1,11)")
    ap.add_argument("--threads", default="1,2", help="peer thread counts (default 1,2)")
    ap.add_argument("--no-peer", action="store_true", help="skip the torch peer")
    ap.add_argument("--reference", action="store_true", help="jax.random.normal row in --quick")
    ap.add_argument("--no-reference", action="store_true", help="skip the jax.random.normal row")
    ap.add_argument("--no-risk", action="store_true", help="skip the exact-vs-Monte-Carlo section")
    ap.add_argument("--json", metavar="PATH", help="also write every measurement to PATH")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(json.loads(args.child))
    q = args.quick
    reps = args.reps if args.reps is not None else (2 if q else 5)
    fresh_reps = args.fresh_reps if args.fresh_reps is not None else (1 if q else 3)
    steps1 = args.steps or (50 if q else 1000)
    steps11 = args.steps_h11 or (10 if q else 250)
    reference = args.reference or not (q or args.no_reference)
    heads = [int(h) for h in args.heads.split(",")]
    steps_by_h = {H: steps1 if H == 1 else steps11 for H in heads}
    threads = [int(t) for t in args.threads.split(",")]

    # OpenMP reads OMP_WAIT_POLICY once, when torch loads it: set it before importing the peer.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    peer = None
    if not args.no_peer:
        sys.path.insert(0, HERE)
        import torch_peer

        peer = torch_peer if torch_peer.AVAILABLE else None
    header("quick" if q else "full", peer, threads, steps_by_h, args)
    if peer is not None:
        check_peer(peer)
    record: dict = {"load_start": os.getloadavg(), "cores": os.cpu_count()}
    for H in heads:
        cs = contenders_for(H, steps_by_h[H], peer, threads, reference and H == 1)
        run_group(H, steps_by_h[H], reps, cs, record)
    if fresh_reps > 0:
        run_fresh(list(steps_by_h.items()), fresh_reps, peer is not None, record)
    if not args.no_risk:
        risk_section(reps if not q else 2, 4096 if q else 65536, 200 if q else 2000, record)
    print(f"\nload average (1/5/15 min) at the end: {load()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
