"""Part I's experiments as one training run: many multi-head LSA configurations, one prompt stream.

Figs. 2-4 of Xie et al. (§5.1) train multi-head LSA for many settings: the number of heads ``H``,
the prior mean ``w_star`` and the initial guess ``y_q = x_q^T g + c``. Each configuration ``j`` has
its own parameters, but all of them can see the *same* fresh prompts at every step: a prompt with
prior mean ``mu`` is a prompt with prior mean 0 whose labels are shifted by ``X mu``
(``y -> y + X mu``, ``y_target -> y_target + x_q^T mu``). So one batch drawn with ``w_star = 0``
serves every configuration, and one Adam on the sum of the losses trains all of them at once (Adam
is per coordinate, so the sum changes nothing for each configuration's parameters).

Every LSA prediction is ``f = <G (x) x~_q, Mt> + v^T x~_q`` (``G`` the context Gram matrix,
``x~_q = (x_q, 1)``; see :mod:`iclgd.exact`). With the shift ``z = W z0``,
``W = [[I, 0], [mu^T, 1]]``, ``<G, S> = <G0, W^T S W>``, so every configuration's prediction is a
linear function of the same ``vech G0`` and ``x~_q``: the sampled losses of all configurations cost
one ``(B, NV) x (NV, K D)`` product per step, and their exact risks come from the ``w_star = 0``
moments alone.

Squared norms describe the settings, as in the paper's Table 1: ``w_star``, ``g`` are
``sqrt(s / d) (1, ..., 1)`` for a squared norm ``s``, and ``c = sqrt(c2)``.

Example::

    sweep = LSASweep(d=10, C=10, batch=2048, configs=[SweepConfig(H) for H in (1, 2, 11)])
    P = sweep.init(jax.random.key(1))
    res = iclgd.train(sweep.sampled_loss, P, jax.random.key(2), steps=2000, has_aux=True)
    res.aux          # (2000, K): the minibatch loss of every configuration at every step
    sweep.exact_risks(res.params)   # (K,) exact risks in float64
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import checks as v
from .. import exact
from ..models.lsa import init_lsa, lsa_reduced
from ..tasks import make_prior, sample_tasks

__all__ = ["SweepConfig", "LSASweep", "along_ones"]


class SweepConfig(NamedTuple):
    """One configuration of Part I's sweep.

    Attributes:
        H: number of heads.
        w2: ``||w_star||^2`` (prior mean along ``(1, ..., 1)``).
        g2: ``||g||^2`` of the linear guess ``y_q = x_q^T g + c`` (along ``(1, ..., 1)``).
        c2: ``c^2`` of the constant part of the guess.
    """

    H: int
    w2: float = 0.0
    g2: float = 0.0
    c2: float = 0.0


def along_ones(d: int, s2: float) -> np.ndarray:
    """The vector ``a (1, ..., 1)`` in ``R^d`` with squared norm ``s2``."""
    d = v.positive_int("d", d)
    s2 = v.nonneg_float("s2", s2)
    return np.sqrt(s2 / d) * np.ones(d)


def _config_list(configs) -> list:
    if isinstance(configs, (SweepConfig, str, dict)) or not hasattr(configs, "__iter__"):
        raise v.ArgumentTypeError(
            f"configs must be a list of SweepConfig (or tuples (H, w2, g2, c2)), "
            f"got {type(configs).__name__}"
        )
    return list(configs)


def _config(i: int, c) -> SweepConfig:
    if not isinstance(c, (tuple, list)) or not 1 <= len(c) <= 4:
        raise v.ArgumentTypeError(
            f"configs[{i}] must be a SweepConfig or a tuple (H, w2, g2, c2), got {c!r:.60}"
        )
    return SweepConfig(*c)


class LSASweep:
    """Many multi-head LSA configurations trained on one stream of prompts (see the module doc).

    Args:
        d: input dimension.
        C: context length.
        batch: prompts per step.
        configs: the configurations; equal configurations are not allowed (each is trained once).

    Attributes:
        configs: the configurations, in order; ``K = len(configs)``.
        HMAX: the largest ``H``; parameters are stacked ``(K, HMAX, d+1, d+1)``, the heads beyond a
            configuration's ``H`` are zero and stay zero (their gradient is zero).
        sampled_loss: ``loss(P, key) -> (sum, (K,) losses)`` on one fresh batch (``has_aux=True``).
        exact_loss: ``loss(P, key) -> (sum, (K,) exact risks)`` (the key is ignored).
    """

    def __init__(self, d: int, C: int, batch: int, configs):
        self.d = v.positive_int("d", d)
        self.C = v.positive_int("C", C)
        self.batch = v.positive_int("batch", batch)
        configs = [_config(i, c) for i, c in enumerate(_config_list(configs))]
        if not configs:
            raise ValueError("configs must hold at least one SweepConfig")
        if len(set(configs)) != len(configs):
            raise ValueError("configs must not repeat a configuration")
        for c in configs:
            v.positive_int("H", c.H)
            for name in ("w2", "g2", "c2"):
                v.nonneg_float(name, getattr(c, name))
        self.configs = configs
        self.K = len(configs)
        self.HMAX = max(c.H for c in configs)
        D = self.D = self.d + 1
        self._iu = np.triu_indices(D)
        self._half = np.where(self._iu[0] == self._iu[1], 0.5, 1.0)[:, None]
        self.mus = jnp.asarray(np.stack([along_ones(d, c.w2) for c in configs]), jnp.float32)
        self.gs = jnp.asarray(np.stack([along_ones(d, c.g2) for c in configs]), jnp.float32)
        self.cs = jnp.asarray([np.sqrt(c.c2) for c in configs], jnp.float32)
        Hs = np.array([c.H for c in configs])
        self.mask = (np.arange(self.HMAX)[None, :] < Hs[:, None]).astype(np.float32)
        self._prior0 = make_prior(d)
        self._ex0 = exact.prepare(self._prior0, self.C)
        self._exs: dict = {}
        self.sampled_loss = self._make_loss(self.sampled_losses)
        self.exact_loss = self._make_loss(self.exact_losses)

    # ------------------------------------------------------------------ parameters
    def init(self, key: jax.Array, init_std: float = 0.1) -> dict:
        """The same :func:`~iclgd.models.lsa.init_lsa` draw for every configuration, truncated to
        its ``H`` heads: ``{"WK", "WQ", "WV", "WP"}`` each ``(K, HMAX, d+1, d+1)``."""
        p = init_lsa(key, self.d, self.HMAX, init_std)
        return {k: x[None] * self.mask[:, :, None, None] for k, x in p.items()}

    def index(self, H: int, w2: float = 0.0, g2: float = 0.0, c2: float = 0.0) -> int:
        """The position of a configuration in :attr:`configs`."""
        want = SweepConfig(H, float(w2), float(g2), float(c2))
        for j, c in enumerate(self.configs):
            if c == want:
                return j
        raise ValueError(f"no configuration {want} in this sweep")

    def params(self, P: dict, j: int) -> dict:
        """The LSA parameters of configuration ``j`` with its own ``H`` heads."""
        keys = ("WK", "WQ", "WV", "WP")
        v.param_dict("P", P, keys, f"a dict with keys {keys} (see LSASweep.init)")
        dims = v.Dims(K=self.K, HMAX=self.HMAX, D=self.D)
        for k in keys:
            v.array(f"P[{k!r}]", P[k], "K HMAX D D", dims)
        j = v.positive_int("j", j, 0)
        if j >= self.K:
            raise ValueError(f"j must be a configuration index < K = {self.K}, got {j}")
        H = self.configs[j].H
        return {k: x[j, :H] for k, x in P.items()}

    # ------------------------------------------------------------------ losses
    def coefficients(self, params: dict, mu, g, c):
        """``S`` with ``f = <G0 (x) x~_q, S> + (g, c).x~_q`` for one configuration (prompts drawn
        with prior mean 0, shifted by ``mu``): ``(D, D, D)``."""
        D, d = self.D, self.d
        b, A = lsa_reduced(params)
        Pt = jnp.zeros((D, D), b.dtype).at[:d, :d].set(jnp.eye(d)).at[d, :d].set(g).at[d, d].set(c)
        Mt = jnp.einsum("hm,hnk->mnk", b, A @ Pt)  # z_q = Pt x~_q
        W = jnp.eye(D, dtype=b.dtype).at[d, :d].set(mu)  # z = W z0
        return jnp.einsum("am,abk,bn->mnk", W, Mt, W)  # <G, S> = <G0, W^T S W>

    def _all_coefficients(self, P):
        S = jax.vmap(self.coefficients)(P, self.mus, self.gs, self.cs)
        # y_q minus the shift of the target
        V = jnp.concatenate([self.gs - self.mus, self.cs[:, None]], -1)
        return S, V

    def sampled_losses(self, P: dict, key: jax.Array) -> jax.Array:
        """Mean squared error of every configuration on the same fresh batch: ``(K,)``."""
        iu, K, D = self._iu, self.K, self.D
        t = sample_tasks(key, self._prior0, self.C, self.batch)
        Z = jnp.concatenate([t.X, t.y[..., None]], -1)
        # (a broadcast product: XLA on CPU runs it several times faster than a batched einsum)
        G0 = (Z[:, :, :, None] * Z[:, :, None, :]).sum(1) / self.C
        Gv = G0[:, iu[0], iu[1]]
        xt = jnp.concatenate([t.x_q, jnp.ones((self.batch, 1))], -1)
        S, V = self._all_coefficients(P)
        theta = (S + S.transpose(0, 2, 1, 3))[:, iu[0], iu[1]] * self._half  # (K, NV, D)
        NV = theta.shape[1]
        Y = (Gv @ theta.transpose(1, 0, 2).reshape(NV, K * D)).reshape(-1, K, D)
        err = jnp.einsum("bjk,bk->bj", Y, xt) + xt @ V.T - t.y_target[:, None]
        return jnp.mean(err**2, 0)

    def exact_losses(self, P: dict, key=None) -> jax.Array:
        """The exact risk of every configuration, from the ``w_star = 0`` moments: ``(K,)``."""
        del key
        S, V = self._all_coefficients(P)
        return jax.vmap(lambda s, vq: exact.predictor_risk(s, vq, self._ex0))(S, V)

    @staticmethod
    def _make_loss(per_config):
        def loss(P, key):
            losses = per_config(P, key)
            return jnp.sum(losses), losses

        return loss

    # ------------------------------------------------------------------ evaluation
    def prepared(self, w2: float):
        """``exact.prepare`` of the prior with ``||w_star||^2 = w2`` (cached)."""
        if w2 not in self._exs:
            mu = jnp.asarray(along_ones(self.d, w2))
            self._exs[w2] = exact.prepare(make_prior(self.d, mu=mu), self.C)
        return self._exs[w2]

    def exact_risk(self, P: dict, j: int) -> float:
        """Exact risk of configuration ``j`` in float64, with the moments of its own prior (an
        independent route from :meth:`exact_losses`)."""
        c = self.configs[j]
        g = along_ones(self.d, c.g2)
        ex = self.prepared(c.w2)
        return exact.risk64(exact.lsa_risk, self.params(P, j), ex, g, np.sqrt(c.c2))

    def exact_risks(self, P: dict) -> np.ndarray:
        """:meth:`exact_risk` of every configuration: ``(K,)``."""
        return np.array([self.exact_risk(P, j) for j in range(self.K)])
