"""Errors and similarities shared by every model family: the one squared-error helper of iclgd.

* :func:`mse` -- the mean squared error over a batch (every loss in iclgd is built from it;
  Part II's losses carry the paper's factor 1/2 in front of it).
* :func:`cosine` -- cosine similarity along the last axis; :func:`max_rel_diff` -- the largest
  difference from a reference, relative to the reference's largest entry.
* :func:`input_gradient` and :func:`compare_predictors` -- do two predictors compute the same
  function? Xie et al. App. C.2 compares predictions and input gradients ``d f / d x_q``.
* :func:`dist_to_identity` -- ``Dist(M, I)`` of Ahn et al. Sec. 5.3 (Figs. 1-4), and
  :func:`whitened` -- the ``Sigma^{1/2} A Sigma^{1/2}`` it is applied to;
  :func:`gradient_stats` -- a sampled gradient and its standard error.
* :func:`empirical_loss`, :func:`inference_loss` -- Yang et al.'s eq. 9 and Theorem 2 on a sample;
  :func:`inference_sets`, :func:`inference_metrics`, :func:`copy_prompt_gap` -- the inference loss
  of Fig. 2 on fixed test prompts, for any Part II model.
* :func:`equal_budget` -- training runs compared at equal steps and at equal wall-clock time
  (Yang et al.'s Fig. 5, whose budget was 100 s on the paper's machine).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import checks as v
from .baselines import y_star
from .models.softmax import softmax_predict
from .tasks.linear import check_batch
from .tasks.representation import (
    RepresentationBatch,
    RepresentationSpec,
    check_spec,
    sample_representation_tasks,
)

__all__ = [
    "mse",
    "cosine",
    "max_rel_diff",
    "input_gradient",
    "compare_predictors",
    "safe_scale",
    "dist_to_identity",
    "whitened",
    "gdpp_sample_loss",
    "GradStats",
    "gradient_stats",
    "empirical_loss",
    "inference_loss",
    "softmax_sample_loss",
    "InferenceSet",
    "inference_sets",
    "inference_metrics",
    "copy_prompt_gap",
    "EqualBudget",
    "equal_budget",
]


def safe_scale(x: jax.Array, axis) -> jax.Array:
    """A divisor for ``x`` along ``axis`` (keepdims) under which its squares neither overflow nor
    underflow: ``max |x|`` where that is above ``max ** (1/4)`` or below ``tiny ** (1/4)`` of the
    dtype, else exactly 1 (so ordinary inputs are computed unchanged). No gradient flows through
    it (use it for scale-invariant quantities)."""
    x = jnp.asarray(x)
    fi = jnp.finfo(x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32)
    s = jax.lax.stop_gradient(jnp.max(jnp.abs(x), axis=axis, keepdims=True))
    bad = ((s > fi.max**0.25) | (s < fi.tiny**0.25)) & (s > 0) & jnp.isfinite(s)
    return jnp.where(bad, s, jnp.ones_like(s))


def mse(pred: jax.Array, target: jax.Array) -> jax.Array:
    """Mean squared error ``mean((pred - target)^2)`` over all entries.

    Args:
        pred: predictions, any shape (``(B,)`` for one query per prompt, ``(B, K)`` for Part II).
        target: the same shape as ``pred``.

    Returns:
        ``()``.

    Raises:
        ValueError: if the shapes differ, the batch is empty or (concrete) a value is NaN or Inf.
    """
    pred = v.array("pred", pred, promote=True)
    target = v.array("target", target, promote=True)
    ps, ts = tuple(pred.shape), tuple(target.shape)
    if ps != ts:
        raise ValueError(f"pred and target must have the same shape, got {ps} and {ts}")
    if 0 in ps:
        raise ValueError(f"pred and target must not be empty, got shape {ps}")
    return jnp.mean((pred - target) ** 2)


def cosine(a: jax.Array, b: jax.Array) -> jax.Array:
    """Cosine similarity ``<a, b> / (|a| |b|)`` along the last axis.

    The cosine with a zero vector is ``0 / 0``; it is returned as ``0`` (no direction is closer
    than another), never NaN. Vectors whose squared norm would overflow (or underflow) are scaled
    by their largest entry first.

    Args:
        a, b: ``(..., n)`` arrays of the same shape, ``n >= 1``.

    Returns:
        ``(...)``.
    """
    a = v.array("a", a, "... n", promote=True)
    b = v.array("b", b, "... n", promote=True)
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    a, b = jnp.asarray(a), jnp.asarray(b)
    a, b = a / safe_scale(a, -1), b / safe_scale(b, -1)
    a2, b2 = jnp.sum(a * a, -1), jnp.sum(b * b, -1)
    ok = (a2 > 0) & (b2 > 0)
    safe = lambda s: jnp.sqrt(jnp.where(ok, s, 1.0))  # no NaN in the value nor the gradient
    return jnp.where(ok, jnp.sum(a * b, -1) / (safe(a2) * safe(b2)), 0.0)


_PREDICT = "a function predict(tasks) -> (B,)"


def max_rel_diff(a, b) -> float:
    """``max |a - b| / max |b|``: how far ``a`` is from the reference ``b`` (shapes broadcast),
    e.g. a model's predictions against a closed form's.

    >>> max_rel_diff([1.0, 2.1], [1.0, 2.0])  # doctest: +ELLIPSIS
    0.05...
    """
    a, b = v.array("a", a, promote=True), v.array("b", b, promote=True)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"a and b must broadcast, got shapes {a.shape} and {b.shape}") from None
    if not v.is_tracer(b) and not np.any(np.asarray(b)):
        raise ValueError("b must not be all zeros (the difference is relative to max |b|)")
    return float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))


def input_gradient(predict: Callable, tasks) -> jax.Array:
    """The gradient of each prompt's prediction with respect to its own query, ``d f / d x_q``.

    Args:
        predict: ``predict(tasks) -> (B,)``, prompts predicted independently (every model of iclgd).
        tasks: a :class:`~iclgd.tasks.TaskBatch`.

    Returns:
        ``(B, d)``.
    """
    v.function("predict", predict, _PREDICT)
    check_batch(tasks)
    # prompts are independent, so the gradient of the sum is every prompt's own gradient
    return jax.grad(lambda x_q: jnp.sum(predict(tasks._replace(x_q=x_q))))(tasks.x_q)


def compare_predictors(predict_a: Callable, predict_b: Callable, tasks) -> dict:
    """How close two predictors are as functions (Xie et al. App. C.2), on a batch of prompts.

    Args:
        predict_a: ``predict_a(tasks) -> (B,)``, e.g. a trained model.
        predict_b: ``predict_b(tasks) -> (B,)``, the reference, e.g. one GD step.
        tasks: a :class:`~iclgd.tasks.TaskBatch`.

    Returns:
        A dict of NumPy arrays and floats: ``pred_diff`` ``(B,)`` ``|f_a - f_b|``, ``pred_scale``
        the rms of ``f_b``; ``grad_diff`` ``(B,)`` ``|grad f_a - grad f_b|`` (input gradients),
        ``grad_scale`` the mean ``|grad f_b|``; ``cos`` ``(B,)`` the cosine of the two input
        gradients; ``cos_ref`` ``(B,)`` the cosine of ``grad f_b`` with each prompt's true task
        weights ``tasks.w`` (how well the reference itself recovers the task).
    """
    v.function("predict_a", predict_a, _PREDICT)
    v.function("predict_b", predict_b, _PREDICT)
    dims = v.Dims()
    check_batch(tasks, dims=dims)
    v.array("tasks.w", tasks.w, "B d", dims)
    B = dims["B"]
    f_a, f_b = predict_a(tasks), predict_b(tasks)
    for name, f in (("predict_a", f_a), ("predict_b", f_b)):
        shp = tuple(np.shape(f))
        if shp != (B,):
            raise ValueError(
                f"{name}(tasks) must return shape (B,) = ({B},) (one prediction per prompt), got "
                f"{shp}"
            )
        v.array(f"{name}(tasks)", f)
    g_a, g_b = input_gradient(predict_a, tasks), input_gradient(predict_b, tasks)
    return {
        "pred_diff": np.asarray(jnp.abs(f_a - f_b)),
        "pred_scale": float(jnp.sqrt(jnp.mean(f_b**2))),
        "grad_diff": np.asarray(jnp.linalg.norm(g_a - g_b, axis=-1)),
        "grad_scale": float(jnp.mean(jnp.linalg.norm(g_b, axis=-1))),
        "cos": np.asarray(cosine(g_a, g_b)),
        "cos_ref": np.asarray(cosine(g_b, tasks.w)),
    }


# Part III: Dist(M, I) of Figs. 1-4 and gradient noise


def dist_to_identity(M) -> jax.Array:
    """``Dist(M, I) = min_alpha ||M - alpha I||_F / ||M||_F`` (Sec. 5.3), batched over leading axes.

    The minimiser is ``alpha = tr(M) / d``, so ``Dist^2 = 1 - tr(M)^2 / (d ||M||_F^2)``.

    Args:
        M: ``(..., d, d)`` array, no matrix identically zero.

    Returns:
        ``(...)`` values in ``[0, 1]``.
    """
    M = v.array("M", M, "... d d", promote=True)
    if not v.is_tracer(M) and np.any(np.abs(np.asarray(M)).max(axis=(-2, -1)) == 0):
        raise ValueError("M must hold no matrix that is identically zero (Dist is 0/0 there)")
    M = jnp.asarray(M)
    M = M / safe_scale(M, (-2, -1))  # Dist is scale-invariant; no overflow in ||M||^2
    d = M.shape[-1]
    alpha = jnp.trace(M, axis1=-2, axis2=-1) / d
    R = M - alpha[..., None, None] * jnp.eye(d, dtype=M.dtype)
    return jnp.linalg.norm(R, axis=(-2, -1)) / jnp.linalg.norm(M, axis=(-2, -1))


def whitened(A, Sigma) -> np.ndarray:
    """``Sigma^{1/2} A Sigma^{1/2}``: Ahn et al.'s weights, whitened (Sec. 5.3, Figs. 1-4).

    Their optima on the set S are multiples of ``Sigma^{-1}`` (Theorems 3-5), so whitened they are
    multiples of ``I``, which :func:`dist_to_identity` measures. ``Sigma^{1/2}`` is the symmetric
    root from ``numpy.linalg.eigh``; the whole computation is float64 NumPy (no JAX), so it does
    not depend on ``jax_enable_x64``.

    Args:
        A: ``(*batch, *extra, d, d)`` matrices, e.g. ``(seeds, records, L, d, d)``.
        Sigma: ``(*batch, d, d)`` covariances, each symmetric positive definite; its leading axes
            are the leading axes of ``A`` (one ``Sigma`` per seed, shared by the ``extra`` axes).

    Returns:
        ``(*batch, *extra, d, d)`` float64 array.

    Example:
        >>> import numpy as np
        >>> from iclgd import metrics
        >>> Sigma = np.diag([1.0, 4.0])
        >>> metrics.whitened(2 * np.linalg.inv(Sigma), Sigma)  # a multiple of Sigma^{-1} -> of I
        array([[2., 0.],
               [0., 2.]])
    """
    S = np.asarray(v.array("Sigma", Sigma, "... d d"), np.float64)
    d = S.shape[-1]
    A = np.asarray(v.array("A", A, "... d d"), np.float64)
    nb, ne = S.ndim - 2, A.ndim - S.ndim
    if ne < 0 or A.shape[:nb] != S.shape[:nb] or A.shape[-1] != d:
        raise ValueError(
            f"A must have shape (*batch, *extra, {d}, {d}) with batch = Sigma's leading axes "
            f"{S.shape[:nb]}, got shape {A.shape}"
        )
    if max(nb, ne) > 13:
        raise ValueError(f"A and Sigma may have at most 13 batch and 13 extra axes, got {nb}, {ne}")
    for idx in np.ndindex(*S.shape[:nb]):
        name = "Sigma" + (f"[{', '.join(map(str, idx))}]" if nb else "")
        v.spd_matrix(name, S[idx], d, dtype=np.float64)
    ev, V = np.linalg.eigh(S)
    root = V @ (np.sqrt(ev)[..., None] * np.swapaxes(V, -1, -2))  # (*batch, d, d)
    b, e = "ABCDEFGHIJKLM"[:nb], "NOPQRSTUVWXYZ"[:ne]
    return np.einsum(f"{b}ij,{b}{e}jk,{b}km->{b}{e}im", root, A, root)


class GradStats(NamedTuple):
    """Sample gradient of a mean loss and its standard error (:func:`gradient_stats`).

    Attributes:
        grad: pytree like ``params``, the gradient of the sample mean loss.
        se: pytree like ``params``, the standard error of each entry (per-prompt spread / sqrt N).
        z2: ``||grad||^2 / sum(se^2)``: about 1 when the population gradient is 0 (pure noise),
            much larger when it is not.
    """

    grad: Any
    se: Any
    z2: float

    def z2_against(self, target) -> float:
        """``||grad - target||^2 / sum(se^2)``: about 1 when ``target`` is the population gradient.

        Args:
            target: pytree like ``grad`` (e.g. an exact gradient).
        """
        diff = jax.tree_util.tree_map(lambda g, t: g - jnp.asarray(t), self.grad, target)
        num = sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(diff))
        return num / sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(self.se))


def gradient_stats(per_prompt_loss, params, *data, chunk: int = 2000) -> GradStats:
    """Gradient of ``mean_i loss_i`` on a fixed sample, with per-entry standard errors.

    Args:
        per_prompt_loss: ``(params, *data) -> (N,)`` losses of the ``N`` prompts in ``data``
            (each array of ``data`` has a leading axis ``N``).
        params: pytree of parameters.
        data: arrays with a leading prompt axis.
        chunk: prompts per vectorised gradient evaluation.

    Returns:
        :class:`GradStats`.
    """
    v.function("per_prompt_loss", per_prompt_loss, "a function (params, *data) -> (N,) losses")
    chunk = v.positive_int("chunk", chunk)
    if not data:
        raise ValueError("data must hold at least one array with a leading prompt axis")
    data = tuple(v.array(f"data[{i}]", x) for i, x in enumerate(data))
    if any(x.ndim < 1 for x in data):
        raise ValueError("every array of data must have a leading (prompt) axis")
    N = int(data[0].shape[0])
    if N < 2:
        raise ValueError(f"data must hold at least 2 prompts (a standard error needs 2), got {N}")
    if any(int(x.shape[0]) != N for x in data):
        raise ValueError("every array of data must have the same leading (prompt) axis")
    one = lambda p, *xs: per_prompt_loss(p, *(x[None] for x in xs))[0]  # noqa: E731
    g1 = jax.jit(jax.vmap(jax.grad(one), in_axes=(None,) + (0,) * len(data)))
    s1 = s2 = None
    for i in range(0, N, chunk):
        g = g1(params, *(x[i : i + chunk] for x in data))
        a = jax.tree_util.tree_map(lambda x: jnp.sum(x, 0), g)
        b = jax.tree_util.tree_map(lambda x: jnp.sum(x**2, 0), g)
        s1 = a if s1 is None else jax.tree_util.tree_map(jnp.add, s1, a)
        s2 = b if s2 is None else jax.tree_util.tree_map(jnp.add, s2, b)
    mean = jax.tree_util.tree_map(lambda x: x / N, s1)
    se = jax.tree_util.tree_map(
        lambda m, q: jnp.sqrt(jnp.maximum(q / N - m**2, 0.0) / (N - 1)), mean, s2
    )
    num = sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(mean))
    den = sum(float(jnp.sum(x**2)) for x in jax.tree_util.tree_leaves(se))
    return GradStats(mean, se, num / den)


def gdpp_sample_loss(a, b, lam) -> np.ndarray:
    """Loss of GD++ on Theorem 5's set for each sampled Gram matrix: ``sum_i q(lam_i)^2``.

    ``q`` is the residual polynomial of :func:`iclgd.exact.gdpp_residual` (Ahn et al. Sec. 6,
    eq. 13, with ``A_l = a_l Sigma^{-1}``, ``B_l = b_l I``); the exact expectation over the Gram
    matrix is :func:`iclgd.exact.gdpp_risk`.

    Args:
        a: ``(L,)``; b: ``(L,)`` (the last ``b`` does not enter).
        lam: ``(N, d)`` eigenvalues of ``N`` sampled whitened Gram matrices ``X_c X_c^T / n``.

    Returns:
        ``(N,)`` float64, one loss per sample.
    """
    from .exact.gdpp import gdpp_residual  # lazy: iclgd.exact imports sympy

    lam = v.array("lam", lam, "N d", promote=True)
    return np.sum(gdpp_residual(a, b, lam) ** 2, -1)


# Part II: the losses of eq. 9 and Theorem 2 on samples, and the inference loss of Fig. 2


def empirical_loss(y_hat: jax.Array, y_all: jax.Array) -> jax.Array:
    """Monte-Carlo estimate of eq. 9 on a batch: ``1/2 mean_b [ 1/K sum_k (y_hat_k - y_k)^2 ]``.

    Args:
        y_hat: ``(B, K)`` predictions for all tokens.
        y_all: ``(B, K)`` true (noisy) labels of all tokens.

    Returns:
        ``()``.
    """
    y_hat = v.array("y_hat", y_hat, "B K", promote=True)
    y_all = v.array("y_all", y_all, promote=True)
    if tuple(y_hat.shape) != tuple(y_all.shape):
        raise ValueError(
            "y_hat and y_all must have the same shape (B, K), "
            f"got {tuple(y_hat.shape)} and {tuple(y_all.shape)}"
        )
    return 0.5 * mse(y_hat, y_all)


def inference_loss(y_hat: jax.Array, y_target: jax.Array) -> jax.Array:
    """Theorem 2's inference error ``1/(2K) ||y_hat - y_star||_2^2``
    (eq. 22), averaged over the batch.

    (Fig. 2 of the paper plots ``1/K ||y_hat - y_star||^2``, i.e. twice this; Fig. 3 plots
    ``1/K ||y_star - y_best||^2``.)

    Args:
        y_hat: ``(B, K)`` model predictions.
        y_target: ``(B, K)`` reference, e.g. :func:`iclgd.baselines.y_star`.

    Returns:
        ``()``.
    """
    return empirical_loss(y_hat, y_target)


def softmax_sample_loss(
    params: dict, spec: RepresentationSpec, batch: RepresentationBatch
) -> jax.Array:
    """The training loss eq. 9 of the one-layer model, estimated on ``batch``.

    Args:
        params: ``{"Q": (H, d, d), "w": (H, K)}``.
        spec: the task.
        batch: prompts from :func:`iclgd.tasks.sample_representation_tasks`.

    Returns:
        ``()``.
    """
    what = "an iclgd.tasks.RepresentationBatch (use sample_representation_tasks)"
    v.container("batch", batch, RepresentationBatch, what)
    return empirical_loss(softmax_predict(params, spec, batch.y), batch.y_all)


def _predict_fn(model) -> Callable:
    predict = getattr(model, "predict", model)
    return v.function("model", predict, "an iclgd Model or a function predict(params, batch)")


class InferenceSet(NamedTuple):
    """Fixed test prompts and their targets ``y_star`` (eq. 22) for the inference loss of Fig. 2.

    Attributes:
        batch: ``B`` prompts (:class:`~iclgd.tasks.RepresentationBatch`).
        target: ``(B, K)`` ``y_star = (y, (Z^Q)^T lam_hat)`` with ``lam_hat`` of eq. 20.
    """

    batch: RepresentationBatch
    target: jax.Array


def inference_sets(key: jax.Array, spec, n: int = 200) -> dict[str, InferenceSet]:
    """Sec. 4's test sets: ``n`` prompts with ``lambda ~ N(0, I_m)`` (``"in"``, in domain) and ``n``
    with ``lambda ~ N(1_m, 4 I_m)`` (``"ood"``, out of domain), each with its ``y_star``.

    Args:
        key: PRNG key (split into one key per set).
        spec: the task (:func:`~iclgd.tasks.make_representation_spec`); its own ``lambda``
            law is not used.
        n: prompts per set, ``>= 1`` (the paper: 200).

    Returns:
        ``{"in": InferenceSet, "ood": InferenceSet}``.
    """
    v.prng_key("key", key)
    spec = check_spec(spec)
    n = v.positive_int("n", n)
    k_in, k_ood = jax.random.split(key)
    laws = {"in": (k_in, 0.0, 1.0), "ood": (k_ood, 1.0, 2.0)}
    out = {}
    for name, (k, mean, std) in laws.items():
        b = sample_representation_tasks(k, spec, n, lam_mean=mean, lam_std=std)
        out[name] = InferenceSet(b, y_star(spec, b.y))
    return out


def _check_sets(sets) -> dict:
    if not isinstance(sets, dict) or not sets:
        raise v.ArgumentTypeError(
            "sets must be a non-empty dict name -> InferenceSet (from inference_sets), "
            f"got {type(sets).__name__} {sets!r:.60}"
        )
    for name, s in sets.items():
        v.container(f"sets[{name!r}]", s, InferenceSet, "an InferenceSet (from inference_sets)")
        v.array(f"sets[{name!r}].target", s.target, "B K", v.Dims(B=s.batch.y_all.shape[0]))
    return sets


def inference_metrics(model, sets: dict) -> Callable:
    """The inference loss of Fig. 2, ``(1/K) ||y_hat - y_star||^2`` averaged over each test set.

    Args:
        model: an iclgd Part II :class:`~iclgd.models.Model`, or
            ``predict(params, batch) -> (B, K)``.
        sets: name -> :class:`InferenceSet` (from :func:`inference_sets`).

    Returns:
        ``metrics(params) -> {name: ()}`` (jittable; pass it to :func:`iclgd.train` as ``metrics``).
    """
    predict = _predict_fn(model)
    sets = _check_sets(sets)

    def metrics(params):
        return {
            name: jnp.mean(jnp.sum((predict(params, s.batch) - s.target) ** 2, axis=-1))
            / s.target.shape[-1]
            for name, s in sets.items()
        }

    return metrics


def copy_prompt_gap(sets: dict) -> dict[str, float]:
    """The inference loss of the same baseline: ``(1/K) ||(y, 0) - y_star||^2`` averaged over each
    test set, i.e. ``(1/K) sum_{k>N} y_star_k^2``.

    Args:
        sets: name -> :class:`InferenceSet` (from :func:`inference_sets`).

    Returns:
        name -> the baseline's inference loss (a float).
    """
    sets = _check_sets(sets)
    out = {}
    for name, s in sets.items():
        N = s.batch.y.shape[-1]
        t = np.asarray(s.target, np.float64)
        out[name] = float(np.mean(np.sum(t[:, N:] ** 2, axis=-1)) / t.shape[-1])
    return out


class EqualBudget(NamedTuple):
    """Runs compared at equal steps and at equal wall-clock time (:func:`equal_budget`).

    Attributes:
        budget_s: the budget ``B`` in seconds: the time the fastest run needs for ``steps`` steps.
        cut: ``{key: int}``, the whole steps each run completes within ``B``:
            ``int(steps * rate / max rate)``, rounded down.
        at_time: ``{key: float}``, the mean loss over the ``every`` steps before ``cut`` (the loss
            at equal time); over the first ``cut`` steps if ``0 < cut < every``, and the first
            step's loss if ``cut == 0`` (the run completes no step within ``B``).
        curve: ``{key: (steps // every,) array}``, the mean loss of each block of ``every``
            consecutive steps within the first ``steps`` (equal steps).
        final: ``{key: float}``, the last entry of ``curve`` (the loss at equal steps).
    """

    budget_s: float
    cut: dict
    at_time: dict
    curve: dict
    final: dict


def equal_budget(losses: dict, rate: dict, steps: int, every: int) -> EqualBudget:
    """Compare training runs at equal steps and at equal wall-clock time (Yang et al.'s Fig. 5).

    A wall-clock budget is a property of the machine: with ``r`` steps per second, run ``k``
    completes ``steps * r_k / max(r)`` steps in the time ``B`` the fastest run needs for
    ``steps`` (the paper's budget was 100 s on its machine; here ``B`` follows from ``steps``).
    Each run must have trained at least ``steps`` steps; only those are read (and checked to be
    finite).

    Args:
        losses: ``{key: (n_k,) array}``, the training loss at each step of each run, ``n_k >=
            steps`` (e.g. ``{H: run.losses}``).
        rate: ``{key: float}``, each run's steps per second (``> 0``), the same keys.
        steps: the steps every run is compared at, a multiple of ``every``.
        every: the block of steps each mean is taken over. The means are taken in the dtype of
            ``losses`` (float32 for a float32 run), as the chapters glue them.

    Returns:
        :class:`EqualBudget`.

    Example:
        >>> import numpy as np
        >>> from iclgd import metrics
        >>> fast, slow = np.linspace(2, 1, 100), np.linspace(2, 0.5, 100)
        >>> eq = metrics.equal_budget({1: fast, 8: slow}, {1: 20.0, 8: 5.0}, steps=100, every=10)
        >>> eq.budget_s, eq.cut
        (5.0, {1: 100, 8: 25})
        >>> bool(eq.final[8] < eq.final[1]), bool(eq.at_time[8] > eq.at_time[1])
        (True, True)
    """
    v.container("losses", losses, dict, "a dict {key: (n,) array of losses}")
    v.container("rate", rate, dict, "a dict {key: steps per second}")
    if not losses:
        raise ValueError("losses must hold at least one run")
    if set(rate) != set(losses):
        raise ValueError(f"rate must have the keys of losses {list(losses)}, got {list(rate)}")
    every = v.positive_int("every", every)
    steps = v.positive_int("steps", steps)
    if steps % every:
        raise ValueError(f"steps must be a multiple of every = {every}, got {steps}")
    r = {k: v.positive_float(f"rate[{k!r}]", rate[k]) for k in losses}
    L = {}  # the first `steps` losses of each run, in their dtype
    for k, x in losses.items():
        x = np.asarray(v.array(f"losses[{k!r}]", x, "n", finite=False, promote=True))
        if len(x) < steps:
            raise ValueError(
                f"losses[{k!r}] must hold at least steps = {steps} steps, got {len(x)}"
            )
        L[k] = v.finite_array(f"losses[{k!r}]", x[:steps])
    fastest = max(r.values())
    cut = {k: int(steps * (r[k] / fastest)) for k in L}
    at_time = {k: float(x[max(cut[k] - every, 0) : max(cut[k], 1)].mean()) for k, x in L.items()}
    curve = {k: x.reshape(-1, every).mean(axis=1) for k, x in L.items()}
    final = {k: float(c[-1]) for k, c in curve.items()}
    return EqualBudget(steps / fastest, cut, at_time, curve, final)
