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
title in the header, page numbers in the footer and an outline (bookmarks) from the headings:
one entry per part, chapter and section, titled with its math as text (``OUTLINE_JS``,
``fix_outline``; the build fails on a repeated or misplaced entry).

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
import html
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
  .bd-article h1.iclgd-pdf-part {  /* the theme hides an article's first <h1> in print */
    display: block !important; font-size: 1.1rem; font-weight: 600; letter-spacing: 0.04em;
    color: #555; border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; margin: 0 0 1.5rem;
  }
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


# The outline (bookmarks) that Page.printToPDF writes has one entry per heading, nested by the
# headings' levels and titled by the text that Chromium painted: without the heading's math
# (MathJax draws it with CSS), without the spaces where a heading wraps ("ICLis"), and twice over
# where a heading moved to the next page ("SummarySummary"). In the singlehtml page the parts of
# the book are no headings (a chapter is an <h3> under the landing page's sections) while the
# print-only table of contents' part captions are (all on page 1), and an API page's module
# heading repeats its page's title. So, in print media, before printing: each part gets a heading
# of its own at the top of its first page (``h1.iclgd-pdf-part``), the contents' captions and a
# heading that repeats its parent's or its previous sibling's title stop being headings
# (``role="none"``: still shown, no entry), and the headings that make entries are returned, in
# order, with their HTML (math as TeX); after printing, :func:`retitle_outline` writes each
# entry's title from its heading as text (``html_to_text`` of book/_ext/iclgd_sphinx.py, as the
# sidebar and the search results show a heading).
OUTLINE_JS = r"""
() => {
  const painted = (el) => {  // the text Chromium paints (no math, no heading link)
    const c = el.cloneNode(true);
    c.querySelectorAll(".headerlink, mjx-container").forEach((x) => x.remove());
    return c.textContent.replace(/\s+/g, " ").trim();
  };
  const parts = [];
  const toc = document.getElementById("jb-print-toc");
  for (const caption of toc ? toc.querySelectorAll("p.caption") : []) {
    caption.setAttribute("role", "none");
    caption.removeAttribute("aria-level");
    const list = caption.nextElementSibling;
    const first = list && list.querySelector('a[href^="#document-"]');
    const start = first && document.getElementById(first.getAttribute("href").slice(1));
    if (!start) continue;
    const heading = document.createElement("h1");
    heading.className = "iclgd-pdf-part";
    heading.textContent = caption.textContent.trim();
    start.after(heading);
    parts.push(heading.textContent);
  }
  const MathJax = window.MathJax;
  const items = MathJax && MathJax.startup && MathJax.startup.document
    ? MathJax.startup.document.getMathItemsWithin(document.body) : [];
  const tex = new Map(items.map((item) => [item.typesetRoot, item.math]));
  const html = (el) => {
    const clone = el.cloneNode(true);
    const math = [...el.querySelectorAll("mjx-container")];
    [...clone.querySelectorAll("mjx-container")].forEach((c, i) => {
      c.replaceWith(`\\(${tex.get(math[i]) || ""}\\)`);
    });
    clone.querySelectorAll(".headerlink").forEach((x) => x.remove());
    return clone.innerHTML;
  };
  const entries = [];
  const dropped = [];
  const stack = [];  // the open entries: {level, title}
  for (const el of document.querySelectorAll("h1, h2, h3, h4, h5, h6, [role=heading]")) {
    if (["none", "presentation"].includes(el.getAttribute("role"))) continue;
    if (!el.getClientRects().length || el.closest("[aria-hidden=true]")) continue;
    const level = +(el.getAttribute("aria-level") || el.tagName.slice(1));
    const title = painted(el);
    while (stack.length && stack[stack.length - 1].level > level) stack.pop();
    const sibling = stack.length && stack[stack.length - 1].level === level ? stack.pop() : null;
    const parent = stack[stack.length - 1];
    if ((parent && parent.title === title) || (sibling && sibling.title === title)) {
      el.setAttribute("role", "none");
      dropped.push(title);
      if (sibling) stack.push(sibling);
      continue;
    }
    stack.push({ level, title });
    entries.push({ level, painted: title, html: html(el) });
  }
  const macros = (MathJax && MathJax.config && MathJax.config.tex && MathJax.config.tex.macros)
    || {};
  return { parts, entries, dropped, macros };
}
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


def _objects(data: bytes) -> tuple[dict[int, tuple[int, int]], int]:
    """Each object's byte span (``N 0 obj`` to the next object) by number, from the PDF's one
    cross-reference table (Chromium writes one, uncompressed), and the table's offset."""
    found = re.findall(rb"startxref\s+(\d+)\s+%%EOF\s*$", data)
    if not found:
        raise ValueError("no startxref at the end of the PDF")
    xref = int(found[-1])
    match = re.compile(rb"xref\s+").match(data, xref)
    if not match:
        raise ValueError(f"no cross-reference table at offset {xref}")
    pos = match.end()
    offsets: dict[int, int] = {}
    section = re.compile(rb"(\d+) (\d+)\s+")
    while m := section.match(data, pos):
        first, count = int(m[1]), int(m[2])
        pos = m.end()
        for k in range(count):
            entry = data[pos : pos + 20]
            if entry[17:18] == b"n":
                offsets[first + k] = int(entry[:10])
            pos += 20
    starts = sorted(offsets.values()) + [xref]
    ends = {start: end for start, end in zip(starts, starts[1:], strict=False)}
    return {number: (start, ends[start]) for number, start in offsets.items()}, xref


