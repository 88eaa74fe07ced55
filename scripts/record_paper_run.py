"""Record a paper-scale run of chapters into ``book/_generated/paper_runs.json`` (status page).

The committed notebooks hold their ``ci``-scale outputs (nbval re-executes them at that scale). A
run at ``ICLGD_SCALE=paper`` is made on a copy of the book, for example a git worktree::

    git worktree add /tmp/paper HEAD && cd /tmp/paper
    ICLGD_SCALE=paper python scripts/execute_notebooks.py --scale paper book/part3/gdpp.ipynb

or, for the whole book on a machine lent for a fixed time, ``bash scripts/paper_run.sh OUT``
(``OUT/paper_run.tgz``: the executed copies and ``run.json``, the run's device, commit, deadline
and wall times).

This script then copies, from each executed copy, what a reader needs to see the paper-scale
result. Each chapter's record (``"format": 3``) holds:

* ``device`` (``--device``), ``jax_version`` (from the execution record's versions), ``commit``
  (of the copy) and ``recorded_at``;
* ``code_sha256``: ``record_status.code_sha256`` of the copy, the sha256 of its code cells'
  sources (``execute_notebooks.py`` changes no source, so it equals the committed notebook's of
  that commit); :func:`freshness` compares it with the committed notebook: ``fresh``, ``stale``
  (the chapter's code changed since the run) or ``missing``;
* ``asserts``: per code cell with an ``assert``, ``{"cell", "held", "asserts", "error"}``
  (:func:`assert_results`; ``held`` ``null``: not run, for example past the deadline);
* ``execution``: the notebook's execution record (``metadata.iclgd.execution``: scale, wall time,
  date, cores, versions, failed and not-run cells);
* ``glue``: every glued value; ``cells``: each code cell's printed text (stdout and
  ``text/plain`` results; glue outputs and errors left out) and its figures, written as PNG files
  under ``book/_generated/paper_runs/``;
* ``run``: for a chapter recorded from a whole-book run (``--run``), that run
  (:func:`run_summary`: its wall time, lanes, this chapter's lane, deadline, start); ``null``
  for a chapter run on its own.

Records written before format 2 read with ``code_sha256`` and ``asserts`` ``null`` (stale),
records before format 3 with ``run`` ``null``. The
status page shows one table of every chapter and the cells' output in dropdowns
(``{iclgd-paper-runs}``, ``book/_ext/iclgd_sphinx.py``). Nothing is typed by hand: every number
comes from the executed cells.

Usage::

    python scripts/record_paper_run.py --run OUT/paper_run.tgz   # every chapter of a run
    python scripts/record_paper_run.py --device "2 CPU cores (AMD EPYC), no GPU" \\
        /tmp/paper/book/part3/figs_1_2.ipynb /tmp/paper/book/part3/gdpp.ipynb
    python scripts/record_paper_run.py --freshness   # fresh / stale / missing per chapter
"""

from __future__ import annotations

import argparse
import ast
import base64
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNS_JSON = REPO / "book" / "_generated" / "paper_runs.json"
FIG_DIR = REPO / "book" / "_generated" / "paper_runs"
FORMAT = 3  # of paper_runs.json: 2 added code_sha256, jax_version, asserts; 3 added run

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_run_plan  # noqa: E402  (sibling script: the lanes' plan, updated from GPU runs)
import record_status  # noqa: E402  (sibling script: code_sha256, toc_notebooks, titles)


def book_path(path: Path) -> str:
    """``book/...`` part of ``path`` (the notebook's path inside any copy of the repository)."""
    parts = path.resolve().parts
    if "book" not in parts:
        raise ValueError(f"{path} is not inside a book/ folder of a copy of the repository")
    i = len(parts) - 1 - parts[::-1].index("book")
    return "/".join(parts[i:])


def _text(x: Any) -> str:
    return "".join(x) if isinstance(x, list) else str(x)


def glued(nb: dict) -> dict[str, str]:
    """``{name: text}`` of every myst-nb ``glue`` output of the notebook."""
    out = {}
    for c in nb.get("cells", []):
        for o in c.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook")
            if not meta:
                continue
            data = o.get("data", {})
            text = data.get(meta.get("mime_prefix", "") + "text/plain", data.get("text/plain"))
            if text is not None:
                text = _text(text)
                try:  # the record is the value's repr: '0.1336' for the string 0.1336
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    value = text
                out[meta["name"]] = value if isinstance(value, str) else str(value)
    return out


