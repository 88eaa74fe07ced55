r"""The risk ladder: exact risks of the models of the three papers on one linear-regression task.

For a prior ``x ~ N(0, Sigma)``, ``w ~ N(mu, Omega)``, ``y = w^T x + eps``
(:class:`iclgd.tasks.Prior`) and ``C`` context examples, :func:`risk_ladder` computes the risk
``R(f) = E[(f - y_q)^2]`` of (the *rungs*, :data:`RUNGS`):

* the Bayes posterior mean (:func:`iclgd.exact.bayes_risk`: closed form, or Rao-Blackwellised Monte
  Carlo over ``X`` with its standard error) -- the lowest risk of any predictor;
* ridge regression at its best penalty (:func:`ridge_risk`, new here: the conditional risk given
  ``X`` is exact, averaged over draws of ``X``);
* one GD step from ``0`` and from ``mu`` at the exact optimal step (:func:`iclgd.exact.gd_optimal`;
  Xie et al. eq. 7-9, Ahn et al. Lemma 2);
* ``k`` steps of preconditioned GD from ``0`` with ``P = Sigma^{-1}`` and exactly tuned step sizes
  (:func:`iclgd.exact.tuned_gd`, Ahn et al. Lemma 2 and Sec. 5; its prior ``w ~ N(0, Omega)`` is
  replaced by the second moment ``Omega + mu mu^T`` of ``w``, which is all that GD from ``0`` sees;
  noise-free labels only);
* the best one-layer LSA with ``y_q = 0``, ``H = 1`` (:func:`iclgd.exact.lsa_search`) and
  ``H >= d + 1`` heads (:func:`iclgd.exact.lsa_optimum`; Xie et al. eq. 3, Theorem 1);
* the best y_q-LSA, the guess ``y_q = g^T x_q`` trained too
  (:func:`iclgd.exact.yq_lsa_optimum`, ``H >= d + 1``: a lower bound for any number of
  heads; Xie et al. Definition 3);
* the best one-layer linear transformer of Ahn et al. eq. 7 with ``b = e_{d+1}``
  (:func:`iclgd.exact.linear_transformer_optimum`) and, where Theorem 1 applies (``mu = 0``,
  ``Omega = I``, no noise), the risk of its printed optimum, eq. 8
  (:func:`iclgd.exact.theorem1_optimal_A`);
* where Theorems 4-5 apply (``mu = 0``, ``Omega = Sigma^{-1}``, no noise): the optimal ``L``-layer
  sparse transformer on Theorem 4's set ``S`` (:func:`iclgd.exact.optimal_scalars`) and the lowest
  strict local minimum of GD++ on Theorem 5's set found so far (:func:`iclgd.exact.gdpp_lowest`,
  the same value in every chapter; an upper bound on the minimum).

Rungs that do not apply to a prior are left out and listed, with the reason, in
:attr:`Ladder.skipped`. :func:`relations` lists the orderings between rungs that are theorems for
that prior (class inclusions and the papers' results); the book's chapter *The risk ladder*
asserts them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
import scipy.optimize as so

from . import checks as v
from . import exact
from .exact.gdpp import _LOWEST_FOUND
from .tasks import Prior, check_prior, standard_normal

__all__ = [
    "RUNGS",
    "Rung",
    "Ladder",
    "RidgeRisk",
    "Relation",
    "ridge_risk",
    "null_risk",
    "risk_ladder",
    "relations",
    "check_relations",
    "format_table",
    "is_part1",
    "is_theorem1",
    "is_part3",
]

RUNGS: dict[str, tuple[str, str]] = {
    "bayes": ("Bayes posterior mean", "optimal predictor"),
    "ridge": ("ridge, best penalty", "baseline"),
    "gd0": ("1 GD step from 0", "Xie eq. 7-9; Ahn Lemma 2"),
    "gd_mu": ("1 GD step from mu", "Xie eq. 7-9"),
    "pgd1": ("1 precond. GD step", "Ahn Lemma 2, Sec. 5"),
    "pgd2": ("2 precond. GD steps", "Ahn Lemma 2, Sec. 5"),
    "pgd3": ("3 precond. GD steps", "Ahn Lemma 2, Sec. 5"),
    "lsa1": ("LSA, H = 1", "Xie eq. 3"),
    "lsa_d": ("LSA, H >= d+1", "Xie Thm. 1"),
    "yq_lsa": ("y_q-LSA (trained guess)", "Xie Def. 3, Sec. 4.2"),
    "lt1": ("linear TF, 1 layer, b = e_d+1", "Ahn Thm. 1, eq. 7"),
    "eq8": ("Ahn eq. 8 (printed optimum)", "Ahn Thm. 1, eq. 8"),
    "sparse2": ("sparse TF on S, 2 layers", "Ahn Thm. 4"),
    "sparse3": ("sparse TF on S, 3 layers", "Ahn Thm. 4"),
    "gdpp2": ("GD++ on S, 2 layers", "Ahn Thm. 5"),
    "gdpp3": ("GD++ on S, 3 layers", "Ahn Thm. 5"),
}
"""Rung key -> ``(label, source)``, in the order of the ladder's table (``k``/``L`` up to 3)."""