def _pdf_string(text: bytes, pos: int) -> tuple[str, int]:
    """The PDF string object at ``text[pos]`` (literal or hex) as text, and where it ends."""
    if text[pos : pos + 1] == b"<":
        end = text.index(b">", pos)
        raw = bytes.fromhex(re.sub(rb"\s", b"", text[pos + 1 : end]).decode())
        end += 1
    else:
        out, depth, i = bytearray(), 0, pos + 1
        escapes = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
        while True:
            c = text[i : i + 1]
            if c == b"\\":
                nxt = text[i + 1 : i + 2]
                octal = re.match(rb"[0-7]{1,3}", text[i + 1 : i + 4])
                if octal:
                    out.append(int(octal[0], 8) & 0xFF)
                    i += 1 + len(octal[0])
                    continue
                out += escapes.get(nxt, nxt if nxt not in b"\r\n" else b"")
                i += 2
                continue
            if c == b"(":
                depth += 1
            elif c == b")":
                if depth == 0:
                    break
                depth -= 1
            out += c
            i += 1
        raw, end = bytes(out), i + 1
    if raw.startswith(b"\xfe\xff"):
        return raw[2:].decode("utf-16-be"), end
    return raw.decode("latin-1"), end


def outline(data: bytes) -> list[dict]:
    """The PDF's outline (bookmarks) in reading order: ``{"title", "depth", "object",
    "title_span"}`` per entry (depth 0 at the top; the title's byte span in the file)."""
    spans, _ = _objects(data)

    def body(number: int) -> tuple[int, bytes]:
        start, end = spans[number]
        return start, data[start:end]

    roots = re.findall(rb"/Root\s+(\d+)\s+0\s+R", data)
    if not roots:
        raise ValueError("no /Root in the PDF's trailer")
    _, catalog_text = body(int(roots[-1]))
    catalog = re.search(rb"/Outlines\s+(\d+)\s+0\s+R", catalog_text)
    if not catalog:
        return []

    entries: list[dict] = []

    def walk(first: int | None, depth: int) -> None:
        seen = set()
        while first is not None:
            if first in seen:
                raise ValueError(f"outline entry {first} loops")
            seen.add(first)
            start, text = body(first)
            title = re.search(rb"/Title\s*", text)
            if not title:
                raise ValueError(f"outline entry {first} has no /Title")
            value, end = _pdf_string(text, title.end())
            rest = text[: title.start()] + text[end:]
            entries.append(
                {
                    "title": value,
                    "depth": depth,
                    "object": first,
                    "title_span": (start + title.end(), start + end),
                }
            )
            child = re.search(rb"/First\s+(\d+)\s+0\s+R", rest)
            if child:
                walk(int(child[1]), depth + 1)
            after = re.search(rb"/Next\s+(\d+)\s+0\s+R", rest)
            first = int(after[1]) if after else None

    _, root = body(int(catalog[1]))
    top = re.search(rb"/First\s+(\d+)\s+0\s+R", root)
    walk(int(top[1]) if top else None, 0)
    # each entry's page (1-based), from its destination and the page tree's order
    order: dict[int, int] = {}

    def pages(number: int) -> None:
        _, node = body(number)
        kids = re.search(rb"/Kids\s*\[([^\]]*)\]", node)
        if kids is None:
            order[number] = len(order) + 1
            return
        for kid in re.findall(rb"(\d+)\s+0\s+R", kids[1]):
            pages(int(kid))

    tree = re.search(rb"/Pages\s+(\d+)\s+0\s+R", catalog_text)
    if tree:
        pages(int(tree[1]))
    for entry in entries:
        _, text = body(entry["object"])
        dest = re.search(rb"/Dest\s*\[\s*(\d+)\s+0\s+R", text)
        entry["page"] = order.get(int(dest[1])) if dest else None
    return entries