def cell_outputs(nb: dict, stem: str) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
    """``[{cell, text, figures}]`` for code cells with printed text or figures, and the PNGs."""
    cells, pngs = [], []
    code = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    for i, c in enumerate(code, start=1):
        text, figs = [], []
        for out in c.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                text.append(_text(out["text"]))
            elif out.get("output_type") in ("execute_result", "display_data"):
                data = out.get("data", {})
                if "scrapbook" in out.get("metadata", {}):
                    continue  # a glue output: its value shows where the prose uses it
                if "image/png" in data:
                    name = f"{stem}-{len(pngs) + 1}.png"
                    pngs.append((name, base64.b64decode(_text(data["image/png"]))))
                    figs.append(f"_generated/paper_runs/{name}")  # from book/status.md
                elif "text/plain" in data:
                    text.append(_text(data["text/plain"]) + "\n")
        if text or figs:
            cells.append({"cell": i, "text": "".join(text).rstrip("\n"), "figures": figs})
    return cells, pngs


def _first_line(text: str, limit: int = 300) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


_ASSERT_LINE = re.compile(r"^\s*assert\b")


def _scale_test(test: ast.expr, scale: str) -> bool | None:
    """Whether the ``if`` test ``iclgd.scale() == "paper"`` (or ``!=``, either side, any scale
    name) is true at ``scale``; ``None`` for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    if not isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        return None
    sides = [test.left, test.comparators[0]]

    def is_call(n) -> bool:
        return (
            isinstance(n, ast.Call)
            and not n.args
            and not n.keywords
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "scale"
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "iclgd"
        )

    consts = [n.value for n in sides if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    if len(consts) != 1 or not any(is_call(n) for n in sides):
        return None
    return (consts[0] == scale) == isinstance(test.ops[0], ast.Eq)


def assert_statements(source: str, scale: str | None = None) -> list[str]:
    """The ``assert`` statements of one cell's source, each on one line, in source order.

    With ``scale`` (``"paper"``, ``"ci"``), a branch ``if iclgd.scale() == "paper": ... else: ...``
    contributes only the asserts of the branch that runs at that scale, so that a record does not
    count the other scale's asserts as held. A cell that does not parse as Python (an IPython
    magic) falls back to its lines that start with ``assert``.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [line.strip() for line in source.splitlines() if _ASSERT_LINE.match(line)]
    found: list[ast.Assert] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Assert):
            found.append(node)
            return
        taken = _scale_test(node.test, scale) if scale and isinstance(node, ast.If) else None
        if taken is not None:
            for child in node.body if taken else node.orelse:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    out = []
    for node in sorted(found, key=lambda n: (n.lineno, n.col_offset)):
        segment = ast.get_source_segment(source, node) or ""
        out.append(" ".join(line.strip() for line in segment.splitlines()))
    return out


