"""scripts/record_paper_run.py: paper-scale runs recorded for the status page."""

import base64
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

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
    md = rpr.render_markdown(runs, link_for=lambda p: "/" + p)
    title = record_status.notebook_title(json.loads((REPO / "book/part3/gdpp.ipynb").read_text()))
    assert f"[{title}](/book/part3/gdpp.ipynb) | 2 CPU cores |" in md
    assert "1 h 06 min" in md and "loss 0.123" in md and "part3-gdpp-1.png" in md
    assert "every cell ran, every assert held" in md
    assert run["glue"]["x"] == "0.5" and "| `x` | – | 0.5 |" in md
    ci = rpr.glued(json.loads((REPO / "book/part3/gdpp.ipynb").read_text()))
    assert f"| `p3g_steps` | {ci['p3g_steps']} |" in md
    run["execution"]["failed_cells"] = [{"cell": 5, "error": "AssertionError: "}]
    assert "cell 5 failed: AssertionError" in rpr.render_markdown(runs)
    assert rpr.render_markdown({"runs": {}}) == "No paper-scale run has been recorded yet."
    with pytest.raises(ValueError, match="not inside a book/ folder"):
        rpr.book_path(tmp_path / "x.ipynb")


def test_committed_paper_runs_are_consistent():
    runs = rpr.load_runs()
    toc = {p.relative_to(REPO).as_posix() for p in record_status.toc_notebooks()}
    for key, run in runs["runs"].items():
        assert key in toc, key
        assert run["execution"]["scale"] == "paper"
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
    wall, failed = execute_notebooks.execute_one(
        path, timeout=120, kernel=None, scale="ci", allow_errors=True
    )
    assert failed == [{"cell": 2, "error": "AssertionError: x"}]  # the tagged cell is not listed
    out = nbformat.read(path, as_version=4)
    assert out.cells[3].outputs[0]["text"] == "3\n"  # ran on after the failure
    assert out.metadata["iclgd"]["execution"]["failed_cells"] == failed


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
    assert res.startswith("cell 3 failed: AssertionError: 3e-05; 2 later cell(s) (5, 7)")
    assert res.endswith("stopped at the machine's time limit: cells 8–10 not run")
