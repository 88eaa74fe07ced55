"""Browser check of the built book (``_build/html``), the way a reader sees it, offline.

Build first (``jupyter-book build . --all -W --keep-going``), then run
``pytest tests/test_book_html.py`` (or both at once: ``bash scripts/build_book.sh --check``).

One headless Chromium (Debian's ``chromium``; another binary via ``$CHROMIUM``), driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``: no extra Python package, no port), opens
*every* page of the site from ``file://`` URLs — each chapter, the API, bibliography, index,
module-index, proof-index and status pages, ``search.html`` and searches with results (whose
excerpts quote the pages' text) — with a 1400 px wide window, waits for MathJax and for every
image, and measures the page in the browser. A page fails on

* **raw TeX** in its rendered text or its title (outside code): ``\\(``, ``\\)``, ``\\[``, ``\\]``,
  ``$$``, ``$...$`` or any ``\\command`` — e.g. a heading's math shown as ``C \\to \\infty`` in a
  link text (in search excerpts, which quote code verbatim, only math delimiters count); a math
  element that MathJax did not typeset, a TeX error or an undefined macro;
* a **missing image**: an ``<img>`` that did not load (``naturalWidth`` 0);
* a **broken internal link**: ``href``/``src`` to a local file that does not exist, or to an
  anchor that the target page does not have;
* a **narrow figure**: a notebook output image narrower than 80 % of the text column;
* **overflow** (content cut off at the right, or scrolled sideways out of sight), measured at
  windows of 1920, 1440, 1366 and 1200 px and in print media (a 794 px A4 page): a **wide table**
  (a table wider than the text column; also at 1000 and 800 px), **wide code** (a code block whose
  text is wider than its box), a **wide output** (a cell's text output wider than its box) and
  **wide math** (a display formula wider than its box);
* at a **phone**'s window (390 x 844 px), anything **cut off** out of reach: there a table, a
  display or an inline formula may be wider than the column if it scrolls sideways inside a box
  of its own, but nothing may reach past the window's edge (the page must not scroll sideways) or
  past a box that hides its overflow (reported as a wide table, math, code or output, or else as
  cut off);
* **dark mode** (``<html data-theme="dark">``, what the theme's button and, in mode "auto", the
  system's dark scheme set): a figure left light (its median luminance, in a screenshot of its
  box, above :data:`DARK_MAX_LUMINANCE`), a figure drawn unlike the one sampled, or an image that
  is not a figure (a logo, an icon) inverted;
* a request to the **network** (every script, style sheet, font and image is local).

Script errors on a page fail ``test_pages_run_without_script_errors``.

Screenshots go to ``_build/screenshots/``: each page whole at 1400 px (a long page in tiles of
:data:`SHOT_MAX_HEIGHT` px: ``page.png``, ``page-2.png``, ...), its first figure at 1400 px and
its first table at 800 px, its first figure in dark mode at 390 px, for people to look at.

``test_the_check_*`` run the same check on a small hand-written page,
``tests/fixtures/book_page.html`` (vendored MathJax, one figure, one table, a code cell with
its output, the book's style sheet, the theme's rules for math and tables), and on copies of it
with one defect each: they show that each kind of defect is caught, and need no book build.

Without ``_build/html`` or Chromium the tests skip with the reason; with ``ICLGD_REQUIRE_BOOK=1``
(set by CI) they fail instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
HTML_DIR = REPO / "_build" / "html"
SHOTS_DIR = REPO / "_build" / "screenshots"
FIXTURES = REPO / "tests" / "fixtures"
REQUIRED = os.environ.get("ICLGD_REQUIRE_BOOK", "") not in ("", "0", "false", "no")
CHROMIUM = (
    os.environ.get("CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
    or shutil.which("google-chrome")
)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    # tabs open side by side: none of them is throttled as a background tab
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no host name resolves
    "--allow-file-access-from-files",  # search.html fetches pages for its result summaries
]
WIDE = 1400  # window width (px) of the figure check and of the screenshots
LAYOUT = (1920, 1440, 1366, 1200)  # window widths (px) at which nothing may be cut off
NARROW = (1000, 800)  # window widths (px) at which tables must fit too (a table screenshot at 800)
PRINT = 794  # px: the viewport of the print-media check (A4, 210 mm at 96 px per inch)
PHONE = (390, 844)  # px: a phone's window (portrait), at which nothing may be out of reach
DARK_MAX_LUMINANCE = 0.25  # a figure's median luminance in dark mode (0 black, 1 white; page 0.09)
MIN_FIGURE_PX = 100  # natural width (px) from which an image of the text column is a figure
SHOT_MAX_HEIGHT = 16000  # px: the tiles of a whole-page screenshot (Chromium's texture limit)
MIN_FIGURE_FRACTION = 0.8  # of the text column, at the wide window
SEARCH_QUERIES = ("LSA", "gap")  # search.html is also opened with these, to check the results
#: Searches whose first result must be the page (and anchor) a reader looks for (issue 52 item 5:
#: the theorems the book states from the papers are index entries, iclgd-scorer.js orders ties by
#: part). The query is URL-encoded as the search box sends it.
SEARCH_FIRST = {
    "Theorem%202": "book/part1/multihead_theory.html#",  # Xie et al.'s Theorem 2
    "y_q-LSA": "book/part1/yq_lsa.html#",
    "Theorem%205": "book/part3/multi_layer.html#",  # Ahn et al.'s Theorem 5
}
PAGE_TIMEOUT = 120.0  # s, per page
WORKERS = 3  # pages open at once (MathJax typesetting is CPU bound)

# Raw TeX in rendered text: math delimiters, environments, any \command, a $...$ pair.
RAW_TEX = re.compile(r"\$\$|\\[()\[\]]|\\begin\{|\\[A-Za-z]+|\$[^\s$][^$\n]{0,80}?\$")
# In the excerpts that search results quote from a page's text (code included, verbatim): what
# only math leaves there.
RAW_MATH = re.compile(r"\\[()\[\]]|\\begin\{")


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (ICLGD_REQUIRE_BOOK is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _require_build() -> None:
    if not (HTML_DIR / "index.html").is_file():
        _unavailable(
            f"{HTML_DIR.relative_to(REPO)} does not exist: build the book first with "
            "`jupyter-book build . --all -W --keep-going`"
        )


def _require_chromium() -> str:
    if not CHROMIUM:
        _unavailable("no Chromium found: `apt-get install -y chromium` (or set $CHROMIUM)")
    return CHROMIUM  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------
# Chromium over the DevTools protocol, on a pipe


class Browser:
    """One headless Chromium; ``send`` runs a DevTools command and returns its result.

    ``--remote-debugging-pipe``: Chromium reads JSON commands, each ended by a NUL byte, from its
    file descriptor 3 and writes replies and events to descriptor 4. Commands may be sent from
    several threads at once; events are queued per session (one session per open tab).
    """

    def __init__(self, binary: str) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="iclgd-chromium-")
        pipe_in, self._cmd_write = os.pipe()
        self._out_read, pipe_out = os.pipe()
        # The child's ends, moved to descriptors >= 10 so that the shell below can put them on 3
        # and 4 without overwriting one with the other; bash then execs Chromium. (A
        # preexec_fn would do it in Python, but it makes subprocess fork a process that runs
        # JAX's threads, which can deadlock.)
        cmd_read = fcntl.fcntl(pipe_in, fcntl.F_DUPFD_CLOEXEC, 10)
        out_write = fcntl.fcntl(pipe_out, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(pipe_in)
        os.close(pipe_out)
        self._log = open(Path(self._profile.name) / "stderr.log", "w+b")  # noqa: SIM115
        shell = f'exec "$@" 3<&{cmd_read} 4>&{out_write} {cmd_read}<&- {out_write}>&-'
        self._proc = subprocess.Popen(
            [
                "bash",  # dash cannot redirect descriptors above 9
                "-c",
                shell,
                "sh",
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self._profile.name}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            pass_fds=(cmd_read, out_write),
        )
        os.close(cmd_read)
        os.close(out_write)
        self._lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, Future] = {}
        self._events: dict[str, queue.Queue] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._out_read, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    future = self._pending.pop(message["id"], None)
                    if future is not None:
                        future.set_result(message)
                else:
                    self.events(message.get("sessionId", "")).put(message)
        for future in list(self._pending.values()):  # Chromium exited
            future.set_exception(RuntimeError(f"chromium exited:\n{self.stderr()}"))

    def events(self, session: str) -> queue.Queue:
        with self._lock:
            return self._events.setdefault(session, queue.Queue())

    def stderr(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-3000:]

    def send(
        self, method: str, params: dict | None = None, session: str = "", timeout: float = 60
    ) -> dict:
        future: Future = Future()
        with self._lock:
            self._next_id += 1
            message: dict[str, Any] = {"id": self._next_id, "method": method}
            self._pending[self._next_id] = future
        message["params"] = params or {}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        with self._lock:
            while data:
                data = data[os.write(self._cmd_write, data) :]
        reply = future.result(timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001  (closing anyway)
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._cmd_write)
        self._reader.join(timeout=10)  # ends when Chromium's end of the pipe closes
        os.close(self._out_read)
        self._log.close()
        self._profile.cleanup()


# The text column of a page and its width (px), in MEASURE_JS and OVERFLOW_JS.
COLUMN_JS = """
  const column = document.querySelector("article.bd-article") ||
    document.querySelector("[role=main]") || document.body;
  const style = getComputedStyle(column);
  const columnWidth = column.clientWidth - parseFloat(style.paddingLeft) -
    parseFloat(style.paddingRight);