def _failing_line(traceback: list) -> str | None:
    """The source line IPython marks with ``--->`` in the innermost frame of the chapter's cell
    (ANSI colours removed), e.g. ``assert np.all(train_end < exact_tr)``; ``None`` if absent."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(_text(t) for t in traceback))
    marked = re.findall(r"^-+>\s*\d+\s(.*)$", text, flags=re.M)
    return " ".join(marked[0].split()) if marked else None


def assert_results(nb: dict) -> list[dict[str, Any]]:
    """Pass/fail of every asserting code cell of an executed notebook.

    Cells are numbered as ``scripts/execute_notebooks.py`` numbers them: code cells only, from 1.
    A cell's asserts are those of the branches that run at the notebook's recorded scale
    (:func:`assert_statements` with ``metadata.iclgd.execution.scale``).
    Each entry is ``{"cell": i, "held": h, "asserts": [statement, ...], "error": e}``:

    * ``held`` ``True``, ``error`` ``None``: the cell ran to its end, so every assert held;
    * ``held`` ``False``: the cell stopped on an error, ``error`` its one line
      (``"AssertionError: ..."``, or another exception: the asserts after it were not reached);
    * ``held`` ``None``: not run (the ``--deadline`` had passed, or the run was interrupted in
      that cell): ``error`` says which.

    A cell tagged ``raises-exception`` is expected to raise: its error does not count.

    Args:
        nb: an executed notebook as read by ``json.loads``; its ``metadata.iclgd.execution``
            (``not_run_cells``, ``failed_cells``) is read where present.
    """
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError("nb must be a notebook dict with a 'cells' list")
    execution = (nb.get("metadata", {}).get("iclgd") or {}).get("execution") or {}
    not_run = set(execution.get("not_run_cells") or [])
    listed = {f["cell"]: f["error"] for f in execution.get("failed_cells") or []}
    code = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    out: list[dict[str, Any]] = []
    for i, cell in enumerate(code, start=1):
        statements = assert_statements(_text(cell.get("source", "")), execution.get("scale"))
        if not statements:
            continue
        expected = "raises-exception" in cell.get("metadata", {}).get("tags", [])
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        held: bool | None
        if i in not_run:
            held, error = None, "not run: the deadline had passed"
        elif cell.get("execution_count") is None and not cell.get("outputs"):
            held, error = None, "not run"
        elif errors and not expected:
            name, value = errors[0].get("ename", "Error"), _text(errors[0].get("evalue", ""))
            if name == "KeyboardInterrupt":
                held, error = None, "not run to its end: interrupted at the deadline"
            else:
                # a bare AssertionError says nothing: name the line that failed
                where = None if value.strip() else _failing_line(errors[0].get("traceback") or [])
                what = f"{name}: {value}" if value.strip() else name
                held, error = False, _first_line(what + (f" at `{where}`" if where else ""))
        elif i in listed and not expected:
            held, error = False, _first_line(listed[i])
        else:
            held, error = True, None
        out.append({"cell": i, "held": held, "asserts": statements, "error": error})
    return out


def commit_of(path: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(path.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


ABOUT = (
    "Generated by scripts/record_paper_run.py from notebooks executed at ICLGD_SCALE=paper; "
    "do not edit by hand. Each record: device, jax_version, commit, recorded_at, code_sha256 "
    "(scripts/record_status.py:code_sha256 of the executed copy; null: recorded before format 2), "
    "asserts (per asserting code cell: held true/false/null = not run; null: not recorded), "
    "execution (the notebook's execution record), glue, cells (printed text and figures), "
    "run (the whole-book run of scripts/paper_run.sh it came from: wall_time_s of the run, lanes, "
    "this chapter's lane, deadline_s, started_at; null: recorded on its own or before format 3)."
)


def migrate(runs: dict[str, Any]) -> dict[str, Any]:
    """``runs`` in the current :data:`FORMAT`: records written before format 2 get
    ``code_sha256`` and ``asserts`` ``None`` (not recorded: such a record is stale) and their
    ``jax_version`` from their execution record; records before format 3 get ``run`` ``None``
    (not from a whole-book run). Nothing else is added."""
    if not isinstance(runs, dict) or not isinstance(runs.get("runs", {}), dict):
        raise TypeError("runs must be a dict with a 'runs' dict (book/_generated/paper_runs.json)")
    version = runs.get("format", 1)
    if not isinstance(version, int) or version > FORMAT:
        raise ValueError(f"paper_runs.json has format {version!r}; this script knows {FORMAT}")
    out: dict[str, Any] = {"format": FORMAT, "about": ABOUT, "runs": {}}
    for key, run in sorted((runs.get("runs") or {}).items()):
        ex = run.get("execution") or {}
        head = {k: run[k] for k in ("device", "commit", "recorded_at") if k in run}
        head["jax_version"] = run.get("jax_version", (ex.get("versions") or {}).get("jax"))
        head["code_sha256"] = run.get("code_sha256")
        head["asserts"] = run.get("asserts")
        head["run"] = run.get("run")
        out["runs"][key] = head | {k: v for k, v in run.items() if k not in head}
    return out


def load_runs(path: Path | None = None) -> dict[str, Any]:
    """``book/_generated/paper_runs.json`` in the current format (an absent file: no runs)."""
    path = RUNS_JSON if path is None else path  # read at call time (tests patch RUNS_JSON)
    if not path.is_file():
        return {"format": FORMAT, "about": ABOUT, "runs": {}}
    return migrate(json.loads(path.read_text(encoding="utf8")))


def write_runs(runs: dict[str, Any], path: Path | None = None) -> Path:
    path = RUNS_JSON if path is None else path
    text = json.dumps(migrate(runs), indent=1, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf8")
    return path


def record(
    paths: list[Path],
    device: str,
    commit: str | None = None,
    run: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Record the executed copies ``paths`` (each ``.../book/<chapter>.ipynb`` run at paper
    scale) into ``book/_generated/paper_runs.json`` and their figures into ``FIG_DIR``.

    Args:
        paths: executed copies of chapters.
        device: the machine, e.g. ``"1 NVIDIA H100 80GB HBM3, 16 CPU cores"``.
        commit: the commit of the copy (default: the copy's git HEAD).
        run: ``{chapter key: run summary}`` (:func:`run_summary`) for chapters of a whole-book
            run; the others get ``run`` ``None``.
    """
    if not isinstance(device, str) or not device.strip():
        raise ValueError("device must name the machine, e.g. '1 NVIDIA H100'")
    runs = load_runs()
    FIG_DIR.mkdir(parents=True, exist_ok=True)
    for path in paths:
        nb = json.loads(Path(path).read_text(encoding="utf8"))
        execution = (nb.get("metadata", {}).get("iclgd") or {}).get("execution") or {}
        if execution.get("scale") != "paper":
            raise ValueError(
                f"{path}: its execution record says scale {execution.get('scale')!r}; run it with "
                "scripts/execute_notebooks.py --scale paper first"
            )
        key = book_path(Path(path))
        if not (REPO / key).is_file():
            raise ValueError(f"{path}: the book has no notebook {key}")
        stem = Path(key).with_suffix("").as_posix().removeprefix("book/").replace("/", "-")
        for old in FIG_DIR.glob(f"{stem}-*.png"):
            old.unlink()
        cells, pngs = cell_outputs(nb, stem)
        for name, data in pngs:
            (FIG_DIR / name).write_bytes(data)
        runs["runs"][key] = {
            "device": device,
            "commit": commit or commit_of(Path(path)),
            "recorded_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "jax_version": (execution.get("versions") or {}).get("jax"),
            "code_sha256": record_status.code_sha256(nb),
            "asserts": assert_results(nb),
            "execution": execution,
            "glue": glued(nb),
            "cells": cells,
            "run": (run or {}).get(key),
        }
    write_runs(runs)
    return load_runs()


