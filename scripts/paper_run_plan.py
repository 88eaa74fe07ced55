#!/usr/bin/env python3
"""Lanes and the summary of a whole-book paper-scale run (``scripts/paper_run.sh``).

``scripts/paper_run_plan.json`` lists the chapters a run executes, each with its last measured
(or estimated) wall time on one GPU while the other lanes run beside it. :func:`pack` spreads
them over lanes, longest first, each onto the lane with the least work so far (the longest-
processing-time rule: no lane ends later than 4/3 of the best split), so the run takes about as
long as its longest chapter. :func:`lane_count` sizes the lanes to the machine: on a GPU one lane
per two CPU cores (a lane is a kernel that compiles with XLA on the CPU and computes on the
shared GPU), on CPUs alone one per four cores.

Runs on the lent machine's own ``python3`` (standard library only).

Usage (from the repository root)::

    python3 scripts/paper_run_plan.py lanes --cores 16 --gpu      # one lane a line
    python3 scripts/paper_run_plan.py lanes --lanes 2 book/part3/single_layer.ipynb ...
    python3 scripts/paper_run_plan.py summary --work W --logs L --meta M   # run.json on stdout
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PLAN = REPO / "scripts" / "paper_run_plan.json"


def load_plan(path: Path = PLAN) -> dict[str, Any]:
    """The plan: ``{"notebooks": {key: {"seconds": s, "how": text, ...}}, "default_s": s, ...}``.

    Raises:
        ValueError: a plan without notebooks, or a notebook without positive ``seconds``.
    """
    plan = json.loads(Path(path).read_text(encoding="utf8"))
    notebooks = plan.get("notebooks")
    if not isinstance(notebooks, dict) or not notebooks:
        raise ValueError(f"{path}: no 'notebooks' to run")
    for key, entry in notebooks.items():
        s = entry.get("seconds") if isinstance(entry, dict) else None
        if not isinstance(s, int | float) or s <= 0:
            raise ValueError(f"{path}: {key} needs positive 'seconds', got {s!r}")
    return plan


def lane_count(cores: int, gpu: bool, notebooks: int) -> int:
    """Lanes for a machine of ``cores`` CPU cores (with or without a GPU) and ``notebooks``
    notebooks: ``cores // 2`` with a GPU, ``cores // 4`` without, at least 1, at most one a
    notebook.

    Raises:
        ValueError: ``cores`` or ``notebooks`` below 1.
    """
    if not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be a positive int, got {cores!r}")
    if not isinstance(notebooks, int) or notebooks < 1:
        raise ValueError(f"notebooks must be a positive int, got {notebooks!r}")
    return max(1, min(notebooks, cores // 2 if gpu else cores // 4))


def pack(seconds: dict[str, float], lanes: int) -> list[list[str]]:
    """Notebooks spread over ``lanes`` lanes, longest first, each onto the lane with the least
    work so far (ties: the first such lane); in each lane the notebooks run longest first.

    Args:
        seconds: ``{notebook: expected wall time in seconds}``; ties are broken by name, so the
            split depends on the times alone.
        lanes: number of lanes, at least 1; no more lanes than notebooks are returned.

    Raises:
        ValueError: ``lanes`` below 1, or a negative time.
    """
    if not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"lanes must be a positive int, got {lanes!r}")
    if any(not isinstance(s, int | float) or s < 0 for s in seconds.values()):
        raise ValueError(f"seconds must be non-negative numbers, got {seconds!r}")
    order = sorted(seconds, key=lambda k: (-seconds[k], k))
    out: list[list[str]] = [[] for _ in range(min(lanes, len(order)))]
    load = [0.0] * len(out)
    for key in order:
        i = min(range(len(out)), key=lambda j: (load[j], j))
        out[i].append(key)
        load[i] += seconds[key]
    return out


def plan_lanes(
    plan: dict[str, Any], lanes: int | None, cores: int, gpu: bool, only: list[str] | None = None
) -> list[list[str]]:
    """:func:`pack` of the plan's notebooks (or of ``only``: a notebook the plan does not time
    counts ``default_s``) over ``lanes`` lanes (default :func:`lane_count`)."""
    keys = list(only) if only else list(plan["notebooks"])
    default = float(plan.get("default_s", 60))
    times = {k: float(plan["notebooks"].get(k, {}).get("seconds", default)) for k in keys}
    n = lane_count(cores, gpu, len(keys)) if lanes is None else lanes
    return pack(times, n)


def _read_times(path: Path) -> tuple[float, float, int | None] | None:
    """``(start, end, rc)`` of a lane's ``laneN.time`` (lines ``start S``, ``end S``, ``rc N``)."""
    if not path.is_file():
        return None
    fields = dict(line.split(None, 1) for line in path.read_text().splitlines() if " " in line)
    if "start" not in fields:
        return None
    end = float(fields.get("end", fields["start"]))
    rc = int(fields["rc"]) if "rc" in fields else None
    return float(fields["start"]), end, rc