"""

# The math of a page, in MEASURE_JS and in scripts/build_pdf.py: how many formulas, those MathJax
# left untypeset, its errors and the undefined macros (object members of the returned result).
MATH_JS = """
    math: document.querySelectorAll(".math").length,
    untypeset: [...document.querySelectorAll(".math")]
      .filter((el) => !el.querySelector("mjx-container")).map((el) => el.textContent.slice(0, 80)),
    errors: [...document.querySelectorAll("mjx-merror")]
      .map((el) => el.getAttribute("data-mjx-error") || el.textContent),
    undefined: [...document.querySelectorAll('mjx-assistive-mml mtext[mathcolor="red"]')]
      .map((el) => el.textContent),
"""

# The start of an async page script: sleep(), within() and a wait for MathJax to start up, in
# MEASURE_JS and tests/test_reader_path.py.
SETTLE_JS = """
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const within = (promise, ms) => Promise.race([promise, sleep(ms)]);
  const MathJax = window.MathJax;
  if (MathJax && MathJax.startup && MathJax.startup.promise) {
    await within(MathJax.startup.promise, 60000);
  }
"""

# What the browser measures on a page (after MathJax and every image are done).
MEASURE_JS = r"""
async () => {
/* SETTLE */
  // searchtools.js declares `const Search` (a global binding, not a property of window)
  if (typeof Search !== "undefined" && new URLSearchParams(location.search).get("q")) {
    for (let i = 0; i < 400; i++) {
      if (/finished|did not match/.test((Search.status && Search.status.innerText) || "")) break;
      await sleep(50);
    }
    for (let i = 0; i < 100; i++) {  // each result's summary is fetched from its page
      const items = [...document.querySelectorAll("#search-results li")];
      if (items.every((li) => li.querySelector(".context") || li.querySelector("span"))) break;
      await sleep(50);
    }
  }
  const images = [...document.images];
  images.forEach((img) => { img.loading = "eager"; });
  await within(Promise.all(images.map((img) => img.decode().catch(() => null))), 30000);

  const where = (node) => {
    const path = [];
    for (let el = node; el && el !== document.body && path.length < 4; el = el.parentElement) {
      path.unshift(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
        (el.classList.length ? "." + [...el.classList].slice(0, 2).join(".") : ""));
    }
    return path.join(" > ");
  };
  const skipped = new Set(["SCRIPT", "STYLE", "PRE", "CODE", "KBD", "SAMP", "TEXTAREA",
                           "NOSCRIPT", "TEMPLATE", "MJX-CONTAINER", "svg"]);
  const shown = NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT;
  const walker = document.createTreeWalker(document.body, shown, {
    acceptNode: (node) => node.nodeType === Node.TEXT_NODE ? NodeFilter.FILTER_ACCEPT
      : (skipped.has(node.tagName) || node.classList.contains("highlight"))
        ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_SKIP,
  });
  const texts = [["(page title)", document.title, false]];
  for (let node; (node = walker.nextNode()); ) {
    if (/[\\$]/.test(node.data)) {
      const quote = !!node.parentElement.closest("#search-results .context");
      texts.push([where(node.parentElement), node.data, quote]);
    }
  }

  /* COLUMN */
  const resolve = (url) => {
    try { return new URL(url, document.baseURI).href; } catch { return url; }
  };
  return {
    url: location.href,
    texts,
    /* MATH */
    images: images.map((img) => ({ src: img.getAttribute("src"), url: img.currentSrc || img.src,
                                   loaded: img.complete && img.naturalWidth > 0 })),
    columnWidth,
    figures: [...document.querySelectorAll(".cell_output img, .output img")]
      .filter((img) => img.offsetParent !== null)
      .map((img) => ({ src: img.getAttribute("src"), width: img.getBoundingClientRect().width })),
    links: [...document.querySelectorAll(
      "a[href], link[href], script[src], iframe[src], source[src]")]  // images: loaded or not
      .filter((el) => !(el instanceof SVGElement))
      .map((el) => {
        const attr = el.hasAttribute("href") ? "href" : "src";
        return [el.tagName.toLowerCase(), el.getAttribute(attr), resolve(el.getAttribute(attr))];
      }),
    ids: [...document.querySelectorAll("[id], a[name]")].map((el) => el.id || el.name),
    paperLine: (document.querySelector(".iclgd-paper-run") || {}).textContent || null,
    searchFirst: (() => {  // the first search result's link, on search.html?q=...
      const first = document.querySelector("#search-results li a");
      return first ? first.getAttribute("href") : null;
    })(),
    paperTabs: [...document.querySelectorAll(".iclgd-paper-tabs")].map((set) => {
      const input = set.querySelector(":scope > input:checked");
      const label = input && set.querySelector(`:scope > label[for="${input.id}"]`);
      const shown = input && input.nextElementSibling && input.nextElementSibling
        .nextElementSibling;  // the checked tab's content (input, label, content)
      return { selected: label ? label.textContent.trim() : null,
               visible: !!(shown && shown.offsetParent !== null) };
    }),
  };
}
""".replace("/* COLUMN */", COLUMN_JS)
MEASURE_JS = MEASURE_JS.replace("/* MATH */", MATH_JS).replace("/* SETTLE */", SETTLE_JS)

# At one window (or in print): what is cut off. ``all``: code, outputs and math too (else tables).
OVERFLOW_JS = r"""
async (all) => {
  // (the layout at the new width is computed when measured: no animation frame is awaited, as a
  // tab that is not in front gets none)
  /* COLUMN */
  const shown = (selector) => [...column.querySelectorAll(selector)]
    .filter((el) => el.offsetParent !== null);
  const head = (el) => el.textContent.trim().replace(/\s+/g, " ").slice(0, 60);
  const found = shown("table").map((t) => ({
    kind: "wide table", head: head(t.querySelector("th, td") || t),
    width: t.getBoundingClientRect().width, box: columnWidth,
    cut: t.parentElement.scrollWidth > t.parentElement.clientWidth + 1 ||
      t.getBoundingClientRect().width > columnWidth + 1,
  }));
  if (all) {
    const boxes = (kind, selector) => shown(selector).map((el) => ({
      kind, head: head(el), width: el.scrollWidth, box: el.clientWidth,
      cut: el.scrollWidth > el.clientWidth + 1,
    }));
    found.push(...boxes("wide code", "div.highlight pre"));
    found.push(...boxes("wide output", ".cell_output pre, .output pre"));
    found.push(...shown('mjx-container[display="true"]').map((el) => {
      const math = el.querySelector("mjx-math") || el;
      const width = math.getBoundingClientRect().width;
      const box = Math.min(el.clientWidth, columnWidth);
      return { kind: "wide math", head: (el.closest(".math") || el).textContent.slice(0, 60),
               width, box, cut: width > box + 1 };
    }));
  }
  return found;
}
""".replace("/* COLUMN */", COLUMN_JS)


# At a phone's window: what is cut off out of reach. A box may be wider than the text column there
# if it scrolls sideways inside itself (overflow-x auto or scroll: a table's container, a display
# or an inline formula); nothing else may reach past the window's edge (the page may not scroll
# sideways) or past a box that hides its overflow (overflow hidden or clip). Each piece cut off is
# reported once, as the innermost element that holds it (a cell, not its table); a page that
# scrolls sideways for something outside the text column as "(the page)". Also returned: the
# boxes that scroll inside themselves (``scrolled``).
REACH_JS = r"""
() => {
  /* COLUMN */
  const head = (el) => el.textContent.trim().replace(/\s+/g, " ").slice(0, 60);
  const kind = (el) => el.closest("table") ? "wide table"
    : el.closest("mjx-container, .math") ? "wide math"
    : el.closest(".cell_output pre, .output pre") ? "wide output"
    : el.closest("pre") ? "wide code" : "cut off";
  const found = [];
  const scrolled = [];
  // el and what it holds, shown between left and right (the window's edges, or nearer ones of
  // the boxes around it that hide their overflow); whether something in it was reported
  const visit = (el, left, right) => {
    // (not laid out: display none, a closed <details>; a collapsed toggle's content, hidden by
    // `visibility`, is checked as it will be shown)
    if (!el.checkVisibility()) return false;
    const style = getComputedStyle(el);
    if (style.position === "fixed") return false;
    const r = el.getBoundingClientRect();
    const scrolls = ["auto", "scroll"].includes(style.overflowX);
    const hides = ["hidden", "clip"].includes(style.overflowX);
    const inner = r.left + el.clientLeft;  // the left of its padding box
    let extent = r.right;  // the right of what it shows
    if (scrolls) {  // what it holds can be scrolled to, unless a box inside it hides it
      if (el.scrollWidth > el.clientWidth + 1) {
        scrolled.push({ head: head(el), width: el.scrollWidth, box: el.clientWidth });
      }
      if (el.tagName !== "MJX-CONTAINER" && el.tagName !== "PRE") {
        let reported = false;
        for (const child of el.children) reported = visit(child, -Infinity, Infinity) || reported;
        if (reported) return true;
      }
    } else if (el.tagName === "MJX-CONTAINER") {  // the formula drawn (not its screen-reader copy)
      extent = (el.querySelector("mjx-math") || el).getBoundingClientRect().right;
    } else {
      if (el.tagName !== "PRE") {  // (a code block's text, as a whole, below)
        const edges = hides ? [Math.max(left, inner), Math.min(right, inner + el.clientWidth)]
          : [left, right];
        let reported = false;
        for (const child of el.children) reported = visit(child, ...edges) || reported;
        if (reported) return true;
      }
      if (!hides) extent = Math.max(extent, inner + el.scrollWidth);  // its text, if it spills
    }
    if (r.width + r.height === 0 || (extent <= right + 1 && r.left >= left - 1)) return false;
    found.push({ kind: kind(el), head: head(el), width: extent - Math.min(left, r.left),
                 box: right - left, cut: true });
    return true;
  };
  const page = document.documentElement;
  if (!visit(column, 0, page.clientWidth) && page.scrollWidth > page.clientWidth + 1) {
    found.push({ kind: "cut off", head: "(the page)", width: page.scrollWidth,
                 box: page.clientWidth, cut: true });
  }
  return { found, scrolled };
}
""".replace("/* COLUMN */", COLUMN_JS)

# Dark mode, as the theme's button sets it: the page's figures (images of the text column at least
# MIN_FIGURE_PX wide, except the theme's class dark-light: drawn for both modes) with their
# computed filters, the other images' filters, and the first figure shown, scrolled into view (a
# screenshot of the window is quicker than of the page beyond it), with the part of it in view.
DARK_JS = r"""
(minWidth) => {
  /* COLUMN */
  if (!document.images.length) return { figures: [], others: [], sample: null };  // (quicker)
  document.documentElement.dataset.theme = "dark";
  const images = [...document.images];
  const isFigure = (img) => column.contains(img) && img.naturalWidth >= minWidth &&
    !img.classList.contains("dark-light");
  const drawn = (img) => ({ src: img.getAttribute("src"), filter: getComputedStyle(img).filter });
  const shown = { checkVisibilityCSS: true, visibilityProperty: true };
  const first = images.find((img) => isFigure(img) && img.checkVisibility(shown) &&
    img.getBoundingClientRect().width >= minWidth);
  let sample = null;
  if (first) {
    first.scrollIntoView({ block: "center", behavior: "instant" });  // (not the theme's smooth)
    const r = first.getBoundingClientRect();
    const top = Math.max(r.top, 0);
    const height = Math.min(r.bottom, innerHeight) - top;
    const clip = { x: r.left + scrollX, y: top + scrollY, width: r.width, height, scale: 1 };
    sample = { ...drawn(first), clip };
  }
  return {
    figures: images.filter(isFigure).map(drawn),
    others: images.filter((img) => !isFigure(img)).map(drawn),
    sample,
  };
}
""".replace("/* COLUMN */", COLUMN_JS)

# The median luminance (0 black .. 1 white) of a PNG screenshot, decoded in the page.
LUMINANCE_JS = r"""
async (png) => {
  const img = new Image();
  img.src = "data:image/png;base64," + png;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const context = canvas.getContext("2d");
  context.drawImage(img, 0, 0);
  const px = context.getImageData(0, 0, canvas.width, canvas.height).data;
  const values = [];
  for (let i = 0; i < px.length; i += 4) {
    values.push((0.2126 * px[i] + 0.7152 * px[i + 1] + 0.0722 * px[i + 2]) / 255);
  }
  values.sort((a, b) => a - b);
  return values[values.length >> 1];
}
"""


def _clip(browser: Browser, session: str, selector: str) -> dict | None:
    """The page rectangle of the first element matching ``selector`` (for a screenshot)."""
    rect = browser.send(
        "Runtime.evaluate",
        {
            "expression": f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (!el) return null; const r = el.getBoundingClientRect();"
            " return {x: r.left + scrollX, y: r.top + scrollY, width: r.width,"
            " height: Math.min(r.height, 2000)}; })()",
            "returnByValue": True,
        },
        session,
    )["result"].get("value")
    if not rect or rect["width"] < 1 or rect["height"] < 1:
        return None
    pad = 16
    return {
        "x": max(rect["x"] - pad, 0),
        "y": max(rect["y"] - pad, 0),
        "width": rect["width"] + 2 * pad,
        "height": rect["height"] + 2 * pad,
        "scale": 1,
    }


def _screenshot(browser: Browser, session: str, path: Path, clip: dict | None = None) -> None:
    params: dict[str, Any] = {"format": "png"}
    if clip:
        params.update(clip=clip, captureBeyondViewport=True)
    data = browser.send("Page.captureScreenshot", params, session)["data"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(data))


def _evaluator(browser: Browser, session: str, where: str):
    """``evaluate(js, *args)``: run the JavaScript function ``js`` on ``args`` (JSON) in the tab
    ``session`` and return its value (awaited); a script error raises, naming ``where``."""

    def evaluate(js: str, *args: object) -> Any:
        expression = f"({js})({', '.join(json.dumps(a) for a in args)})"
        reply = browser.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session,
            timeout=PAGE_TIMEOUT,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{where}: a measuring script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    return evaluate


def inspect_page(browser: Browser, url: str, shots: Path | None = None) -> dict:
    """Open ``url`` in a new tab, let it settle, and return what ``MEASURE_JS``, ``OVERFLOW_JS``
    (at each window), ``REACH_JS`` (at a phone's) and ``DARK_JS`` measured, the page's requests
    and its script errors (screenshots to ``shots``: a file-name prefix)."""
    start = time.perf_counter()
    # each page in a window of its own: a tab behind another gets no animation frames
    target = browser.send("Target.createTarget", {"url": "about:blank", "newWindow": True})[
        "targetId"
    ]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
        "sessionId"
    ]

    evaluate = _evaluator(browser, session, url)

    try:
        metrics = {"width": WIDE, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics, session)
        for domain in ("Page", "Network", "Runtime"):
            browser.send(f"{domain}.enable", {}, session)
        browser.send("Page.navigate", {"url": url}, session)
        events = browser.events(session)
        requests: list[str] = []
        exceptions: list[str] = []
        deadline = time.monotonic() + PAGE_TIMEOUT
        while True:
            event = events.get(timeout=max(deadline - time.monotonic(), 0.1))
            method, params = event["method"], event.get("params", {})
            if method == "Network.requestWillBeSent":
                requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                exceptions.append(
                    (details.get("exception") or {}).get("description") or details["text"]
                )
            elif method == "Page.loadEventFired":
                break
        result = evaluate(MEASURE_JS)
        if shots is not None:  # the page whole, in tiles of at most SHOT_MAX_HEIGHT
            height = browser.send(
                "Runtime.evaluate",
                {"expression": "document.documentElement.scrollHeight", "returnByValue": True},
                session,
            )["result"]["value"]
            for k, top in enumerate(range(0, height, SHOT_MAX_HEIGHT)):
                tile = {"x": 0, "y": top, "width": WIDE, "scale": 1}
                tile["height"] = min(SHOT_MAX_HEIGHT, height - top)
                name = shots.name + (f"-{k + 1}" if k else "") + ".png"
                _screenshot(browser, session, shots.with_name(name), tile)
            # the first figure shown: a paper-scale tab's (iclgd_paper_runs.py) or a cell's
            figure = _clip(browser, session, ".iclgd-paper-output img, .cell_output img")
            if figure:
                _screenshot(browser, session, shots.with_name(shots.name + "-figure.png"), figure)
        result["boxes"] = []  # every box measured, each with its window and whether it is cut
        windows = [*((w, "screen", True) for w in LAYOUT), (PRINT, "print", True)]
        windows += [(w, "screen", False) for w in NARROW]
        for width, media, everything in windows:
            metrics["width"] = width
            browser.send("Emulation.setDeviceMetricsOverride", metrics, session)
            browser.send("Emulation.setEmulatedMedia", {"media": media}, session)
            boxes = evaluate(OVERFLOW_JS, everything)
            window = f"{width} px" + (" (print)" if media == "print" else "")
            result["boxes"] += [{**box, "window": window} for box in boxes]
        result["tables"] = [b for b in result["boxes"] if b["kind"] == "wide table"]
        if shots is not None and result["tables"]:
            table = _clip(browser, session, "article table, [role=main] table")
            shot = shots.with_name(shots.name + f"-table@{NARROW[-1]}.png")
            _screenshot(browser, session, shot, table)
        # a phone's window (the same page, in screen media since NARROW), then dark mode there
        metrics["width"], metrics["height"] = PHONE
        browser.send("Emulation.setDeviceMetricsOverride", metrics, session)
        reach = evaluate(REACH_JS)
        result["boxes"] += [{**box, "window": f"{PHONE[0]} px"} for box in reach["found"]]
        result["scrolled"] = reach["scrolled"]
        result["dark"] = evaluate(DARK_JS, MIN_FIGURE_PX)
        sample = result["dark"]["sample"]
        if sample:  # a screenshot of the first figure shown, its luminance measured in the page
            params = {"format": "png", "clip": sample["clip"]}
            png = browser.send("Page.captureScreenshot", params, session)["data"]
            sample["luminance"] = evaluate(LUMINANCE_JS, png)
            if shots is not None:
                shot = shots.with_name(shots.name + f"-figure-dark@{PHONE[0]}.png")
                shot.write_bytes(base64.b64decode(png))
        while not events.empty():  # requests made while the page settled
            event = events.get_nowait()
            if event["method"] == "Network.requestWillBeSent":
                requests.append(event["params"]["request"]["url"])
        result.update(requests=requests, exceptions=exceptions)
        result["seconds"] = time.perf_counter() - start
        return result
    finally:
        browser.send("Target.closeTarget", {"targetId": target})


# ------------------------------------------------------------------------------------------------
# Judging a page


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str, str]] = []  # (tag[:rel], attribute, value)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None:
                rel = f":{attrs.get('rel') or ''}" if tag == "link" else ""
                self.links.append((tag + rel, key, attrs[key] or ""))


@cache
def _parse_file(path: Path) -> _Ids:
    parser = _Ids()
    parser.feed(path.read_text(encoding="utf8", errors="replace"))
    parser.close()
    return parser


# Files that a step after the HTML build writes into the site, by the step: a link to one is not
# broken while it is missing (tests/test_pdf.py checks, with ICLGD_REQUIRE_BOOK, that it is there).
BUILT_AFTER = {"iclgd.pdf": "python scripts/build_pdf.py --site _build/html"}


def _link_problem(url: str, page: Path, page_ids: set[str]) -> str | None:
    """Why a ``file:`` URL found on ``page`` is broken, or None."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    target = Path(unquote(parts.path))
    if target.is_dir():
        target = target / "index.html"
    if not target.exists():
        later = target.name in BUILT_AFTER and target.parent.resolve() == HTML_DIR.resolve()
        return None if later else "missing file"
    fragment = unquote(parts.fragment)
    if not fragment or target.suffix != ".html":
        return None
    ids = page_ids if target.resolve() == page.resolve() else _parse_file(target.resolve()).ids
    return None if fragment in ids else f"no id {fragment!r} in {target.name}"


def problems(result: dict) -> dict[str, list[str]]:
    """What is wrong with a page that ``inspect_page`` measured, by kind (empty lists: fine)."""
    page = Path(unquote(urlsplit(result["url"]).path))
    found: dict[str, list[str]] = {
        "raw TeX": [],
        "math": [],
        "missing image": [],
        "broken link": [],
        "narrow figure": [],
        "wide table": [],
        "wide code": [],
        "wide output": [],
        "wide math": [],
        "cut off": [],
        "dark mode": [],
        "network": [],
    }
    for where, text, quote in result["texts"]:
        for match in (RAW_MATH if quote else RAW_TEX).finditer(text):
            start = max(match.start() - 40, 0)
            found["raw TeX"].append(f"{match[0]!r} in {where}: ...{text[start : start + 100]}...")
    found["math"] += [f"not typeset by MathJax: {t!r}" for t in result["untypeset"]]
    found["math"] += [f"TeX error: {e}" for e in result["errors"]]
    found["math"] += [f"undefined macro {m} (add it to _config.yml?)" for m in result["undefined"]]
    found["missing image"] += [f"{img['src']}" for img in result["images"] if not img["loaded"]]
    ids = set(result["ids"])
    for tag, raw, url in result["links"]:
        why = _link_problem(url, page, ids)
        if why:
            found["broken link"].append(f"<{tag} {raw!r}>: {why}")
    for fig in result["figures"]:
        if fig["width"] < MIN_FIGURE_FRACTION * result["columnWidth"]:
            found["narrow figure"].append(
                f"{fig['src']}: {fig['width']:.0f} px of a {result['columnWidth']:.0f} px column "
                f"at a {WIDE} px window ({fig['width'] / result['columnWidth']:.0%} < "
                f"{MIN_FIGURE_FRACTION:.0%})"
            )
    seen = set()
    for box in result["boxes"]:
        if box["cut"] and (box["kind"], box["head"], box["window"]) not in seen:
            seen.add((box["kind"], box["head"], box["window"]))
            found[box["kind"]].append(
                f"{box['head']!r}: {box['width']:.0f} px in a {box['box']:.0f} px box "
                f"at a {box['window']} window"
            )
    dark = result["dark"]
    sample = dark["sample"]
    if sample and sample["luminance"] > DARK_MAX_LUMINANCE:
        found["dark mode"].append(
            f"{sample['src']}: a light block on the dark page (median luminance "
            f"{sample['luminance']:.2f} > {DARK_MAX_LUMINANCE}; filter {sample['filter']!r})"
        )
    if sample:
        found["dark mode"] += [
            f"{fig['src']}: drawn unlike {sample['src']} (filter {fig['filter']!r}, not "
            f"{sample['filter']!r})"
            for fig in dark["figures"]
            if fig["filter"] != sample["filter"]
        ]
    found["dark mode"] += [
        f"{img['src']}: not a figure, but inverted ({img['filter']!r})"
        for img in dark["others"]
        if "invert" in img["filter"]
    ]
    found["network"] += sorted(
        {u for u in result["requests"] if urlsplit(u).scheme not in ("file", "data", "about")}
    )
    return found


def _report(result: dict, kinds: dict[str, list[str]]) -> str:
    lines = [f"{result['url']}:"]
    for kind, items in kinds.items():
        lines += [f"  {kind}: {item}" for item in items[:15]]
        if len(items) > 15:
            lines.append(f"  {kind}: ... and {len(items) - 15} more")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# The book


def _book_pages() -> list[str]:
    """Every page of the built site (paths under _build/html), plus a search with results."""
    if not HTML_DIR.is_dir():
        return []
    internal = {"_static", "_sources", "_images", "_downloads", "reports"}
    pages = [
        p.relative_to(HTML_DIR).as_posix()
        for p in sorted(HTML_DIR.rglob("*.html"))
        if not internal & set(p.relative_to(HTML_DIR).parts)
    ]
    pages.remove("index.html")  # a redirect to the introduction (test_index_...)
    queries = (*SEARCH_QUERIES, *SEARCH_FIRST)
    return [*pages, *(f"search.html?q={query}" for query in queries)]


PAGES = _book_pages()
FILES = [page for page in PAGES if "?" not in page]  # the HTML files among them


def _shot_name(page: str) -> str:
    return page.removeprefix("book/").replace("/", "_").replace(".html", "").replace("?q=", "-")


@pytest.fixture(scope="module")
def book() -> dict[str, dict]:
    """Every page of PAGES, measured in the browser (screenshots saved on the way)."""
    _require_build()
    binary = _require_chromium()
    browser = Browser(binary)
    start = time.perf_counter()

    def one(page: str) -> tuple[str, dict]:
        path, _, query = page.partition("?")
        url = (HTML_DIR / path).as_uri() + (f"?{query}" if query else "")
        return page, inspect_page(browser, url, SHOTS_DIR / _shot_name(page))

    try:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            results = dict(pool.map(one, PAGES))
    finally:
        browser.close()
    slowest = max(results.items(), key=lambda item: item[1]["seconds"])
    print(
        f"\nbrowser check: {len(results)} pages in {time.perf_counter() - start:.1f} s "
        f"({WORKERS} at once; slowest {slowest[0]} {slowest[1]['seconds']:.1f} s)"
    )
    return results


def test_index_leads_to_the_introduction():
    _require_build()
    text = (HTML_DIR / "index.html").read_text(encoding="utf8")
    targets = re.findall(r'url=([^"\'>\s]+)', text) + re.findall(r'href="([^"]+)"', text)
    assert targets, "index.html neither redirects nor links anywhere"
    assert any((HTML_DIR / urlsplit(t).path).is_file() for t in targets), targets


def test_every_page_is_checked():
    _require_build()
    names = set(PAGES)
    for page in ("book/api.html", "book/bibliography.html", "genindex.html", "search.html"):
        assert page in names, f"{page} is not among the pages the browser opens"
    assert len(PAGES) >= 15, PAGES


@pytest.mark.parametrize("page", PAGES or ["(book not built)"])
def test_page_reads_well(book, page):
    result = book[page]
    kinds = problems(result)
    assert not any(kinds.values()), _report(result, kinds)


def _paper_runs() -> tuple[dict, dict]:
    """``paper_runs.json``'s records and each chapter's freshness (scripts/record_paper_run.py)."""
    import sys

    sys.path.insert(0, str(REPO / "scripts"))
    import record_paper_run

    runs = record_paper_run.load_runs()
    return runs["runs"], record_paper_run.freshness(runs)


def test_chapters_show_their_paper_scale_run(book):
    """Every chapter says under its title which paper-scale run it shows (or that none is
    recorded), and a chapter whose record has figures shows them in tab sets that open on the
    paper-scale tab (book/_ext/iclgd_paper_runs.py)."""
    records, fresh = _paper_runs()
    checked = 0
    for key, state in fresh.items():
        page = key.removesuffix(".ipynb") + ".html"
        result = book[page]
        line = result["paperLine"] or ""
        assert line.startswith("Paper-scale run:"), f"{page}: no paper-scale line ({line!r})"
        if state == "missing":
            assert "none recorded" in line, f"{page}: {line!r}"
            continue
        assert f"{state} record" in line, f"{page} says {line!r}, its record is {state}"
        tabs = result["paperTabs"]
        if any(c.get("figures") for c in records[key].get("cells") or []):
            assert tabs, f"{page}: its paper-scale figures are not shown"
        bad = [t for t in tabs if t != {"selected": "Paper scale", "visible": True}]
        assert not bad, f"{page}: tab sets that do not open on the paper scale: {bad}"
        checked += 1
    assert checked >= 10, f"only {checked} chapters have a paper-scale record"


def test_searches_open_on_the_page_a_reader_looks_for(book):
    """The search for "Theorem 2" opens on Xie et al.'s Theorem 2 (not on a page that never says
    it), "y_q-LSA" on its chapter: the book's index entries and scorer (iclgd-scorer.js)."""
    for query, want in SEARCH_FIRST.items():
        first = book[f"search.html?q={query}"]["searchFirst"] or ""
        assert first.startswith(want), f"search {query!r}: first result {first!r}, not {want}"


def test_pages_run_without_script_errors(book):
    errors = {page: r["exceptions"] for page, r in book.items() if r["exceptions"]}
    assert not errors, json.dumps(errors, indent=1)[:3000]


def test_screenshots_were_taken(book):
    for page in book:
        shot = SHOTS_DIR / f"{_shot_name(page)}.png"
        assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot for {page}: {shot}"


def test_no_broken_links_in_the_html_files():
    """The HTML as written (before any script ran): every local href/src of every file."""
    _require_build()
    broken = []
    for page in ["index.html", *FILES]:
        path = HTML_DIR / page
        doc = _parse_file(path)
        for tag, attr, value in doc.links:
            value = value.strip()
            if not value or value.startswith(("data:", "javascript:", "mailto:", "tel:")):
                continue
            if urlsplit(value).scheme or value.startswith("//"):
                continue
            why = _link_problem(urljoin(path.as_uri(), value), path, doc.ids)
            if why:
                broken.append(f"{path.relative_to(HTML_DIR)}: <{tag} {attr}={value!r}>: {why}")
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:50])