def run_summary(run: dict[str, Any], key: str) -> dict[str, Any]:
    """What a chapter's record keeps of its whole-book run (``run.json`` of
    ``scripts/paper_run.sh``): the run's ``wall_time_s`` (first lane's start to last lane's
    end), ``total_s`` (wheels and copy included), ``lanes``, this chapter's ``lane`` (from 1)
    and the ``lane_wall_time_s`` of that lane, ``deadline_s``, ``started_at``, ``chapters``
    (how many it ran) and ``dirty`` (the tree had uncommitted changes to iclgd/, book/ or
    scripts/; ``None``: the copy had no git to ask)."""
    nb = run["notebooks"][key]
    lane = run["lanes"][nb["lane"] - 1]
    return {
        "wall_time_s": run.get("wall_time_s"),
        "total_s": run.get("total_s"),
        "lanes": len(run["lanes"]),
        "lane": nb["lane"],
        "lane_wall_time_s": lane.get("wall_time_s"),
        "deadline_s": run.get("deadline_s"),
        "started_at": run.get("started_at"),
        "chapters": len(run["notebooks"]),
        "dirty": run.get("dirty"),
    }


def _run_folder(source: Path, tmp: Path) -> Path:
    """The ``paper_run/`` folder of ``source``: ``paper_run.tgz``, its unpacked folder, or the
    folder holding it."""
    source = Path(source)
    if source.is_file():
        with tarfile.open(source, "r:gz") as tar:
            tar.extractall(tmp, filter="data")
        source = tmp
    for folder in (source, source / "paper_run"):
        if (folder / "run.json").is_file():
            return folder
    raise ValueError(f"{source}: no run.json (give OUT/paper_run.tgz of scripts/paper_run.sh)")