def outline_problems(entries: list[dict], parts: list[str]) -> list[str]:
    """What is wrong with an outline (:func:`outline`) whose top entries must be the book's title
    and then ``parts`` (the captions of _toc.yml), in order: an empty title, raw TeX, a title
    that repeats itself ("SummarySummary"), an entry with its parent's or its previous sibling's
    title, an entry without a page or on a page before the previous entry's."""
    found = []
    parent: list[str] = []  # the titles of the open entries, by depth
    previous: dict[int, str] = {}  # the last title at each depth under the current parent
    page = 0
    for i, entry in enumerate(entries):
        title, depth = entry["title"], entry["depth"]
        where = f"entry {i} {title!r}"
        del parent[depth:]
        for d in [d for d in previous if d > depth]:
            del previous[d]
        if not title.strip():
            found.append(f"entry {i}: empty title")
        if re.search(r"\\[A-Za-z()\[\]]|\$", title):
            found.append(f"{where}: raw TeX")
        if re.search(r"(\w.{4,})\1", re.sub(r"\s", "", title)):
            found.append(f"{where}: repeats itself")
        if parent and title == parent[-1]:
            found.append(f"{where}: the title of its parent")
        if previous.get(depth) == title:
            found.append(f"{where}: the title of its previous sibling")
        if entry.get("page") is None or entry["page"] < page:
            found.append(f"{where}: on page {entry.get('page')}, after an entry on page {page}")
        page = entry.get("page") or page
        parent.append(title)
        previous[depth] = title
    top = [e["title"] for e in entries if e["depth"] == 0]
    if top[1:] != parts:
        found.append(f"the top entries are {top}, not the book's title and then the parts {parts}")
    return found


def retitle_outline(data: bytes, titles: list[str]) -> bytes:
    """``data`` with its outline entries, in reading order, titled ``titles`` (as many), and its
    cross-reference table rewritten for the new offsets."""
    entries = outline(data)
    if len(entries) != len(titles):
        raise ValueError(f"{len(entries)} outline entries for {len(titles)} titles")
    spans, xref = _objects(data)
    edits = sorted(
        (entry["title_span"], b"<FEFF" + title.encode("utf-16-be").hex().upper().encode() + b">")
        for entry, title in zip(entries, titles, strict=True)
    )
    out, pos = bytearray(), 0
    moved = []  # (old offset, shift): offsets at or after an edit shift by the edits before them
    for (start, end), value in edits:
        out += data[pos:start] + value
        pos = end
        moved.append((end, len(out) - end))
    out += data[pos:xref]

    def shifted(offset: int) -> int:
        shift = 0
        for end, delta in moved:
            if offset >= end:
                shift = delta
        return offset + shift

    new_xref = len(out)
    trailer = re.search(rb"trailer\s*(<<.*?>>)\s*startxref", data[xref:], re.S)
    if not trailer:
        raise ValueError("no trailer after the cross-reference table")
    size = int(re.search(rb"/Size\s+(\d+)", trailer[1])[1])
    table = [b"xref\n", f"0 {size}\n".encode(), b"0000000000 65535 f \n"]
    for number in range(1, size):
        if number in spans:
            table.append(f"{shifted(spans[number][0]):010d} 00000 n \n".encode())
        else:
            table.append(b"0000000000 00000 f \n")
    out += (
        b"".join(table) + b"trailer\n" + trailer[1] + f"\nstartxref\n{new_xref}\n%%EOF\n".encode()
    )
    return bytes(out)


