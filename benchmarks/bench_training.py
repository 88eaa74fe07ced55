"""Benchmark: sampled vs exact-risk training, and one exact risk vs a Monte Carlo estimate.

Run from the repository root::

    python benchmarks/bench_training.py            # full table (~3-5 minutes on 2 cores)
    python benchmarks/bench_training.py --quick    # fewer repetitions

Setting (Xie et al. / von Oswald et al.): d = 10, C = 10, batch 2048, Adam (lr 5e-4), prior mean
w* = 1 (||w*||^2 = 10), Sigma = Omega = I, noise-free; multi-head LSA with H = 1 and H = 11 heads.
Every timing is the best of ``--reps`` runs (other processes share the machine's 2 cores). Each
``iclgd.train`` call compiles its own loop, so we report

* ``1000 steps``: the wall time of ``train(..., steps=1000)``, compilation included, and
* ``steady``: seconds per 1000 steps of the same compiled loop (``iclgd.training._make_chunk``, the
  step and divergence checks of ``train``), called again after compiling.

Rows ``sampled (jax.random.normal)`` use the sampler as it was before iclgd's fast path (the same
numbers, bit for bit: see tests/test_sampling.py), to show what the fast path buys.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import iclgd
from iclgd import tasks as tasks_mod
from iclgd import exact, training
from iclgd.tasks import TaskBatch

D_IN, C, BATCH = 10, 10, 2048


reference_sample = tasks_mod.sample_tasks_reference


def lsa_mse(p, t):
    return iclgd.mse(iclgd.lsa_predict(p, iclgd.embed(t)), t.y_target)


def best_time(f, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def train_timing(loss, p0, key, steady_steps, reps, with_1000=True):
    """(wall s of ``train(steps=1000)`` incl. compile, steady s per 1000 steps of the same loop).

    The steady rate times repeated calls of the compiled chunk of ``iclgd.train`` (its own
    ``_make_chunk``: same step, same divergence checks), so compilation is excluded.
    """
    t1000 = np.nan
    if with_1000:
        t1000 = best_time(lambda: iclgd.train(loss, p0, key, steps=1000, progress=False), reps)
    opt = iclgd.make_optimizer("adam", 5e-4)
    run_chunk = training._make_chunk(loss, opt, steady_steps, False, False)
    state = opt.init(p0)
    args = (p0, state, key, jnp.array(False), jnp.asarray(0), jnp.asarray(steady_steps))
    jax.block_until_ready(run_chunk(*args))  # compile
    t = best_time(lambda: jax.block_until_ready(run_chunk(*args)), reps)
    return t1000, t / steady_steps * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 repetitions, shorter runs")
    args = ap.parse_args()
    reps = 2 if args.quick else args.reps
    key = jax.random.key(0)
    prior = iclgd.make_prior(D_IN, mu=jnp.ones(D_IN))
    t0 = time.perf_counter()
    ex = exact.prepare(prior, C)
    t_prepare = time.perf_counter() - t0
    print(f"JAX {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} CPU cores, "
          f"load average {os.getloadavg()[0]:.1f} at start; exact.prepare: {t_prepare:.2f} s (incl. compile)")
    print(f"d = {D_IN}, C = {C}, batch = {BATCH}, Adam lr 5e-4; times: best of {reps}\n")

    fast_loss = iclgd.sampled_loss(lambda p, t: iclgd.lsa_predict(p, iclgd.embed(t)), prior, C, BATCH)

    def ref_loss(p, k):
        return lsa_mse(p, reference_sample(k, prior, C, BATCH))

    rows = []
    for H in (1, 11):
        p0 = iclgd.init_lsa(jax.random.key(1), D_IN, H)
        n = 500 if args.quick else 1000
        rows.append((f"sampled, fast sampler (iclgd), H={H}", *train_timing(fast_loss, p0, key, n, reps)))
        if H == 1:
            rows.append((f"sampled, jax.random.normal, H={H}", *train_timing(ref_loss, p0, key, 200, reps, False)))
        rows.append((f"exact risk, H={H}", *train_timing(exact.lsa_loss(ex), p0, key, 20 * n, reps)))

    print(f"{'training run':42s} {'1000 steps (s)':>15s} {'steady s/1000':>14s} {'steady steps/s':>15s}")
    for name, t1000, steady in rows:
        print(f"{name:42s} {t1000:15.3f} {steady:14.3f} {1000 / steady:15.0f}")
    by = {name: steady for name, _, steady in rows}
    by1 = {name: t1 for name, t1, _ in rows}
    for H in (1, 11):
        r = by[f"sampled, fast sampler (iclgd), H={H}"] / by[f"exact risk, H={H}"]
        r1 = by1[f"sampled, fast sampler (iclgd), H={H}"] / by1[f"exact risk, H={H}"]
        print(f"exact / sampled steps per second, H={H}: {r:.0f}x steady, {r1:.1f}x for 1000-step runs incl. compile")
    r = by["sampled, jax.random.normal, H=1"] / by["sampled, fast sampler (iclgd), H=1"]
    print(f"fast sampler / jax.random.normal training speed, H=1: {r:.1f}x steady")

    # ---------------------------------------------------------------- one exact risk vs Monte Carlo
    print("\nOne evaluation of the risk: exact vs a Monte Carlo estimate of a given standard error")
    best = exact.best_multihead_lsa(ex)
    eta, r_gd = exact.gd_optimal(ex)
    models = {
        "best multi-head LSA (H=11)": jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), best.params),
        "GD from 0 (H=1)": iclgd.gd_weights(jnp.zeros(D_IN), exact.gd_optimal(ex, np.zeros(D_IN))[0]),
    }
    n_mc = 65536
    sq_err = jax.jit(lambda p, k: (lambda t: (iclgd.lsa_predict(p, iclgd.embed(t)) - t.y_target) ** 2)(
        iclgd.sample_tasks(k, prior, C, n_mc)))
    ex_fn = jax.jit(lambda p: exact.lsa_risk(p, ex))
    print(f"{'model':28s} {'exact risk':>11s} {'t_exact':>10s} {'sd(err^2)':>10s} {'target SE':>12s} "
          f"{'MC tasks':>12s} {'t_MC':>10s} {'t_MC/t_exact':>13s}")
    gap = best.risk - r_gd
    for name, p in models.items():
        r_exact = float(ex_fn(p))
        n_calls = 2000
        t_exact = best_time(lambda: [ex_fn(p) for _ in range(n_calls)][-1].block_until_ready(), reps) / n_calls
        e2 = sq_err(p, key).block_until_ready()
        t_batch = best_time(lambda: sq_err(p, jax.random.key(3)).block_until_ready(), reps)
        sd = float(jnp.std(e2))
        for label, se in [("1e-3 x risk", 1e-3 * r_exact), ("gap/4", gap / 4)]:
            n = (sd / se) ** 2
            t_mc = n / n_mc * t_batch
            print(f"{name:28s} {r_exact:11.5f} {t_exact * 1e6:8.1f}us {sd:10.3f} {label:>12s} {n:12.3g} "
                  f"{t_mc:9.3g}s {t_mc / t_exact:13.3g}")
    print(f"\n(gap = best multi-head LSA - one GD step from w* = {gap:.5f}; exact.prepare, once per (prior, C): "
          f"{t_prepare:.2f} s incl. compile)")


if __name__ == "__main__":
    main()