def record_run(
    source: Path, commit: str | None = None, device: str | None = None, plan: Path | None = None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Record every chapter a whole-book run executed (``scripts/paper_run.sh``'s
    ``paper_run.tgz`` or its unpacked folder), each with :func:`run_summary`; the device and
    commit come from its ``run.json`` unless given. A GPU run's times update the lanes' plan
    ``plan`` (default ``scripts/paper_run_plan.json``; :func:`paper_run_plan.update`).

    Returns:
        ``(runs, recorded, not_executed)``: the new ``paper_runs.json`` content, the chapters
        recorded and those the run did not execute (the deadline had passed before their turn).

    Raises:
        ValueError: no ``run.json``, no commit to record, or a chapter the book lacks.
    """
    with tempfile.TemporaryDirectory() as tmp:
        folder = _run_folder(Path(source), Path(tmp))
        run = json.loads((folder / "run.json").read_text(encoding="utf8"))
        commit = commit or run.get("commit")
        if not commit:
            raise ValueError(
                f"{source}: run.json names no commit (the copy had no .git): give --commit"
            )
        if re.fullmatch(r"[0-9a-f]{40}", commit):
            commit = commit[:7]  # the short form the records and the status page show
        done = [k for k, nb in run["notebooks"].items() if nb.get("executed")]
        skipped = [k for k in run["notebooks"] if k not in done]
        summaries = {k: run_summary(run, k) for k in done}
        runs = record([folder / k for k in done], device or run["device"], commit, summaries)
    if run.get("gpu"):
        path = paper_run_plan.PLAN if plan is None else plan
        new = paper_run_plan.update(paper_run_plan.load_plan(path), run, Path(source).name)
        path.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    return runs, done, skipped


def chapter_notebooks() -> dict[str, Path]:
    """``{"book/....ipynb": path}`` of the chapters in ``_toc.yml``, in book order."""
    return {p.relative_to(REPO).as_posix(): p for p in record_status.toc_notebooks()}


def freshness(runs: dict[str, Any], chapters: dict[str, Path] | None = None) -> dict[str, str]:
    """``{chapter: "fresh" | "stale" | "missing"}`` for every chapter, in book order.

    ``fresh``: the record's ``code_sha256`` equals the committed notebook's; ``stale``: the
    chapter's code changed since the run (a record without ``code_sha256``, written before
    format 2, is stale); ``missing``: no record.

    Args:
        runs: content of ``book/_generated/paper_runs.json`` (:func:`load_runs`).
        chapters: ``{key: committed notebook path}``; default the chapters of ``_toc.yml``.
    """
    if not isinstance(runs, dict):
        raise TypeError(f"runs must be a dict, got {type(runs).__name__}")
    chapters = chapter_notebooks() if chapters is None else chapters
    records = runs.get("runs") or {}
    out = {}
    for key, path in chapters.items():
        run = records.get(key)
        if run is None:
            out[key] = "missing"
        elif not run.get("code_sha256"):
            out[key] = "stale"
        else:
            nb = json.loads(Path(path).read_text(encoding="utf8"))
            out[key] = "fresh" if run["code_sha256"] == record_status.code_sha256(nb) else "stale"
    return out


def _cell_list(cells: list[int]) -> str:
    """``[3, 4, 5, 8]`` -> ``"cells 3–5, 8"``; ``[8]`` -> ``"cell 8"``."""
    groups: list[list[int]] = []
    for c in sorted(cells):
        if groups and c == groups[-1][-1] + 1:
            groups[-1].append(c)
        else:
            groups.append([c])
    text = ", ".join(f"{g[0]}–{g[-1]}" if len(g) > 2 else ", ".join(map(str, g)) for g in groups)
    return ("cells " if len(cells) > 1 else "cell ") + text


def asserts_held(run: dict[str, Any]) -> str:
    """The status table's "asserts held" of one record: ``"12 of 12"``,
    ``"10 of 12: cells 8, 13 failed"``; from the execution record where the record predates
    the per-assert list."""
    asserts = run.get("asserts")
    if asserts is None:
        ex = run.get("execution") or {}
        failed = sorted({f["cell"] for f in ex.get("failed_cells") or []})
        not_run = ex.get("not_run_cells") or []
        parts = [f"{_cell_list(failed)} failed"] if failed else []
        parts += [f"{_cell_list(not_run)} not run (deadline)"] if not_run else []
        return "older record, asserts not listed: " + ("; ".join(parts) or "no cell failed")
    if not asserts:
        return "no assert"
    failed = [a["cell"] for a in asserts if a["held"] is False]
    not_run = [a["cell"] for a in asserts if a["held"] is None]
    held = sum(a["held"] is True for a in asserts)
    parts = [f"{_cell_list(failed)} failed"] if failed else []
    parts += [f"{_cell_list(not_run)} not run (deadline)"] if not_run else []
    return f"{held} of {len(asserts)}" + (": " + "; ".join(parts) if parts else "")


def _code(text: str) -> str:
    return "`" + _first_line(str(text)).replace("`", "'") + "`"


def _result(execution: dict[str, Any]) -> str:
    """One line per failure of an execution record (errors as code), NameErrors that follow a
    failure counted, not repeated."""
    failed = execution.get("failed_cells") or []
    not_run = execution.get("not_run_cells") or []
    if not failed and not not_run:
        return "every cell ran, every assert held"
    # a NameError after an earlier failure is that failure's consequence: count, do not repeat
    first = failed[0]["cell"] if failed else 0
    follow = [f["cell"] for f in failed if f["cell"] > first and f["error"].startswith("NameError")]
    parts = [
        f"cell {f['cell']} failed: {_code(f['error'])}" for f in failed if f["cell"] not in follow
    ]
    if follow:
        parts.append(
            f"{len(follow)} later cell(s) ({', '.join(map(str, follow))}) failed with a NameError "
            "for want of what a failed cell defines"
        )
    if not_run:
        parts.append(f"stopped at the machine's time limit: {_cell_list(not_run)} not run")
    return "; ".join(parts)


def whole_runs(records: dict[str, Any]) -> list[str]:
    """Markdown lines, one per run of ``scripts/paper_run.sh`` that the records come from,
    newest first: when, device, commit, how many of its chapters are recorded, lanes, the
    run's wall time (first lane's start to last lane's end) against its deadline, and with the
    wheels' install and the copy; an empty list when no record comes from such a run."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in records.values():
        whole = rec.get("run")
        if not whole:
            continue
        key = (str(whole.get("started_at")), str(rec.get("device")))
        entry = seen.setdefault(key, {"run": whole, "commit": rec.get("commit"), "n": 0})
        entry["n"] += 1
    lines = []
    fmt = record_status._fmt_seconds
    for (started, device), e in sorted(seen.items(), reverse=True):
        w = e["run"]
        commit = f", commit `{e['commit']}`" if e["commit"] else ""
        commit += " with uncommitted changes" if commit and w.get("dirty") else ""
        when = started.replace("T", " ").removesuffix("Z")[:16]
        lines.append(
            f"- `scripts/paper_run.sh` of {when} UTC on "
            f"{_cell_text(device)}{commit}: {_n(w.get('chapters'), 'chapter')} in "
            f"{_n(w.get('lanes'), 'lane')} "
            f"side by side, **{fmt(w.get('wall_time_s'))}** from the first lane's start to "
            f"the last one's end (deadline {fmt(w.get('deadline_s'))}; {fmt(w.get('total_s'))} "
            f"with the wheels' install and the copy of the book); {e['n']} of its chapters "
            "recorded here."
        )
    return [""] + lines if lines else []


