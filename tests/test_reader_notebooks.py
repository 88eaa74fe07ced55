"""The reader notebooks (scripts/make_reader_notebooks.py): the numbers a reader sees in Colab or
in a downloaded notebook are the book's, with no raw glue role left."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mrn", ROOT / "scripts" / "make_reader_notebooks.py")
mrn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mrn)


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    out = tmp_path_factory.mktemp("reader")
    assert mrn.main(["--out", str(out)]) == 0
    return out


def test_every_chapter_has_a_reader_notebook_without_glue_roles(reader):
    paths = mrn.toc_notebooks()
    assert len(paths) >= 15
    for p in paths:
        nb = json.loads((reader / p.relative_to(ROOT)).read_text(encoding="utf8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                assert "{glue" not in "".join(cell["source"]), p.name


def test_reader_values_are_the_committed_outputs(reader):
    # each role of the committed markdown is replaced by the value its notebook's outputs glue,
    # and the code cells and their outputs are untouched
    for p in mrn.toc_notebooks():
        src = json.loads(p.read_text(encoding="utf8"))
        out = json.loads((reader / p.relative_to(ROOT)).read_text(encoding="utf8"))
        assert len(src["cells"]) == len(out["cells"])
        values = mrn.glued(src)
        for a, b in zip(src["cells"], out["cells"]):
            if a["cell_type"] == "code":
                assert a == b
                continue
            text = "".join(a["source"])
            for m in mrn.ROLE.finditer(text):
                ref = m.group(1)
                if "::" not in ref:
                    assert values[ref.partition(":")[0]] in "".join(b["source"]), (p.name, ref)


def test_substitute_resolves_other_notebooks_and_reports_unknown_names(tmp_path):
    a, b = tmp_path / "a.ipynb", tmp_path / "sub" / "b.ipynb"
    values = {a.resolve(): {"x": "0.25"}, b.resolve(): {"y": "3"}}
    text = "x = {glue:text}`x`, y = {glue:text}`sub/b.ipynb::y:s`, z = {glue:text}`z`"
    new, missing = mrn.substitute(text, a.resolve(), values)
    assert new == "x = 0.25, y = 3, z = {glue:text}`z`"
    assert missing == ["z"]
    assert mrn.substitute("{glue:text}`x:.1f`", a.resolve(), values)[0] == "0.2"


def test_substitute_writes_paper_scale_values(tmp_path):
    a = tmp_path / "a.ipynb"
    values = {a.resolve(): {"x": "0.25"}}
    paper = {a.resolve(): {"x": "0.136"}}
    text = "ci {glue:text}`x`, paper {paper-glue}`x`, unknown {paper-glue}`q`"
    new, missing = mrn.substitute(text, a.resolve(), values, paper)
    assert new == "ci 0.25, paper 0.136, unknown {paper-glue}`q`"
    assert missing == ["q"]


def test_reader_notebooks_have_no_paper_glue_roles(reader):
    for p in mrn.toc_notebooks():
        nb = json.loads((reader / p.relative_to(ROOT)).read_text(encoding="utf8"))
        text = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert "{paper-glue}" not in text, p.name


def test_captions_become_paragraphs():
    text = (
        "Before.\n\n```{figure-caption} p2-fig2a\nThe paper's Fig. 2(a), re-run:\n"
        "losses fall together.\n```\n\nAfter.\n"
    )
    assert mrn.captions_as_text(text) == (
        "Before.\n\n**Figure.** The paper's Fig. 2(a), re-run:\nlosses fall together.\n\nAfter.\n"
    )
    colon = ":::{figure-caption} fig-x\nA caption.\n:::\n"
    assert mrn.captions_as_text(colon) == "**Figure.** A caption.\n"


def test_reader_notebooks_have_no_caption_blocks(reader):
    for p in mrn.toc_notebooks():
        nb = json.loads((reader / p.relative_to(ROOT)).read_text(encoding="utf8"))
        text = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert "{figure-caption}" not in text, p.name


def test_dropdowns_become_details_in_the_reader_notebooks():
    """A collapsed block of the book (``{dropdown}``, either fence, nested, with options) is HTML
    ``<details>`` in a reader notebook: collapsed in Colab too, never raw MyST."""
    text = (
        "Before.\n\n:::{dropdown} How this is checked: the sweep\n:class: note\nThe *sweep* "
        "equals separate runs.\n\n::::\n:::\n\nAfter.\n\n````{dropdown} Outer\n:open:\n"
        "Outer text.\n\n```{dropdown}\nInner $x$.\n```\n````\n"
    )
    out = mrn.dropdowns_as_details(text)
    assert "{dropdown}" not in out and ":class:" not in out and ":open:" not in out, out
    assert "<details><summary>How this is checked: the sweep</summary>\n\nThe *sweep*" in out
    assert out.count("<details") == 3 and out.count("</details>") == 3
    assert "<details open><summary>Outer</summary>" in out
    assert "<details><summary>Details</summary>\n\nInner $x$.\n\n</details>" in out
    assert out.startswith("Before.") and "After." in out
    assert "::::" in out  # a longer fence inside is the block's text, not its end