def test_no_resource_is_loaded_from_the_network():
    """The HTML as written: no script, style sheet, image or font from another host."""
    _require_build()
    remote = []
    for page in ["index.html", *FILES]:
        path = HTML_DIR / page
        for tag, attr, value in _parse_file(path).links:
            is_resource = tag in ("script", "img", "iframe", "source", "video", "audio") or (
                tag.startswith("link:")
                and any(r in tag for r in ("stylesheet", "preload", "icon", "modulepreload"))
            )
            if is_resource and (
                urlsplit(value).scheme in ("http", "https") or value.startswith("//")
            ):
                remote.append(f"{path.relative_to(HTML_DIR)}: <{tag} {attr}={value!r}>")
    assert not remote, "pages load resources from the network:\n" + "\n".join(
        sorted(set(remote))[:50]
    )


def test_figure_numbers_run_in_page_order_without_gaps():
    """The HTML as written: on each page the figure numbers ("Fig. 4.1", ...) appear in order,
    1, 2, 3, ... with nothing skipped, and each once: a figure numbered only inside a hidden tab
    would leave a visible gap."""
    _require_build()
    wrong = []
    for page in FILES:
        html = (HTML_DIR / page).read_text(encoding="utf8")
        numbers = re.findall(r'<span class="caption-number">Fig\. (\d+)\.(\d+) ?</span>', html)
        if not numbers:
            continue
        seen = [int(k) for _, k in numbers]
        if seen != list(range(1, len(seen) + 1)) or len({c for c, _ in numbers}) != 1:
            wrong.append(f"{page}: " + ", ".join(".".join(n) for n in numbers))
    assert not wrong, "figure numbers out of order or with gaps:\n" + "\n".join(wrong)


