"""The written layout rules: README's layout table names every entry of iclgd/, modules stay short,
and the chapter template (book/_template.ipynb) keeps its fixed sections and runs."""

import fnmatch
import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "book" / "_template.ipynb"
MAX_LINES = 600


def _layout_section():
    text = (ROOT / "README.md").read_text(encoding="utf8")
    m = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, "README.md has no '## Layout' section"
    return m.group(1)


def test_readme_layout_table_names_every_entry_of_iclgd():
    """One row per package (``iclgd/x/``) and per module (``iclgd/x.py``) of iclgd, no more."""
    entries = {
        p.name + ("/" if p.is_dir() else "")
        for p in (ROOT / "iclgd").iterdir()
        if not p.name.startswith((".", "_")) and (p.is_dir() or p.suffix == ".py")
    }
    named = re.findall(r"^\| `iclgd/([\w.]+/?)`", _layout_section(), re.M)
    assert len(named) == len(set(named)), f"a row is repeated: {named}"
    assert set(named) == entries, (
        f"README's layout table and `ls iclgd` disagree: missing {sorted(entries - set(named))}, "
        f"gone {sorted(set(named) - entries)}"
    )


def test_no_module_of_iclgd_is_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / "iclgd").rglob("*.py"))
        if (n := len(p.read_text(encoding="utf8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


# The template's fixed sections, in order: (what, test of a cell).
def _src(cell):
    return "".join(cell["source"])


def _tags(cell):
    return cell.get("metadata", {}).get("tags", [])


SECTIONS = [
    ("the Colab bootstrap", lambda c: c["cell_type"] == "code" and "%pip install" in _src(c)),
    ("the imports", lambda c: c["cell_type"] == "code" and "from iclgd import " in _src(c)),
    ("'## In short'", lambda c: c["cell_type"] == "markdown" and "\n## In short" in "\n" + _src(c)),
    ("a prf:theorem box", lambda c: c["cell_type"] == "markdown" and "{prf:theorem}" in _src(c)),
    ("'## Derivation'", lambda c: c["cell_type"] == "markdown" and "## Derivation" in _src(c)),
    ("an asserted check", lambda c: c["cell_type"] == "code" and "\nassert " in "\n" + _src(c)),
    (
        "a hide-input figure by iclgd.plot",
        lambda c: (
            c["cell_type"] == "code"
            and "hide-input" in _tags(c)
            and re.search(r"\biclgd\.plot\.\w+\(", _src(c))
        ),
    ),
    ("'## Summary'", lambda c: c["cell_type"] == "markdown" and _src(c).startswith("## Summary")),
]


# Test files that check the book or the project as a whole, not one module of iclgd.
CROSS_CUTTING = {
    "bad_input": "every public function against bad input",
    "book_html": "the browser check of the built book",
    "deep_record": "Part II deep's paper-scale verdicts, on the runs its record was made from",
    "errata": "scripts/make_errata.py and the claims tables",
    "float32": "the chapters' default float32 paths, across modules",
    "layout": "this file",
    "notebooks_meta": "the chapters' conventions",
    "numeric_variant": "scripts/numeric_variant.sh",
    "paper_runs": "scripts/record_paper_run.py and the paper-scale records",
    "pdf": "scripts/build_pdf.py and the whole-book PDF",
    "reader_notebooks": "scripts/make_reader_notebooks.py",
    "reader_path": "the paper-figure directive and the first figure's place on each chapter page",
    "reader_shape": "the book's shape for a reader: scripts/reader_load.py and the word budgets",
}


def _module_of(stem: str) -> Path | None:
    """``exact_pgd`` -> iclgd/exact/pgd.py, ``models`` -> iclgd/models/__init__.py, ... or None."""
    parts = stem.split("_")
    for k in range(len(parts), 0, -1):  # longest package prefix first: symbolic_yq_lsa, ...
        head, rest = parts[:k], parts[k:]
        for split in range(len(head) + 1):
            pkg, mod = head[:split], "_".join(head[split:])
            base = ROOT / "iclgd" / Path(*pkg) if pkg else ROOT / "iclgd"
            if not rest and mod and (base / f"{mod}.py").is_file():
                return base / f"{mod}.py"
            if not rest and mod and (base / mod / "__init__.py").is_file():
                return base / mod / "__init__.py"
    return None


def test_test_files_are_named_after_the_module_they_test():
    """tests/test_<package>_<module>.py tests iclgd/<package>/<module>.py (test_models.py the
    package iclgd/models); the cross-cutting suites above are the only other test files."""
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        stem = path.stem[len("test_") :]
        if stem in CROSS_CUTTING:
            continue
        assert _module_of(stem) is not None, (
            f"{path.name} names no module of iclgd: name it test_<package>_<module>.py after "
            "the module it tests, or list it in CROSS_CUTTING"
        )
    assert _module_of("exact_pgd") == ROOT / "iclgd" / "exact" / "pgd.py"
    assert _module_of("symbolic_yq_lsa") == ROOT / "iclgd" / "symbolic" / "yq_lsa.py"
    assert _module_of("part3_figs") is None


def test_template_has_the_fixed_sections_in_order():
    cells = json.loads(TEMPLATE.read_text(encoding="utf8"))["cells"]
    chapter = json.loads((ROOT / "book" / "part1" / "yq_lsa.ipynb").read_text(encoding="utf8"))
    assert _src(cells[0]) == _src(chapter["cells"][0]), "cell 1: copy the chapters' bootstrap"
    assert "hide-input" in _tags(cells[0])
    at = -1
    for what, is_it in SECTIONS:
        nxt = next((i for i in range(at + 1, len(cells)) if is_it(cells[i])), None)
        assert nxt is not None, f"no {what} after cell {at + 1} of the template"
        at = nxt
    assert at == len(cells) - 1, "the closing section '## Summary' is the template's last cell"
    assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), "commit it clean"


def test_template_is_not_a_chapter():
    """Left out of the book, its table of contents, `pytest --nbval book` and the chapter tests."""
    rel = str(TEMPLATE.relative_to(ROOT))
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert rel in config["exclude_patterns"]
    assert rel.removesuffix(".ipynb") not in (ROOT / "_toc.yml").read_text()
    assert any(fnmatch.fnmatch(rel, g) for g in _load(ROOT / "conftest.py").collect_ignore_glob)
    assert TEMPLATE not in _load(ROOT / "tests" / "test_notebooks_meta.py").NOTEBOOKS


def _load(path):
    spec = importlib.util.spec_from_file_location(f"_layout_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_template_runs_top_to_bottom_in_a_fresh_kernel(tmp_path):
    """Its example is tiny: executed as a chapter is (nbclient, the book's folder as cwd)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(TEMPLATE, as_version=4)
    cwd = {"metadata": {"path": str(TEMPLATE.parent)}}
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources=cwd).execute()
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "both risks equal the theorem's" in printed
