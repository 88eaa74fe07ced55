"""Part II deep's paper-scale verdicts, checked on the runs that record was made from.

The chapter's paper-scale record (``book/_generated/paper_runs.json``, one NVIDIA H200, 2026-11-27)
was trained from the seven runs committed in ``scripts/run_cache/`` (``iclgd.training.timed_train``
with ``store=``): each holds the losses, the inference losses and the steps per second of one number
of heads $H$. Part II's claims table reads the verdicts on Figs. 2(b) and 5 from that record's glued
numbers. The chapter's Fig. 5 cell asserts those verdicts at paper scale since 2026-11-28, after the
record was made (its cell 9 then asserted the ci run's reading and failed), so the record is stale
until a GPU re-executes the chapter (which trains again since the trainer changed on 2026-12-02:
CONTRIBUTING.md, "A session lent a GPU"). These tests recompute the glued numbers from the saved
runs with the chapter's function (``iclgd.metrics.equal_budget``) and check each verdict: they
execute the chapter's own paper-scale assert cell on the saved runs (and check that it fails on runs
that say what the paper says), so that the chapter and the tests cannot drift. Re-recording the
chapter replaces both, and the tests check the new pair.
"""

import json
import re
import types
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "book" / "_generated" / "paper_runs.json"
RUNS = REPO / "scripts" / "run_cache"
CHAPTER = REPO / "book" / "part2" / "deep.ipynb"
FIG5_CELL = 'if iclgd.scale() == "paper":'


def _glue() -> dict[str, str]:
    runs = json.loads(RECORD.read_text(encoding="utf8"))["runs"]
    return runs["book/part2/deep.ipynb"]["glue"]


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _saved() -> dict[int, dict]:
    """The saved run of each H: losses, inference losses ``in`` and ``ood``, rate."""
    out = {}
    for path in sorted(RUNS.glob("p2d-H*.npz")):
        h = int(re.match(r"p2d-H(\d+)-[0-9a-f]{16}\.npz$", path.name).group(1))
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            out[h] = {
                "losses": z["losses"],
                "in": z["metric_in"],
                "ood": z["metric_ood"],
                "rate": meta["rate"],
                "device": meta["device"],
            }
    return dict(sorted(out.items()))


@pytest.fixture(scope="module")
def deep():
    from iclgd import metrics

    glue, runs = _glue(), _saved()
    every, n5 = _number(glue["p2d_every"]), _number(glue["p2d_n5"])
    rate = {h: r["rate"] for h, r in runs.items()}
    eq = metrics.equal_budget({h: r["losses"] for h, r in runs.items()}, rate, n5, every)
    return dict(
        glue=glue, runs=runs, every=every, rate=rate, at_time=eq.at_time, curve=eq.curve,
        fin=eq.final,
    )  # fmt: skip


def test_the_committed_runs_are_those_of_the_record(deep):
    glue, runs, rate, at_time, fin = (deep[k] for k in ("glue", "runs", "rate", "at_time", "fin"))
    assert list(runs) == [1, 2, 4, 8, 16, 32, 64]
    assert {r["device"] for r in runs.values()} == {"NVIDIA H200"}
    assert glue["p2d_rates"] == ", ".join(f"H = {h}: {rate[h]:.0f} steps/s" for h in runs)
    assert glue["p2d_wall"] == ", ".join(f"H = {h}: {at_time[h]:.2f}" for h in runs)
    assert glue["p2d_fin_H1"] == f"{fin[1]:.2f}" and glue["p2d_fin_H4"] == f"{fin[4]:.2f}"
    assert glue["p2d_fin_big"] == f"{fin[32]:.2f} (H = 32), {fin[64]:.2f} (H = 64)"
    h8, every = runs[int(glue["p2d_h2b"])], deep["every"]
    assert len(h8["losses"]) == _number(glue["p2d_steps"])
    assert glue["p2d_train_end"] == f"{h8['losses'][-every:].mean():.2f}"
    assert glue["p2d_in_end"] == f"{h8['in'][-1]:.2f}"
    assert glue["p2d_ood_end"] == f"{h8['ood'][-1]:.1f}"