def test_each_figure_is_drawn_once_on_its_page():
    """The HTML as written: no page shows the same image twice (a chapter's headline figure is
    drawn at the top, and its own paper-scale tab links back to it: iclgd_paper_runs.py)."""
    _require_build()
    twice = []
    for page in FILES:
        html = (HTML_DIR / page).read_text(encoding="utf8")
        srcs = re.findall(r'<img[^>]*\bsrc="([^"]*_images/[^"]+)"', html)
        repeated = sorted({s for s in srcs if srcs.count(s) > 1})
        if repeated:
            twice.append(f"{page}: " + ", ".join(repeated))
    assert not twice, "images drawn twice on a page:\n" + "\n".join(twice)


# ------------------------------------------------------------------------------------------------
# Hover previews of cross-references (book/_static/iclgd-hover.js)

HOVER_PAGE = "book/part1/yq_lsa.html"  # theorem boxes, links to another page's, citations
HOVER_NARROW = 720  # px: no previews at this window width and narrower

# In the page: the first link in the text with this href, scrolled to the middle of the window;
# returns its centre and what must not move when the box opens.
HOVER_LINK_JS = r"""
(href) => {
  const link = [...document.querySelectorAll(".bd-article a[href]")]
    .find((a) => a.getAttribute("href") === href);
  if (!link) return null;
  link.scrollIntoView({ block: "center" });
  const r = link.getClientRects()[0];  // its first line (a link may wrap)
  const article = document.querySelector(".bd-article").getBoundingClientRect();
  return { x: r.left + r.width / 2, y: r.top + r.height / 2,
           layout: [r.left, r.top, article.width, article.height,
                    document.documentElement.scrollHeight, scrollX, scrollY] };
}
"""

