"""Losses equal to an exact risk (the key is ignored), for ``iclgd.train``: one call shape.

Each builder takes the setting of its risk (the moments ``ex`` of :func:`~iclgd.exact.prepare`)
and returns ``loss(params, key)``; given ``None`` instead, it returns ``loss(params, key, ex)``, so
that :func:`iclgd.train` with ``args=(ex,)`` trains every setting of a sweep with one compilation
(the convention of :func:`iclgd.training.sampled_loss`). Part II's builder is
:func:`iclgd.exact.softmax_loss`.

Training on them follows the exact-gradient path of the population risk: no sampling noise.
Example::

    ex = exact.prepare(iclgd.make_prior(10, mu=jnp.ones(10)), C=10)
    run = iclgd.train(exact.lsa_loss(ex), iclgd.init_lsa(jax.random.key(0), 10), jax.random.key(1),
                      steps=2000)
    # run.losses is the population risk along the path
    loss = exact.lsa_loss(None)                      # loss(params, key, ex): one compilation
    runs = [iclgd.train(loss, p0, key, steps=2000, args=(ex,)) for ex in moments_of_a_sweep]
"""

from __future__ import annotations

from collections.abc import Callable

from .. import checks as v
from .moments import Exact, check_exact
from .risks import check_guess, linear_transformer_risk, lsa_risk, yq_lsa_risk

__all__ = ["lsa_loss", "yq_lsa_loss", "linear_transformer_loss"]


def _check_guess_alone(y_q_guess, y_q_bias) -> None:
    """Validate the query guess without the moments (its length is checked against ``ex.d`` at the
    call of the loss)."""
    if y_q_guess is not None:
        v.array("y_q_guess", y_q_guess, "d")
    c = v.array("y_q_bias", y_q_bias)
    if c.ndim != 0:
        raise ValueError(f"y_q_bias must be a scalar, got shape {tuple(c.shape)}")


def lsa_loss(ex: Exact | None, y_q_guess=None, y_q_bias=0.0) -> Callable:
    """``loss(params, key)`` = :func:`~iclgd.exact.lsa_risk` (key ignored), for training.

    Args:
        ex: the moments (:func:`~iclgd.exact.prepare`); ``None`` makes them an argument of the loss,
            ``loss(params, key, ex)`` (pass ``args=(ex,)`` to :func:`iclgd.train`).
        y_q_guess: ``(d,)`` or ``None``; the query guess ``y_q = x_q^T g + c`` (§5.1.3).
        y_q_bias: ``()``, the ``c`` of that guess.

    Returns:
        ``loss(params, key) -> ()``, or ``loss(params, key, ex) -> ()`` when ``ex`` is ``None``.
    """
    if ex is None:
        _check_guess_alone(y_q_guess, y_q_bias)
        return lambda params, key, ex: lsa_risk(params, ex, y_q_guess, y_q_bias)
    check_exact(ex)
    check_guess(ex, y_q_guess, y_q_bias)
    return lambda params, key=None: lsa_risk(params, ex, y_q_guess, y_q_bias)


def yq_lsa_loss(ex: Exact | None) -> Callable:
    """``loss(params, key)`` = :func:`~iclgd.exact.yq_lsa_risk` (key ignored), for training.

    Args:
        ex: the moments; ``None`` makes them an argument, ``loss(params, key, ex)``.

    Returns:
        ``loss(params, key) -> ()``, or ``loss(params, key, ex) -> ()`` when ``ex`` is ``None``.
    """
    if ex is None:
        return lambda params, key, ex: yq_lsa_risk(params, ex)
    check_exact(ex)
    return lambda params, key=None: yq_lsa_risk(params, ex)


def linear_transformer_loss(ex: Exact | None) -> Callable:
    """``loss(params, key)`` = :func:`~iclgd.exact.linear_transformer_risk` (key ignored).

    Args:
        ex: the moments; ``None`` makes them an argument, ``loss(params, key, ex)``.

    Returns:
        ``loss(params, key) -> ()``, or ``loss(params, key, ex) -> ()`` when ``ex`` is ``None``.
    """
    if ex is None:
        return lambda params, key, ex: linear_transformer_risk(params, ex)
    check_exact(ex)
    return lambda params, key=None: linear_transformer_risk(params, ex)
