"""Products of many tiny matrices, one pair per prompt: ``(B, a, k) x (B, k, b)`` for ``B`` prompts
and ``a, k, b`` of the order of ``d = 5`` (Part III's GD++ through its context moments,
:func:`iclgd.models.linear_transformer.gdpp_moments`).

Each product is a sum over the contracted index ``k`` of broadcast products, which XLA fuses into
one loop: on a CPU its batched ``dot_general`` is 10-20x slower on such shapes
(``benchmarks/README.md``, Part III). Each has a custom VJP that is again such a sum
(differentiating the sums directly gives XLA reductions, as slow as the batched dot). All are
private to :mod:`iclgd.models`; shapes are not checked here (the callers check theirs).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__: list[str] = []


def _nn(P, Q):  # P Q
    return sum(P[:, :, k, None] * Q[:, None, k, :] for k in range(P.shape[2]))


def _nt(P, Q):  # P Q^T
    return sum(P[:, :, k, None] * Q[:, None, :, k] for k in range(P.shape[2]))


def _tn(P, Q):  # P^T Q
    return sum(P[:, k, :, None] * Q[:, None, k, :] for k in range(P.shape[1]))


@jax.custom_vjp
def _mm(P, Q):
    return _nn(P, Q)


_mm.defvjp(lambda P, Q: (_nn(P, Q), (P, Q)), lambda r, g: (_nt(g, r[1]), _tn(r[0], g)))


@jax.custom_vjp
def _mm_t(P, Q):  # P Q^T
    return _nt(P, Q)


_mm_t.defvjp(lambda P, Q: (_nt(P, Q), (P, Q)), lambda r, g: (_nn(g, r[1]), _tn(g, r[0])))


def _mv_raw(P, x):  # P x
    return sum(P[:, :, k] * x[:, None, k] for k in range(P.shape[2]))


def _tv_raw(P, x):  # P^T x
    return sum(P[:, k, :] * x[:, None, k] for k in range(P.shape[1]))


@jax.custom_vjp
def _mv(P, x):
    return _mv_raw(P, x)


_mv.defvjp(
    lambda P, x: (_mv_raw(P, x), (P, x)),
    lambda r, g: (g[:, :, None] * r[1][:, None, :], _tv_raw(r[0], g)),
)


@jax.custom_vjp
def _tv(P, x):  # P^T x
    return _tv_raw(P, x)


_tv.defvjp(
    lambda P, x: (_tv_raw(P, x), (P, x)),
    lambda r, g: (r[1][:, :, None] * g[:, None, :], _mv_raw(r[0], g)),
)


def _sandwich(Bm, G, A):
    """``B G_b A`` for every prompt ``b`` (``B``, ``A`` shared): for ``d <= 8`` one matrix product
    ``vec(G_b) (B^T kron A)`` of ``(batch, d^2) x (d^2, d^2)``, else two shared products."""
    d = G.shape[-1]
    if d > 8:
        return jnp.einsum("ij,bjk,kl->bil", Bm, G, A)
    return (G.reshape(-1, d * d) @ jnp.kron(Bm.T, A)).reshape(G.shape)