# In the page: the preview box once shown with its math typeset (null after ``wait`` ms without);
# text without math, so that it compares with the source HTML.
HOVER_BOX_JS = r"""
async (href, wait) => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const plain = (el) => {
    const c = el.cloneNode(true);
    c.querySelectorAll(".math, mjx-container").forEach((m) => m.remove());
    return c.textContent.replace(/\s+/g, " ").trim();
  };
  const link = [...document.querySelectorAll(".bd-article a[href]")]
    .find((a) => a.getAttribute("href") === href);
  for (let t = 0; t < wait; t += 50) {
    const box = document.querySelector(".iclgd-hover");
    if (box && !box.hidden && box.dataset.ready) {
      const r = box.getBoundingClientRect();
      const article = document.querySelector(".bd-article").getBoundingClientRect();
      const l = link.getClientRects()[0];
      const title = box.querySelector(".admonition-title");
      return {
        text: plain(box), title: title ? plain(title) : null,
        math: box.querySelectorAll(".math").length,
        untypeset: box.querySelectorAll(".math:not(:has(mjx-container))").length,
        ids: box.querySelectorAll("[id]").length,
        inside: r.left >= 0 && r.right <= document.documentElement.clientWidth && r.height > 0,
        describedBy: (link.getAttribute("aria-describedby") || "").includes(box.id),
        layout: [l.left, l.top, article.width, article.height,
                 document.documentElement.scrollHeight, scrollX, scrollY],
      };
    }
    await sleep(50);
  }
  return null;
}
"""


