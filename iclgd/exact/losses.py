"""Losses ``loss(params, key)`` equal to an exact risk (the key is ignored), for ``iclgd.train``.

Training on them follows the exact-gradient path of the population risk: no sampling noise.
Example::

    ex = exact.prepare(iclgd.make_prior(10, mu=jnp.ones(10)), C=10)
    run = iclgd.train(exact.lsa_loss(ex), iclgd.init_lsa(jax.random.key(0), 10), jax.random.key(1),
                      steps=2000)
    # run.losses is the population risk along the path
"""

from __future__ import annotations

from collections.abc import Callable

from .moments import Exact, check_exact
from .risks import check_guess, linear_transformer_risk, lsa_risk, yq_lsa_risk

__all__ = ["lsa_loss", "yq_lsa_loss", "linear_transformer_loss"]


def lsa_loss(ex: Exact, y_q_guess=None, y_q_bias=0.0) -> Callable:
    """``loss(params, key)`` = :func:`~iclgd.exact.lsa_risk` (key ignored), for training."""
    check_exact(ex)
    check_guess(ex, y_q_guess, y_q_bias)
    return lambda params, key=None: lsa_risk(params, ex, y_q_guess, y_q_bias)


def yq_lsa_loss(ex: Exact) -> Callable:
    """``loss(params, key)`` = :func:`~iclgd.exact.yq_lsa_risk` (key ignored), for training."""
    check_exact(ex)
    return lambda params, key=None: yq_lsa_risk(params, ex)


def linear_transformer_loss(ex: Exact) -> Callable:
    """``loss(params, key)`` = :func:`~iclgd.exact.linear_transformer_risk` (key ignored)."""
    check_exact(ex)
    return lambda params, key=None: linear_transformer_risk(params, ex)
