"""The §5.3 experiment: one context and query per run, sent to the LM in several *arms*.

An arm is what the prompt shows besides the labelled context pairs (App. C.3):

* ``"without"`` -- no guesses (:func:`~iclgd.llm.prompt.build_prompt` without them);
* ``"<name>"`` -- the guesses of ``guesses[name]`` for the ``C`` context pairs and the query, e.g.
  ``"mlp"`` (the App. C.3 guess model) or ``"cos"`` (``5 cos``);
* ``"placebo:<name>"`` -- the same ``C + 1`` guesses of ``guesses[name]``, permuted at random
  across the context pairs and the query (a fresh permutation per run): the prompt's format and the
  guesses' values are those of arm ``<name>``, their information about the pairs is gone. An LM
  that *uses* the guesses does better with ``<name>`` than with its placebo; one that only reacts
  to numbers in the prompt does the same with both.

Run ``r`` draws, from ``jax.random.fold_in(key, r // q)``, ``C`` context pairs (without
replacement) from a labelled pool, where ``q = queries_per_context`` (the paper: ``q = 1``, a fresh
context for every run; ``q > 1`` lets ``q`` consecutive runs share a context, so that a backend with
a prefix cache computes it once); the queries are ``n_runs`` distinct pairs of a query set, in an
order drawn from ``key``. Every arm sends the *same* context and query, so arms are compared run by
run (:mod:`~iclgd.llm.stats`). Every answer is parsed strictly
(:func:`~iclgd.llm.parse.parse_score`); an unparsed answer is kept with its reason (NaN value).

With ``answers_file`` the answers are appended, prompt by prompt, to a JSON-lines file keyed by the
sha256 of (model, dtype, generation budget, prompt): a run that is killed keeps what it generated,
and the same call resumes it (greedy decoding: a stored answer is the one the model gives again).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from .. import checks as v
from .guess import calibrated_guess
from .parse import parse_score
from .prompt import build_prompt
from .stsb import STSB

__all__ = ["RefineResult", "run_refinement", "arm_guess_name", "PLACEBO"]

WITHOUT = "without"
PLACEBO = "placebo:"


class RefineResult(NamedTuple):
    """Per-run records of :func:`run_refinement` (``R`` runs, ``C`` context pairs, arms ``A``).

    Attributes:
        arms: the arms, in the order they were sent.
        query_idx: ``(R,)`` indices into the query set; ``context_idx``: ``(R, C)`` into the pool.
        truth: ``(R,)`` the queries' scores; ``context_score``: ``(R, C)`` the context pairs'.
        query_guess: ``{name: (R,)}`` each guess of the query; ``context_guess``: ``{name: (R, C)}``
            each guess of the context pairs (as the guess arms show them).
        shown_guess: ``{arm: (R,)}`` the query guess the arm's prompt showed (NaN for
            ``"without"``; for a placebo, the permuted one).
        values: ``{arm: (R,)}`` parsed answers (NaN if unparsed); ``reasons``, ``texts``:
            ``{arm: list of R}`` parse reasons and raw answers.
        seconds: ``{arm: (R,)}`` generation time of each prompt (stored answers keep the time
            they took when generated).
        model: the backend's name.
    """

    arms: tuple
    query_idx: np.ndarray
    context_idx: np.ndarray
    truth: np.ndarray
    context_score: np.ndarray
    query_guess: dict
    context_guess: dict
    shown_guess: dict
    values: dict
    reasons: dict
    texts: dict
    seconds: dict
    model: str

    @property
    def n_runs(self) -> int:
        return len(self.truth)

    @property
    def seconds_per_prompt(self) -> float:
        """Mean generation time of one prompt, over every arm and run."""
        return float(np.mean(np.concatenate([self.seconds[a] for a in self.arms])))

    def parsed(self, *arms: str) -> np.ndarray:
        """``(R,)`` bool: runs whose answers in every arm named (default: all arms) parsed."""
        arms = arms or self.arms
        for a in arms:
            if a not in self.values:
                raise ValueError(f"arms must be among {self.arms}, got {a!r}")
        return np.logical_and.reduce([np.isfinite(self.values[a]) for a in arms])

    def calibrated(self, name: str) -> np.ndarray:
        """``(R,)`` the in-context calibration of guess ``name``: per run, the least-squares line
        ``score ~ a + b guess`` on the ``C`` context pairs, applied to the query's guess (no LM;
        :func:`~iclgd.llm.guess.calibrated_guess`)."""
        if name not in self.query_guess:
            raise ValueError(f"name must be a guess among {tuple(self.query_guess)}, got {name!r}")
        return calibrated_guess(
            self.context_guess[name], self.context_score, self.query_guess[name]
        )


def arm_guess_name(arm: str) -> str | None:
    """The guess an arm shows: ``None`` for ``"without"``, ``name`` for ``name`` and
    ``"placebo:name"``."""
    if not isinstance(arm, str):
        raise TypeError(f"arm must be a string, got {type(arm).__name__}")
    if arm == WITHOUT:
        return None
    return arm[len(PLACEBO) :] if arm.startswith(PLACEBO) else arm


def _check_guesses(guesses, pool, queries) -> dict:
    if not isinstance(guesses, Mapping):
        raise TypeError(
            "guesses must be a dict {name: (pool_guess, query_guess)}, got "
            f"{type(guesses).__name__}"
        )
    out = {}
    for name, pair in guesses.items():
        if not isinstance(name, str) or not name or name == WITHOUT or ":" in name:
            raise ValueError(
                f"guesses' names must be strings other than 'without', without ':', got {name!r}"
            )
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"guesses[{name!r}] must be a pair (pool_guess, query_guess)")
        p = np.asarray(v.array(f"guesses[{name!r}][0]", pair[0], (len(pool),)), float)
        q = np.asarray(v.array(f"guesses[{name!r}][1]", pair[1], (len(queries),)), float)
        out[name] = (p, q)
    return out


def _check_arms(arms, guesses) -> tuple:
    if isinstance(arms, str) or not isinstance(arms, Sequence) or not arms:
        raise TypeError(f"arms must be a non-empty list of arm names, got {arms!r}")
    arms = tuple(arms)
    for a in arms:
        g = arm_guess_name(a)
        if g is not None and g not in guesses:
            raise ValueError(
                f"arms: {a!r} shows guess {g!r}, which is not in guesses {tuple(guesses)}"
            )
    if len(set(arms)) != len(arms):
        raise ValueError(f"arms must not repeat, got {arms}")
    return arms


class _AnswerStore:
    """The answers file: ``{"key", "text", "seconds"}`` per line, appended as they come."""

    def __init__(self, path, backend):
        self.path = None if path is None else Path(path)
        self.tag = [
            str(getattr(backend, "name", type(backend).__name__)),
            str(getattr(backend, "dtype", "")),
            int(getattr(backend, "max_new_tokens", 0)),
        ]
        self.known = {}
        self.cut = False  # the file ends inside a line (a kill mid-write): start a new one
        if self.path is not None and self.path.is_file():
            text = self.path.read_text(encoding="utf8")
            self.cut = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                    self.known[rec["key"]] = (rec["text"], float(rec["seconds"]))
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a kill
        self.reused = 0

    def key(self, prompt: str) -> str:
        return hashlib.sha256(json.dumps([*self.tag, prompt]).encode()).hexdigest()

    def get(self, prompt):
        hit = self.known.get(self.key(prompt))
        self.reused += hit is not None
        return hit

    def put(self, prompt, text, seconds):
        if self.path is None:
            return
        k = self.key(prompt)
        self.known[k] = (text, seconds)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf8") as f:
            line = json.dumps({"key": k, "text": text, "seconds": seconds}) + "\n"
            f.write("\n" * self.cut + line)
            self.cut = False
            f.flush()
            os.fsync(f.fileno())


def run_refinement(
    backend,
    pool: STSB,
    queries: STSB,
    guesses: Mapping,
    *,
    key: jax.Array,
    n_runs: int,
    arms: Sequence[str] = ("without", "mlp"),
    n_context: int = 10,
    queries_per_context: int = 1,
    answers_file: str | os.PathLike | None = None,
    progress: bool = True,
) -> RefineResult:
    """Run the experiment of §5.3 (App. C.3) in the given arms.

    Args:
        backend: an object with ``generate(list[str]) -> list[str]`` and a ``name``
            (:class:`~iclgd.llm.HFBackend`, :class:`~iclgd.llm.CallableBackend`).
        pool: the labelled pairs the contexts are drawn from (e.g. STS-B train).
        queries: the pairs to score (e.g. STS-B test).
        guesses: ``{name: (pool_guess, query_guess)}``: ``(len(pool),)`` and ``(len(queries),)``
            initial guesses, e.g. ``{"mlp": ..., "cos": ...}``. The context pairs' guesses should
            be out of sample as the queries' are (:func:`~iclgd.llm.guess.cross_fit_guesses`).
        key: PRNG key of the queries' order, of each run's context and of the placebos.
        n_runs: ``1 <= n_runs <= len(queries)`` (paper: 100).
        arms: the arms (module docstring), sent in this order for each context.
        n_context: context pairs per prompt, ``1 <= n_context <= len(pool)`` (paper: 10).
        queries_per_context: consecutive runs that share one context (paper: 1). A context's
            prompts are sent together, arm by arm; runs that share a context are not independent,
            which statistics over the runs do not account for.
        answers_file: a JSON-lines file the answers are appended to as they come, and read back
            from (module docstring); ``None``: no file.
        progress: a tqdm bar over the runs (showing seconds per prompt).

    Returns:
        A :class:`RefineResult`.

    Raises:
        TypeError: a backend without ``generate``, a non-key ``key``, ``guesses`` or ``arms`` of
            the wrong type, a backend that does not return one string per prompt.
        ValueError: guesses of the wrong length, an arm naming an unknown guess, ``n_runs`` or
            ``n_context`` out of range.
    """
    from tqdm.auto import tqdm

    v.prng_key("key", key)
    v.container("pool", pool, STSB, "an iclgd.llm.STSB (load_stsb)")
    v.container("queries", queries, STSB, "an iclgd.llm.STSB (load_stsb)")
    if not callable(getattr(backend, "generate", None)):
        raise TypeError(
            f"backend must have a generate(prompts) method, got {type(backend).__name__}"
        )
    guesses = _check_guesses(guesses, pool, queries)
    arms = _check_arms(arms, guesses)
    n_runs = v.positive_int("n_runs", n_runs)
    n_context = v.positive_int("n_context", n_context)
    per = v.positive_int("queries_per_context", queries_per_context)
    if n_runs > len(queries):
        raise ValueError(f"n_runs must be <= len(queries) = {len(queries)}, got {n_runs}")
    if n_context > len(pool):
        raise ValueError(f"n_context must be <= len(pool) = {len(pool)}, got {n_context}")
    k_order, k_ctx, k_placebo = jax.random.split(key, 3)
    q_idx = np.asarray(jax.random.permutation(k_order, len(queries))[:n_runs])
    groups = [range(g, min(g + per, n_runs)) for g in range(0, n_runs, per)]
    draw = lambda g: np.asarray(
        jax.random.choice(jax.random.fold_in(k_ctx, g), len(pool), (n_context,), False)
    )
    c_idx = np.concatenate(
        [np.broadcast_to(draw(g.start // per), (len(g), n_context)) for g in groups]
    )
    perm = np.asarray(
        jax.vmap(lambda r: jax.random.permutation(jax.random.fold_in(k_placebo, r), n_context + 1))(
            np.arange(n_runs)
        )
    )  # (R, C + 1): run r's placebo shows guess perm[r, j] in slot j (the query is slot C)
    ctx_guess = {n: p[c_idx] for n, (p, _) in guesses.items()}
    q_guess = {n: q[q_idx] for n, (_, q) in guesses.items()}
    shown = {}
    for a in arms:
        g = arm_guess_name(a)
        if g is None:
            continue
        all11 = np.concatenate([ctx_guess[g], q_guess[g][:, None]], 1)
        shown[a] = np.take_along_axis(all11, perm, 1) if a.startswith(PLACEBO) else all11
    store = _AnswerStore(answers_file, backend)
    answers = {a: [None] * n_runs for a in arms}
    secs = {a: np.zeros(n_runs) for a in arms}
    progress = v.boolean("progress", progress)
    bar = tqdm(total=n_runs, desc=getattr(backend, "name", "LM"), disable=not progress)
    done = 0
    for g in groups:
        ctx = pool.take(c_idx[g.start])
        for a in arms:  # a context's prompts back to back, arm by arm (prefix cache)
            for r in g:
                pair = (queries.sentence1[q_idx[r]], queries.sentence2[q_idx[r]])
                if a == WITHOUT:
                    prompt = build_prompt(ctx, pair)
                else:
                    s = shown[a][r]
                    prompt = build_prompt(ctx, pair, context_guess=s[:-1], query_guess=s[-1])
                hit = store.get(prompt)
                if hit is None:
                    t0 = time.perf_counter()
                    texts = backend.generate([prompt])
                    dt = time.perf_counter() - t0
                    if len(texts) != 1 or not isinstance(texts[0], str):
                        raise TypeError(
                            f"backend.generate must return one string per prompt, got {texts!r}"
                        )
                    hit = (texts[0], dt)
                    store.put(prompt, *hit)
                answers[a][r], secs[a][r] = parse_score(hit[0]), hit[1]
        done += len(g)
        bar.update(len(g))
        bar.set_postfix(
            s_per_prompt=f"{sum(s[:done].sum() for s in secs.values()) / (len(arms) * done):.2f}"
        )
    bar.close()
    col = lambda a, field: [getattr(x, field) for x in answers[a]]
    return RefineResult(
        arms=arms,
        query_idx=q_idx,
        context_idx=c_idx,
        truth=np.asarray(queries.score[q_idx], float),
        context_score=np.asarray(pool.score, float)[c_idx],
        query_guess=q_guess,
        context_guess=ctx_guess,
        shown_guess={a: shown[a][:, -1] if a in shown else np.full(n_runs, np.nan) for a in arms},
        values={a: np.asarray(col(a, "value"), float) for a in arms},
        reasons={a: col(a, "reason") for a in arms},
        texts={a: col(a, "text") for a in arms},
        seconds=secs,
        model=str(getattr(backend, "name", type(backend).__name__)),
    )