def _html_text(html: str) -> str:
    """The text of an HTML fragment without its math (as HOVER_BOX_JS's ``plain``)."""
    import html as html_module

    html = re.sub(r'<span class="math[^"]*">.*?</span>', "", html, flags=re.S)
    return re.sub(r"\s+", " ", html_module.unescape(re.sub(r"<[^>]+>", "", html))).strip()


def _hover_links() -> dict[str, tuple[str, str]]:
    """On HOVER_PAGE: a link to a theorem box of the page, one to another page's, and a citation,
    each with the text its preview must show (the box's title; the bibliography's entry)."""
    page = HTML_DIR / HOVER_PAGE
    source = page.read_text(encoding="utf8")
    proof = re.compile(
        r'<div class="proof [^"]*" id="([^"]+)">\s*<p class="admonition-title"[^>]*>(.*?)</p>', re.S
    )
    found: dict[str, tuple[str, str]] = {}
    titles = dict(proof.findall(source))
    for href in re.findall(r'<a class="reference internal" href="(#[^"]+)"', source):
        if href[1:] in titles:
            found["theorem on the page"] = (href, _html_text(titles[href[1:]]))
            break
    for href in re.findall(r'<a class="reference internal" href="([^"#]+\.html)#([^"]+)"', source):
        target = (page.parent / href[0]).resolve()
        if target != page.resolve() and target.is_file():
            other = dict(proof.findall(target.read_text(encoding="utf8")))
            if href[1] in other:
                found["theorem on another page"] = ("#".join(href), _html_text(other[href[1]]))
                break
    cite = re.search(
        r'<span class="bibtex-citation"[^>]*>[^<]*(?:<(?!a )[^>]*>[^<]*)*'
        r'<a class="reference internal" href="([^"#]+)#([^"]+)"',
        source,
    )
    if cite:
        bib = (page.parent / cite[1]).read_text(encoding="utf8")
        entry = re.search(
            rf'<div class="citation" id="{re.escape(cite[2])}"[^>]*>.*?<p>(.*?)</p>', bib, re.S
        )
        if entry:
            found["citation"] = (f"{cite[1]}#{cite[2]}", _html_text(entry[1]))
    return found