class Rung(NamedTuple):
    """One model on the ladder.

    Attributes:
        key: its key in :data:`RUNGS`.
        label: a short name.
        risk: its risk ``E[(f - y_q)^2]`` (float64).
        stderr: the standard error of ``risk`` (0 for an exact value).
        method: ``"exact"``, ``"closed form"``, ``"search"`` (the best of a numerical search on the
            exact risk: exact up to local minima) or ``"monte carlo"``.
        source: the paper's equation or theorem.
        detail: the optimal step(s), penalty, ... as text.
    """

    key: str
    label: str
    risk: float
    stderr: float
    method: str
    source: str
    detail: str = ""


class Ladder(NamedTuple):
    """The rungs of one prior and context length (:func:`risk_ladder`).

    Attributes:
        prior: the :class:`iclgd.tasks.Prior`.
        C: the context length.
        rungs: the :class:`Rung` computed, in the order of :data:`RUNGS`.
        skipped: rung key -> why it does not apply to this prior.
    """

    prior: Prior
    C: int
    rungs: tuple
    skipped: dict

    def keys(self) -> list[str]:
        """Keys of the rungs computed, in order."""
        return [r.key for r in self.rungs]

    def get(self, key: str) -> Rung:
        """The rung ``key`` (``KeyError`` naming the reason if it was skipped)."""
        for r in self.rungs:
            if r.key == key:
                return r
        why = self.skipped.get(key, f"unknown rung; the rungs are {list(RUNGS)}")
        raise KeyError(f"rung {key!r} is not on this ladder: {why}")

    def risk(self, key: str) -> float:
        """The risk of rung ``key``."""
        return self.get(key).risk


class RidgeRisk(NamedTuple):
    """Risk of ridge regression (:func:`ridge_risk`).

    Attributes:
        risk: the risk at ``lam``.
        stderr: its standard error (0 for a closed form).
        lam: the penalty ``lambda`` used (the tuned one when none was given).
        method: ``"closed form"`` or ``"monte carlo"``.
    """

    risk: float
    stderr: float
    lam: float
    method: str


class Relation(NamedTuple):
    """An ordering between two rungs that is a theorem for the ladder's prior (:func:`relations`).

    Attributes:
        lhs, rhs: rung keys.
        op: ``"<="`` or ``"=="``.
        reason: why it holds.
        tol: allowed violation (absolute): Monte Carlo error or float64 rounding.
        theorem: ``False`` for a consistency check that holds by the construction of the rungs
            (nested least squares, a zero Bayes risk, a search space that contains the other).
    """

    lhs: str
    op: str
    rhs: str
    reason: str
    tol: float
    theorem: bool = True


# --- settings --------------------------------------------------------------------------------


def _arrays(prior: Prior):
    f = lambda a: np.asarray(a, np.float64)  # noqa: E731
    return f(prior.mu), f(prior.Sigma), f(prior.Omega), float(prior.noise_std) ** 2


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=1e-6, atol=1e-6 * max(1.0, float(np.abs(b).max()))))


def is_part1(prior: Prior) -> bool:
    """Xie et al.'s setting: ``Sigma = Omega = I``, no label noise (any prior mean)."""
    return _is_part1(check_prior(prior))


def is_theorem1(prior: Prior) -> bool:
    """Ahn et al.'s Theorem 1: ``mu = 0``, ``Omega = I``, no label noise (any ``Sigma``)."""
    return _is_theorem1(check_prior(prior))


def is_part3(prior: Prior) -> bool:
    """Ahn et al.'s Theorems 4-5: ``mu = 0``, ``Omega = Sigma^{-1}``, no label noise."""
    return _is_part3(check_prior(prior))


