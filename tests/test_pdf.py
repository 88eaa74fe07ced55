"""The whole-book PDF (``_build/pdf/iclgd.pdf``, written by ``scripts/build_pdf.py``) and its copy
in the built site, which the landing page links.

Without the PDF the tests of it skip with the reason; with ``ICLGD_REQUIRE_BOOK=1`` (set by CI and
the publish workflow) they fail instead. ``page_count`` is tested on small hand-written PDFs.
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
    if not shipped.is_file():
        _unavailable(
            f"{shipped.relative_to(REPO)} does not exist: "
            "`python scripts/build_pdf.py --site _build/html`"
        )
    assert shipped.read_bytes() == data, "the site's iclgd.pdf is not the last one built"