def _fig5_cell() -> str:
    """The source of the chapter's cell that asserts Fig. 5's paper-scale verdicts."""
    nb = json.loads(CHAPTER.read_text(encoding="utf8"))
    cells = [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and "".join(c["source"]).startswith(FIG5_CELL)
    ]
    assert len(cells) == 1, f"one cell of {CHAPTER.name} must start with {FIG5_CELL!r}"
    return cells[0]


def _run_fig5_cell(deep, runs: dict) -> None:
    """Execute the chapter's Fig. 5 assert cell at paper scale on ``runs`` (``{H: saved run}``),
    with the names the chapter's earlier cells define."""
    from iclgd import metrics

    glue, every = deep["glue"], deep["every"]
    rate = {h: r["rate"] for h, r in runs.items()}
    eq = metrics.equal_budget(
        {h: r["losses"] for h, r in runs.items()}, rate, _number(glue["p2d_n5"]), every
    )
    fin = eq.final
    namespace = dict(
        np=np,
        iclgd=types.SimpleNamespace(scale=lambda: "paper"),
        heads=list(runs), rate=rate, eq=eq, curve=eq.curve, fin=fin,
        big=[h for h in runs if h >= 32], best=min(fin, key=fin.get),
        h1_bound=float(glue["p2d_h1_bound"]),  # the chapter's exact value, rounded to 3 digits
    )  # fmt: skip
    exec(compile(_fig5_cell(), f"{CHAPTER.name}, Fig. 5 assert cell", "exec"), namespace)


def test_the_chapters_fig5_asserts_hold_on_the_saved_runs(deep, capsys):
    # the chapter's own cell, not a copy of its asserts: what its next paper-scale run will check
    _run_fig5_cell(deep, deep["runs"])
    assert "Fig. 5's asserts at paper scale held" in capsys.readouterr().out


def test_the_chapters_fig5_asserts_can_fail(deep):
    # a control: had four heads trained as one head did (the paper's Fig. 5(a)), the cell fails
    runs = dict(deep["runs"])
    runs[1], runs[4] = dict(runs[4], rate=runs[1]["rate"]), dict(runs[1], rate=runs[4]["rate"])
    with pytest.raises(AssertionError):
        _run_fig5_cell(deep, runs)


def test_every_h_learns(deep):
    # every H ends below 60 % of the copy baseline's loss (not evidence of depth: the text)
    assert max(deep["fin"].values()) < 0.6 * float(deep["glue"]["p2d_copy"])


def test_fig2b_falls_but_has_not_reached_the_one_layer_optimum(deep):
    glue, every = deep["glue"], deep["every"]
    run = deep["runs"][int(glue["p2d_h2b"])]
    windows = run["losses"].reshape(-1, 10 * every).mean(axis=1)  # 10 epochs a window
    assert windows[-1] < 0.1 * windows[0]  # the training loss falls ...
    assert windows[-1] > float(glue["p2d_Lstar"])  # ... stays above L* ...
    assert windows[-1] < windows[-5]  # ... and is still falling at the end
    assert run["ood"][-1] > (4 + 20) * run["in"][-1]  # more than any linear predictor (m = 20)


def test_the_trainer_is_the_one_the_saved_runs_were_made_with():
    """The trainer is the saved runs' (they load on a GPU), or a change was recorded on purpose.

    ``manifest.json``'s ``trainer_source`` is the digest the runs were made with; a deliberate
    change to ``iclgd/training`` is recorded under ``trainer_changed`` (the new digest, its date
    and why; CONTRIBUTING.md says what it costs a GPU session). Any other change fails here."""
    from iclgd.training.timed import _source_digest

    made = json.loads((RUNS / "manifest.json").read_text(encoding="utf8"))
    accepted = {made["trainer_source"]}  # the runs load
    changed = made.get("trainer_changed") or {}
    if {"trainer_source", "date", "why"} <= changed.keys():  # recorded as meant
        accepted.add(changed["trainer_source"])
    assert _source_digest() in accepted, (
        "iclgd/training/*.py changed since Part II deep's GPU runs were saved "
        f"(scripts/run_cache/, made at {made['commit']}): their fingerprints no longer match, so a "
        "GPU session would train the chapter again (about 10 minutes, two calls) instead of "
        "loading them (about 2). If that is meant, say so in CONTRIBUTING.md and record it under "
        "'trainer_changed' in scripts/run_cache/manifest.json (the new digest, the date, why)"
    )