# the unchecked internals of the three (for a prior already checked)


def _is_part1(prior: Prior) -> bool:
    mu, S, Om, s2 = _arrays(prior)
    eye = np.eye(len(mu))
    return s2 == 0.0 and _close(S, eye) and _close(Om, eye)


def _is_theorem1(prior: Prior) -> bool:
    mu, S, Om, s2 = _arrays(prior)
    return s2 == 0.0 and not np.any(mu) and _close(Om, np.eye(len(mu)))


def _is_part3(prior: Prior) -> bool:
    mu, S, Om, s2 = _arrays(prior)
    return s2 == 0.0 and not np.any(mu) and _close(Om @ S, np.eye(len(mu)))


def null_risk(prior: Prior) -> float:
    """Risk of predicting ``0``: ``E[y_q^2] = tr(Sigma (Omega + mu mu^T)) + sigma^2``."""
    mu, S, Om, s2 = _arrays(check_prior(prior))
    return float(np.trace(S @ (Om + np.outer(mu, mu)))) + s2


# --- ridge -----------------------------------------------------------------------------------


def _ridge_draws(prior: Prior, C: int, key, n: int):
    """Per draw of ``X``: eigenvalues ``s`` ``(n, d)`` of ``G = X^T X / C``, the products
    ``(V^T Sigma V) * (V^T B V)`` ``(n, d, d)`` (``B = Omega + mu mu^T``) and
    ``diag(V^T Sigma V)`` ``(n, d)``."""
    mu, S, Om, _ = _arrays(prior)
    B = Om + np.outer(mu, mu)
    LS = np.linalg.cholesky((S + S.T) / 2)
    with exact.core.enable_x64():
        Z = np.asarray(standard_normal(key, (n, C, len(mu))), np.float64)
    X = Z @ LS.T
    s, V = np.linalg.eigh(np.einsum("nci,ncj->nij", X, X) / C)
    Vt = np.swapaxes(V, 1, 2)
    Sv, Bv = Vt @ S @ V, Vt @ B @ V
    return s, Sv * Bv, np.einsum("nii->ni", Sv)


def _ridge_cond(lam: float, draws, s2: float, C: int) -> np.ndarray:
    """Conditional risk given ``X`` of ridge at ``lam`` ``(n,)``: ``lam^2 tr(Sigma R B R) +
    (s2 / C) tr(Sigma R G R) + s2`` with ``R = (G + lam I)^{-1}`` (``lam = 0``: the limit, the
    minimum-norm least-squares fit)."""
    s, SB, Sdiag = draws
    tol = 1e-10 * np.maximum(s.max(axis=1, keepdims=True), 1e-300)
    null = s <= tol
    if lam == 0.0:
        r = null.astype(float)
        inv = np.where(null, 0.0, 1.0 / np.where(null, 1.0, s))
        noise = np.sum(Sdiag * inv, axis=1)
    else:
        r = lam / (np.where(null, 0.0, s) + lam)
        noise = np.sum(Sdiag * np.where(null, 0.0, s) / (s + lam) ** 2, axis=1)
    return np.einsum("ni,nij,nj->n", r, SB, r, optimize=True) + s2 / C * noise + s2


def ridge_risk(
    prior: Prior, C: int, lam: float | None = None, *, key=None, n_mc: int = 50_000
) -> RidgeRisk:
    """Risk of ridge regression ``w_lam = (X^T X / C + lam I)^{-1} X^T y / C``, predicting
    ``w_lam^T x_q``, at a given penalty or at the best one.

    Given the context inputs ``X`` (``G = X^T X / C``, ``R = (G + lam I)^{-1}``,
    ``B = Omega + mu mu^T``) the risk is exact::

        R(lam | X) = lam^2 tr(Sigma R B R) + (sigma^2 / C) tr(Sigma R G R) + sigma^2,

    since ``w_lam - w = -lam R w + R X^T eps / C``. The estimate averages it over ``n_mc`` draws of
    ``X`` (Rao-Blackwellised, as :func:`iclgd.exact.bayes_risk`: ``w``, ``x_q`` and the noise are
    integrated exactly); ``lam = 0`` is the limit, the minimum-norm least-squares fit. The ridge
    shrinks towards ``0``, not towards ``mu``.

    **Best penalty** (``lam=None``): the average over one set of draws is minimised over
    ``lam = 0`` and ``log lam`` (a grid, then a bounded scalar search); the risk at the tuned
    ``lam`` is then estimated on *independent* draws, so it is an unbiased estimate of the risk of
    a ridge regression (never below the best one's, up to its standard error). **Closed form**:
    without label noise and with ``C >= d``, ``X`` has rank ``d`` and ``lam = 0`` recovers ``w``
    exactly: ``R = 0``.

    Args:
        prior: task distribution.
        C: context length.
        lam: the penalty (``>= 0``), or ``None`` for the best one.
        key: PRNG key of the draws (default ``jax.random.key(0)``).
        n_mc: draws of ``X`` (each set), ``>= 2``.

    Returns:
        :class:`RidgeRisk` ``(risk, stderr, lam, method)``.
    """
    check_prior(prior)
    C = v.positive_int("C", C)
    if lam is not None:
        lam = v.nonneg_float("lam", lam)
    n_mc = v.positive_int("n_mc", n_mc, 2)
    key = jax.random.key(0) if key is None else v.prng_key("key", key)
    return _ridge_risk(prior, C, lam, key, n_mc)


