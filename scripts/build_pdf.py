"""Build the whole book as one PDF, offline: ``_build/pdf/iclgd.pdf``.

    python scripts/build_pdf.py                    # singlehtml build, then print it to PDF
    python scripts/build_pdf.py --no-build         # print the existing _build/singlehtml again
    python scripts/build_pdf.py --site _build/html # ... and copy the PDF into the built site

There is no LaTeX here (and Jupyter Book's ``pdfhtml`` builder downloads its own Chromium), so the
book is built with Sphinx's ``singlehtml`` builder (``jupyter-book build . --builder singlehtml
--all -W --keep-going``: every page in one HTML file, warnings are errors) and printed by headless
Chromium (Debian's ``chromium``, or ``$CHROMIUM``), driven over the DevTools pipe by the
``Browser`` of ``tests/test_book_html.py``: the page is opened from ``file://`` in print media,
MathJax and every image are awaited, then ``Page.printToPDF`` writes an A4 PDF with the book's
title in the header, page numbers in the footer and an outline (bookmarks) from the headings.

For print, each chapter starts on a new page, the folded code cells (``hide-input``: the figures'
code) stay folded and their "Show code cell source" toggles are left out, and the landing page's
link to this PDF is dropped. Code and text outputs wrap inside their box
(``book/_static/iclgd.css``); a chapter's paper-scale tab sets show their selected tab, *Paper
scale*.

The page is laid out at the width at which tests/test_book_html.py checks print media (794 px,
an A4 page) and scaled to fit between the margins. A display formula or a table still wider than
its box there is scaled down to fit it (each one is listed; below ``MIN_ZOOM`` the build fails).
Before printing, the script fails on: a MathJax error or undefined macro, math left untypeset, an
image that did not load, a code block, text output, display formula or table cut off at the
right, or a paper-scale tab set whose shown tab is not *Paper scale*. After printing it checks the
PDF (its header, its page tree, a page count between the chapters' count and a bound from the
printed height) and prints the page count, the size and the time taken.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SINGLE = REPO / "_build" / "singlehtml"
PDF = REPO / "_build" / "pdf" / "iclgd.pdf"
BUILT = SINGLE / "book" / "intro.html"  # the singlehtml builder's page (_toc.yml's `root`)
PAGE = SINGLE / "iclgd.html"  # BUILT at the root, where its relative URLs point from

# A4, in inches (DevTools' unit); margins leave room for the header and the footer.
PAPER = {"paperWidth": 8.27, "paperHeight": 11.69}
MARGIN = {"marginTop": 0.6, "marginBottom": 0.6, "marginLeft": 0.5, "marginRight": 0.5}
# The page is laid out at the width at which tests/test_book_html.py checks print media (its
# PRINT: A4's 794 px), and scaled down to fit between the margins: what fits there fits here.
LAYOUT_WIDTH = 794
SCALE = (PAPER["paperWidth"] - MARGIN["marginLeft"] - MARGIN["marginRight"]) * 96 / LAYOUT_WIDTH
# the height (CSS px, before scaling) that one printed page holds
PAGE_HEIGHT = (PAPER["paperHeight"] - MARGIN["marginTop"] - MARGIN["marginBottom"]) * 96 / SCALE

MIN_ZOOM = 0.6  # a formula or table scaled below this to fit the page fails the build

HEADER = (
    '<div style="font: 8px sans-serif; color: #666; width: 100%; margin: 0 0.5in;">'
    '<span class="title"></span></div>'
)
FOOTER = (
    '<div style="font: 8px sans-serif; color: #666; width: 100%; text-align: center;">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)

# Print-only style added to the page: a chapter per page; the folded cells' toggles left out, and
# a folded cell without output (each chapter's Colab bootstrap) altogether; no link to this PDF;
# no page break right after a heading, or inside a code cell or a tab set shorter than a page.
PRINT_CSS = """
@media print {
  span[id^="document-"] { display: block; break-before: page; }
  details.hide > summary { display: none !important; }
  .cell.tag_hide-input:not(:has(.cell_output)) { display: none !important; }
  .iclgd-pdf-link { display: none !important; }
  h1, h2, h3, h4, h5, h6 { break-after: avoid; }
  .cell_input, .cell_output img, figure img, .sd-tab-set { break-inside: avoid; }
}
"""

# Run in the page once it has loaded: wait for MathJax and every image, add PRINT_CSS.
SETTLE_JS = r"""
async (css) => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const within = (promise, ms) => Promise.race([promise, sleep(ms)]);
  const style = document.createElement("style");
  style.textContent = css;
  document.head.appendChild(style);
  const MathJax = window.MathJax;
  if (MathJax && MathJax.startup && MathJax.startup.promise) {
    await within(MathJax.startup.promise, 600000);
  }
  const images = [...document.images];
  images.forEach((img) => { img.loading = "eager"; });
  await within(Promise.all(images.map((img) => img.decode().catch(() => null))), 120000);
  return {
    chapters: document.querySelectorAll('span[id^="document-"]').length,
    /* MATH */  // tests/test_book_html.py MATH_JS
    images: images.length,
    missing: images.filter((img) => !(img.complete && img.naturalWidth > 0))
      .map((img) => img.getAttribute("src")),
  };
}
"""

# In print media, at the layout width: a display formula or a table wider than its box is scaled
# down to fit it (CSS zoom). The HTML pages scroll such a box sideways on a narrow screen; paper
# cannot. Returns what was scaled, by how much.
FIT_JS = r"""
() => {
  /* COLUMN */
  const fitted = [];
  const fit = (kind, el, width, box) => {
    if (width <= box + 1) return;
    const zoom = Math.floor((box - 2) / width * 1000) / 1000;
    el.style.zoom = zoom;
    fitted.push({ kind, head: el.textContent.trim().replace(/\s+/g, " ").slice(0, 60), zoom });
  };
  for (const el of column.querySelectorAll('mjx-container[display="true"]')) {
    if (el.offsetParent === null) continue;
    const math = el.querySelector("mjx-math") || el;
    fit("formula", el, math.getBoundingClientRect().width, Math.min(el.clientWidth, columnWidth));
  }
  for (const table of column.querySelectorAll("table")) {
    if (table.offsetParent === null) continue;
    const box = Math.min(table.parentElement.clientWidth, columnWidth);
    fit("table", table, table.getBoundingClientRect().width, box);
  }
  return fitted;
}
"""

# In print media: the tab sets' shown tabs and the printed height.
PRINT_STATE_JS = r"""
() => ({
  height: document.documentElement.scrollHeight,
  paperTabs: [...document.querySelectorAll(".iclgd-paper-tabs")].map((set) => {
    const input = set.querySelector(":scope > input:checked");
    const label = input && set.querySelector(`:scope > label[for="${input.id}"]`);
    const shown = input && input.nextElementSibling && input.nextElementSibling
      .nextElementSibling;
    return { selected: label ? label.textContent.trim() : null,
             visible: !!(shown && shown.offsetParent !== null),
             height: shown ? shown.getBoundingClientRect().height : 0 };
  }),
})
"""


def _book_html():
    """tests/test_book_html.py as a module: its ``Browser`` and its overflow measure."""
    spec = importlib.util.spec_from_file_location("book_html", REPO / "tests" / "test_book_html.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_singlehtml() -> float:
    """``jupyter-book build . --builder singlehtml --all -W --keep-going``; its warnings are
    printed (and fail the build). Returns the seconds it took."""
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", ".", "--builder", "singlehtml"]
    cmd += ["--all", "-W", "--keep-going"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if re.search(r"WARNING|ERROR", line)]
    for line in warnings:
        print(f"  {line}")
    if proc.returncode != 0 or not BUILT.is_file():
        print(log[-4000:], file=sys.stderr)
        sys.exit(f"the singlehtml build failed ({len(warnings)} warnings/errors above)")
    print(
        f"singlehtml built in {seconds:.0f} s, {len(warnings)} warnings: {BUILT.relative_to(REPO)}"
    )
    return seconds


def place_page() -> None:
    """Write :data:`BUILT` to :data:`PAGE`. The builder writes the root document at its path
    (``book/intro.html``) but with URLs relative to the output's root (``_static/``, ``_images/``,
    ``book/intro.html#anchor``): at the root, with its links to itself made same-page anchors
    (which the PDF keeps as links), everything resolves."""
    html = BUILT.read_text(encoding="utf8")
    html = re.sub(r'href="book/intro\.html(#[^"]*)?"', lambda m: f'href="{m[1] or "#"}"', html)
    PAGE.write_text(html, encoding="utf8")


def page_count(data: bytes) -> int:
    """The number of pages of a PDF: the /Count of its page tree's root, checked against its
    /Type /Page objects (Chromium writes the objects uncompressed)."""
    if not data.startswith(b"%PDF-"):
        raise ValueError("not a PDF: no %PDF- header")
    pages = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", data))
    counts = [int(c) for c in re.findall(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)", data)]
    counts += [int(c) for c in re.findall(rb"/Count\s+(\d+)[^>]*?/Type\s*/Pages\b", data)]
    if not counts or max(counts) != pages:
        raise ValueError(f"inconsistent page tree: {pages} page objects, /Count {counts[:5]}")
    return pages


def print_pdf(out: Path) -> dict:
    """Open the singlehtml page in headless Chromium, check it in print media and print it."""
    book_html = _book_html()
    binary = book_html.CHROMIUM
    if not binary:
        sys.exit("no Chromium found: `apt-get install -y chromium` (or set $CHROMIUM)")
    browser = book_html.Browser(binary)
    start = time.perf_counter()
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank", "newWindow": True})
        session = browser.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )["sessionId"]
        metrics = {"width": LAYOUT_WIDTH, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics, session)
        browser.send("Emulation.setEmulatedMedia", {"media": "print"}, session)
        browser.send("Page.enable", {}, session)
        events = browser.events(session)
        browser.send("Page.navigate", {"url": PAGE.as_uri()}, session)
        deadline = time.monotonic() + 300
        while events.get(timeout=max(deadline - time.monotonic(), 0.1))["method"] != (
            "Page.loadEventFired"
        ):
            pass

        def evaluate(js: str, *args) -> object:
            expression = f"({js})({', '.join(json.dumps(a) for a in args)})"
            reply = browser.send(
                "Runtime.evaluate",
                {"expression": expression, "awaitPromise": True, "returnByValue": True},
                session,
                timeout=900,
            )
            if "exceptionDetails" in reply:
                raise RuntimeError(f"script failed: {reply['exceptionDetails']}")
            return reply["result"]["value"]

        page = evaluate(SETTLE_JS.replace("/* MATH */", book_html.MATH_JS), PRINT_CSS)
        fitted = evaluate(FIT_JS.replace("/* COLUMN */", book_html.COLUMN_JS))
        for item in fitted:
            print(
                f"  scaled to {item['zoom']:.0%} to fit the page: {item['kind']} {item['head']!r}"
            )
        state = evaluate(PRINT_STATE_JS)
        boxes = evaluate(book_html.OVERFLOW_JS, True)
        settled = time.perf_counter() - start

        problems = [f"TeX error: {e}" for e in page["errors"]]
        problems += [f"undefined macro {m}" for m in page["undefined"]]
        problems += [f"not typeset by MathJax: {t!r}" for t in page["untypeset"]]
        problems += [f"image not loaded: {src}" for src in page["missing"]]
        problems += [
            f"{b['kind']}: {b['head']!r}: {b['width']:.0f} px in a {b['box']:.0f} px box"
            for b in boxes
            if b["cut"]
        ]
        for i, tabs in enumerate(state["paperTabs"]):
            if tabs["selected"] != "Paper scale" or not tabs["visible"]:
                problems.append(f"paper-scale tab set {i}: shows {tabs} in print")
        problems += [
            f"{f['kind']} {f['head']!r}: unreadable at {f['zoom']:.0%}"
            for f in fitted
            if f["zoom"] < MIN_ZOOM
        ]
        if page["chapters"] < 10 or page["math"] < 100 or page["images"] < 10:
            problems.append(f"too little on the page to be the book: {page}")
        if problems:
            sys.exit(
                f"{len(problems)} problems on {PAGE.relative_to(REPO)} in print:\n  "
                + "\n  ".join(problems[:40])
            )

        params = {
            **PAPER,
            **MARGIN,
            "scale": SCALE,
            "printBackground": True,
            "displayHeaderFooter": True,
            "headerTemplate": HEADER,
            "footerTemplate": FOOTER,
            "generateTaggedPDF": True,
            "generateDocumentOutline": True,
            "transferMode": "ReturnAsStream",
        }
        stream = browser.send("Page.printToPDF", params, session, timeout=900)["stream"]
        chunks = []
        while True:
            chunk = browser.send(
                "IO.read", {"handle": stream, "size": 1 << 20}, session, timeout=120
            )
            data = chunk["data"]
            chunks.append(base64.b64decode(data) if chunk.get("base64Encoded") else data.encode())
            if chunk.get("eof"):
                break
        browser.send("IO.close", {"handle": stream}, session)
    finally:
        browser.close()
    data = b"".join(chunks)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    pages = page_count(data)
    # the printed height gives a floor (less 10 %: the page layout differs slightly from the
    # measured one) and, with a page break per chapter and breaks kept off headings and figures,
    # a ceiling
    filled = state["height"] / PAGE_HEIGHT
    low = max(page["chapters"], 0.9 * filled)
    high = 1.5 * filled + page["chapters"]
    print(
        f"{out.relative_to(REPO) if out.is_relative_to(REPO) else out}: {pages} pages, "
        f"{len(data) / 2**20:.1f} MiB ({page['chapters']} pages of the site, "
        f"{page['math']} formulas, {page['images']} images, {len(state['paperTabs'])} paper-scale "
        f"tab sets); settled in {settled:.0f} s, "
        f"printed in {time.perf_counter() - start - settled:.0f} s"
    )
    if not low <= pages <= high:
        sys.exit(
            f"implausible page count {pages}: expected {low:.0f} to {high:.0f} from the printed "
            f"height ({state['height']} px, {filled:.0f} pages of {PAGE_HEIGHT} px)"
        )
    return {"pages": pages, "bytes": len(data), **page}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-build", action="store_true", help="reuse _build/singlehtml")
    parser.add_argument("--out", type=Path, default=PDF, help=f"default: {PDF.relative_to(REPO)}")
    parser.add_argument(
        "--site", type=Path, help="a built site (_build/html) to copy the PDF into, as iclgd.pdf"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if not args.no_build:
        build_singlehtml()
    elif not BUILT.is_file():
        sys.exit(f"{BUILT.relative_to(REPO)} does not exist: run without --no-build")
    place_page()
    print_pdf(args.out.resolve())
    if args.site:
        if not (args.site / "index.html").is_file():
            sys.exit(f"{args.site} is not a built site (no index.html)")
        shutil.copyfile(args.out, args.site / "iclgd.pdf")
        print(f"copied to {args.site / 'iclgd.pdf'}")
    print(f"PDF built in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
