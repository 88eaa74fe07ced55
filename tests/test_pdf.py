"""The whole-book PDF (``_build/pdf/iclgd.pdf``, written by ``scripts/build_pdf.py``) and its copy
in the built site, which the landing page links.

Without the PDF the tests of it skip with the reason; with ``ICLGD_REQUIRE_BOOK=1`` (set by CI and
the publish workflow) they fail instead. ``page_count`` and the outline's reader, writer and
check are tested on small hand-written PDFs.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PDF = REPO / "_build" / "pdf" / "iclgd.pdf"
SITE = REPO / "_build" / "html"
REQUIRED = os.environ.get("ICLGD_REQUIRE_BOOK", "") not in ("", "0", "false", "no")
# The book's body alone (without the API reference) prints on about 190 A4 pages (479 in all on
# 2026-11-26); a PDF below this floor lost chapters. Above the ceiling GitHub refuses the file.
MIN_PAGES = 150
MIN_BYTES, MAX_BYTES = 2**20, 100 * 10**6


def _build_pdf():
    spec = importlib.util.spec_from_file_location("build_pdf", REPO / "scripts" / "build_pdf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (ICLGD_REQUIRE_BOOK is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _require_pdf() -> bytes:
    if not PDF.is_file():
        _unavailable(f"{PDF.relative_to(REPO)} does not exist: `python scripts/build_pdf.py`")
    return PDF.read_bytes()


def _pdf(pages: int, count: int) -> bytes:
    """A PDF skeleton with ``pages`` page objects whose page tree claims ``count``."""
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
        *["<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>"] * pages,
    ]
    body = "".join(f"{i + 1} 0 obj\n{o}\nendobj\n" for i, o in enumerate(objects))
    return f"%PDF-1.4\n{body}trailer\n<< /Root 1 0 R >>\n%%EOF\n".encode()


def test_page_count_reads_the_page_tree():
    page_count = _build_pdf().page_count
    assert page_count(_pdf(3, 3)) == 3
    assert page_count(_pdf(1, 1)) == 1
    with pytest.raises(ValueError, match="inconsistent page tree"):
        page_count(_pdf(3, 4))
    with pytest.raises(ValueError, match="not a PDF"):
        page_count(b"<html></html>")


def test_the_pdf_is_the_whole_book():
    data = _require_pdf()
    pages = _build_pdf().page_count(data)  # also checks the %PDF- header
    assert data.rstrip().endswith(b"%%EOF"), "the PDF is cut off (no %%EOF at its end)"
    assert pages >= MIN_PAGES, f"{pages} pages: fewer than {MIN_PAGES}, chapters are missing"
    assert MIN_BYTES <= len(data) <= MAX_BYTES, f"{len(data)} bytes"
    # chapters: one outline entry (bookmark) per heading, internal links kept as links
    assert b"/Outlines" in data, "no outline (bookmarks) in the PDF"
    assert re.search(rb"/Dests|/Dest\b", data), "no internal link destinations in the PDF"


def test_the_site_ships_the_pdf_that_the_landing_page_links():
    data = _require_pdf()
    if not (SITE / "index.html").is_file():
        _unavailable(f"{SITE.relative_to(REPO)} does not exist: build the book first")
    intro = (SITE / "book" / "intro.html").read_text(encoding="utf8")
    assert 'href="../iclgd.pdf"' in intro, "the landing page does not link iclgd.pdf"
    shipped = SITE / "iclgd.pdf"
    build_pdf = _build_pdf()
    if not shipped.is_file():
        assert build_pdf.PDF_LINK_HIDDEN in intro, "a site without the PDF shows a link to it"
        _unavailable(
            f"{shipped.relative_to(REPO)} does not exist: "
            "`python scripts/build_pdf.py --site _build/html`"
        )
    assert shipped.read_bytes() == data, "the site's iclgd.pdf is not the last one built"
    assert build_pdf.PDF_LINK_HIDDEN not in intro, "the site ships the PDF but hides its link"


def test_the_pdf_link_is_shown_only_in_a_site_that_has_the_pdf(tmp_path):
    build_pdf = _build_pdf()
    (tmp_path / "book").mkdir()
    page = tmp_path / "book" / "intro.html"
    page.write_text(f'<body>{build_pdf.PDF_LINK_HIDDEN}<a href="../iclgd.pdf">x</a></p>', "utf8")
    with pytest.raises(FileNotFoundError, match="copy the PDF first"):
        build_pdf.show_pdf_link(tmp_path)
    (tmp_path / "iclgd.pdf").write_bytes(b"%PDF-1.4")
    build_pdf.show_pdf_link(tmp_path)
    assert (
        page.read_text("utf8") == '<body><p class="iclgd-pdf-link"><a href="../iclgd.pdf">x</a></p>'
    )
    with pytest.raises(ValueError, match="no hidden link"):
        build_pdf.show_pdf_link(tmp_path)


def _outlined_pdf(entries: list[tuple[int, bytes, int]], pages: int = 3) -> bytes:
    """A PDF with ``pages`` pages and an outline of ``entries`` (depth, title as a PDF string,
    page), with a cross-reference table, as Chromium writes them."""
    n_pages = pages
    first_item = 3 + n_pages
    outline_root = first_item + len(entries)
    objects: dict[int, bytes] = {
        1: f"<< /Type /Catalog /Pages 2 0 R /Outlines {outline_root} 0 R >>".encode(),
        2: (
            "<< /Type /Pages /Kids ["
            + " ".join(f"{3 + i} 0 R" for i in range(n_pages))
            + f"] /Count {n_pages} >>"
        ).encode(),
    }
    for i in range(n_pages):
        objects[3 + i] = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>"
    parents: list[int] = [outline_root]
    links: dict[int, dict[str, int]] = {k: {} for k in range(first_item, outline_root + 1)}
    last_at: dict[int, int] = {}
    for k, (depth, _, _) in enumerate(entries):
        number = first_item + k
        del parents[depth + 1 :]
        parent = parents[depth]
        links[number]["Parent"] = parent
        previous = last_at.get(depth)
        if previous is not None and links[previous]["Parent"] == parent:
            links[previous]["Next"] = number
            links[number]["Prev"] = previous
        else:
            links[parent]["First"] = number
        links[parent]["Last"] = number
        last_at = {d: v for d, v in last_at.items() if d < depth}
        last_at[depth] = number
        parents.append(number)
    for k, (_, title, page) in enumerate(entries):
        number = first_item + k
        refs = " ".join(f"/{key} {value} 0 R" for key, value in links[number].items())
        dest = f"/Dest [{3 + page - 1} 0 R /XYZ 0 800 0]".encode()
        objects[number] = b"<< /Title " + title + b"\n" + dest + b" " + refs.encode() + b" >>"
    refs = " ".join(f"/{key} {value} 0 R" for key, value in links[outline_root].items())
    objects[outline_root] = f"<< /Type /Outlines {refs} /Count {len(entries)} >>".encode()
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += f"{number} 0 obj\n".encode() + objects[number] + b"\nendobj\n"
    xref = len(out)
    size = max(objects) + 1
    out += f"xref\n0 {size}\n".encode() + b"0000000000 65535 f \n"
    out += b"".join(f"{offsets[k]:010d} 00000 n \n".encode() for k in range(1, size))
    out += f"trailer\n<< /Size {size} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


BOOK = [  # a good outline: the title, two parts, their chapters and sections
    (0, b"(The book)", 1),
    (1, b"(How to read it)", 1),
    (0, b"(Part I)", 2),
    (1, b"(1. A chapter \\(with parentheses\\))", 2),
    (2, b"<FEFF0031002E0031002E0020005300750020200B>", 2),  # "1.1. Su \u200b", in UTF-16
    (2, b"(1.2. Summary)", 2),
    (0, b"(Part II)", 3),
    (1, b"(2. Another chapter)", 3),
]


def test_outline_reads_titles_depths_and_pages():
    build_pdf = _build_pdf()
    entries = build_pdf.outline(_outlined_pdf(BOOK))
    assert [(e["depth"], e["page"]) for e in entries] == [(d, p) for d, _, p in BOOK]
    titles = [e["title"] for e in entries]
    assert titles[3] == "1. A chapter (with parentheses)"
    assert titles[4] == "1.1. Su \u200b"
    assert build_pdf.outline_problems(entries, ["Part I", "Part II"]) == []


def test_retitle_outline_rewrites_titles_and_offsets():
    build_pdf = _build_pdf()
    data = _outlined_pdf(BOOK)
    titles = [f"Entry {i}: Σ^-1 (é) \\ ‖w‖" for i in range(len(BOOK))]
    new = build_pdf.retitle_outline(data, titles)
    entries = build_pdf.outline(new)
    assert [e["title"] for e in entries] == titles
    assert [(e["depth"], e["page"]) for e in entries] == [(d, p) for d, _, p in BOOK]
    spans, _ = build_pdf._objects(new)  # each object where the new table says it is
    assert all(new[start:].startswith(f"{n} 0 obj".encode()) for n, (start, _) in spans.items())
    assert build_pdf.page_count(new) == 3
    with pytest.raises(ValueError, match="outline entries for"):
        build_pdf.retitle_outline(data, titles[:-1])


@pytest.mark.parametrize(
    ("index", "title", "problem"),
    [
        (5, b"(1.2. SummarySummary)", "repeats itself"),
        (5, b"(1.2. Summary1.2. Summary)", "repeats itself"),
        (4, b"(1. A chapter \\(with parentheses\\))", "the title of its parent"),
        (5, b"<FEFF0031002E0031002E0020005300750020200B>", "the title of its previous sibling"),
        (5, b"(1.2. The risk of \\\\(G\\\\))", "raw TeX"),
        (5, b"()", "empty title"),
        (2, b"(Part One)", "not the book's title and then the parts"),
    ],
)
def test_outline_problems_are_found(index, title, problem):
    build_pdf = _build_pdf()
    book = list(BOOK)
    book[index] = (book[index][0], title, book[index][2])
    found = build_pdf.outline_problems(
        build_pdf.outline(_outlined_pdf(book)), ["Part I", "Part II"]
    )
    assert any(problem in line for line in found), found


def test_outline_problems_finds_entries_out_of_order():
    build_pdf = _build_pdf()
    book = list(BOOK)
    book[7] = (1, b"(2. Another chapter)", 1)  # on page 1, after entries on pages 2 and 3
    found = build_pdf.outline_problems(
        build_pdf.outline(_outlined_pdf(book)), ["Part I", "Part II"]
    )
    assert any("after an entry on page 3" in line for line in found), found


def _parts() -> list[str]:
    import yaml

    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf8"))
    return [part["caption"] for part in toc["parts"]]


def test_the_outline_has_one_entry_per_part_chapter_and_section():
    """The bookmarks: the book's title, then each part of _toc.yml with its chapters and their
    sections, in page order, each titled once (its math as text), none repeating its parent or
    its previous sibling (scripts/build_pdf.py, OUTLINE_JS and fix_outline)."""
    data = _require_pdf()
    build_pdf = _build_pdf()
    entries = build_pdf.outline(data)
    problems = build_pdf.outline_problems(entries, _parts())
    assert not problems, "\n".join(problems[:40])
    chapters = [e["title"] for e in entries if e["depth"] == 1]
    numbered = [t for t in chapters if re.match(r"\d+\. ", t)]
    assert [int(t.split(".")[0]) for t in numbered] == list(range(1, len(numbered) + 1)), chapters
    assert len(numbered) >= 15 and len(entries) >= 100, (len(numbered), len(entries))


@pytest.mark.parametrize(
    ("bookmark", "heading", "same"),
    [
        ("SummarySummary", "Summary", True),
        ("ICLis in-context", "ICL is in-context", True),
        (  # a heading broken across lines at a comma, one line painted twice (CI, 2026-11-27)
            "Predictors the paper compares against (Sec. 3.2-3.3; Predictors the paper compares "
            "against (Sec. 3.2-3.3; iclgd.baselines,,iclgd.exact)",
            "Predictors the paper compares against (Sec. 3.2-3.3; iclgd.baselines, iclgd.exact)",
            True,
        ),
        ("12.6. Summary", "12.7. Summary", False),
        ("The setting", "The risk", False),
    ],
)
def test_bookmark_titles_are_matched_to_their_headings(bookmark, heading, same):
    collapsed = _build_pdf().collapsed
    assert (collapsed(bookmark) == collapsed(heading)) is same