def _ridge_risk(prior: Prior, C: int, lam: float | None, key, n_mc: int) -> RidgeRisk:
    """:func:`ridge_risk` on checked arguments (``key`` a PRNG key)."""
    d = prior.d
    s2 = _arrays(prior)[3]
    if s2 == 0.0 and C >= d and not lam:
        return RidgeRisk(0.0, 0.0, 0.0, "closed form")
    k_tune, k_eval = jax.random.split(key)
    if lam is None:
        draws = _ridge_draws(prior, C, k_tune, n_mc)
        f = lambda t: float(np.mean(_ridge_cond(float(np.exp(t)), draws, s2, C)))  # noqa: E731
        scale = float(np.trace(_arrays(prior)[1])) / d
        grid = np.log(scale) + np.linspace(np.log(1e-8), np.log(1e4), 25)
        vals = [f(t) for t in grid]
        i = int(np.argmin(vals))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        res = so.minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
        t_best, v_best = (res.x, res.fun) if res.fun < vals[i] else (grid[i], vals[i])
        zero = float(np.mean(_ridge_cond(0.0, draws, s2, C)))
        lam = 0.0 if zero <= v_best else float(np.exp(t_best))
    vals = _ridge_cond(lam, _ridge_draws(prior, C, k_eval, n_mc), s2, C)
    return RidgeRisk(
        float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(n_mc)), lam, "monte carlo"
    )


# --- the ladder ------------------------------------------------------------------------------


def _rung(key: str, risk: float, stderr: float = 0.0, method: str = "exact", detail: str = ""):
    label, source = RUNGS[key]
    return Rung(key, label, float(risk), float(stderr), method, source, detail)


