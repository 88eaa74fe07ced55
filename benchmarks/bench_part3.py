"""Benchmark: Part III's training (Ahn et al., Figs. 1-4) on a CPU.

Run from the repository root (see benchmarks/README.md)::

    python benchmarks/bench_part3.py --quick   # smoke run, about 2 minutes
    python benchmarks/bench_part3.py           # full run, about 16 minutes on 2 quiet cores

Setting (Sec. 5.3 / 6.1 of the paper, as the chapters run it at ``ICLGD_SCALE=paper``): d = 5,
three layers, one fixed batch of 20,000 prompts per seed with the paper's Sigma, L-BFGS (optax,
zoom line search).

1. **One value and gradient of the training loss** (one seed, 20,000 prompts, float64), several
   forward passes of the same model:

   * ``sparse_predict``: iclgd's (what ``linear_transformer_model(..., symmetrize=True).predict``
     runs), through each prompt's context moments; for GD++ both on ``model.prepare(batch)`` (the
     moments computed once, what ``train_seeds`` evaluates) and on the embeddings (the moments at
     every call);
   * ``tokens, layers unrolled``: GD++ token by token (iclgd's ``sparse_predict`` up to 1e20069);
   * ``lax.scan over layers``: the token form with a ``lax.scan`` over the layers (iclgd up to
     6f5e86e^); defined below;
   * ``full model``: ``linear_transformer_predict(sparse_to_full(params), Z0)``, the general
     (d+1) x (d+1) layers of eq. 3-4.

   For eq. 9 (``{"A"}``, n = 20, Figs. 1-2) and eq. 13 (``{"A", "B"}``, GD++, n = 10 and 20,
   Figs. 3-4); for GD++ also **the floor**: the flops per prompt (``gdpp_flops``, token form and
   moment form) x 20,000 at the rate of a 2000 x 2000 GEMM measured beside it (``rates``, which
   also measures 20,000 products of 5 x 5).

2. **L-BFGS steps of 5 seeds** (eq. 13, n = 10), one call = ``iclgd.train_seeds(..., steps=K)``:

   * ``seed_args, one after another``: each seed's batch drawn once and passed with
     ``seed_args`` to ``training.batch_loss(model)``; ``vectorize=False`` (the default for L-BFGS
     on a CPU);
   * ``seed_args, vmap``: the same with ``vectorize=True``;
   * ``batch drawn in the loss, vmap``:
     ``loss(p, key) = batch_loss(model)(p, key, sample_paper_prompts(key, n, N))``
     with ``fixed_key=True`` and ``vectorize=True``, how the chapters trained before 6f5e86e.

3. **The public code's recipe beside iclgd's** (``--peer``, or ``--peer-only``; needs torch):
   Fig. 3's setting (n = 20, one seed, 20,000 prompts,
   ``torch.optim.LBFGS(history_size=600, max_iter=4, lr=0.1)``), the PyTorch port in
   ``torch_peer_part3.py`` (float32, 1 and 2 threads) against
   ``iclgd.train_seeds(training.batch_loss(model), ..., optimizer=training.torch_lbfgs(0.1, 600))``
   as chapter ``gdpp`` runs the code's recipe (float64): one value and gradient, and one L-BFGS
   iteration (the peer: one notebook step / 4, its five evaluations included; iclgd: a call of
   ``4 K`` iterations / ``4 K``, compilation shown apart in round 0).

Protocol: the contenders of a section run interleaved, A, B, C, A, B, C, ...; round 0 is each one's
first call (compilation included, shown separately as ``compile``: JAX's own monitoring events),
then ``--reps`` rounds of later calls. Reported: medians [min, max] over the later rounds, the
median of the per-round ratios to the first contender, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported (section 3)

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_training import CLOCK, load, stats  # noqa: E402

import iclgd  # noqa: E402
from iclgd import models, tasks, training  # noqa: E402
from iclgd.models import linear_transformer as LT  # noqa: E402
from iclgd.models.batched_products import _nn  # noqa: E402

D, L = 5, 3


# ------------------------------------------------------------- the replaced lax.scan forward passes


@jax.jit
def scan_pgd(As, Z0):
    d, n = Z0.shape[1] - 1, Z0.shape[2] - 1
    X0, Y0 = Z0[:, :d, :], Z0[:, d, :]

    def step(Y, A):
        u = jnp.einsum("bic,bc->bi", X0[:, :, :n], Y[:, :n]) / n
        return Y + jnp.einsum("bi,ij,bjc->bc", u, A, X0), None

    YL, _ = jax.lax.scan(step, Y0, As)
    return -YL[:, n]


@jax.jit
def scan_gdpp(As, Bs, Z0):
    d, n = Z0.shape[1] - 1, Z0.shape[2] - 1
    X0, Y0 = Z0[:, :d, :], Z0[:, d, :]

    def step(XY, AB):
        X, Y = XY
        A, Bm = AB
        Xc = X[:, :, :n]
        u = jnp.einsum("bic,bc->bi", Xc, Y[:, :n]) / n
        G = jnp.einsum("bic,bjc->bij", Xc, Xc) / n
        AX = jnp.einsum("ij,bjc->bic", A, X)
        return (
            X + jnp.einsum("ij,bjk,bkc->bic", Bm, G, AX),
            Y + jnp.einsum("bi,bic->bc", u, AX),
        ), None

    (_, YL), _ = jax.lax.scan(step, (X0, Y0), (As, Bs))
    return -YL[:, n]


@jax.jit
def tokens_gdpp(As, Bs, Z0):
    """Eq. 13 token by token, the layers unrolled: ``sparse_predict``'s GD++ up to 1e20069."""
    d, n = Z0.shape[1] - 1, Z0.shape[2] - 1
    X, Y = Z0[:, :d, :], Z0[:, d, :]
    for A, Bm in zip(As, Bs):
        Xc = X[:, :, :n]
        u = jnp.einsum("bic,bc->bi", Xc, Y[:, :n]) / n
        G = jnp.einsum("bic,bjc->bij", Xc, Xc) / n
        AX = jnp.einsum("ij,bjc->bic", A, X)
        X, Y = X + jnp.einsum("ij,bjk,bkc->bic", Bm, G, AX), Y + jnp.einsum("bi,bic->bc", u, AX)
    return -Y[:, n]