def test_hover_previews():
    """Pointing at a reference shows its target in a box: a theorem box of the same page and of
    another page (its title, its math typeset), a citation (the bibliography's entry); the box
    opens over the page (nothing moves), inside the window, is described to assistive technology,
    opens on keyboard focus too and closes on Escape; there is none at 720 px; and nothing is
    loaded from the network."""
    _require_build()
    links = _hover_links()
    assert set(links) == {"theorem on the page", "theorem on another page", "citation"}, links
    browser = Browser(_require_chromium())
    target = browser.send("Target.createTarget", {"url": "about:blank", "newWindow": True})
    session = browser.send(
        "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
    )["sessionId"]

    evaluate = _evaluator(browser, session, "the page")

    def key(name: str) -> None:
        for kind in ("keyDown", "keyUp"):
            event = {"type": kind, "key": name, "code": name, "windowsVirtualKeyCode": 27}
            browser.send("Input.dispatchKeyEvent", event, session)

    def hover(href: str, wait: int = 10000) -> dict | None:
        browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 1, "y": 1}, session)
        key("Escape")
        link = evaluate(HOVER_LINK_JS, href)
        assert link, f"no link {href!r} on {HOVER_PAGE}"
        point = {"type": "mouseMoved", "x": link["x"], "y": link["y"]}
        browser.send("Input.dispatchMouseEvent", point, session)
        box = evaluate(HOVER_BOX_JS, href, wait)
        if box is not None:
            assert box["layout"] == link["layout"], f"{href}: the page moved when the box opened"
        return box

    try:
        metrics = {"width": WIDE, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics, session)
        for domain in ("Page", "Network", "Runtime"):
            browser.send(f"{domain}.enable", {}, session)
        events = browser.events(session)
        browser.send("Page.navigate", {"url": (HTML_DIR / HOVER_PAGE).as_uri()}, session)
        deadline = time.monotonic() + PAGE_TIMEOUT
        while events.get(timeout=max(deadline - time.monotonic(), 0.1))["method"] != (
            "Page.loadEventFired"
        ):
            pass
        evaluate("() => window.MathJax.startup.promise.then(() => true)")
        for kind, (href, expected) in links.items():
            box = hover(href)
            assert box, f"{kind} ({href}): no preview"
            assert box["inside"] and box["describedBy"] and not box["ids"], (kind, box)
            if kind == "citation":
                assert box["text"] == expected, (kind, box["text"], expected)
            else:
                assert box["title"] == expected, (kind, box["title"], expected)
                assert box["math"] and not box["untypeset"], f"{kind}: math not typeset: {box}"
        # the keyboard: focus opens the box, Escape closes it
        href = links["theorem on the page"][0]
        evaluate(HOVER_LINK_JS, href)
        browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 1, "y": 1}, session)
        key("Escape")  # (the last input is a key: focus() then shows the focus ring)
        focus = "(href) => [...document.querySelectorAll('.bd-article a[href]')]"
        focus += ".find((a) => a.getAttribute('href') === href).focus()"
        evaluate(focus, href)
        box = evaluate(HOVER_BOX_JS, href, 5000)
        assert box and box["title"] == links["theorem on the page"][1], box
        key("Escape")
        assert evaluate(HOVER_BOX_JS, href, 300) is None, "Escape did not close the box"
        # a narrow window: no previews
        metrics["width"] = HOVER_NARROW
        browser.send("Emulation.setDeviceMetricsOverride", metrics, session)
        assert hover(links["theorem on the page"][0], 1000) is None, "a preview at 720 px"
        requests = []
        while not events.empty():
            event = events.get_nowait()
            if event["method"] == "Network.requestWillBeSent":
                requests.append(event["params"]["request"]["url"])
        remote = [u for u in requests if urlsplit(u).scheme not in ("file", "data", "about")]
        assert not remote, f"loaded from the network: {remote}"
        assert any(
            links["theorem on another page"][0].split("#")[0].lstrip("./") in u for u in requests
        ), "the other page was not read for its preview"
    finally:
        browser.close()


# ------------------------------------------------------------------------------------------------
# The check itself, on a small fixture page (no book build needed)

DEFECTS = {
    # kind: (text in tests/fixtures/book_page.html, its replacement)
    "raw TeX": (
        "<li>Figures</li>",
        '<li><a href="#figures">What happens as C \\to \\infty</a></li>',
    ),
    "missing image": ('<img alt="logo" src="figure.svg"', '<img alt="logo" src="no_such.svg"'),
    "broken link": ('<a href="#setting">setting</a>', '<a href="#no-such-section">setting</a>'),
    "narrow figure": ('class="figure" style="width: 100%"', 'class="figure" style="width: 60%"'),
    "wide table": (
        "<td>the claim</td>",
        '<td style="white-space: nowrap">' + "the claim " * 60 + "</td>",
    ),
    "wide code": ("<pre>steps = 100", '<pre style="white-space: pre">' + "x = 1; " * 60),
    "wide output": ("<pre>loss after", '<pre style="white-space: pre">' + "loss 0.25, " * 60),
    "wide math": (r"\frac{\eta}{C}", r"\frac{\eta}{C}" + "+ x_{12345}" * 90),
}

# Defects that only a phone's window or dark mode shows: (kind, (text, its replacement)).
PHONE_OR_DARK_DEFECTS = {
    # the theme's `overflow: hidden` on an inline formula (book/_static/iclgd.css lifts it)
    "inline formula cut off": (
        "wide math",
        (
            '<p>Its risk is <span class="math notranslate nohighlight">',
            '<p>Its risk is <span class="math notranslate nohighlight" style="overflow: hidden">',
        ),
    ),
    "table without a box that scrolls": (
        "wide table",
        (
            '<div class="pst-scrollable-table-container">',
            '<div class="pst-scrollable-table-container" style="overflow: visible">',
        ),
    ),
    "heading cut off": (
        "cut off",
        (
            "<h2>Figures</h2>",
            '<h2 style="white-space: nowrap">Figures, and what they show of the setting</h2>',
        ),
    ),
    "the page scrolls sideways": ("cut off", ("<nav>", '<nav style="width: 600px">')),
    "figure left light": (
        "dark mode",
        ('class="figure" style="width: 100%"', 'class="figure" style="width: 100%; filter: none"'),
    ),
    "logo inverted": (
        "dark mode",
        ('<img alt="logo"', '<img alt="logo" style="filter: invert(1)"'),
    ),
}