def risk_ladder(
    prior: Prior,
    C: int,
    *,
    key=None,
    n_mc: int = 50_000,
    lsa_restarts: int = 4,
    lsa_steps: int = 300,
    lsa_method: str = "auto",
    gdpp_starts: int = 1,
) -> Ladder:
    """The rungs of the module docstring for one prior and context length.

    Sizes: ``d = prior.d``; the exact engine works with ``D = d + 1``, ``vech G`` of size
    ``D (D + 1) / 2``. Preconditioned GD and the multi-layer rungs go up to ``k = L = 3``
    (Wishart moments up to ``E tr S^6``, ``E tr S^26`` for GD++).

    Args:
        prior: task distribution (:func:`iclgd.make_prior`).
        C: context length (Ahn et al.'s ``n``), ``>= 1``.
        key: PRNG key of the Monte Carlo rungs and the searches (default ``jax.random.key(0)``).
        n_mc: draws of ``X`` for the Monte Carlo rungs (Bayes and ridge where no closed form).
        lsa_restarts: random starts of the single-head LSA search (:func:`iclgd.exact.lsa_search`).
        lsa_steps: L-BFGS iterations per start of that search.
        lsa_method: its ``method``: ``"auto"`` (subspaces seeded by L-BFGS on the weights; the
            most reliable) or ``"subspace"`` (random subspaces only: one compilation less).
        gdpp_starts: starts of the GD++ critical-point search (the first is the ``B = 0`` optimum)
            where :func:`iclgd.exact.gdpp_lowest` has no value for ``(L, C, d)``.

    Returns:
        :class:`Ladder`.

    Raises:
        TypeError: if ``prior`` is not a :class:`iclgd.tasks.Prior` or a size is not an integer.
        ValueError: if a size is out of range.
    """
    check_prior(prior)
    C = v.positive_int("C", C)
    n_mc = v.positive_int("n_mc", n_mc, 2)
    lsa_restarts = v.positive_int("lsa_restarts", lsa_restarts)
    lsa_steps = v.positive_int("lsa_steps", lsa_steps)
    if lsa_method not in ("auto", "subspace"):
        raise ValueError(f"lsa_method must be 'auto' or 'subspace', got {lsa_method!r}")
    gdpp_starts = v.positive_int("gdpp_starts", gdpp_starts)
    key = jax.random.key(0) if key is None else v.prng_key("key", key)
    k_bayes, k_ridge, k_lsa, k_pp = jax.random.split(key, 4)
    d = prior.d
    mu, S, Om, s2 = _arrays(prior)
    ex = exact.prepare(prior, C)
    rungs, skipped = [], {}

    b = exact.bayes_risk(prior, C, n_mc=n_mc, key=k_bayes)
    rungs.append(_rung("bayes", b.risk, b.stderr, b.method))
    r = _ridge_risk(prior, C, None, k_ridge, n_mc)
    rungs.append(_rung("ridge", r.risk, r.stderr, r.method, f"lambda* = {r.lam:.3g}"))
    for k, w0 in (("gd0", np.zeros(d)), ("gd_mu", mu)):
        eta, risk = exact.gd_optimal(ex, w0)
        rungs.append(_rung(k, risk, detail=f"eta* = {eta:.4g}"))
    if s2 == 0.0:
        P = np.linalg.inv(S)
        for k in (1, 2, 3):
            try:
                t = exact.tuned_gd(k, C, S, P=P, Omega=Om + np.outer(mu, mu))
            except ValueError as e:  # complex roots: no real step sizes
                skipped[f"pgd{k}"] = str(e)
                continue
            steps = ", ".join(f"{g:.3g}" for g in t.steps)
            rungs.append(_rung(f"pgd{k}", t.risk, detail=f"steps {steps}, P = Sigma^-1"))
    else:
        for k in (1, 2, 3):
            skipped[f"pgd{k}"] = "tuned_gd's exact loss is for noise-free labels"
    lsa1 = exact.lsa_search(
        ex, 1, restarts=lsa_restarts, steps=lsa_steps, key=k_lsa, method=lsa_method
    )
    rungs.append(_rung("lsa1", lsa1.risk, method="search", detail=lsa1.method))
    rungs.append(_rung("lsa_d", exact.lsa_optimum(ex).risk))
    yq = exact.yq_lsa_optimum(ex)
    g = ", ".join(f"{x:.3g}" for x in yq.y_q_guess)
    rungs.append(_rung("yq_lsa", yq.risk, detail=f"g* = ({g})"))
    rungs.append(_rung("lt1", exact.linear_transformer_optimum(ex).risk))
    if _is_theorem1(prior):
        from .exact.pgd import theorem1_optimal_A

        A8 = np.asarray(theorem1_optimal_A(S, C), np.float64)
        params = {"b": np.eye(d + 1)[d], "A": np.vstack([A8, np.zeros((1, d))])}
        rungs.append(_rung("eq8", exact.risk64(exact.linear_transformer_risk, params, ex)))
    else:
        skipped["eq8"] = "Theorem 1 needs mu = 0, Omega = I and no label noise"
    if _is_part3(prior):
        for L in (2, 3):
            o = exact.optimal_scalars(L, C, d)
            a = ", ".join(f"{x:.3g}" for x in o.a)
            rungs.append(_rung(f"sparse{L}", float(o.risk), detail=f"a = ({a})"))
        for L in (2, 3):  # one value per (L, n, d) in every chapter where the library has it
            if (L, C, d) in _LOWEST_FOUND:
                best = [exact.gdpp_lowest(L, C, d)]
            else:
                s = exact.gdpp_critical_points(L, C, d, jax.random.fold_in(k_pp, L), gdpp_starts)
                best = [p for p in s.points if p.hess_eigs.min() > 0]
            if not best:
                skipped[f"gdpp{L}"] = "no strict local minimum found on S"
                continue
            ab = ", ".join(f"{x:.3g}" for x in (*best[0].a, *best[0].b[: L - 1]))
            rungs.append(_rung(f"gdpp{L}", best[0].risk, method="search", detail=f"a, b = {ab}"))
    else:
        why = "Theorems 4-5 need mu = 0, Omega = Sigma^-1 and no label noise"
        skipped.update({f"{m}{L}": why for m in ("sparse", "gdpp") for L in (2, 3)})
    order = list(RUNGS)
    rungs.sort(key=lambda r: order.index(r.key))
    return Ladder(prior, C, tuple(rungs), skipped)


