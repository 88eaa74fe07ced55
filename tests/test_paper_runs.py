"""Paper-scale runs: scripts/record_paper_run.py (records for the status page), the whole-book
run (scripts/paper_run.sh, scripts/paper_run_plan.py) and the wheels it carries
(scripts/device_wheels.py)."""

import base64
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import device_wheels as dw  # noqa: E402
import paper_run_plan as prp  # noqa: E402
import record_paper_run as rpr  # noqa: E402
import record_status  # noqa: E402

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really an image").decode()


def _executed_copy(tmp_path: Path, scale: str) -> Path:
    nb = json.loads((REPO / "book/part3/gdpp.ipynb").read_text(encoding="utf8"))
    nb["metadata"]["iclgd"]["execution"]["scale"] = scale
    nb["metadata"]["iclgd"]["execution"]["wall_time_s"] = 4000.0
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[1]["outputs"] = [
        {"output_type": "stream", "name": "stdout", "text": ["loss 0.123\n"]},
        {"output_type": "stream", "name": "stderr", "text": ["a tqdm bar\n"]},
        {
            "output_type": "display_data",
            "metadata": {"scrapbook": {"name": "x"}},
            "data": {"text/plain": ["'0.5'"]},
        },
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": PNG}},
    ]
    out = tmp_path / "copy" / "book" / "part3" / "gdpp.ipynb"
    out.parent.mkdir(parents=True)
    out.write_text(json.dumps(nb), encoding="utf8")
    return out


def test_record_and_render(tmp_path, monkeypatch):
    monkeypatch.setattr(rpr, "RUNS_JSON", tmp_path / "runs.json")
    monkeypatch.setattr(rpr, "FIG_DIR", tmp_path / "figs")
    with pytest.raises(ValueError, match="scale 'ci'"):
        rpr.record([_executed_copy(tmp_path / "a", "ci")], "2 CPU cores")
    runs = rpr.record([_executed_copy(tmp_path / "b", "paper")], "2 CPU cores")
    run = runs["runs"]["book/part3/gdpp.ipynb"]
    assert run["device"] == "2 CPU cores" and run["execution"]["scale"] == "paper"
    cell = next(c for c in run["cells"] if c["cell"] == 2)
    assert cell["text"] == "loss 0.123"  # stdout kept; stderr and glue outputs left out
    assert cell["figures"] == ["_generated/paper_runs/part3-gdpp-1.png"]
    assert (tmp_path / "figs" / "part3-gdpp-1.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((tmp_path / "runs.json").read_text())["runs"].keys() == {
        "book/part3/gdpp.ipynb"
    }
    assert (
        runs["format"] == rpr.FORMAT and run["jax_version"] == run["execution"]["versions"]["jax"]
    )
    committed = json.loads((REPO / "book/part3/gdpp.ipynb").read_text(encoding="utf8"))
    assert run["code_sha256"] == record_status.code_sha256(committed)  # the copy's code
    assert run["asserts"] and all(a["held"] is True for a in run["asserts"])
    assert run["run"] is None  # recorded on its own, not from scripts/paper_run.sh
    assert rpr.freshness(runs)["book/part3/gdpp.ipynb"] == "fresh"
    md = rpr.render_markdown(runs, link_for=lambda p: "/" + p)
    title = record_status.notebook_title(committed)
    n = len(run["asserts"])
    assert f"| [{title}](/book/part3/gdpp.ipynb) | `paper`, 1 h 06 min | 2 CPU cores; JAX " in md
    assert f"| fresh | {n} of {n} |" in md
    assert "loss 0.123" in md and "part3-gdpp-1.png" in md
    assert f"`````{{dropdown}} {title}, cell 2\n" in md  # labelled by title and cell, not glue
    assert "every cell ran, every assert held" in md
    assert run["glue"]["x"] == "0.5" and "`x`" not in md and "p3g_steps" not in md
    run["execution"]["failed_cells"] = [{"cell": 5, "error": "AssertionError: "}]
    assert "cell 5 failed: `AssertionError:`" in rpr.render_markdown(runs)
    empty = rpr.render_markdown({"runs": {}})
    assert "| no record | – |" in empty and "| fresh |" not in empty
    with pytest.raises(ValueError, match="not inside a book/ folder"):
        rpr.book_path(tmp_path / "x.ipynb")


def test_committed_paper_runs_are_consistent():
    raw = json.loads(rpr.RUNS_JSON.read_text(encoding="utf8"))
    assert raw["format"] == rpr.FORMAT and rpr.migrate(raw) == raw  # written in this format
    runs = rpr.load_runs()
    toc = {p.relative_to(REPO).as_posix() for p in record_status.toc_notebooks()}
    for key, run in runs["runs"].items():
        assert key in toc, key
        assert run["execution"]["scale"] == "paper"
        assert run["jax_version"] == run["execution"]["versions"]["jax"]
        assert run["code_sha256"] is None or len(run["code_sha256"]) == 64
        for cell in run["cells"]:
            for fig in cell["figures"]:
                assert (REPO / "book" / fig).is_file(), fig


