"""Browser check of the built book (``_build/html``), the way a reader sees it, offline.

Build first (``jupyter-book build . -W --keep-going``), then ``pytest tests/test_book_html.py``.

Headless Chromium (Debian's ``chromium``; another binary via ``$CHROMIUM``) opens the introduction,
the notation page and every page of each part's index plus its first chapter, from ``file://``
URLs with networking off, lets MathJax run (``--virtual-time-budget``), and dumps the DOM. The test
asserts that

* every math element Sphinx wrote became MathJax output (``mjx-container``), with no TeX error and
  no undefined macro, and no raw ``$$``, ``\\(``, ``\\[`` or ``\\begin{`` is
  left in the visible text;
* every ``<img>`` of a page is still in the DOM (its file is checked by the link check);
* no built page has a broken internal link (``href``/``src`` to a local file, or to an anchor of
  one) and no page loads a script, stylesheet, image or font from the network;
* ``index.html`` leads to the introduction.

It also saves screenshots of those pages to ``_build/screenshots/`` (for people to look at).

Without ``_build/html`` or Chromium the tests skip with the reason; with ``ICLGD_REQUIRE_BOOK=1``
(set by CI) they fail instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
HTML_DIR = REPO / "_build" / "html"
SHOTS_DIR = REPO / "_build" / "screenshots"
TOC = REPO / "_toc.yml"
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
    "--virtual-time-budget=10000",
]


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (ICLGD_REQUIRE_BOOK is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _require_build() -> None:
    if not (HTML_DIR / "index.html").is_file():
        _unavailable(
            f"{HTML_DIR.relative_to(REPO)} does not exist: build the book first with "
            "`jupyter-book build . -W --keep-going`"
        )


def _require_chromium() -> str:
    if not CHROMIUM:
        _unavailable("no Chromium found: `apt-get install -y chromium` (or set $CHROMIUM)")
    return CHROMIUM  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------
# Which pages the browser opens


def _toc_parts() -> list[tuple[str, list[str]]]:
    import yaml

    toc = yaml.safe_load(TOC.read_text(encoding="utf8"))
    parts = []
    for part in toc.get("parts") or []:
        files: list[str] = []

        def walk(entries):
            for entry in entries or []:
                if "file" in entry:
                    files.append(entry["file"])
                walk(entry.get("sections"))

        walk(part.get("chapters"))
        parts.append((str(part.get("caption", "")), files))
    return parts


def _pages() -> list[str]:
    """Docnames (paths under _build/html without .html) the browser opens."""
    import yaml

    root = yaml.safe_load(TOC.read_text(encoding="utf8"))["root"]
    pages = [root]
    for caption, files in _toc_parts():
        if caption.startswith("Part"):
            pages += files[:2]  # the part's index page and its first chapter, if any
        elif caption == "Introduction":
            pages += files
    pages.append("book/notation")  # every shared MathJax macro, rendered
    return list(dict.fromkeys(pages))


PAGES = _pages()


def _shot_name(page: str) -> str:
    return page.removeprefix("book/").replace("/", "_") + ".png"


# ------------------------------------------------------------------------------------------------
# Chromium


def _chromium(args: list[str], timeout: float = 180) -> str:
    with tempfile.TemporaryDirectory(prefix="iclgd-chromium-") as profile:
        proc = subprocess.run(
            [_require_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if proc.returncode != 0:
        raise AssertionError(
            f"chromium {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return proc.stdout


def _render(page: str) -> tuple[str, str]:
    url = (HTML_DIR / f"{page}.html").as_uri()
    dom = _chromium(["--dump-dom", url])
    shot = SHOTS_DIR / _shot_name(page)
    _chromium(["--window-size=1280,1800", f"--screenshot={shot}", url])
    return page, dom


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    """DOM after MathJax ran, for every page of PAGES (screenshots are saved on the way)."""
    _require_build()
    _require_chromium()
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    pages = [p for p in PAGES if (HTML_DIR / f"{p}.html").is_file()]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(_render, pages))


# ------------------------------------------------------------------------------------------------
# HTML parsing helpers


class _Collector(HTMLParser):
    """Collects ids, link targets, visible text and element counts of one HTML document."""

    SKIP_TEXT = {
        "script",
        "style",
        "pre",
        "code",
        "textarea",
        "mjx-container",
        "noscript",
        "svg",
        "title",
    }
    VOID = {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.text: list[str] = []
        self.imgs = 0
        self.math = 0
        self.mjx = 0
        self._skip_stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None:
                self.links.append((tag, key, attrs[key] or ""))
        if tag == "link" and attrs.get("href") is not None:
            self.links[-1] = ("link:" + (attrs.get("rel") or ""), "href", attrs["href"] or "")
        classes = (attrs.get("class") or "").split()
        if tag == "img":
            self.imgs += 1
        if tag in ("span", "div") and "math" in classes:
            self.math += 1
        if tag == "mjx-container":
            self.mjx += 1
        if tag in self.SKIP_TEXT or (tag == "div" and "highlight" in classes):
            if tag not in self.VOID:
                self._skip_stack.append(tag)
        elif self._skip_stack and tag not in self.VOID:
            self._skip_stack.append(tag)

    def handle_endtag(self, tag):
        if self._skip_stack:
            # pop up to the matching tag (tolerates unclosed inner tags)
            if tag in self._skip_stack:
                while self._skip_stack and self._skip_stack.pop() != tag:
                    pass

    def handle_data(self, data):
        if not self._skip_stack:
            self.text.append(data)


def _parse(text: str) -> _Collector:
    c = _Collector()
    c.feed(text)
    c.close()
    return c


@cache
def _parse_file(path: Path) -> _Collector:
    return _parse(path.read_text(encoding="utf8", errors="replace"))


# ------------------------------------------------------------------------------------------------
# Tests


def test_index_leads_to_the_introduction():
    _require_build()
    text = (HTML_DIR / "index.html").read_text(encoding="utf8")
    targets = re.findall(r'url=([^"\'>\s]+)', text) + re.findall(r'href="([^"]+)"', text)
    assert targets, "index.html neither redirects nor links anywhere"
    assert any((HTML_DIR / urlsplit(t).path).is_file() for t in targets), targets


@pytest.mark.parametrize("page", PAGES)
def test_math_is_rendered_by_mathjax(rendered, page):
    if page not in rendered:
        pytest.skip(f"{page}.html was not built (not in the toc yet?)")
    static = _parse_file(HTML_DIR / f"{page}.html")
    dom_text = rendered[page]
    dom = _parse(dom_text)
    if static.math:
        assert dom.mjx >= static.math, (
            f"{page}: {static.math} math elements in the HTML but only {dom.mjx} mjx-container "
            "after MathJax ran (is _static/mathjax/tex-mml-chtml.js served? see mathjax_path)"
        )
    errors = re.findall(r'<mjx-merror[^>]*data-mjx-error="([^"]*)"', dom_text)
    errors += re.findall(r"<merror[^>]*>(.*?)</merror>", dom_text)
    assert not errors, f"{page}: MathJax errors: {errors[:5]}"
    undefined = re.findall(r'<mtext mathcolor="red">(\\[^<]*)</mtext>', dom_text)
    assert not undefined, (
        f"{page}: undefined TeX macros (add them to mathjax3_config in _config.yml?): "
        f"{sorted(set(undefined))}"
    )
    visible = html.unescape(" ".join(dom.text))
    for raw in ("$$", "\\(", "\\)", "\\[", "\\]", "\\begin{"):
        index = visible.find(raw)
        assert index < 0, (
            f"{page}: raw TeX {raw!r} left in the text: "
            f"...{visible[max(0, index - 80) : index + 80]}..."
        )


@pytest.mark.parametrize("page", PAGES)
def test_images_are_present(rendered, page):
    if page not in rendered:
        pytest.skip(f"{page}.html was not built (not in the toc yet?)")
    static = _parse_file(HTML_DIR / f"{page}.html")
    dom = _parse(rendered[page])
    assert dom.imgs >= static.imgs, (
        f"{page}: {static.imgs} <img> in the HTML, {dom.imgs} in the DOM"
    )


def test_screenshots_were_taken(rendered):
    for page in rendered:
        shot = SHOTS_DIR / _shot_name(page)
        assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot for {page}: {shot}"


def _html_files() -> list[Path]:
    return sorted(
        p for p in HTML_DIR.rglob("*.html") if "_static" not in p.relative_to(HTML_DIR).parts
    )


def test_no_broken_internal_links():
    _require_build()
    broken: list[str] = []
    for page in _html_files():
        doc = _parse_file(page)
        for tag, attr, value in doc.links:
            value = value.strip()
            if not value or value.startswith(("data:", "javascript:", "mailto:", "tel:")):
                continue
            parts = urlsplit(value)
            if parts.scheme or value.startswith("//"):
                continue  # external: not checked (no network)
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(HTML_DIR)}: <{tag} {attr}={value!r}>"
            if not target.exists():
                broken.append(f"{where} -> missing file")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html" and fragment not in _parse_file(target).ids:
                broken.append(f"{where} -> no id {fragment!r} in {target.relative_to(HTML_DIR)}")
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:50])


def test_no_resource_is_loaded_from_the_network():
    _require_build()
    remote: list[str] = []
    for page in _html_files():
        for tag, attr, value in _parse_file(page).links:
            is_resource = tag in ("script", "img", "iframe", "source", "video", "audio") or (
                tag.startswith("link:")
                and any(r in tag for r in ("stylesheet", "preload", "icon", "modulepreload"))
            )
            if is_resource and (
                urlsplit(value).scheme in ("http", "https") or value.startswith("//")
            ):
                remote.append(f"{page.relative_to(HTML_DIR)}: <{tag} {attr}={value!r}>")
    assert not remote, "pages load resources from the network:\n" + "\n".join(
        sorted(set(remote))[:50]
    )