# --- the theorems between rungs --------------------------------------------------------------


_Z, _RTOL = 4.0, 1e-9  # the defaults of relations (and of check_relations)


def relations(lad: Ladder, *, z: float = _Z, rtol: float = _RTOL) -> list[Relation]:
    """The orderings between the rungs of ``lad`` that are theorems for its prior.

    * Bayes ``<=`` every other rung (the posterior mean minimises the risk), up to ``z`` combined
      standard errors of the Monte Carlo rungs.
    * Class inclusions (``a <= b`` when model ``b`` is an instance of class ``a``): one GD step
      from ``0`` is an ``H = 1`` LSA and a one-layer linear transformer with ``b = e_{d+1}``
      (Xie eq. 7-9, Ahn Lemma 2), which is itself an ``H = 1`` LSA with ``y_q = 0``; ``H = 1`` is
      a special case of ``H >= d+1``; ``y_q = 0`` is the guess ``g = 0``; one GD step from ``mu``
      is a y_q-LSA with guess ``mu``; a preconditioned step is a one-layer transformer; ``k``
      tuned steps include ``k - 1`` (a polynomial of lower degree); on ``S``, ``B = 0`` makes
      GD++ the sparse transformer.
    * GD from ``mu`` ``<=`` from ``0`` (the risk of a fixed step is increasing in
      ``E[(w - w0)(w - w0)^T]``).
    * ``mu = 0``: the best multi-head LSA uses only ``G[d+1, :]`` (the risk is even in ``(w,
      eps)``), so ``LSA H >= d+1 == linear TF 1 layer`` (Ahn Thm. 1's "global" over all
      ``(b, A)``).
    * Theorem 1's setting: ``linear TF 1 layer == eq. 8``.
    * Theorem 4's setting: ``sparse TF on S, L layers == L preconditioned GD steps`` (Lemma 2).
    * Xie et al.'s setting (``Sigma = Omega = I``, no noise): ``y_q-LSA == 1 GD step from mu``
      (the GD point is the global optimum of y_q-LSA).

    Args:
        lad: a :class:`Ladder`.
        z: Monte Carlo tolerance in standard errors.
        rtol: relative tolerance of the exact relations (float64 rounding, search convergence);
            at least ``50 eps`` of the prior's dtype (``6e-6`` for float32).

    Consistency checks that hold by construction have ``theorem=False``: ``k`` tuned steps against
    ``k - 1``, GD++ against ``B = 0``, and Bayes against any rung where its risk is exactly 0.

    Returns:
        The :class:`Relation` whose two rungs are both on the ladder.
    """
    _check_ladder(lad)
    z = v.positive_float("z", z)
    rtol = v.positive_float("rtol", rtol)
    return _relations(lad, z, rtol)


def _check_ladder(lad) -> Ladder:
    v.container("lad", lad, Ladder, "an iclgd.ladder.Ladder (use risk_ladder)")
    check_prior(lad.prior, "lad.prior")
    return lad


