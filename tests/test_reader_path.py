"""The reader's path: each chapter's first figure near its top (issue 29, items 3 and 4).

Two parts:

* **The directive** ``paper-figure`` (``book/_ext/iclgd_paper_runs.py``), on a small book built
  here with Sphinx and myst-nb (no book build needed): it shows the recorded paper-scale figure,
  unnumbered, with a caption that links to the numbered figure and to its section, the record's
  device and date and "Stale record" where the record is stale; a missing record figure or an
  unknown label is a build warning. ``scripts/make_reader_notebooks.py`` turns it into a paragraph
  with the PNG attached.
* **The built book** (``_build/html``, in headless Chromium as in ``tests/test_book_html.py``): at
  a 1400 x 1000 px window, the top of the first figure (an image inside the article) of every
  chapter whose paper-scale record has a figure is at most :data:`MAX_SCREENS` screens (window
  heights) down. ``python tests/test_reader_path.py`` prints the numbers of every chapter.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import test_book_html as tbh  # the browser and the build checks (tests/ is on sys.path)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import record_paper_run  # noqa: E402
import record_status  # noqa: E402

MAX_SCREENS = 3.0  # the first figure's top, in window heights from the page's top
WINDOW = (1400, 1000)  # px: width, height
#: Chapters whose headline figure is still to be inserted (issue 29: Part II, Part III and the risk
#: ladder were being edited when the Part I chapters got theirs). Each is expected to fail, and
#: fails the test once it passes: then take it off this list.
PENDING: set[str] = set()

_spec = importlib.util.spec_from_file_location("mrn", REPO / "scripts" / "make_reader_notebooks.py")
mrn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mrn)


# ------------------------------------------------------------------------------------------------
# The directive, on a small book


def _png(width: int = 4, height: int = 3) -> bytes:
    """A valid RGB PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\x20\x60\xa0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _markdown(text: str) -> dict:
    cell_id = hashlib.sha1(text.encode()).hexdigest()[:8]
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}


CONF = """
import sys
from pathlib import Path
sys.path[:0] = [{ext!r}, {scripts!r}]
import record_paper_run
HERE = Path(__file__).resolve().parent
record_paper_run.REPO = HERE
record_paper_run.RUNS_JSON = HERE / "runs.json"
import iclgd_figures, iclgd_paper_runs
extensions = ["myst_nb", "sphinx_design"]
nb_execution_mode = "off"
numfig = True
exclude_patterns = ["_build"]
def setup(app):
    iclgd_figures.setup(app)
    iclgd_paper_runs.setup(app)
"""


def _small_book(root: Path, directive: str, record: str = "fresh") -> Path:
    """A book of one chapter, ``book/ch.ipynb``: its opening, ``directive`` (a markdown cell),
    a section with a figure's code cell and its caption (label ``fig-x``); and its paper-scale
    record (``record``: "fresh", "stale", "no figure" or "none")."""
    image = {"output_type": "display_data", "metadata": {}, "data": {"image/png": ""}}
    image["data"]["image/png"] = base64.b64encode(_png()).decode()
    glued = {  # glue("x", "0.25", display=False), as myst-nb records it
        "output_type": "display_data",
        "metadata": {"scrapbook": {"name": "x", "mime_prefix": "application/papermill.record/"}},
        "data": {"application/papermill.record/text/plain": "'0.25'"},
    }
    code = {
        "cell_type": "code",
        "id": "code-1",
        "execution_count": 1,
        "metadata": {"tags": ["hide-input"]},
        "outputs": [glued, image],
        "source": "draw()",
    }
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            _markdown("# A chapter\n\nWhat the paper claims; what the book finds.\n"),
            _markdown(directive),
            _markdown("## The experiment\n\nIt runs here.\n"),
            code,
            _markdown("```{figure-caption} fig-x\nThe figure, **re-run**.\n```\n"),
        ],
    }
    book = root / "book"
    (book / "_generated" / "paper_runs").mkdir(parents=True)
    (book / "ch.ipynb").write_text(json.dumps(nb), encoding="utf8")
    # the chapter's entry, as record_paper_run.render_markdown writes it (the line under the
    # chapter's title links to it)
    status = "# Status\n\n(paper-run-ch)=\n**ch** at paper scale.\n"
    (book / "status.md").write_text(status, encoding="utf8")
    (book / "_generated" / "paper_runs" / "book-ch-1.png").write_bytes(_png(8, 6))
    (root / "index.md").write_text(
        "# Book\n\n```{toctree}\nbook/ch\nbook/status\n```\n", encoding="utf8"
    )
    ext, scripts = str(REPO / "book" / "_ext"), str(REPO / "scripts")
    (root / "conf.py").write_text(CONF.format(ext=ext, scripts=scripts), encoding="utf8")
    figures = [] if record == "no figure" else ["_generated/paper_runs/book-ch-1.png"]
    run = {
        "device": "a test machine",
        "jax_version": "0.0",
        "commit": "abc1234",
        "recorded_at": "2026-11-20T10:00:00Z",
        "code_sha256": record_status.code_sha256(nb) if record != "stale" else "0" * 64,
        "asserts": [],
        "glue": {},
        "cells": [{"cell": 1, "text": "", "figures": figures}],
    }
    runs = {"format": record_paper_run.FORMAT, "runs": {"book/ch.ipynb": run}}
    if record == "none":
        runs["runs"] = {}
    (root / "runs.json").write_text(json.dumps(runs), encoding="utf8")
    return root