def summarize(work: Path, logs: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """``run.json`` of a finished run: ``meta`` (device, commit, deadline_s, started, ...) and

    * ``lanes``: per lane its notebooks, ``wall_time_s`` (from its ``laneN.time``) and exit
      status ``rc`` (124/137: killed past the deadline's grace);
    * ``notebooks``: per notebook its ``lane`` (from 1), ``executed`` (run at paper scale in this
      run: its execution record is dated after the run's start), ``wall_time_s``, and the
      numbers of failed and not-run cells;
    * ``wall_time_s``: from the first lane's start to the last lane's end; ``total_s``: from the
      script's start (``meta["started"]``, epoch seconds) to now, wheels and copy included.
    """
    import time
    from datetime import UTC, datetime

    started = float(meta["started"])
    lanes_out, notebooks = [], {}
    spans = []
    for i, lane in enumerate(meta["lanes"], start=1):
        times = _read_times(Path(logs) / f"lane{i}.time")
        entry: dict[str, Any] = {"notebooks": lane, "wall_time_s": None, "rc": None}
        if times:
            entry["wall_time_s"] = round(times[1] - times[0], 1)
            entry["rc"] = times[2]
            spans.append(times[:2])
        lanes_out.append(entry)
        for key in lane:
            path = Path(work) / key
            nb = json.loads(path.read_text(encoding="utf8")) if path.is_file() else {}
            ex = (nb.get("metadata", {}).get("iclgd") or {}).get("execution") or {}
            when = ex.get("executed_at")
            executed = (
                ex.get("scale") == "paper"
                and isinstance(when, str)
                and datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
                >= int(started)
            )
            notebooks[key] = {
                "lane": i,
                "executed": executed,
                "wall_time_s": ex.get("wall_time_s") if executed else None,
                "failed_cells": len(ex.get("failed_cells") or []) if executed else None,
                "not_run_cells": len(ex.get("not_run_cells") or []) if executed else None,
            }
    out = {k: v for k, v in meta.items() if k not in ("lanes", "started")}
    out["started_at"] = datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    wall = max(e for _, e in spans) - min(s for s, _ in spans) if spans else None
    out["wall_time_s"] = None if wall is None else round(wall, 1)
    out["total_s"] = round(time.time() - started, 1)
    out["lanes"] = lanes_out
    out["notebooks"] = notebooks
    return {"format": 1} | out


def update(plan: dict[str, Any], run: dict[str, Any], where: str) -> dict[str, Any]:
    """The plan with the times of a GPU run (``run.json``): each notebook the run executed gets
    its measured ``seconds``; one that the deadline cut off (cells not run) keeps the larger of
    its old time and the partial one, marked ``"cut": true``. A run without a GPU changes
    nothing (its times would mislead the packing on a GPU).

    Args:
        plan: :func:`load_plan`'s dict.
        run: a run's ``run.json``.
        where: how the run is named in each entry's ``how`` (e.g. the tarball's name).
    """
    if not isinstance(run, dict) or "notebooks" not in run:
        raise TypeError("run must be a run.json dict with 'notebooks'")
    if not run.get("gpu"):
        return plan
    out = json.loads(json.dumps(plan))
    for key, nb in run["notebooks"].items():
        if not nb.get("executed") or nb.get("wall_time_s") is None:
            continue
        old = out["notebooks"].get(key, {}).get("seconds", 0)
        cut = bool(nb.get("not_run_cells"))
        seconds = max(old, nb["wall_time_s"]) if cut else nb["wall_time_s"]
        how = (
            f"measured {run.get('started_at', '?')[:10]} on {run.get('device', '?')}, "
            f"{len(run.get('lanes') or [])} lanes side by side ({where})"
        )
        out["notebooks"][key] = {"seconds": round(seconds, 1), "how": how} | (
            {"cut": True} if cut else {}
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    la = sub.add_parser("lanes", help="print the lanes, one a line (notebooks space-separated)")
    la.add_argument("notebooks", nargs="*", help="default: every notebook of the plan")
    la.add_argument("--lanes", type=int, default=None, help="default: sized to the machine")
    la.add_argument("--cores", type=int, required=True)
    la.add_argument("--gpu", action="store_true", help="the machine has a GPU")
    la.add_argument("--plan", type=Path, default=PLAN)
    su = sub.add_parser("summary", help="print run.json of a finished run")
    su.add_argument("--work", type=Path, required=True, help="the copy the lanes executed in")
    su.add_argument("--logs", type=Path, required=True, help="folder of laneN.time files")
    su.add_argument("--meta", type=Path, required=True, help="JSON: device, lanes, started, ...")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "lanes":
            for lane in plan_lanes(load_plan(a.plan), a.lanes, a.cores, a.gpu, a.notebooks):
                print(" ".join(lane))
        else:
            meta = json.loads(a.meta.read_text(encoding="utf8"))
            print(json.dumps(summarize(a.work, a.logs, meta), indent=1))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