def _n(count: Any, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _cell_text(text: str) -> str:
    return " ".join(str(text).split())


FRESHNESS_TEXT = {
    "fresh": "fresh",
    "stale": "**stale**",
    "missing": "no record",
}


def status_label(docname: str) -> str:
    """The target of a chapter's entry on the status page: ``book/part2/training`` ->
    ``paper-run-part2-training`` (the chapter's line under its title links to it)."""
    return "paper-run-" + docname.removeprefix("book/").replace("/", "-").replace("_", "-")


def render_markdown(
    runs: dict[str, Any], link_for: Any = None, chapters: dict[str, Path] | None = None
) -> str:
    """MyST markdown of ``book/_generated/paper_runs.json`` for the status page: one table
    (chapter, scale, device, date, fresh/stale, asserts held), then per recorded chapter its
    failures (one line each) and one dropdown per cell with what it printed and drew.

    Args:
        runs: content of ``book/_generated/paper_runs.json`` (:func:`load_runs`).
        link_for: optional callable mapping a notebook's repository path to a MyST link target.
        chapters: ``{key: committed notebook path}``; default the chapters of ``_toc.yml``.
    """
    runs = migrate(runs)
    chapters = chapter_notebooks() if chapters is None else chapters
    entries = runs["runs"]
    keys = list(chapters) + [k for k in entries if k not in chapters]
    fresh = freshness(runs, chapters)
    titles = {}
    for key in keys:
        path = chapters.get(key, REPO / key)
        nb = json.loads(Path(path).read_text(encoding="utf8")) if Path(path).is_file() else {}
        titles[key] = record_status.notebook_title(nb) or key
    cell = record_status._cell
    lines = [  # book/status.md explains the columns
        "| chapter | scale | device | executed (UTC) | record | asserts held |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key in keys:
        target = link_for(key) if link_for else None
        name = cell(titles[key])
        chapter = f"[{name}]({target})" if target else name
        run = entries.get(key)
        if run is None:
            lines.append(f"| {chapter} | `ci` only | – | – | no record | – |")
            continue
        ex = run.get("execution") or {}
        device = str(run.get("device") or "–")
        jax = run.get("jax_version")
        if jax and jax not in device:
            device += f"; JAX {jax}"
        when = str(ex.get("executed_at") or run.get("recorded_at") or "–")
        when = when.replace("T", " ").removesuffix("Z")[:16]
        if run.get("commit"):
            when += f", commit `{run['commit']}`"
        scale = (
            f"`{cell(ex.get('scale', '?'))}`, {record_status._fmt_seconds(ex.get('wall_time_s'))}"
        )
        whole = run.get("run")
        if whole:
            scale += (
                f"; lane {whole['lane']} of {whole['lanes']} of a "
                f"{record_status._fmt_seconds(whole.get('wall_time_s'))} run"
            )
        state = FRESHNESS_TEXT.get(fresh.get(key, "stale"), "**stale**")
        lines.append(
            f"| {chapter} | {scale} | {cell(device)} | {cell(when)} | {state} "
            f"| {cell(asserts_held(run))} |"
        )
    lines += whole_runs(entries)
    for key in keys:
        run = entries.get(key)
        if run is None:
            continue
        ex = run.get("execution") or {}
        label = status_label(key.removesuffix(".ipynb"))
        lines += ["", f"({label})=", f"**{cell(titles[key])}** at paper scale: {_result(ex)}.", ""]
        failed = {a["cell"] for a in run.get("asserts") or [] if a["held"] is False}
        failed |= {f["cell"] for f in ex.get("failed_cells") or []}
        for c in run.get("cells", []):
            mark = " (failed)" if c["cell"] in failed else ""
            label = f"{titles[key]}, cell {c['cell']}{mark}"
            lines += [f"`````{{dropdown}} {label}", ""]
            if c.get("text"):
                lines += ["````text", c["text"], "````", ""]
            for fig in c.get("figures", []):
                lines += [f"![cell {c['cell']}, paper scale]({fig})", ""]
            lines += ["`````", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="notebooks executed at paper scale")
    ap.add_argument(
        "--run",
        type=Path,
        help="OUT/paper_run.tgz of scripts/paper_run.sh (or its unpacked folder): record every "
        "chapter it executed, with the run's wall time; a GPU run also updates "
        "scripts/paper_run_plan.json",
    )
    ap.add_argument(
        "--device", help='e.g. "1 NVIDIA H100" or "2 CPU cores" (with --run: from its run.json)'
    )
    ap.add_argument(
        "--commit",
        default=None,
        help="the commit the copy was made from, where the copy is not a git checkout "
        "(default: the copy's HEAD)",
    )
    ap.add_argument(
        "--freshness",
        action="store_true",
        help="print fresh / stale / missing for every chapter of _toc.yml and exit",
    )
    ap.add_argument(
        "--migrate",
        action="store_true",
        help=f"rewrite book/_generated/paper_runs.json in format {FORMAT} (no new data) and exit",
    )
    a = ap.parse_args(argv)
    if a.freshness:
        for key, state in freshness(load_runs()).items():
            print(f"{state:8} {key}")
        return 0
    if a.migrate:
        write_runs(load_runs())
        print(f"wrote {RUNS_JSON.relative_to(REPO)} (format {FORMAT})")
        return 0
    if a.run:
        if a.notebooks:
            ap.error("give --run or notebooks, not both")
        try:
            _, done, skipped = record_run(a.run, a.commit, a.device)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"wrote {RUNS_JSON.relative_to(REPO)} ({len(done)} chapter(s) of {a.run})")
        if skipped:
            print("not executed in that run (not recorded): " + ", ".join(skipped))
        return 0
    if not a.notebooks or not a.device:
        ap.error("give --run, or the executed notebooks and --device (or --freshness / --migrate)")
    try:
        record(a.notebooks, a.device, a.commit)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {RUNS_JSON.relative_to(REPO)} ({len(a.notebooks)} notebook(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