def _sphinx(root: Path, *flags: str) -> tuple[int, str, str]:
    """Build ``root`` into ``root/_build``: return code, the chapter's HTML and the warnings."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-b",
            "html",
            "-q",
            *flags,
            str(root),
            str(root / "_build"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    page = root / "_build" / "book" / "ch.html"
    html = page.read_text(encoding="utf8") if page.is_file() else ""
    return done.returncode, html, done.stderr


DIRECTIVE = (  # a caption with markup and a glued value
    "```{paper-figure} fig-x\n"
    "The paper reports *this*; the book finds it, at {glue:text}`x`.\n"
    "```\n"
)


def test_paper_figure_shows_the_record_unnumbered_with_links(tmp_path):
    rc, html, warnings = _sphinx(_small_book(tmp_path, DIRECTIVE), "-W", "--keep-going")
    assert rc == 0, warnings
    box = html.split('class="iclgd-paper-figure', 1)[1].split("</div>", 1)[0]
    assert box.count("<img") == 1 and "book-ch-1.png" in box, box  # the recorded PNG
    assert "Fig. 1" in box and "at paper scale." in box and "Preview" not in box, box
    assert 'href="#fig-x"' in box, box  # to the numbered figure ...
    assert 'href="#the-experiment"' in box and "The experiment</a>" in box, box  # ... its section
    assert "The paper reports <em>this</em>; the book finds it, at " in box, box
    assert re.search(r"at <span[^>]*>0\.25</span>\.", box), box  # the glued value
    # where and when the run was made: once, in the line under the title, not in the caption
    assert "a test machine" not in box and "2026-11-20" not in box, box
    line = html.split('class="iclgd-paper-run', 1)[1].split("</p>", 1)[0]
    assert "a test machine" in line and "2026-11-20" in line and "abc1234" in line, line
    assert 'status.html#paper-run-ch"' in line, line  # to the chapter's entry on the status page
    assert "Stale record" not in box
    # the figure keeps its number; the preview takes none (no second "Fig. 1", no "Fig. 2")
    assert html.count('<span class="caption-number">') == 1, html
    assert "Fig. 2" not in html
    # it comes before the figure's section, and the figure below still has its tabs
    assert html.index("iclgd-paper-figure") < html.index('id="the-experiment"')
    below = html.split('id="the-experiment"', 1)[1]
    assert "iclgd-paper-tabs" in below
    # ... drawn once: the paper-scale tab below links to the top instead of a second copy
    assert "book-ch-1.png" not in below and html.count("book-ch-1.png") == 1, below
    drawn = below.split('class="iclgd-paper-drawn-above', 1)[1].split("</p>", 1)[0]
    assert 'href="#paper-fig-x"' in drawn and 'id="paper-fig-x"' in html, drawn


def test_paper_figure_says_when_its_record_is_stale(tmp_path):
    rc, html, warnings = _sphinx(_small_book(tmp_path, DIRECTIVE, "stale"), "-W", "--keep-going")
    assert rc == 0, warnings
    box = html.split('class="iclgd-paper-figure', 1)[1].split("</div>", 1)[0]
    assert "Stale record" in box, box


@pytest.mark.parametrize(
    ("directive", "record", "message"),
    [
        (DIRECTIVE, "none", "no paper-scale record"),
        (DIRECTIVE, "no figure", "no figure in its record"),
        (DIRECTIVE.replace("fig-x", "fig-y"), "fresh", "no figure of this chapter"),
    ],
)
def test_paper_figure_without_a_record_figure_is_a_warning(tmp_path, directive, record, message):
    rc, html, warnings = _sphinx(_small_book(tmp_path, directive, record))
    assert "[iclgd] paper-figure" in warnings and message in warnings, warnings
    assert "iclgd-paper-figure" not in html  # nothing shown in its place
    assert _sphinx(tmp_path, "-W", "-E")[0] != 0  # an error under -W


def test_reader_notebook_writes_the_directive_as_a_paragraph_with_the_png(tmp_path, monkeypatch):
    root = _small_book(tmp_path, DIRECTIVE, "stale")
    monkeypatch.setattr(mrn, "REPO", root)
    monkeypatch.setattr(record_paper_run, "RUNS_JSON", root / "runs.json")
    path = root / "book" / "ch.ipynb"
    values = {path.resolve(): {"x": "0.25"}}
    nb, missing = mrn.reader_notebook(path, values, mrn.paper_values(), mrn.paper_figures())
    assert missing == []
    cell = nb["cells"][1]
    text = "".join(cell["source"])
    assert "{paper-figure}" not in text and "```" not in text, text
    head = "**The figure below, at paper scale** (recorded 2026-11-20 on a test machine"
    assert text.startswith(head), text
    assert "stale record" in text and "the book finds it, at 0.25." in text, text
    (name,) = cell["attachments"]
    assert f"](attachment:{name})" in text
    assert base64.b64decode(cell["attachments"][name]["image/png"]) == _png(8, 6)
    # no record figure: the paragraph stays, without an image, and the role is reported missing
    empty = {"format": record_paper_run.FORMAT, "runs": {}}
    (root / "runs.json").write_text(json.dumps(empty), encoding="utf8")
    nb, missing = mrn.reader_notebook(path, values, mrn.paper_values(), mrn.paper_figures())
    assert missing == ["paper-figure fig-x"] and "attachments" not in nb["cells"][1]
    assert "{paper-figure}" not in "".join(nb["cells"][1]["source"])


# ------------------------------------------------------------------------------------------------
# The built book, in a browser

MEASURE_JS = r"""
async () => {
/* SETTLE */
  const images = [...document.images];
  images.forEach((img) => { img.loading = "eager"; });
  await within(Promise.all(images.map((img) => img.decode().catch(() => null))), 30000);
  const article = document.querySelector("article.bd-article") || document.body;
  const first = [...article.querySelectorAll("img")]
    .filter((img) => img.offsetParent !== null && img.getBoundingClientRect().width >= 100)[0];
  return {
    top: first ? first.getBoundingClientRect().top + scrollY : null,
    src: first ? first.getAttribute("src") : null,
    height: document.documentElement.scrollHeight,
    screen: innerHeight,
  };
}
""".replace("/* SETTLE */", tbh.SETTLE_JS)


def measure(browser: tbh.Browser, url: str) -> dict:
    """At a WINDOW-sized window: the top of the page's first figure and the page's height, in
    screens (window heights)."""
    target = browser.send("Target.createTarget", {"url": "about:blank", "newWindow": True})[
        "targetId"
    ]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
        "sessionId"
    ]
    try:
        width, height = WINDOW
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics, session)
        browser.send("Page.enable", {}, session)
        browser.send("Page.navigate", {"url": url}, session)
        events = browser.events(session)
        while events.get(timeout=tbh.PAGE_TIMEOUT)["method"] != "Page.loadEventFired":
            pass
        reply = browser.send(
            "Runtime.evaluate",
            {"expression": f"({MEASURE_JS})()", "awaitPromise": True, "returnByValue": True},
            session,
            timeout=tbh.PAGE_TIMEOUT,
        )
        value = reply["result"]["value"]
        screen = value["screen"]
        first = None if value["top"] is None else value["top"] / screen
        return {"first": first, "src": value["src"], "length": value["height"] / screen}
    finally:
        browser.send("Target.closeTarget", {"targetId": target})


def _chapters() -> dict[str, bool]:
    """Every notebook chapter of ``_toc.yml``: whether its paper-scale record has a figure."""
    records = record_paper_run.load_runs()["runs"]
    return {
        key: any(c.get("figures") for c in (records.get(key) or {}).get("cells") or [])
        for key in record_paper_run.chapter_notebooks()
    }


def measure_book() -> dict[str, dict]:
    """:func:`measure` on every notebook chapter of the built book."""
    tbh._require_build()
    browser = tbh.Browser(tbh._require_chromium())
    try:
        out = {}
        for key in _chapters():
            page = tbh.HTML_DIR / (key.removesuffix(".ipynb") + ".html")
            out[key] = measure(browser, page.as_uri())
        return out
    finally:
        browser.close()


@pytest.fixture(scope="module")
def screens() -> dict[str, dict]:
    return measure_book()


CHAPTERS = _chapters()


@pytest.mark.parametrize(
    "chapter",
    [
        pytest.param(c, marks=pytest.mark.xfail(reason="headline figure pending", strict=True))
        if c in PENDING
        else c
        for c, has_figure in CHAPTERS.items()
        if has_figure
    ],
)
def test_first_figure_within_three_screens(screens, chapter):
    found = screens[chapter]
    assert found["first"] is not None, f"{chapter}: no figure on the page"
    assert found["first"] <= MAX_SCREENS, (
        f"{chapter}: its first figure ({found['src']}) is {found['first']:.1f} screens down "
        f"(at {WINDOW[0]} x {WINDOW[1]} px), more than {MAX_SCREENS:g}: put its headline figure "
        "near the top (```{paper-figure} <label>```, book/_ext/iclgd_paper_runs.py)"
    )


def test_pending_chapters_are_chapters_with_a_paper_scale_figure():
    assert PENDING <= {c for c, has_figure in CHAPTERS.items() if has_figure}


if __name__ == "__main__":  # the numbers of every chapter
    print(f"{'chapter':42s} first figure  page  (screens of {WINDOW[1]} px at {WINDOW[0]} px)")
    for key, found in measure_book().items():
        first = "none" if found["first"] is None else f"{found['first']:.1f}"
        print(f"{key:42s} {first:>12s}  {found['length']:4.1f}  {found['src']}")