def collapsed(text: str) -> str:
    """A heading's painted text as Chromium's bookmark title may hold it: letters and digits only
    (spaces and punctuation go: a line broken at "a, b" can be painted "a,,b"), and a run painted
    twice once ("SummarySummary" -> "Summary")."""
    text = re.sub(r"[\W_]", "", text)
    while (shorter := re.sub(r"(.{2,}?)\1", r"\1", text)) != text:
        text = shorter
    return text


def fix_outline(data: bytes, marks: dict) -> bytes:
    """The printed PDF with each outline entry titled by its heading as text (``marks``: what
    OUTLINE_JS returned), after checking that the entries are those headings (the build fails
    on a mismatch)."""
    sys.path.insert(0, str(REPO / "book" / "_ext"))
    from iclgd_sphinx import html_to_text

    entries = outline(data)
    headings = marks["entries"]
    if len(entries) != len(headings):
        sys.exit(f"the PDF has {len(entries)} outline entries for {len(headings)} headings")

    titles, wrong = [], []
    for i, (entry, heading) in enumerate(zip(entries, headings, strict=True)):
        # Chromium's title is the painted text, each line of it once or twice, spaces lost
        if collapsed(entry["title"]) != collapsed(heading["painted"]):
            wrong.append(f"entry {i} {entry['title']!r} is not the heading {heading['painted']!r}")
        text = html.unescape(html_to_text(heading["html"], marks["macros"]))
        titles.append(re.sub(r"\s+", " ", text).strip())
    if wrong:
        sys.exit("the outline does not follow the headings:\n  " + "\n  ".join(wrong[:20]))
    data = retitle_outline(data, titles)
    print(
        f"outline: {len(titles)} entries, {len(marks['parts'])} parts; "
        f"{len(marks['dropped'])} headings that repeat their parent's title left out"
    )
    return data


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
        marks = evaluate(OUTLINE_JS)
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
    data = fix_outline(data, marks)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    pages = page_count(data)
    problems = outline_problems(outline(data), marks["parts"])
    if problems:
        sys.exit("outline (bookmarks):\n  " + "\n  ".join(problems[:40]))
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


#: The landing page's link to the PDF, as the HTML build writes it: hidden, because the build
#: has no PDF; :func:`show_pdf_link` shows it once the PDF is in the site.
PDF_LINK_HIDDEN = '<p class="iclgd-pdf-link" hidden>'


def show_pdf_link(site: Path) -> Path:
    """Show the landing page's link to ``iclgd.pdf`` in the built ``site`` (which must hold the
    PDF): a site without the PDF never shows a link to it.

    Raises:
        FileNotFoundError: ``site`` has no ``iclgd.pdf``.
        ValueError: the landing page has no hidden PDF link (book/intro.md changed).
    """
    if not (site / "iclgd.pdf").is_file():
        raise FileNotFoundError(f"{site / 'iclgd.pdf'} does not exist: copy the PDF first")
    page = site / "book" / "intro.html"
    html = page.read_text(encoding="utf8")
    if PDF_LINK_HIDDEN not in html:
        raise ValueError(f"{page}: no hidden link to the PDF ({PDF_LINK_HIDDEN!r})")
    page.write_text(html.replace(PDF_LINK_HIDDEN, '<p class="iclgd-pdf-link">'), encoding="utf8")
    return page


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
        show_pdf_link(args.site)
        print(f"copied to {args.site / 'iclgd.pdf'}; the landing page's link to it shown")
    print(f"PDF built in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