@pytest.fixture(scope="module")
def fixture_browser():
    browser = Browser(_require_chromium())
    yield browser
    browser.close()


def _fixture_result(browser: Browser, tmp_path: Path, edit: tuple[str, str] | None) -> dict:
    """The fixture page, edited (``(old, new)``), in a copy of tests/fixtures beside a link to
    book/ (for its MathJax), measured in the browser."""
    source = (FIXTURES / "book_page.html").read_text(encoding="utf8")
    if edit is not None:
        old, new = edit
        assert source.count(old) == 1, f"the fixture lost its {old!r}"
        source = source.replace(old, new)
    (tmp_path / "book").symlink_to(REPO / "book")
    pages = tmp_path / "tests" / "fixtures"
    pages.mkdir(parents=True)
    for path in FIXTURES.iterdir():
        if path.name != "book_page.html":
            (pages / path.name).symlink_to(path)
    (pages / "book_page.html").write_text(source, encoding="utf8")
    return inspect_page(browser, (pages / "book_page.html").as_uri())


def test_the_check_passes_the_fixture_page(fixture_browser, tmp_path):
    result = _fixture_result(fixture_browser, tmp_path, None)
    kinds = problems(result)
    assert not any(kinds.values()), _report(result, kinds)
    assert result["math"] >= 3 and not result["untypeset"], "the fixture's math was not typeset"
    assert result["figures"] and result["tables"], "the fixture lost its figure or its table"
    # at a phone's window its table, display formula and long inline formula scroll in their boxes
    assert len(result["scrolled"]) >= 3, result["scrolled"]
    sample = result["dark"]["sample"]
    assert sample and sample["luminance"] < DARK_MAX_LUMINANCE, result["dark"]


@pytest.mark.parametrize("defect", DEFECTS)
def test_the_check_fails_on(fixture_browser, tmp_path, defect):
    kinds = problems(_fixture_result(fixture_browser, tmp_path, DEFECTS[defect]))
    assert kinds[defect], f"the check missed a {defect}: {kinds}"
    others = {kind: items for kind, items in kinds.items() if items and kind != defect}
    assert not others, f"a {defect} was also reported as something else: {others}"


@pytest.mark.parametrize("defect", PHONE_OR_DARK_DEFECTS)
def test_the_check_fails_at_a_phone_or_in_dark_mode_on(fixture_browser, tmp_path, defect):
    kind, edit = PHONE_OR_DARK_DEFECTS[defect]
    kinds = problems(_fixture_result(fixture_browser, tmp_path, edit))
    assert kinds[kind], f"the check missed a {defect}: {kinds}"
    if kind != "dark mode":  # the phone's window found it, not a wider one
        assert all(f"at a {PHONE[0]} px window" in item for item in kinds[kind]), kinds[kind]
    others = {k: items for k, items in kinds.items() if items and k != kind}
    assert not others, f"a {defect} was also reported as something else: {others}"


@pytest.mark.parametrize(
    "raw",
    ["\\(y_q\\)", "$$x^2$$", "\\[ x \\]", "\\begin{align} x \\end{align}", "$\\lVert w\\rVert$"],
)
def test_the_check_fails_on_raw_tex_outside_math(fixture_browser, tmp_path, raw):
    """TeX where MathJax does not look (a class it ignores) stays raw: each form is caught."""
    edit = ("<li>Figures</li>", f'<li class="tex2jax_ignore mathjax_ignore">{raw}</li>')
    kinds = problems(_fixture_result(fixture_browser, tmp_path, edit))
    assert kinds["raw TeX"], f"the check missed raw TeX {raw!r}: {kinds}"


@pytest.mark.parametrize(
    ("tex", "text"),
    [
        (r"C \to \infty", "C → ∞"),
        (r"\lVert w_\star\rVert^2", "‖w_⋆‖^2"),
        (r"\wstar", "w_⋆"),
        (r"\eta^\star = C/(C+d+1)", "η^⋆ = C/(C+d+1)"),
        (r"\mathbf{W}^P_h", "W^P_h"),
        (r"\Sigma \in \R^{d \times d}", "Σ ∈ R^d × d"),
    ],
)
def test_heading_tex_as_plain_text(tex, text):
    """Where a heading can only be plain text (tab titles, search titles), its TeX is rewritten
    (book/_ext/iclgd_sphinx.py); the book's macros are expanded."""
    import sys

    sys.path.insert(0, str(REPO / "book" / "_ext"))
    from iclgd_sphinx import html_to_text, tex_to_text

    macros = {"wstar": r"\mathbf{w}_{\star}", "R": r"\mathbb{R}", "norm": [r"\lVert #1\rVert", 1]}
    assert tex_to_text(tex, macros) == text
    span = f'<span class="math notranslate nohighlight">\\({tex}\\)</span>'
    assert html_to_text(f"<span>6. </span>{span}-LSA", macros) == f"6. {text}-LSA"


@pytest.mark.parametrize(
    "tex",
    [
        r"X_{k+1} \approx X_k(I - \lvert a_kb_k\rvert MX_k^\top X_k)",
        r"2\sum_i g_i\,\E[(1+\langle G,M_{d+1}\rangle)(\langle G,M_i\rangle-\hat w_i)]",
        r"\eta=\eta^\star=C/(C+d+1)",
        r"\left( a + b + c + d + e + f + g + h \right) = \frac{x + y + z}{u - v - w}",
        r"H \in \{1, \dots, 400\}",
        r"a = b",
    ],
)
def test_long_table_formulas_are_cut_into_valid_pieces(tex):
    """book/_ext/iclgd_tables.py: the pieces join to the formula, each keeps its braces and its
    \\left/\\right pairs balanced, a long formula is cut and a short one is not."""
    import sys

    sys.path.insert(0, str(REPO / "book" / "_ext"))
    from iclgd_tables import MIN_CHARS, split_tex

    pieces = split_tex(tex)
    assert "".join(pieces) == tex
    for piece in pieces:
        body = piece.replace(r"\{", "").replace(r"\}", "")
        assert body.count("{") == body.count("}"), piece
        assert piece.count(r"\left") == piece.count(r"\right"), piece
    if len(tex) <= MIN_CHARS:
        assert pieces == [tex]
    if len(tex) >= 2 * MIN_CHARS:
        assert len(pieces) > 1, pieces


def test_skips_of_the_book_checks_are_summarised_with_their_reasons():
    """The root conftest's end-of-run summary counts the browser check's skips by reason (and
    no other test's skips), so that a run without Chromium never reads as a pass."""
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("root_conftest", REPO / "conftest.py")
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    no_chromium = "no Chromium found: `apt-get install -y chromium` (or set $CHROMIUM)"
    reports = [
        SimpleNamespace(nodeid="tests/test_book_html.py::test_a", longrepr=("f", 1, no_chromium)),
        SimpleNamespace(
            nodeid="tests/test_book_html.py::test_b", longrepr=("f", 2, "Skipped: " + no_chromium)
        ),
        SimpleNamespace(nodeid="tests/test_pdf.py::test_c", longrepr=("f", 3, "no PDF")),
        SimpleNamespace(nodeid="tests/test_llm.py::test_d", longrepr=("f", 4, "no extra")),
    ]
    assert root.book_check_skips(reports) == {no_chromium: 2, "no PDF": 1}
    assert root.book_check_skips(reports[3:]) == {}