def forwards(form: str) -> dict:
    """``name -> predict(params, Z0)`` for ``form`` ``"pgd"`` (eq. 9) or ``"gdpp"`` (eq. 13); a
    GD++ entry marked ``prepared`` takes the batch's ``PromptMoments`` instead of ``Z0``."""
    sp = LT.symmetrize  # the effective parameters: symmetric A_l
    full = {"full model": lambda p, Z: LT.linear_transformer_predict(LT.sparse_to_full(sp(p)), Z)}
    if form == "pgd":
        return {
            "sparse_predict": lambda p, Z: LT.sparse_predict(sp(p), Z),
            "lax.scan over layers": lambda p, Z: scan_pgd(sp(p)["A"], Z),
            **full,
        }
    return {
        "sparse_predict, prepared moments": lambda p, m: LT.sparse_predict(sp(p), m),
        "sparse_predict, moments per call": lambda p, Z: LT.sparse_predict(sp(p), Z),
        "tokens, layers unrolled (to 1e20069)": lambda p, Z: tokens_gdpp(
            *(sp(p)[k] for k in "AB"), Z
        ),
        "lax.scan over layers": lambda p, Z: scan_gdpp(*(sp(p)[k] for k in "AB"), Z),
        **full,
    }


# ------------------------------------------------------------------------------------ the floor


def gdpp_flops(d: int, n: int, L: int) -> dict:
    """Floating-point operations per prompt of one value and gradient of eq. 13's loss: the forward
    pass's multiply-adds x 2, the backward counted as twice the forward (two products per product);
    the context moments (no gradient) once."""
    tokens = L * (d * n + d * d * n + 2 * d * d * (n + 1) + d**3 + d * (n + 1))  # u, G, AX, BGAX, Y
    moments = d * d * n + d * n  # G_0, h_0
    recursion = (2 * d**3 + d * d) + (L - 1) * (5 * d**3 + 4 * d * d) + d  # layer 0, the others
    return {"tokens": 2 * 3 * tokens, "moments": 2 * moments + 2 * 3 * recursion}


def rates() -> dict:
    """Measured GFLOP/s on this machine: a 2000 x 2000 float64 matrix product (XLA's GEMM), and
    20,000 products of 5 x 5 float64 matrices in the form sparse_predict uses."""
    a = jnp.ones((2000, 2000), jnp.float64)
    gemm = jax.jit(lambda x: x @ x)
    P = jax.random.normal(jax.random.key(0), (20_000, 5, 5), jnp.float64)
    small = jax.jit(lambda P: _nn(P, P))
    out = {}
    for name, f, x, fl in (("gemm", gemm, a, 2 * 2000**3), ("5x5", small, P, 2 * 20_000 * 125)):
        jax.block_until_ready(f(x))
        ts = [timed(lambda: f(x))[0] for _ in range(7)]
        out[name] = fl / np.median(ts) / 1e9
    return out


