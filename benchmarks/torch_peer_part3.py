"""A PyTorch peer of iclgd's Part III training (Ahn et al.'s Fig. 3 recipe), for ``bench_part3.py``.

A port of the public code (github.com/chengxiang/LinearTransformer): ``attention``,
``Transformer_F`` and ``in_context_loss`` of ``linear_transformer.py`` and the training loop of
``rotation demonstration-LBFGS.ipynb``, on the CPU. Tokens are rows, ``Z`` is ``(B, n+1, d+1)``
(``[x, y]`` per token, the query's ``y`` zero); each layer is

    Z <- Z + (1/n) (Z Q_full Z^T) M (Z P_full^T),   M = diag(I_n, 0),

with ``P_full = [[P, 0], [0, 1]]``, ``Q_full = [[Q, 0], [0, 0]]`` built from the ``d x d``
parameters of ``allparam (L, 1, 2, d, d)`` (``P = B_l``, ``Q = A_l`` of eq. 13), the whole
``(n+1) x (n+1)`` attention matrix of every prompt; the loss is ``mean((Z_L[:, n, d] + y)^2)``.
The optimiser is ``torch.optim.LBFGS(history_size=600, max_iter=4, lr=0.1)`` on one fixed batch;
each step of the notebook also evaluates the loss and its gradient once outside the closure (for
its printed gradient norm), so a step costs five evaluations for four L-BFGS iterations.

Float32, as the public code runs. ``torch.set_num_threads`` is set per call; ``OMP_WAIT_POLICY``
must be set in the environment before ``torch`` is imported (``bench_part3.py`` sets it).
"""

from __future__ import annotations

import time

try:
    import torch
except ImportError:  # the benchmark prints "torch not installed: peer skipped"
    torch = None

AVAILABLE = torch is not None
__all__ = ["AVAILABLE", "attention", "Transformer_F", "in_context_loss", "make_batch", "Recipe"]


def attention(P, Q, Z):
    """One head of the public code's linear attention: ``(B, n+1, d+1)`` -> the same shape."""
    n, d = Z.shape[1] - 1, Z.shape[2] - 1
    P_full = torch.cat([P, torch.zeros(1, d, dtype=Z.dtype)], dim=0)
    P_full = torch.cat([P_full, torch.zeros(d + 1, 1, dtype=Z.dtype)], dim=1)
    P_full[d, d] = 1
    Q_full = torch.cat([Q, torch.zeros(1, d, dtype=Z.dtype)], dim=0)
    Q_full = torch.cat([Q_full, torch.zeros(d + 1, 1, dtype=Z.dtype)], dim=1)
    A = torch.eye(n + 1, dtype=Z.dtype)
    A[n, n] = 0
    Attn = torch.einsum("BNi, ij, BMj -> BNM", (Z, Q_full, Z))
    key = torch.einsum("ij, BNj -> BNi", (P_full, Z))
    return torch.einsum("BNM,ML, BLi -> BNi", (Attn, A, key)) / n


if AVAILABLE:

    class Transformer_F(torch.nn.Module):
        """``allparam (L, H, 2, d, d)``: ``[i, j, 0]`` is ``P``, ``[i, j, 1]`` is ``Q`` of layer
        ``i``, head ``j``; i.i.d. normal entries of standard deviation ``var`` (the public code's
        ``normal_(0, var)``)."""

        def __init__(self, n_layer: int, n_head: int, d: int, var: float):
            super().__init__()
            self.register_parameter(
                "allparam", torch.nn.Parameter(torch.zeros(n_layer, n_head, 2, d, d))
            )
            with torch.no_grad():
                self.allparam.normal_(0, var)
            self.n_layer, self.n_head = n_layer, n_head

        def forward(self, Z):
            for i in range(self.n_layer):
                residues = 0
                for j in range(self.n_head):
                    residues = residues + attention(
                        self.allparam[i, j, 0], self.allparam[i, j, 1], Z
                    )
                Z = Z + residues
            return Z
else:  # pragma: no cover - without torch
    Transformer_F = None


def in_context_loss(model, Z, y):
    """``mean((Z_L[:, n, d] + y)^2)``: the public code's loss (its prediction is ``-Z_L[n, d]``)."""
    n, d = Z.shape[1] - 1, Z.shape[2] - 1
    return ((model(Z)[:, n, d] + y) ** 2).mean()


def make_batch(X, y, x_q, y_target):
    """The public code's ``Z (B, n+1, d+1)`` and query labels ``(B,)`` from iclgd's prompt arrays
    (NumPy: ``X (B, n, d)``, ``y (B, n)``, ``x_q (B, d)``, ``y_target (B,)``), float32."""
    X = torch.tensor(X, dtype=torch.float32)
    B = X.shape[0]
    x_all = torch.cat([X, torch.tensor(x_q, dtype=torch.float32)[:, None]], dim=1)
    y_all = torch.cat([torch.tensor(y, dtype=torch.float32), torch.zeros(B, 1)], dim=1)
    return torch.cat([x_all, y_all[:, :, None]], dim=2), torch.tensor(y_target).float()


class Recipe:
    """The notebook's training loop on one fixed batch: :meth:`step` is one iteration of its
    ``for t in range(max_iters)`` (a loss and gradient, then ``optimizer.step(closure)``: four
    L-BFGS iterations); :meth:`value_and_grad` is one evaluation of the loss and its gradient."""

    def __init__(self, Z, y, n_layer: int = 3, var: float = 1e-4, seed: int = 0):
        torch.manual_seed(seed)
        self.Z, self.y = Z, y
        self.model = Transformer_F(n_layer, 1, Z.shape[2] - 1, var)
        self.opt = torch.optim.LBFGS(self.model.parameters(), history_size=600, max_iter=4, lr=0.1)
        self.evals = 0

    def value_and_grad(self) -> float:
        self.opt.zero_grad()
        loss = in_context_loss(self.model, self.Z, self.y)
        loss.backward()
        self.evals += 1
        return float(loss.detach())

    def step(self) -> float:
        def closure():
            self.opt.zero_grad()
            loss = in_context_loss(self.model, self.Z, self.y)
            loss.backward()
            self.evals += 1
            return loss

        loss = self.value_and_grad()  # the notebook's loss and gradient norm, outside the closure
        self.opt.step(closure)
        self.opt.zero_grad()
        return loss


def time_steps(recipe: Recipe, steps: int, threads: int) -> tuple[float, int]:
    """Seconds for ``steps`` notebook steps at ``threads`` threads, and evaluations done."""
    torch.set_num_threads(threads)
    e0, t0 = recipe.evals, time.perf_counter()
    for _ in range(steps):
        recipe.step()
    return time.perf_counter() - t0, recipe.evals - e0
