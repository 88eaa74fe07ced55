"""A PyTorch peer of iclgd's sampled LSA training (Part I setting), for ``bench_training.py``.

It computes the model the way the public PyTorch code of the papers does (Ahn et al.'s
``linear_transformer.py``; von Oswald et al.'s JAX code is organised the same way): every step
draws a fresh batch of tasks with ``torch.randn``, builds the embedding

    E = [[X^T, x_q], [y^T, y_q]]        (B, d+1, C+1), y_q = 0,

computes the *whole* output matrix of multi-head linear self-attention (Xie et al. eq. 5-6),

    E + sum_h (1/C) W^P_h W^V_h E M E^T (W^K_h)^T W^Q_h E,     M = diag(I_C, 0),

head by head in a Python loop, with the full (C+1) x (C+1) attention matrix of each head, then reads
the bottom-right entry as the prediction of the query label; Adam on the squared error, and
``loss.item()`` at every step (the peer logs its loss each step, iclgd's trainer records it).

The task distribution is iclgd's Part I prior: ``x ~ N(0, I_d)``, ``w = w* + N(0, I_d)`` with
``w* = (1, ..., 1)``, noise-free labels. The parameterisation (``W^K, W^Q, W^V, W^P``, each
``(H, d+1, d+1)``, i.i.d. ``N(0, 0.1^2)`` at init) is iclgd's ``init_lsa``, so the two compute the
same function (``max_abs_diff`` checks it on one batch).

This module imports ``torch`` only when it is installed: ``AVAILABLE`` says whether it is.
The thread count is set per call (``torch.set_num_threads``); ``OMP_WAIT_POLICY`` must be set in the
environment before ``torch`` is imported (``bench_training.py`` does it), it is read once by OpenMP.
"""

from __future__ import annotations

import time

try:
    import torch
except ImportError:  # the benchmark prints "torch not installed: peer skipped"
    torch = None

AVAILABLE = torch is not None
__all__ = [
    "AVAILABLE",
    "version",
    "init_params",
    "sample_embeddings",
    "lsa_output",
    "loss_fn",
    "train",
    "max_abs_diff",
]


def version() -> str:
    return torch.__version__ if AVAILABLE else "not installed"


def init_params(d: int, H: int, init_std: float = 0.1, seed: int = 0):
    """``(4, H, d+1, d+1)`` parameters ``[W^K, W^Q, W^V, W^P]``, i.i.d. ``N(0, init_std^2)``."""
    g = torch.Generator().manual_seed(seed)
    p = init_std * torch.randn(4, H, d + 1, d + 1, generator=g)
    return torch.nn.Parameter(p)


def sample_embeddings(d: int, C: int, batch: int, w_star: float = 1.0):
    """A fresh batch: ``E`` ``(B, d+1, C+1)`` (with ``y_q = 0``) and the query labels ``(B,)``."""
    x = torch.randn(batch, C + 1, d)  # context inputs and the query input
    w = w_star + torch.randn(batch, d)
    y = torch.einsum("bcd,bd->bc", x, w)  # (B, C+1), noise-free
    top = x.transpose(1, 2)  # (B, d, C+1)
    bottom = torch.cat([y[:, :C], torch.zeros(batch, 1)], dim=1)[:, None, :]  # (B, 1, C+1)
    return torch.cat([top, bottom], dim=1), y[:, C]


def lsa_output(params, E):
    """The whole output matrix ``E + sum_h head_h(E)``, ``(B, d+1, C+1)``, one head at a time."""
    C = E.shape[2] - 1
    A = torch.eye(C + 1, dtype=E.dtype)
    A[C, C] = 0.0  # M = diag(I_C, 0): the query token is neither key nor value
    WK, WQ, WV, WP = params
    out = E
    for h in range(params.shape[1]):
        Q = WK[h].T @ WQ[h]  # key-query product
        P = WP[h] @ WV[h]  # projection-value product
        scores = torch.einsum("bil,ik,bkr->blr", E, Q, E)  # (B, C+1, C+1): every pair of tokens
        values = torch.einsum("ij,bjl->bil", P, E)  # (B, d+1, C+1)
        out = out + torch.einsum("bil,lm,bmr->bir", values, A, scores) / C
    return out


def loss_fn(params, E, y_target):
    pred = lsa_output(params, E)[:, -1, -1]  # the bottom-right entry
    return torch.mean((pred - y_target) ** 2)


def train(
    steps: int,
    d: int = 10,
    C: int = 10,
    batch: int = 2048,
    H: int = 1,
    learning_rate: float = 5e-4,
    threads: int | None = None,
    seed: int = 0,
) -> dict:
    """Train the peer for ``steps`` Adam steps, a fresh batch each step.

    Returns:
        ``{"losses": list of floats, "seconds": wall time of the whole call (model and optimiser
        built, every step)}``.
    """
    if threads is not None:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    params = init_params(d, H, seed=seed)
    opt = torch.optim.Adam([params], lr=learning_rate)
    losses = []
    for _ in range(steps):
        E, y_target = sample_embeddings(d, C, batch)
        loss = loss_fn(params, E, y_target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "seconds": time.perf_counter() - t0}


def max_abs_diff(params_np: dict, E_np, pred_np) -> float:
    """Largest ``|peer - iclgd|`` of the predictions on one batch (float64), same parameters.

    Args:
        params_np: iclgd LSA parameters ``{"WK", "WQ", "WV", "WP"}`` as NumPy arrays ``(H, D, D)``.
        E_np: ``(B, d+1, C+1)`` embeddings (NumPy).
        pred_np: ``(B,)`` iclgd's predictions on ``E_np``.
    """
    names = ("WK", "WQ", "WV", "WP")
    params = torch.stack([torch.tensor(params_np[k], dtype=torch.float64) for k in names])
    E = torch.tensor(E_np, dtype=torch.float64)
    with torch.no_grad():
        pred = lsa_output(params, E)[:, -1, -1]
    return float((pred - torch.tensor(pred_np, dtype=torch.float64)).abs().max())


def main() -> None:
    import argparse
    import json
    import os

    ap = argparse.ArgumentParser(description="Train the PyTorch peer once and time the call.")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--H", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON line (for bench_training)")
    args = ap.parse_args()
    if not AVAILABLE:
        raise SystemExit("torch not installed: pip install torch==2.13.0")
    r = train(args.steps, H=args.H, threads=args.threads)
    if args.json:
        out = {"wall": r["seconds"], "prepare": 0.0, "compile": 0.0, "steps": args.steps}
        print(json.dumps(out))
    else:
        policy = os.environ.get("OMP_WAIT_POLICY", "unset")
        print(
            f"torch {torch.__version__}, H = {args.H}, {args.threads} thread(s), "
            f"OMP_WAIT_POLICY={policy}: {args.steps} steps in {r['seconds']:.2f} s "
            f"({r['seconds'] / args.steps * 1000:.2f} ms/step), loss {r['losses'][0]:.3f} -> "
            f"{r['losses'][-1]:.3f}"
        )


if __name__ == "__main__":
    main()
