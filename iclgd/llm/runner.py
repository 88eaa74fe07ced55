"""The §5.3 experiment: paired prompts with and without initial guesses, answers parsed and scored.

Run ``r`` draws, from ``jax.random.fold_in(key, r // q)``, ``C`` context pairs (without replacement)
from a labelled pool, where ``q = queries_per_context`` (the paper: ``q = 1``, a fresh context for
every run; ``q > 1`` lets ``q`` consecutive runs share a context, so that a backend with a prefix
cache computes it once); the queries are ``n_runs`` distinct pairs of a query set, in an order
drawn from ``key``. Each run sends the *same* context and query twice, with the guesses and without
them (:func:`~iclgd.llm.prompt.build_prompt`), so the two conditions are compared pair by pair.
Every answer is parsed strictly (:func:`~iclgd.llm.parse.parse_score`); an unparsed answer is kept
with its reason and counted, and the squared errors are compared on the runs where both answers
parsed.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import numpy as np

from .. import checks as v
from .parse import parse_score
from .prompt import build_prompt
from .stsb import STSB

__all__ = ["RefineResult", "run_refinement", "paired_test"]


class RefineResult(NamedTuple):
    """Per-run records of :func:`run_refinement` (``R`` runs, ``C`` context pairs)."""

    query_idx: np.ndarray  # (R,) indices into the query set
    context_idx: np.ndarray  # (R, C) indices into the context pool
    truth: np.ndarray  # (R,) the queries' scores
    guess: np.ndarray  # (R,) the queries' initial guesses
    with_value: np.ndarray  # (R,) parsed answers with guesses (NaN if unparsed)
    without_value: np.ndarray  # (R,) parsed answers without guesses (NaN if unparsed)
    with_reason: list  # (R,) parse reasons
    without_reason: list
    with_text: list  # (R,) raw answers
    without_text: list
    seconds: float  # wall time of all generations
    model: str

    @property
    def n_runs(self) -> int:
        return len(self.truth)

    @property
    def both_parsed(self) -> np.ndarray:
        """``(R,)`` bool: runs whose two answers parsed (the paired comparison uses these)."""
        return np.isfinite(self.with_value) & np.isfinite(self.without_value)

    @property
    def seconds_per_prompt(self) -> float:
        return self.seconds / (2 * self.n_runs)

    def squared_errors(self) -> dict:
        """``{"with", "without", "guess"}``: ``(P,)`` squared errors on the ``P`` paired runs."""
        ok = self.both_parsed
        t = self.truth[ok]
        return {
            "with": (self.with_value[ok] - t) ** 2,
            "without": (self.without_value[ok] - t) ** 2,
            "guess": (self.guess[ok] - t) ** 2,
        }

    def summary(self) -> dict:
        """MSEs on the paired runs, their standard errors, and the counts of unparsed answers."""
        se = self.squared_errors()
        p = int(self.both_parsed.sum())
        out = {"model": self.model, "runs": self.n_runs, "paired": p}
        for k, e in se.items():
            out[f"mse_{k}"] = float(e.mean()) if p else float("nan")
            out[f"sem_{k}"] = float(e.std(ddof=1) / np.sqrt(p)) if p > 1 else float("nan")
        out["unparsed_with"] = int(np.sum(~np.isfinite(self.with_value)))
        out["unparsed_without"] = int(np.sum(~np.isfinite(self.without_value)))
        out["copied_guess"] = int(np.sum(np.round(self.with_value, 2) == np.round(self.guess, 2)))
        out["seconds_per_prompt"] = self.seconds_per_prompt
        return out


def paired_test(result: RefineResult) -> dict:
    """Paired tests of the squared errors with vs without guesses on the paired runs.

    Returns ``{"n", "mean_diff", "sem_diff", "t", "p_t", "p_wilcoxon"}``: ``mean_diff`` is the mean
    of (with - without); ``p_t`` the two-sided paired t-test, ``p_wilcoxon`` the signed-rank test
    (NaN when every difference is zero or fewer than two runs paired).
    """
    from scipy import stats

    v.container("result", result, RefineResult, "an iclgd.llm.RefineResult (run_refinement)")
    se = result.squared_errors()
    d = se["with"] - se["without"]
    n = len(d)
    out = {"n": n, "mean_diff": float(d.mean()) if n else float("nan")}
    out["sem_diff"] = float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    nan = float("nan")
    if n > 1 and np.any(d != 0):
        t = stats.ttest_rel(se["with"], se["without"])
        out["t"], out["p_t"] = float(t.statistic), float(t.pvalue)
        out["p_wilcoxon"] = float(stats.wilcoxon(d).pvalue)
    else:
        out["t"], out["p_t"], out["p_wilcoxon"] = nan, nan, nan
    return out


def run_refinement(
    backend,
    pool: STSB,
    pool_guess,
    queries: STSB,
    query_guess,
    *,
    key: jax.Array,
    n_runs: int,
    n_context: int = 10,
    queries_per_context: int = 1,
    progress: bool = True,
) -> RefineResult:
    """Run the paired experiment of §5.3.

    Args:
        backend: an object with ``generate(list[str]) -> list[str]`` and a ``name``
            (:class:`~iclgd.llm.HFBackend`, :class:`~iclgd.llm.CallableBackend`).
        pool: the labelled pairs the contexts are drawn from (e.g. STS-B train).
        pool_guess: ``(len(pool),)`` initial guesses of the pool's pairs.
        queries: the pairs to score (e.g. STS-B test).
        query_guess: ``(len(queries),)`` their initial guesses.
        key: PRNG key of the queries' order and of each run's context.
        n_runs: ``1 <= n_runs <= len(queries)`` (paper: 100).
        n_context: context pairs per prompt, ``1 <= n_context <= len(pool)`` (paper: 10).
        queries_per_context: consecutive runs that share one context (paper: 1). The prompts of a
            context are sent together, first with guesses, then without; runs that share a context
            are not independent, which a paired test over the runs does not account for.
        progress: a tqdm bar over the runs (showing seconds per prompt).

    Returns:
        A :class:`RefineResult`.
    """
    from tqdm.auto import tqdm

    v.prng_key("key", key)
    v.container("pool", pool, STSB, "an iclgd.llm.STSB (load_stsb)")
    v.container("queries", queries, STSB, "an iclgd.llm.STSB (load_stsb)")
    if not callable(getattr(backend, "generate", None)):
        raise TypeError(
            f"backend must have a generate(prompts) method, got {type(backend).__name__}"
        )
    pool_guess = np.asarray(v.array("pool_guess", pool_guess, (len(pool),)), float)
    query_guess = np.asarray(v.array("query_guess", query_guess, (len(queries),)), float)
    n_runs = v.positive_int("n_runs", n_runs)
    n_context = v.positive_int("n_context", n_context)
    per = v.positive_int("queries_per_context", queries_per_context)
    if n_runs > len(queries):
        raise ValueError(f"n_runs must be <= len(queries) = {len(queries)}, got {n_runs}")
    if n_context > len(pool):
        raise ValueError(f"n_context must be <= len(pool) = {len(pool)}, got {n_context}")
    k_order, k_ctx = jax.random.split(key)
    q_idx = np.asarray(jax.random.permutation(k_order, len(queries))[:n_runs])
    groups = [range(g, min(g + per, n_runs)) for g in range(0, n_runs, per)]
    c_idx = np.concatenate(
        [
            np.broadcast_to(
                np.asarray(
                    jax.random.choice(
                        jax.random.fold_in(k_ctx, g.start // per), len(pool), (n_context,), False
                    )
                ),
                (len(g), n_context),
            )
            for g in groups
        ]
    )
    answers = {"with": [None] * n_runs, "without": [None] * n_runs}
    seconds, done = 0.0, 0
    bar = tqdm(total=n_runs, desc=getattr(backend, "name", "LM"), disable=not progress)
    for g in groups:
        ctx, guesses = pool.take(c_idx[g.start]), pool_guess[c_idx[g.start]]
        pairs = [(queries.sentence1[q], queries.sentence2[q]) for q in q_idx[g].tolist()]
        prompts = {
            "with": [
                build_prompt(ctx, pair, context_guess=guesses, query_guess=query_guess[q])
                for pair, q in zip(pairs, q_idx[g].tolist(), strict=True)
            ],
            "without": [build_prompt(ctx, pair) for pair in pairs],
        }
        for cond, batch in prompts.items():  # a context's prompts back to back (prefix cache)
            t0 = time.perf_counter()
            texts = backend.generate(batch)
            seconds += time.perf_counter() - t0
            if len(texts) != len(batch) or not all(isinstance(t, str) for t in texts):
                raise TypeError(
                    f"backend.generate must return one string per prompt, got {texts!r}"
                )
            for r, text in zip(g, texts, strict=True):
                answers[cond][r] = parse_score(text)
        done += len(g)
        bar.update(len(g))
        bar.set_postfix(s_per_prompt=f"{seconds / (2 * done):.2f}")
    bar.close()
    col = lambda cond, field: [getattr(a, field) for a in answers[cond]]
    return RefineResult(
        query_idx=q_idx,
        context_idx=c_idx,
        truth=np.asarray(queries.score[q_idx], float),
        guess=query_guess[q_idx],
        with_value=np.asarray(col("with", "value"), float),
        without_value=np.asarray(col("without", "value"), float),
        with_reason=col("with", "reason"),
        without_reason=col("without", "reason"),
        with_text=col("with", "text"),
        without_text=col("without", "text"),
        seconds=seconds,
        model=str(getattr(backend, "name", type(backend).__name__)),
    )