def test_execute_allow_errors_runs_on_and_lists_failed_cells(tmp_path):
    import execute_notebooks
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    fails = new_code_cell("raise ValueError('meant to')", metadata={"tags": ["raises-exception"]})
    nb = new_notebook(
        cells=[new_code_cell("print(1)"), new_code_cell("assert 1 == 2, 'x'"), fails]
        + [new_code_cell("print(3)")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    before = path.read_text(encoding="utf8")
    wall, failed = execute_notebooks.execute_one(
        path, timeout=120, kernel=None, scale="ci", allow_errors=True
    )
    assert failed == [{"cell": 2, "error": "AssertionError: x"}]  # the tagged cell is not listed
    out = nbformat.read(path, as_version=4)
    assert out.cells[3].outputs[0]["text"] == "3\n"  # ran on after the failure
    assert out.metadata["iclgd"]["execution"]["failed_cells"] == failed
    # executing changes no source: the executed copy's code hash is the committed notebook's
    executed = json.loads(path.read_text(encoding="utf8"))
    assert record_status.code_sha256(executed) == record_status.code_sha256(json.loads(before))
    assert rpr.assert_results(executed) == [
        {"cell": 2, "held": False, "asserts": ["assert 1 == 2, 'x'"], "error": "AssertionError: x"}
    ]


def test_the_kernel_imports_this_checkouts_iclgd(tmp_path, monkeypatch):
    """A copy of the book run with another checkout's environment must run its own code."""
    import execute_notebooks
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    decoy = tmp_path / "decoy"
    (decoy / "iclgd").mkdir(parents=True)
    (decoy / "iclgd" / "__init__.py").write_text("WHERE = 'decoy'\n", encoding="utf8")
    monkeypatch.setenv("PYTHONPATH", str(decoy))
    cell = "import pathlib, iclgd; print(pathlib.Path(iclgd.__file__).resolve().parents[1])"
    nb = new_notebook(
        cells=[new_code_cell(cell)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    execute_notebooks.execute_one(path, timeout=120, kernel=None, scale="ci")
    out = nbformat.read(path, as_version=4)
    assert out.cells[0].outputs[0]["text"].strip() == str(execute_notebooks.REPO)
    assert execute_notebooks.kernel_pythonpath(f"{decoy}{os.pathsep}{REPO}").split(os.pathsep) == [
        str(REPO),
        str(decoy),
    ]


def test_execute_deadline_interrupts_the_running_cell_and_skips_the_rest(tmp_path):
    import time

    import execute_notebooks
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    cells = ["print(1)", "import time; time.sleep(60)", "print(3)"]
    nb = new_notebook(
        cells=[new_code_cell(c) for c in cells],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    deadline = time.monotonic() + 8  # time for the kernel to start and run cell 1
    wall, failed = execute_notebooks.execute_one(
        path, timeout=120, kernel=None, scale="paper", deadline=deadline
    )
    assert wall < 40  # the sleep was interrupted, not waited out
    assert failed[0] == {"cell": 2, "error": "KeyboardInterrupt: "}
    assert failed[1]["cell"] == 3 and "deadline" in failed[1]["error"]
    out = nbformat.read(path, as_version=4)
    assert out.cells[0].outputs[0]["text"] == "1\n" and out.cells[2].outputs == []
    assert out.metadata["iclgd"]["execution"]["not_run_cells"] == [3]
    assert "iclgd" not in out.cells[2].metadata  # the marker is not left in the notebook


def test_result_column_counts_follow_on_name_errors_and_the_deadline():
    ok = rpr._result({})
    assert ok == "every cell ran, every assert held"
    res = rpr._result(
        {
            "failed_cells": [
                {"cell": 3, "error": "AssertionError: 3e-05"},
                {"cell": 5, "error": "NameError: name 'x' is not defined"},
                {"cell": 7, "error": "NameError: name 'y' is not defined"},
            ],
            "not_run_cells": [8, 9, 10],
        }
    )
    assert res.startswith("cell 3 failed: `AssertionError: 3e-05`; 2 later cell(s) (5, 7)")
    assert res.endswith("stopped at the machine's time limit: cells 8–10 not run")


def _code_cell(source, outputs=(), count=1, tags=()):
    cell = {"cell_type": "code", "source": source, "outputs": list(outputs)}
    cell["execution_count"] = count
    cell["metadata"] = {"tags": list(tags)} if tags else {}
    return cell


def _md(source):
    return {"cell_type": "markdown", "source": source, "metadata": {}}


def _error(ename, evalue):
    tb = ["\x1b[0;31mTraceback (most recent call last)\x1b[0m", f"{ename}: {evalue}"]
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": tb}


def _notebook(cells, execution=None):
    meta = {"iclgd": {"execution": execution}} if execution is not None else {}
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def test_code_sha256_depends_on_code_sources_only():
    nb = json.loads((REPO / "book/part3/gdpp.ipynb").read_text(encoding="utf8"))
    h = record_status.code_sha256(nb)
    assert len(h) == 64 and h == record_status.code_sha256(json.loads(json.dumps(nb)))
    same = json.loads(json.dumps(nb))
    code = [c for c in same["cells"] if c["cell_type"] == "code"]
    code[0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "other\n"}]
    code[1]["execution_count"] = 99
    code[2]["metadata"] = {"tags": ["hide-input"]}
    same["metadata"]["iclgd"]["execution"]["wall_time_s"] = 1.0
    md = next(c for c in same["cells"] if c["cell_type"] == "markdown")
    md["source"] = "# another title"
    assert record_status.code_sha256(same) == h  # outputs, metadata, markdown: same hash
    joined = json.loads(json.dumps(nb))
    for c in joined["cells"]:  # a source as one string or as a list of lines: same code
        c["source"] = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    assert record_status.code_sha256(joined) == h
    changed = json.loads(json.dumps(nb))
    cell = [c for c in changed["cells"] if c["cell_type"] == "code"][3]
    cell["source"] = "".join(cell["source"]) + " "
    assert record_status.code_sha256(changed) != h  # one character of code: another hash
    split = _notebook([_code_cell("a = 1\nb = 2")])
    assert record_status.code_sha256(split) != record_status.code_sha256(
        _notebook([_code_cell("a = 1"), _code_cell("b = 2")])
    )  # where cells begin is part of the code
    with pytest.raises(TypeError, match="nb must be a notebook"):
        record_status.code_sha256([])


def test_assert_results_held_failed_not_run_and_other_errors():
    cells = [
        _md("# T"),
        _code_cell("x = 1\nprint(x)", [{"output_type": "stream", "name": "stdout", "text": "1"}]),
        _code_cell("assert x == 1\nfor i in range(2):\n    assert i < 2, i"),  # held
        _code_cell(
            "assert x == 2, (\n    x,\n    'two',\n)", [_error("AssertionError", "(1, 'two')")]
        ),
        _code_cell("y = z\nassert y", [_error("NameError", "name 'z' is not defined")]),
        _code_cell("import time\ntime.sleep(9)\nassert x", [_error("KeyboardInterrupt", "")]),
        _code_cell("assert x > 0", count=None),  # past the deadline: listed as not run
        _code_cell("assert x > 1", count=None),  # never executed
        _code_cell(
            "raise ValueError\nassert x", [_error("ValueError", "")], tags=["raises-exception"]
        ),
        _code_cell("%time assert x == 1"),  # not Python: lines that start with assert only
        _code_cell("# no assert here\nprint('assertion')"),
    ]
    nb = _notebook(cells, {"scale": "paper", "not_run_cells": [6]})
    res = rpr.assert_results(nb)
    assert [r["cell"] for r in res] == [2, 3, 4, 5, 6, 7, 8]  # code cells numbered from 1
    by = {r["cell"]: r for r in res}
    assert by[2] == {
        "cell": 2,
        "held": True,
        "asserts": ["assert x == 1", "assert i < 2, i"],
        "error": None,
    }
    assert by[3]["held"] is False and by[3]["error"] == "AssertionError: (1, 'two')"
    assert by[3]["asserts"] == ["assert x == 2, ( x, 'two', )"]  # one line per statement
    assert by[4]["held"] is False and by[4]["error"] == "NameError: name 'z' is not defined"
    assert by[5]["held"] is None and "interrupted at the deadline" in by[5]["error"]
    assert by[6]["held"] is None and by[6]["error"] == "not run: the deadline had passed"
    assert by[7]["held"] is None and by[7]["error"] == "not run"
    assert by[8]["held"] is True  # the expected error of a raises-exception cell
    assert rpr.assert_statements("%time assert x == 1\n  assert y") == ["assert y"]
    assert (
        rpr.asserts_held({"asserts": res})
        == "2 of 7: cells 3, 4 failed; cells 5–7 not run (deadline)"
    )
    assert rpr.asserts_held({"asserts": res[:1]}) == "1 of 1"
    assert rpr.asserts_held({"asserts": []}) == "no assert"
    assert rpr.asserts_held({"asserts": None, "execution": {}}).endswith("no cell failed")
    long = _notebook([_code_cell("assert 0", [_error("AssertionError", "a\nb" + "c" * 400)])])
    assert rpr.assert_results(long)[0]["error"] == "AssertionError: a"  # its first line only
    with pytest.raises(TypeError, match="source must be a str"):
        rpr.assert_statements(None)


def test_assert_statements_keep_the_branch_of_the_recorded_scale():
    src = (
        "assert a\n"
        'if iclgd.scale() == "paper":\n'
        "    assert p1\n"
        "    for h in hs:\n"
        "        assert p2, h\n"
        "else:\n"
        "    assert c1\n"
        'if "ci" != iclgd.scale():\n'
        "    assert p3\n"
        "if x == 'paper':\n"  # not a scale test: both branches count
        "    assert q1\n"
        "else:\n"
        "    assert q2\n"
    )
    every = ["assert a", "assert p1", "assert p2, h", "assert c1", "assert p3", "assert q1"]
    assert rpr.assert_statements(src) == every + ["assert q2"]  # no scale: every assert
    assert rpr.assert_statements(src, "paper") == [
        "assert a", "assert p1", "assert p2, h", "assert p3", "assert q1", "assert q2"
    ]  # fmt: skip
    assert rpr.assert_statements(src, "ci") == ["assert a", "assert c1", "assert q1", "assert q2"]
    res = rpr.assert_results(_notebook([_code_cell(src)], {"scale": "paper"}))
    assert res[0]["held"] is True and "assert c1" not in res[0]["asserts"]
    assert (
        "assert c1"
        in rpr.assert_results(_notebook([_code_cell(src)], {"scale": "ci"}))[0]["asserts"]
    )


def _chapters(tmp_path):
    paths = {}
    for name, code in (("a", "assert 1"), ("b", "assert 2"), ("c", "assert 3"), ("d", "x = 4")):
        path = tmp_path / "book" / f"{name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nb = _notebook([_md(f"# Chapter {name.upper()}"), _code_cell(code)])
        path.write_text(json.dumps(nb), encoding="utf8")
        paths[f"book/{name}.ipynb"] = path
    return paths


def _run(code_sha256, **fields):
    ex = {"scale": "paper", "executed_at": "2026-11-26T04:05:00Z", "wall_time_s": 75.0}
    ex["versions"] = {"jax": "0.11.2"}
    return {
        "device": "1 NVIDIA H100",
        "commit": "abc1234",
        "recorded_at": "2026-11-26T05:00:00Z",
        "code_sha256": code_sha256,
        "execution": ex,
        "glue": {"p9_secret_key": "0.136"},
        "cells": [],
    } | fields


def test_freshness_fresh_stale_missing_and_old_records(tmp_path):
    chapters = _chapters(tmp_path)
    h = {k: record_status.code_sha256(json.loads(p.read_text())) for k, p in chapters.items()}
    old = _run(None)
    del old["code_sha256"]
    runs = {
        "runs": {
            "book/a.ipynb": _run(h["book/a.ipynb"]),  # recorded from this code
            "book/b.ipynb": _run(h["book/a.ipynb"]),  # recorded from other code
            "book/d.ipynb": old,  # format 1: no hash
        }
    }
    assert rpr.freshness(runs, chapters) == {
        "book/a.ipynb": "fresh",
        "book/b.ipynb": "stale",
        "book/c.ipynb": "missing",
        "book/d.ipynb": "stale",
    }
    migrated = rpr.migrate(runs)
    assert migrated["format"] == rpr.FORMAT
    assert migrated["runs"]["book/d.ipynb"]["code_sha256"] is None
    assert migrated["runs"]["book/d.ipynb"]["asserts"] is None
    assert migrated["runs"]["book/d.ipynb"]["jax_version"] == "0.11.2"
    assert rpr.migrate(migrated) == migrated
    assert rpr.freshness(migrated, chapters)["book/d.ipynb"] == "stale"
    assert migrated["runs"]["book/a.ipynb"]["run"] is None  # format 2: not from paper_run.sh
    with pytest.raises(ValueError, match="format 4"):
        rpr.migrate({"format": 4, "runs": {}})
    with pytest.raises(TypeError, match="runs must be a dict"):
        rpr.freshness([], chapters)


def test_status_table_names_chapters_not_glue_keys_and_no_tracebacks(tmp_path):
    chapters = _chapters(tmp_path)
    h = record_status.code_sha256(json.loads(chapters["book/a.ipynb"].read_text()))
    asserts = [
        {"cell": 1, "held": True, "asserts": ["assert 1"], "error": None},
        {"cell": 2, "held": False, "asserts": ["assert x"], "error": "AssertionError: 0.136"},
        {"cell": 3, "held": False, "asserts": ["assert y"], "error": "NameError: name 'x'"},
    ]
    failed = [{"cell": 2, "error": "AssertionError: 0.136"}, {"cell": 3, "error": "NameError: x"}]
    a = _run(h, asserts=asserts, cells=[{"cell": 2, "text": "loss 0.136", "figures": []}])
    a["execution"]["failed_cells"] = failed
    runs = {"runs": {"book/a.ipynb": a, "book/b.ipynb": _run(None)}}
    md = rpr.render_markdown(runs, link_for=lambda p: "/" + p, chapters=chapters)
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert rows[0] == "| chapter | scale | device | executed (UTC) | record | asserts held |"
    assert rows[2] == (
        "| [Chapter A](/book/a.ipynb) | `paper`, 1 min 15 s | 1 NVIDIA H100; JAX 0.11.2 "
        "| 2026-11-26 04:05, commit `abc1234` | fresh | 1 of 3: cells 2, 3 failed |"
    )
    assert rows[3].startswith("| [Chapter B](/book/b.ipynb) |") and "| **stale** |" in rows[3]
    assert "| older record, asserts not listed: no cell failed |" in rows[3]
    assert rows[4] == "| [Chapter C](/book/c.ipynb) | `ci` only | – | – | no record | – |"
    assert "cell 2 failed: `AssertionError: 0.136`" in md  # one error line per failed cell
    assert "`````{dropdown} Chapter A, cell 2 (failed)\n" in md and "loss 0.136" in md
    assert "p9_secret_key" not in md and "Traceback" not in md and "\x1b" not in md


def test_committed_status_table_shows_no_glue_key_or_traceback():
    runs = rpr.load_runs()
    md = rpr.render_markdown(runs)
    for run in runs["runs"].values():
        for name in run["glue"]:
            assert f"`{name}`" not in md, name
    assert "Traceback" not in md and "\x1b" not in md
    assert md.count("| no record |") == list(rpr.freshness(runs).values()).count("missing")


def test_an_assert_without_message_is_named_by_its_line():
    """``assert a < b`` raises a bare AssertionError: the record names the failing line, read from
    the line IPython marks with ``--->`` (colours removed)."""
    err = _error("AssertionError", "")
    err["traceback"] = [
        "\x1b[31mAssertionError\x1b[39m  Traceback (most recent call last)",
        "\x1b[32m      1\x1b[39m x = 3\n"
        "\x1b[32m---> 2\x1b[39m \x1b[38;5;28;01massert\x1b[39;00m x < 1",
        "\x1b[31mAssertionError\x1b[39m: ",
    ]
    nb = _notebook([_code_cell("x = 3\nassert x < 1", [err])])
    assert rpr.assert_results(nb)[0]["error"] == "AssertionError at `assert x < 1`"
    plain = _notebook([_code_cell("assert 0", [_error("AssertionError", "")])])
    assert rpr.assert_results(plain)[0]["error"] == "AssertionError"  # no traceback: the name


# --- the whole-book run: scripts/paper_run.sh, paper_run_plan.py, record_paper_run --run ---


def test_pack_longest_first_onto_the_least_loaded_lane():
    times = {"a": 278, "b": 191, "c": 136, "d": 120, "e": 100, "f": 60, "g": 30, "h": 10}
    lanes = prp.pack(times, 3)
    assert lanes == [["a", "g"], ["b", "e", "h"], ["c", "d", "f"]]  # loads 308, 301, 316
    assert sorted(sum(lanes, [])) == sorted(times)  # every notebook once
    assert prp.pack(times, 20) == [[k] for k in "abcdefgh"]  # no empty lanes
    assert prp.pack({"x": 5, "y": 5}, 1) == [["x", "y"]]  # ties by name
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="lanes must be a positive int"):
            prp.pack(times, bad)
    with pytest.raises(ValueError, match="non-negative"):
        prp.pack({"a": -1}, 2)


def test_lane_count_follows_the_machine():
    assert prp.lane_count(16, True, 14) == 8  # one lane per two cores beside a GPU
    assert prp.lane_count(16, False, 14) == 4  # one per four cores on CPUs alone
    assert prp.lane_count(2, False, 14) == 1 and prp.lane_count(16, True, 3) == 3
    with pytest.raises(ValueError, match="cores must be"):
        prp.lane_count(0, True, 3)
    with pytest.raises(ValueError, match="notebooks must be"):
        prp.lane_count(4, True, 0)


def test_committed_plan_covers_the_book_and_fits_the_deadline(tmp_path):
    """Every chapter of _toc.yml but the plan's exclusions is planned, and on the lent machine
    (16 cores, a GPU) no lane's planned time exceeds scripts/paper_run.sh's default deadline."""
    plan = prp.load_plan()
    toc = [p.relative_to(REPO).as_posix() for p in record_status.toc_notebooks()]
    assert set(plan["notebooks"]) | set(plan["excluded"]) == set(toc)
    assert not set(plan["notebooks"]) & set(plan["excluded"])
    script = (REPO / "scripts" / "paper_run.sh").read_text(encoding="utf8")
    deadline = int(re.search(r"^deadline=(\d+)$", script, re.M)[1])
    assert deadline <= 330  # whole run, wheels and copy included, inside 6 minutes
    lanes = prp.plan_lanes(plan, None, 16, True)
    assert len(lanes) == 8
    load = [sum(plan["notebooks"][k]["seconds"] for k in lane) for lane in lanes]
    assert max(load) < deadline, load
    bad = json.loads((REPO / "scripts" / "paper_run_plan.json").read_text(encoding="utf8"))
    bad["notebooks"]["book/risk_ladder.ipynb"]["seconds"] = 0
    (tmp_path / "plan.json").write_text(json.dumps(bad), encoding="utf8")
    with pytest.raises(ValueError, match="positive 'seconds'"):
        prp.load_plan(tmp_path / "plan.json")


def _tiny_repo(tmp_path: Path) -> Path:
    """A repository whose scripts/ and iclgd/ are the real ones (links) and whose book/t/ holds
    two small notebooks: one that runs, one that sleeps past the deadline."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    repo = tmp_path / "repo"
    (repo / "book" / "t").mkdir(parents=True)
    (repo / "iclgd").symlink_to(REPO / "iclgd")
    (repo / "scripts").mkdir()  # its files linked, so that scripts/run_cache/ is the test's own
    for f in (REPO / "scripts").iterdir():
        if f.is_file():
            (repo / "scripts" / f.name).symlink_to(f)
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3"}}
    quick = [new_code_cell("x = 1\nprint(x)"), new_code_cell("assert x == 1")]
    quick.append(
        new_code_cell('import os\nprint(sorted(os.listdir(os.environ["ICLGD_RUN_CACHE"])))')
    )
    slow = [new_code_cell("import time\ntime.sleep(120)"), new_code_cell("assert True")]
    nbformat.write(new_notebook(cells=quick, metadata=meta), repo / "book" / "t" / "quick.ipynb")
    nbformat.write(new_notebook(cells=slow, metadata=meta), repo / "book" / "t" / "slow.ipynb")
    return repo


def test_paper_run_sh_runs_lanes_to_a_deadline_and_packs_the_result(tmp_path):
    import io
    import os
    import shutil
    import subprocess
    import tarfile

    repo = _tiny_repo(tmp_path)
    out = tmp_path / "out"
    scratch = f"/tmp/iclgd-test-paper-run-{os.getpid()}"
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # python3: this venv
        "PAPER_RUN_SCRATCH": scratch,
    }
    deadline = 20  # a kernel starts in a few seconds, also beside the other test worker
    cmd = ["bash", str(repo / "scripts" / "paper_run.sh"), str(out), "--deadline", str(deadline)]
    cmd += ["--lanes", "2", "--commit", "abc1234", "book/t/quick.ipynb", "book/t/slow.ipynb"]
    saved = repo / "scripts" / "run_cache"  # runs an earlier call saved, copied back
    saved.mkdir()
    (saved / "p2d-H1-0123456789abcdef.npz").write_bytes(b"saved")
    checkpoint = os.urandom(17 * 2**20)  # a cut run's checkpoint, over the tool's 16 MiB a file
    (saved / "p2d-H8-0123456789abcdef.partial.npz").write_bytes(checkpoint)
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # slow.ipynb was cut off
    run = json.loads((out / "run.json").read_text(encoding="utf8"))
    assert run["commit"] == "abc1234" and run["deadline_s"] == deadline and run["gpu"] is False
    assert run["dirty"] is None  # no git in the tiny repository to ask
    assert [lane["notebooks"] for lane in run["lanes"]] in (
        [["book/t/quick.ipynb"], ["book/t/slow.ipynb"]],
        [["book/t/slow.ipynb"], ["book/t/quick.ipynb"]],
    )
    quick, slow = run["notebooks"]["book/t/quick.ipynb"], run["notebooks"]["book/t/slow.ipynb"]
    assert quick["executed"] and quick["failed_cells"] == 0 and quick["not_run_cells"] == 0
    assert slow["executed"] and slow["not_run_cells"] == 1  # cell 1 interrupted, cell 2 not run
    lane_walls = [lane["wall_time_s"] for lane in run["lanes"]]
    assert run["wall_time_s"] >= max(lane_walls)
    assert deadline - 2 <= run["wall_time_s"] < deadline + 45  # the slow lane ran to the deadline
    assert run["total_s"] >= run["wall_time_s"]
    with tarfile.open(out / "paper_run.tgz") as tar:
        names = set(tar.getnames())
        executed = json.load(tar.extractfile("paper_run/book/t/quick.ipynb"))
    assert {"paper_run/run.json", "paper_run/device.txt", "paper_run/lane1.log"} <= names
    assert "paper_run/book/t/slow.ipynb" in names
    # the kernels saw ICLGD_RUN_CACHE holding the runs of scripts/run_cache, and the archive
    # brings the finished ones back (the device tool returns 8 files at most: OUT holds four)
    assert "".join(executed["cells"][2]["outputs"][0]["text"]) == (
        "['p2d-H1-0123456789abcdef.npz', 'p2d-H8-0123456789abcdef.partial.npz']\n"
    )
    assert "paper_run/run_cache/p2d-H1-0123456789abcdef.npz" in names
    assert not any(n.endswith(".partial.npz") for n in names)  # checkpoints come back in pieces
    pieces = ["checkpoints.tgz.00", "checkpoints.tgz.01"]
    assert sorted(p.name for p in out.iterdir()) == pieces + ["paper_run.tgz", "run.json"]
    assert all((out / p).stat().st_size <= 15 * 2**20 for p in pieces)
    joined = b"".join((out / p).read_bytes() for p in pieces)
    with tarfile.open(fileobj=io.BytesIO(joined), mode="r:gz") as tar:
        assert tar.getnames() == ["p2d-H8-0123456789abcdef.partial.npz"]
        assert tar.extractfile(tar.getmembers()[0]).read() == checkpoint
    nb = json.loads((repo / "book" / "t" / "quick.ipynb").read_text(encoding="utf8"))
    assert nb["cells"][0]["outputs"] == []  # the checkout is not executed: the copy is
    bad = subprocess.run(cmd[:3] + ["--deadline", "5m"], capture_output=True, text=True)
    assert bad.returncode == 2 and "whole seconds" in bad.stderr


def _run_folder(tmp_path: Path, gpu: bool) -> Path:
    """paper_run/ of a two-lane run: gdpp executed, risk_ladder not reached."""
    copy = _executed_copy(tmp_path, "paper")
    folder = tmp_path / "copy"
    nb = json.loads(copy.read_text(encoding="utf8"))
    nb["metadata"]["iclgd"]["execution"]["not_run_cells"] = [9]
    copy.write_text(json.dumps(nb), encoding="utf8")
    run = {
        "format": 1,
        "device": "1 NVIDIA H100 80GB HBM3, 16 CPU cores" if gpu else "2 CPU cores, no GPU",
        "gpu": gpu,
        "commit": "abc1234",
        "dirty": False,
        "deadline_s": 330,
        "started_at": "2026-11-27T05:00:00Z",
        "wall_time_s": 331.5,
        "total_s": 349.0,
        "lanes": [
            {"notebooks": ["book/part3/gdpp.ipynb"], "wall_time_s": 331.5, "rc": 1},
            {"notebooks": ["book/risk_ladder.ipynb"], "wall_time_s": 2.0, "rc": 1},
        ],
        "notebooks": {
            "book/part3/gdpp.ipynb": {
                "lane": 1,
                "executed": True,
                "wall_time_s": 329.9,
                "failed_cells": 0,
                "not_run_cells": 1,
            },
            "book/risk_ladder.ipynb": {"lane": 2, "executed": False, "wall_time_s": None},
        },
    }
    (folder / "run.json").write_text(json.dumps(run), encoding="utf8")
    return folder


def test_record_run_records_each_chapter_with_the_run_and_updates_the_plan(tmp_path, monkeypatch):
    import tarfile

    monkeypatch.setattr(rpr, "RUNS_JSON", tmp_path / "runs.json")
    monkeypatch.setattr(rpr, "FIG_DIR", tmp_path / "figs")
    plan = tmp_path / "plan.json"
    plan.write_text((REPO / "scripts" / "paper_run_plan.json").read_text(), encoding="utf8")
    folder = _run_folder(tmp_path / "gpu", gpu=True)
    tgz = tmp_path / "paper_run.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(folder, arcname="paper_run")
    runs, done, skipped = rpr.record_run(tgz, plan=plan)
    assert done == ["book/part3/gdpp.ipynb"] and skipped == ["book/risk_ladder.ipynb"]
    rec = runs["runs"]["book/part3/gdpp.ipynb"]
    assert rec["device"] == "1 NVIDIA H100 80GB HBM3, 16 CPU cores" and rec["commit"] == "abc1234"
    assert rec["run"] == {
        "wall_time_s": 331.5,
        "total_s": 349.0,
        "lanes": 2,
        "lane": 1,
        "lane_wall_time_s": 331.5,
        "deadline_s": 330,
        "started_at": "2026-11-27T05:00:00Z",
        "chapters": 2,
        "dirty": False,
    }
    assert "book/risk_ladder.ipynb" not in runs["runs"]
    new = json.loads(plan.read_text(encoding="utf8"))["notebooks"]
    assert new["book/part3/gdpp.ipynb"]["seconds"] == 329.9  # measured, above the old 120
    assert (
        new["book/part3/gdpp.ipynb"]["cut"] is True
        and "paper_run.tgz" in (new["book/part3/gdpp.ipynb"]["how"])
    )
    assert (
        new["book/risk_ladder.ipynb"]
        == json.loads((REPO / "scripts" / "paper_run_plan.json").read_text())["notebooks"][
            "book/risk_ladder.ipynb"
        ]
    )  # not executed: its time is kept
    md = rpr.render_markdown(runs, chapters=rpr.chapter_notebooks())
    row = next(line for line in md.splitlines() if "/gdpp" in line or "GD++" in line)
    assert "; lane 1 of 2 of a 5 min 32 s run |" in row
    assert (
        "- `scripts/paper_run.sh` of 2026-11-27 05:00 UTC on 1 NVIDIA H100 80GB HBM3, 16 CPU "
        "cores, commit `abc1234`: 2 chapters in 2 lanes side by side, **5 min 32 s** from the "
        "first lane's start to the last one's end (deadline 5 min 30 s; 5 min 49 s with the "
        "wheels' install and the copy of the book); 1 of its chapters recorded here." in md
    )
    # a CPU run is recorded the same way but leaves the GPU plan alone; the folder form works
    before = plan.read_text(encoding="utf8")
    cpu = _run_folder(tmp_path / "cpu", gpu=False)
    runs, done, _ = rpr.record_run(cpu, commit="def5678", plan=plan)
    assert runs["runs"]["book/part3/gdpp.ipynb"]["commit"] == "def5678"  # --commit wins
    full = "def5678" + "0" * 33  # a full sha (git rev-parse HEAD): recorded in its short form
    runs, _, _ = rpr.record_run(cpu, commit=full, plan=plan)
    assert runs["runs"]["book/part3/gdpp.ipynb"]["commit"] == "def5678"
    assert plan.read_text(encoding="utf8") == before
    run = json.loads((cpu / "run.json").read_text())
    run["commit"] = None
    (cpu / "run.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="give --commit"):
        rpr.record_run(cpu, plan=plan)
    with pytest.raises(ValueError, match="no run.json"):
        rpr.record_run(tmp_path / "figs", plan=plan)


def test_summary_reads_lane_times_and_tells_executed_from_stale_notebooks(tmp_path):
    work, logs = tmp_path / "tree", tmp_path / "logs"
    logs.mkdir()
    for key, when in (("book/a.ipynb", "2026-11-27T05:01:00Z"), ("book/b.ipynb", None)):
        path = work / key
        path.parent.mkdir(parents=True, exist_ok=True)
        ex = {"scale": "paper", "wall_time_s": 50.0, "not_run_cells": [4, 5]}
        ex = ex | {"executed_at": when} if when else {"scale": "ci", "executed_at": when}
        path.write_text(json.dumps(_notebook([], ex)), encoding="utf8")
    (logs / "lane1.time").write_text("start 1795755600.0\nend 1795755660.5\nrc 1\n")
    (logs / "lane2.time").write_text("start 1795755600.2\nend 1795755630.0\nrc 0\n")
    meta = {"device": "d", "gpu": True, "deadline_s": 60, "started": 1795755590.0}
    meta["lanes"] = [["book/a.ipynb"], ["book/b.ipynb"]]
    run = prp.summarize(work, logs, meta)
    assert run["started_at"] == "2026-11-27T04:59:50Z" and run["wall_time_s"] == 60.5
    assert run["lanes"][0] == {"notebooks": ["book/a.ipynb"], "wall_time_s": 60.5, "rc": 1}
    assert run["notebooks"]["book/a.ipynb"] == {
        "lane": 1,
        "executed": True,
        "wall_time_s": 50.0,
        "failed_cells": 0,
        "not_run_cells": 2,
    }
    assert run["notebooks"]["book/b.ipynb"]["executed"] is False  # its committed ci record
    updated = prp.update({"notebooks": {"book/b.ipynb": {"seconds": 9}}}, run, "x.tgz")
    assert updated["notebooks"]["book/a.ipynb"]["seconds"] == 50.0
    assert updated["notebooks"]["book/b.ipynb"] == {"seconds": 9}
    with pytest.raises(TypeError, match="run must be a run.json dict"):
        prp.update({}, [], "x")


# --- the wheels carried to the GPU machine: scripts/device_wheels.py ---


def test_committed_wheel_lock_is_internally_consistent():
    """The lock is the device run's artefact (``device_wheels.py`` relocks from the venv before a
    run): the test checks it in itself, never against what the package index serves today."""
    lock = dw.read_lock()
    assert {"nbclient", "nbformat", "ipykernel", "myst-nb", "ipython", "pyzmq"} <= set(lock.pins)
    assert dw.problems(lock) == []


def test_lock_problems_name_each_inconsistency():
    pins = {"nbclient": ("1.0", "a" * 64), "docutils": ("0.21", "b" * 64), "jax": ("x.y", "c" * 64)}
    lock = dw.Lock(pins, {"jax", "numpy"}, {"sphinx", "nbclient"})
    found = dw.problems(lock)
    assert "nbformat: a root, not pinned" in found
    assert "jax: pinned and also listed as device-has" in found
    assert "nbclient: pinned and also listed as not-carried" in found
    assert "matplotlib: not on the device-has list" in found
    assert "jax==x.y: not a PEP 440 version" in found
    del pins["docutils"]
    assert "docutils: not pinned (myst_nb.glue imports it)" in dw.problems(lock)


def test_drift_names_changed_added_and_dropped_packages(tmp_path, monkeypatch, capsys):
    """A newer release in the venv is drift, relocked before the device run (not a test failure)."""
    lock = tmp_path / "lock.txt"
    lock.write_text(
        "# device-has: numpy\n"
        f"platformdirs==4.14.8 --hash=sha256:{'a' * 64}\nfoo==1.0 --hash=sha256:{'b' * 64}\n",
        encoding="utf8",
    )
    same = {"platformdirs": "4.14.8", "foo": "1.0"}
    assert dw.drift(lock, same) == {}
    env = {"platformdirs": "4.14.9", "bar": "2.0"}
    assert dw.drift(lock, env) == {
        "bar": (None, "2.0"),
        "foo": ("1.0", None),
        "platformdirs": ("4.14.8", "4.14.9"),
    }
    calls = []
    monkeypatch.setattr(dw, "drift", lambda: {"platformdirs": ("4.14.8", "4.14.9")})
    monkeypatch.setattr(dw, "relock", lambda: calls.append("relock") or lock)
    monkeypatch.setattr(dw, "fetch", lambda dest: calls.append("fetch") or [])
    assert dw.main(["--dest", str(tmp_path / "whl")]) == 0
    assert calls == ["relock", "fetch"]  # the lock is rewritten before the wheels are fetched
    assert "platformdirs: the lock has 4.14.8, this venv 4.14.9" in capsys.readouterr().out


def test_verify_names_each_wrong_missing_or_foreign_wheel(tmp_path):
    good, other = b"a wheel", b"another"
    lock = tmp_path / "lock.txt"
    lock.write_text(
        "# device-has: numpy\n# not-carried: sphinx\n"
        f"foo-bar==1.0 --hash=sha256:{hashlib.sha256(good).hexdigest()}\n"
        f"baz==2.0 --hash=sha256:{hashlib.sha256(other).hexdigest()}\n",
        encoding="utf8",
    )
    parsed = dw.read_lock(lock)
    assert parsed.device_has == {"numpy"} and parsed.not_carried == {"sphinx"}
    assert set(parsed.pins) == {"foo-bar", "baz"}
    wheels = tmp_path / "whl"
    wheels.mkdir()
    (wheels / "foo_bar-1.0-py3-none-any.whl").write_bytes(good)
    (wheels / "baz-2.0-py3-none-any.whl").write_bytes(other)
    assert dw.verify(wheels, lock) == []
    (wheels / "baz-2.0-py3-none-any.whl").write_bytes(b"tampered")
    (wheels / "extra-0.1-py3-none-any.whl").write_bytes(b"x")
    (wheels / "foo_bar-1.0-py3-none-any.whl").unlink()
    problems = dw.verify(wheels, lock)
    assert "baz-2.0-py3-none-any.whl: sha256 differs from the lock's" in problems
    assert "extra-0.1-py3-none-any.whl: not in the lock" in problems
    assert "foo-bar==1.0: missing" in problems and len(problems) == 3
    lock.write_text("foo==1.0\n", encoding="utf8")
    with pytest.raises(ValueError, match="not 'name==version --hash=sha256:HEX'"):
        dw.read_lock(lock)
    with pytest.raises(ValueError, match="not a wheel file name"):
        dw.wheel_name("foo-1.0.tar.gz")
    assert dw.wheel_name("Jupyter_Client-8.10.0-py3-none-any.whl") == ("jupyter-client", "8.10.0")


def test_paper_glue_value_renders_inline_tex_as_math():
    """``{paper-glue}``: a glued value's ``$...$`` pieces become math nodes, the rest text; a
    value without TeX (or with a lone dollar) stays one text node."""
    import importlib.util

    from docutils import nodes

    spec = importlib.util.spec_from_file_location(
        "iclgd_paper_runs", REPO / "book" / "_ext" / "iclgd_paper_runs.py"
    )
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    parts = ext.glue_children("$B_0$ 0.11, $A_1$ 0.19")
    assert [type(p) for p in parts] == [nodes.math, nodes.Text, nodes.math, nodes.Text]
    assert [p.astext() for p in parts] == ["B_0", " 0.11, ", "A_1", " 0.19"]
    plain = ext.glue_children("0.136 (floor 0.1336)")
    assert [type(p) for p in plain] == [nodes.Text] and plain[0].astext() == "0.136 (floor 0.1336)"
    lone = ext.glue_children("costs $5")
    assert [p.astext() for p in lone] == ["costs $5"] and isinstance(lone[0], nodes.Text)