# ---------------------------------------------------------------------------------- the protocol


def timed(fn):
    mark, t0 = CLOCK.mark(), time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0, CLOCK.since(mark)


def interleave(contenders: dict, reps: int, per: float = 1.0, unit: str = "s") -> None:
    """Round 0 (first calls), then ``reps`` interleaved rounds; print medians and ratios."""
    first = {k: timed(f) for k, f in contenders.items()}
    later = {k: [] for k in contenders}
    for _ in range(reps):
        for k, f in contenders.items():
            later[k].append(timed(f)[0] / per)
    ref = next(iter(contenders))
    print(
        f"  {'contender':38s} {'first call s':>13s} {'compile s':>10s}   "
        f"later calls {unit} [min, max]   ratio to first row"
    )
    for k in contenders:
        ratio = np.median(np.array(later[k]) / np.array(later[ref]))
        print(
            f"  {k:38s} {first[k][0]:13.3g} {first[k][1]:10.3g}   "
            f"{stats(later[k]):28s}   {ratio:.2f}x"
        )
    return {k: float(np.median(t)) for k, t in later.items()}


def peer_section(reps: int, K: int) -> None:
    """Section 3: the public code's PyTorch recipe against iclgd's, interleaved (float64 iclgd)."""
    import torch_peer_part3 as tp

    if not tp.AVAILABLE:
        print("torch not installed: peer skipped")
        return
    torch = tp.torch
    jax.config.update("jax_enable_x64", True)
    n, N = 20, 20_000
    key = jax.random.key(22)
    pr = tasks.sample_paper_prompts(jax.random.fold_in(key, 1), n, N)
    code_model = models.linear_transformer_model(D, L, form="gdpp", init_std=1e-4)
    loss = training.batch_loss(code_model)
    p = code_model.init(key)
    vg = jax.jit(jax.value_and_grad(loss))
    batch = jax.tree.map(lambda x: x[None], pr)  # one seed
    opt = training.torch_lbfgs(0.1, 600)

    def fit():
        return iclgd.train_seeds(
            loss,
            code_model.init,
            key[None],
            steps=4 * K,
            optimizer=opt,
            seed_args=(batch,),
            fixed_key=True,
            progress=False,
        ).losses

    Z, y = tp.make_batch(*(np.asarray(a) for a in (pr.X, pr.y, pr.x_q, pr.y_target)))
    recipe = {t: tp.Recipe(Z, y) for t in (1, 2)}
    # peer check: the same parameters (P = B_l, Q = A_l^T), the same loss (float64)
    check = tp.Recipe(Z.double(), y.double())
    with torch.no_grad():
        check.model.allparam.data = check.model.allparam.data.double()
        for i in range(L):
            check.model.allparam[i, 0, 0] = torch.tensor(np.asarray(p["B"][i]))
            check.model.allparam[i, 0, 1] = torch.tensor(np.asarray(p["A"][i]).T)
        Z64 = tp.make_batch(*(np.asarray(a) for a in (pr.X, pr.y, pr.x_q, pr.y_target)))[0]
        ours = float(loss(p, key, pr))
        theirs = float(
            tp.in_context_loss(check.model, Z64.double(), torch.tensor(np.asarray(pr.y_target)))
        )
    print(f"peer check: loss {theirs:.6g} (torch, float32 batch in float64) vs {ours:.6g} (iclgd)")

    def peer_vg(t):
        torch.set_num_threads(t)
        return recipe[t].value_and_grad()

    def peer_iter(t):
        return tp.time_steps(recipe[t], K, t)[0]

    print(
        f"\n=== the public code's recipe (torch {torch.__version__}, float32, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}) against iclgd (float64), eq. 13, "
        f"n = {n}, {N:,} prompts, one seed ==="
    )
    print(f"load before: {load()}")
    print("one value and gradient:")
    prepared = code_model.prepare(pr)  # what train_seeds hands the loss (loss.prepare)
    interleave(
        {
            "iclgd batch_loss, prepared batch": lambda: vg(p, key, prepared),
            "iclgd batch_loss, TaskBatch": lambda: vg(p, key, pr),
            "torch peer, 1 thread": lambda: peer_vg(1),
            "torch peer, 2 threads": lambda: peer_vg(2),
        },
        reps,
    )
    print(f"one L-BFGS iteration ({K} notebook steps = {4 * K} iterations per call):")
    interleave(
        {
            "iclgd train_seeds, torch_lbfgs": fit,
            "torch peer, 1 thread": lambda: peer_iter(1),
            "torch peer, 2 threads": lambda: peer_iter(2),
        },
        reps,
        per=4 * K,
        unit="s/iteration",
    )
    print(f"load after: {load()}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and steps (smoke run)")
    ap.add_argument("--reps", type=int, default=None, help="later rounds (default 7, quick 2)")
    ap.add_argument(
        "--steps", type=int, default=None, help="L-BFGS steps per call (default 20, quick 4)"
    )
    ap.add_argument("--peer", action="store_true", help="also run section 3 (needs torch)")
    ap.add_argument("--peer-only", action="store_true", help="run section 3 only")
    a = ap.parse_args(argv)
    reps = a.reps or (2 if a.quick else 7)
    K = a.steps or (4 if a.quick else 20)
    N = 20_000
    print(
        f"jax {jax.__version__} on {jax.default_backend()}, {os.cpu_count()} cores; "
        f"load (1/5/15 min) {load()}"
    )
    if a.peer_only:
        peer_section(reps, K)
        return
    key = jax.random.key(21)
    jax.config.update("jax_enable_x64", True)  # the chapters' precision
    for form, n in (("pgd", 20), ("gdpp", 10), ("gdpp", 20)):
        pr = tasks.sample_paper_prompts(jax.random.fold_in(key, 1), n, N)
        Z0 = tasks.embed_zero_query(pr)
        model = models.linear_transformer_model(D, L, form=form, init_std=0.1, symmetrize=True)
        p = model.init(key)
        m = model.prepare(pr) if model.prepare else None
        cont = {}
        for name, f in forwards(form).items():
            vg = jax.jit(jax.value_and_grad(lambda p, Z, y, f=f: jnp.mean((f(p, Z) - y) ** 2)))
            x = m if "prepared" in name else Z0
            cont[name] = lambda vg=vg, x=x: vg(p, x, pr.y_target)
        print(
            f"\n=== value and gradient of the loss, eq. {9 if form == 'pgd' else 13}, n = {n}, "
            f"{N:,} prompts, {L} layers, one seed, float64 ==="
        )
        times = interleave(cont, reps)
        if form == "gdpp":
            r, fl = rates(), gdpp_flops(D, n, L)
            print(
                f"  floor: {r['gemm']:.0f} GFLOP/s (2000 x 2000 GEMM), {r['5x5']:.1f} GFLOP/s "
                "(20,000 products of 5 x 5, sparse_predict's form), measured now"
            )
            for form_, f_ in fl.items():
                floor = N * f_ / (r["gemm"] * 1e9)
                print(
                    f"  {form_:8s} {f_:6,} flop/prompt: floor {1e3 * floor:.2f} ms at the GEMM "
                    f"rate; prepared moments {times[next(iter(cont))] / floor:.1f}x that floor"
                )
    print(f"load after: {load()}")

    n, seeds = 10, 5
    keys = jax.random.split(jax.random.key(21), seeds)
    data_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    batch = jax.vmap(lambda k: tasks.sample_paper_prompts(k, n, N))(data_keys)
    model = models.linear_transformer_model(D, L, form="gdpp", init_std=0.1, symmetrize=True)
    on_batch = training.batch_loss(model)
    drawn = lambda p, key: on_batch(p, key, tasks.sample_paper_prompts(key, n, N))  # noqa: E731
    init = model.init
    opts = dict(optimizer="lbfgs", learning_rate=1.0, steps=K, fixed_key=True, progress=False)
    train = iclgd.train_seeds
    cont = {
        "seed_args, one after another": lambda: (
            train(on_batch, init, keys, seed_args=(batch,), vectorize=False, **opts).losses
        ),
        "seed_args, vmap": lambda: (
            train(on_batch, init, keys, seed_args=(batch,), vectorize=True, **opts).losses
        ),
        "batch drawn in the loss, vmap": lambda: (
            train(drawn, init, keys, vectorize=True, **opts).losses
        ),
    }
    print(
        f"\n=== L-BFGS, eq. 13, n = {n}, {N:,} prompts per seed, {seeds} seeds, {K} steps per "
        "call (times: s per step of all seeds) ==="
    )
    print(f"load before: {load()}")
    interleave(cont, reps, per=K, unit="s/step")
    print(f"load after: {load()}")
    if a.peer:
        peer_section(reps, K)


if __name__ == "__main__":
    main()