def _relations(lad: Ladder, z: float, rtol: float) -> list[Relation]:
    """:func:`relations` on checked arguments."""
    # a prior stored in float32 (JAX's default) meets Omega = Sigma^-1 only to float32 rounding
    rtol = max(rtol, 50 * float(np.finfo(np.asarray(lad.prior.Sigma).dtype).eps))
    have = set(lad.keys())
    out = []

    def add(lhs, op, rhs, reason, theorem=True):
        if lhs in have and rhs in have:
            a, b = lad.get(lhs), lad.get(rhs)
            se = z * float(np.hypot(a.stderr, b.stderr))
            tol = se + rtol * max(abs(a.risk), abs(b.risk))
            out.append(Relation(lhs, op, rhs, reason, tol, theorem))

    zero_bayes = "bayes" in have and lad.get("bayes").risk == 0.0  # C >= d, no noise: exactly 0
    for k in lad.keys():
        if k != "bayes":
            why = "Bayes posterior mean minimises the risk"
            add("bayes", "<=", k, why + (" (Bayes = 0)" if zero_bayes else ""), not zero_bayes)
    add("lsa1", "<=", "gd0", "1 GD step from 0 is a 1-head LSA (Xie eq. 7-9)")
    add("lsa_d", "<=", "lsa1", "H = 1 is a special case of H >= d+1")
    add("lsa1", "<=", "lt1", "Ahn's 1 layer (b = e_d+1) is a 1-head LSA with y_q = 0")
    add("lt1", "<=", "gd0", "1 GD step from 0 is Ahn's 1 layer with A = -eta I")
    add("lt1", "<=", "pgd1", "1 precond. step is Ahn's 1 layer with A = -gamma P")
    add("yq_lsa", "<=", "lsa_d", "y_q = 0 is the guess g = 0")
    add("yq_lsa", "<=", "gd_mu", "1 GD step from mu is a y_q-LSA with guess mu (Xie eq. 9)")
    add("gd_mu", "<=", "gd0", "a fixed step's risk grows with E[(w - w0)(w - w0)^T]")
    nested = "(nested least squares of one engine)"
    add("pgd2", "<=", "pgd1", f"tuned 2-step polynomials include the 1-step ones {nested}", False)
    add("pgd3", "<=", "pgd2", f"tuned 3-step polynomials include the 2-step ones {nested}", False)
    for L in (2, 3):
        why = "B = 0 makes GD++ the sparse transformer (the search space contains it)"
        add(f"gdpp{L}", "<=", f"sparse{L}", why, False)
        add(
            f"sparse{L}", "==", f"pgd{L}", "on S the sparse TF is precond. GD (Ahn Lemma 2, Thm. 4)"
        )
    if not np.any(_arrays(lad.prior)[0]):
        add("lsa_d", "==", "lt1", "mu = 0: the best LSA uses only G[d+1, :] (Ahn Thm. 1)")
    add("lt1", "==", "eq8", "Ahn Theorem 1: eq. 8 is the global optimum")
    if _is_part1(lad.prior):
        add("yq_lsa", "==", "gd_mu", "Xie: the GD point is the global optimum of y_q-LSA")
    return out


def check_relations(lad: Ladder, rels: list[Relation] | None = None) -> list[tuple]:
    """Evaluate relations on ``lad``: ``(relation, lhs risk, rhs risk, holds)`` for each.

    Args:
        lad: a :class:`Ladder`.
        rels: the relations (default :func:`relations` ``(lad)``).
    """
    _check_ladder(lad)
    rels = _relations(lad, _Z, _RTOL) if rels is None else rels
    out = []
    for rel in rels:
        a, b = lad.risk(rel.lhs), lad.risk(rel.rhs)
        ok = a <= b + rel.tol if rel.op == "<=" else abs(a - b) <= rel.tol
        out.append((rel, a, b, bool(ok)))
    return out


def format_table(ladders: dict, digits: int = 4) -> str:
    """The ladders as one text table: a row per rung, a column per setting, risks rounded to
    ``digits`` significant digits (Monte Carlo rungs as ``risk±2 se`` where the standard error
    shows at that precision; ``-`` where a rung does not apply; exact zeros as ``0``).

    Args:
        ladders: column name -> :class:`Ladder`.
        digits: significant digits, ``>= 1``.
    """
    v.container("ladders", ladders, dict, "a dict column name -> Ladder")
    for name, lad in ladders.items():
        v.container(f"ladders[{name!r}]", lad, Ladder, "an iclgd.ladder.Ladder")
    digits = v.positive_int("digits", digits)
    keys = [k for k in RUNGS if any(k in lad.keys() for lad in ladders.values())]

    def cell(lad, k):
        if k not in lad.keys():
            return "-"
        r = lad.get(k)
        if r.risk == 0.0 and r.stderr == 0.0:
            return "0"
        s = f"{r.risk:.{digits}g}"
        significant = r.stderr > 10.0 ** (-digits - 1) * abs(r.risk)
        return s + (f"±{2 * r.stderr:.1g}" if significant else "")

    cols = list(ladders)
    rows = [[RUNGS[k][0]] + [cell(ladders[c], k) for c in cols] for k in keys]
    head = ["rung"] + cols
    w = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
    line = lambda xs: "  ".join(
        x.ljust(w[0]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(xs)
    )  # noqa: E731
    return "\n".join([line(head)] + [line(r) for r in rows])
