"""Sphinx glue for the iclgd book (loaded via ``sphinx.local_extensions`` in ``_config.yml``).

1. Puts the repository root first on ``sys.path``, so the API page documents this checkout's
   ``iclgd`` whether or not the package is pip-installed.
2. Expands three fenced blocks before MyST parses a page (``source-read``):

   ````md
   ```{iclgd-modules}
   iclgd.config
   iclgd.tasks
   ```
   ````
       one section per module (heading + ``automodule``); adding a module is adding a line
       (the API pages, ``book/api/*.md``, one per package; the build warns about a public module
       of iclgd that none lists).

   ````md
   ```{iclgd-status}
   ```
   ````
       the tables of ``book/_generated/status.json`` (written by ``scripts/record_status.py``).

   ````md
   ```{iclgd-paper-runs}
   ```
   ````
       the paper-scale runs of ``book/_generated/paper_runs.json``
       (``scripts/record_paper_run.py``): one table of every chapter (scale, device, date,
       fresh / stale, asserts held), then each recorded cell's output in a dropdown.

   ````md
   ```{iclgd-macros}
   ```
   ````
       the MathJax macros of ``_config.yml`` as a table, plus ``\\newcommand`` lines for notebooks.

3. Skips NamedTuple field accessors in autodoc (their Google-style ``Attributes:`` section
   documents them; both would be a duplicate-description warning).
4. Makes the math in headings render wherever a heading is shown:

   * MathJax (the vendored copy of ``mathjax_path``) is loaded on *every* page, not only on pages
     with math of their own: the sidebar, the previous/next buttons and the in-page contents
     show headings of other pages, math included (``app.set_html_assets_policy("always")``,
     Sphinx's switch for assets that extensions add per page);
   * a ``{ref}`` to a section or a ``{doc}`` to a page without an explicit link text gets the
     heading itself as its text, math nodes included, instead of Sphinx's plain-text copy of it
     (which shows TeX source such as ``C \\to \\infty``);
   * where only plain text can go (the browser tab's title, the titles of search results) the
     TeX of a heading is written as text (``C → ∞``, ``‖w_⋆‖^2``); the search page also gets
     ``book/_static/iclgd-search.js``, which does the same for the excerpts under each result.

5. Shows each chapter's paper-scale run beside its ci outputs, and gives the ``{paper-glue}``
   role (``book/_ext/iclgd_paper_runs.py``).
6. Writes each script of a page once (sphinx-thebe's inline configuration comes twice, a script
   error on every page).
7. Shows the verdicts of the claims tables and of the errata page as badges, and links each
   erratum's claim to its row on the errata page and back (``book/_ext/iclgd_verdicts.py``).
8. Leaves the theorem boxes unnumbered: their titles carry the papers' numbers
   (``book/_ext/iclgd_proofs.py``).
9. Puts each chapter's Colab bootstrap cell below its title.
10. Gives the ``figure-caption`` directive: the markdown cell after a figure's code cell
    captions it, and the two become one numbered figure (``book/_ext/iclgd_figures.py``).
11. Lets a long inline formula in a table cell break across lines (``book/_ext/iclgd_tables.py``).

``tests/test_book_html.py`` checks the result in a browser, on every page.
"""

from __future__ import annotations

import json
import pkgutil
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import docname_join, logging
from sphinx.util.nodes import make_refnode

HERE = Path(__file__).resolve().parent  # book/_ext
REPO = HERE.parents[1]
SCRIPTS = REPO / "scripts"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import iclgd_figures  # noqa: E402  (book/_ext/iclgd_figures.py: numbered, captioned figures)
import iclgd_paper_runs  # noqa: E402  (book/_ext/iclgd_paper_runs.py: paper scale on the pages)
import iclgd_proofs  # noqa: E402  (book/_ext/iclgd_proofs.py: theorem boxes by the papers' numbers)
import iclgd_tables  # noqa: E402  (book/_ext/iclgd_tables.py: long formulas in tables may break)
import iclgd_verdicts  # noqa: E402  (book/_ext/iclgd_verdicts.py: verdict badges, errata links)
import record_paper_run  # noqa: E402  (scripts/record_paper_run.py)
import record_status  # noqa: E402  (scripts/record_status.py)

logger = logging.getLogger(__name__)

_BLOCK = re.compile(
    r"^(?P<fence>`{3,})\{(?P<name>iclgd-modules|iclgd-status|iclgd-paper-runs|iclgd-macros)\}[^\n]*\n"
    r"(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)

# Example arguments used to show macros that take arguments.
_MACRO_EXAMPLES = {"T": r"\x^\T", "norm": r"\norm{\x}", "ip": r"\ip{\x}{\w}"}


def _listed_modules(body: str) -> list[str]:
    """The modules of an ``iclgd-modules`` block, one per line (``#`` lines are comments)."""
    return [
        line.strip()
        for line in body.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def _modules_markdown(body: str) -> str:
    out = []
    for mod in _listed_modules(body):
        out.append(f"## `{mod}`\n")
        out.append("```{eval-rst}")
        out.append(f".. automodule:: {mod}")
        out.append("```\n")
    return "\n".join(out)


def _note_undocumented(app: Sphinx) -> None:
    """Warn (an error under -W) about a public module of iclgd that no API page lists: the
    pages are ``book/api/*.md``, one per package, each with an ``iclgd-modules`` block."""
    package = REPO / "iclgd"
    if not package.is_dir():
        return
    listed = set()
    for page in sorted((REPO / "book" / "api").glob("*.md")):
        for match in _BLOCK.finditer(page.read_text(encoding="utf8")):
            if match.group("name") == "iclgd-modules":
                listed.update(_listed_modules(match.group("body")))
    public = sorted(
        f"iclgd.{m.name}"
        for m in pkgutil.iter_modules([str(package)])
        if not m.name.startswith("_")
    )
    missing = [m for m in public if m not in listed]
    if missing:
        logger.warning(
            "[iclgd] no API page lists: %s (add it to a page of book/api/)", ", ".join(missing)
        )


def _status_markdown(app: Sphinx) -> str:
    app.env.note_dependency(str(record_status.STATUS_JSON))
    status = record_status.load_status()
    found = app.env.found_docs

    def link_for(repo_path: str) -> str | None:
        docname = repo_path.rsplit(".", 1)[0]
        if docname not in found:
            return None
        # link relative to book/status.md
        return "/" + repo_path  # MyST: a leading "/" is relative to the source directory

    build_versions = record_status.package_versions(
        tuple(dict.fromkeys(record_status.PACKAGES + record_status.BUILD_PACKAGES))
    )
    return record_status.render_markdown(status, build_versions=build_versions, link_for=link_for)


def _paper_runs_markdown(app: Sphinx) -> str:
    app.env.note_dependency(str(record_paper_run.RUNS_JSON))
    for path in record_paper_run.chapter_notebooks().values():  # fresh / stale: their code
        app.env.note_dependency(str(path))
    found = app.env.found_docs
    link_for = lambda p: "/" + p if p.rsplit(".", 1)[0] in found else None  # noqa: E731
    return record_paper_run.render_markdown(record_paper_run.load_runs(), link_for=link_for)


def _macros_markdown(app: Sphinx) -> str:
    macros: dict[str, Any] = ((app.config.mathjax3_config or {}).get("tex") or {}).get(
        "macros"
    ) or {}
    if not macros:
        return "No MathJax macros are configured."
    rows = ["| Macro | Renders as | Definition |", "| --- | --- | --- |"]
    newcommands = []
    for name, definition in macros.items():
        if isinstance(definition, (list, tuple)):
            body, nargs = definition[0], int(definition[1])
        else:
            body, nargs = definition, 0
        example = _MACRO_EXAMPLES.get(name) or (
            "\\" + name + "".join("{" + "abc"[i] + "}" for i in range(nargs))
        )
        shown = (
            "`\\" + name + "`"
            if nargs == 0
            else "`\\" + name + "".join(f"{{#{i + 1}}}" for i in range(nargs)) + "`"
        )
        rows.append(f"| {shown} | ${example}$ | `{body}` |")
        arg = f"[{nargs}]" if nargs else ""
        newcommands.append(f"\\newcommand{{\\{name}}}{arg}{{{body}}}")
    preamble = "\n".join(newcommands)
    return "\n".join(rows) + (
        "\n\nA notebook's markdown is also read outside the book (Jupyter, Colab), where these "
        "macros are not configured. A notebook that uses them defines them in its first "
        "markdown cell, inside a math block (invisible once rendered):\n\n"
        "```latex\n$$\n" + preamble + "\n$$\n```\n"
    )


def _expand(app: Sphinx, docname: str, source: list[str]) -> None:
    text = source[0]
    if "{iclgd-" not in text:
        return

    def replace(match: re.Match) -> str:
        name = match.group("name")
        if name == "iclgd-modules":
            return _modules_markdown(match.group("body"))
        if name == "iclgd-status":
            return _status_markdown(app)
        if name == "iclgd-paper-runs":
            return _paper_runs_markdown(app)
        return _macros_markdown(app)

    source[0] = _BLOCK.sub(replace, text)


def _skip_namedtuple_fields(
    app: Sphinx, what: str, name: str, obj: Any, skip: bool, options: Any
) -> bool | None:
    """Skip NamedTuple field accessors ("Alias for field number N"): the class docstring's
    Google-style ``Attributes:`` section already documents them (napoleon), and documenting both
    is a "duplicate object description" warning."""
    doc = getattr(obj, "__doc__", None)
    if what == "class" and isinstance(doc, str) and doc.startswith("Alias for field number"):
        return True
    return None


# ------------------------------------------------------------------------------------------------
# The Colab bootstrap below the title


class BootstrapBelowTitle(SphinxTransform):
    """A notebook's first cell is its Colab bootstrap (``tests/test_notebooks_meta.py``), so
    myst-nb puts its folded code above the chapter's title; on the page it goes below the title
    (and below the lines of :mod:`iclgd_paper_runs`, which run after this)."""

    default_priority = 790  # after myst-nb has built the cells, before PaperRunTabs (800)

    def apply(self, **kwargs: Any) -> None:
        if not self.env.doc2path(self.env.docname).endswith(".ipynb"):
            return
        section = next(iter(self.document.findall(nodes.section)), None)
        if section is None or section.parent is not self.document:
            return
        for child in list(self.document.children):
            if child is section:
                return
            if (
                isinstance(child, nodes.container)
                and child.get("nb_element") == "cell_code"
                and "%pip install" in child.astext()
            ):
                self.document.remove(child)
                section.insert(1, child)
                return


# ------------------------------------------------------------------------------------------------
# Math in headings


class HeadingLinkTexts(SphinxPostTransform):
    """A ``{ref}``/``{doc}`` without explicit text whose target heading has math links with the
    heading's own nodes (math rendered by MathJax), not Sphinx's plain-text copy of it.

    Runs before Sphinx resolves references (priority 10) and resolves these ones itself, the way
    the std domain does (``build_reference_node`` / ``make_refnode``), with a richer link text.
    """

    default_priority = 5

    def run(self, **kwargs: Any) -> None:
        std = self.env.get_domain("std")
        doctrees: dict[str, nodes.document] = {}
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("refdomain") != "std" or node.get("refexplicit"):
                continue
            reftype, target = node.get("reftype"), node.get("reftarget", "")
            fromdoc = node.get("refdoc", self.env.docname)
            if reftype == "ref" and target in std.labels:
                docname, labelid, sectname = std.labels[target]
                if docname not in doctrees:
                    doctrees[docname] = self.env.get_doctree(docname)
                title = _section_title(doctrees[docname], labelid)
                if title is None or not _has_math(title):
                    continue
                ref = std.build_reference_node(
                    fromdoc, self.app.builder, docname, labelid, sectname, "ref"
                )
                ref[0][:] = [child.deepcopy() for child in title.children]
            elif reftype == "doc":
                docname = docname_join(fromdoc, target)
                title = self.env.titles.get(docname)
                if title is None or not _has_math(title):
                    continue
                inner = nodes.inline("", "", *(c.deepcopy() for c in title.children))
                inner["classes"].append("doc")
                ref = make_refnode(self.app.builder, fromdoc, docname, "", inner)
            else:
                continue
            node.replace_self(ref)


def _has_math(node: nodes.Node) -> bool:
    return any(True for _ in node.findall(nodes.math))


def _section_title(doctree: nodes.document, labelid: str) -> nodes.title | None:
    for section in doctree.findall(nodes.section):
        if labelid in section["ids"] and section.children:
            first = section[0]
            return first if isinstance(first, nodes.title) else None
    return None


_MATH_SPAN = re.compile(r'<span class="math[^"]*">\\\((.*?)\\\)</span>', re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_SYMBOLS = {
    "lVert": "‖", "rVert": "‖", "star": "⋆", "top": "⊤", "infty": "∞", "cdot": "·",
    "times": "×", "sum": "∑", "ell": "ℓ", "dots": "…", "ldots": "…", "langle": "⟨",
    "rangle": "⟩",
}  # fmt: skip
_RELATIONS = {
    "to": "→", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "neq": "≠", "approx": "≈",
    "sim": "∼", "in": "∈",
}  # fmt: skip


def tex_to_text(tex: str, macros: dict[str, Any] | None = None) -> str:
    """Plain-text rendering of a heading's inline TeX, for places where math cannot render.

    Expands the book's argument-free macros, writes Greek letters and common symbols in Unicode
    and drops every other command name and the braces: ``C \\to \\infty`` → ``C → ∞``,
    ``\\lVert w_\\star\\rVert^2`` → ``‖w_⋆‖^2``, ``\\wstar`` → ``w_⋆``.
    """
    simple = {k: v for k, v in (macros or {}).items() if isinstance(v, str)}
    for _ in range(3):
        tex = re.sub(r"\\([A-Za-z]+)", lambda m: simple.get(m[1], m[0]), tex)

    def command(m: re.Match) -> str:
        name = m[1]
        if name in _RELATIONS:
            return f" {_RELATIONS[name]} "
        if name in _SYMBOLS:
            return _SYMBOLS[name]
        case = "CAPITAL" if name[0].isupper() else "SMALL"
        try:
            return unicodedata.lookup(f"GREEK {case} LETTER {name.upper()}")
        except KeyError:
            return ""  # \\mathbf, \\left, \\operatorname, ...: the name goes, the argument stays

    def spaced(m: re.Match) -> str:
        text = command(m)  # a space after "‖", "⟨" or a dropped command name would show
        return text if text in ("", "‖", "⟨") else text + m[2]

    tex = re.sub(r"\\([A-Za-z]+)( *)", spaced, tex)
    tex = re.sub(r"\\[,;:! ]", " ", tex)
    tex = re.sub(r"[{}]|\\", "", tex)
    return re.sub(r"  +", " ", tex).strip()


def html_to_text(html: str, macros: dict[str, Any] | None = None) -> str:
    """``html`` (a rendered heading) without tags, its inline math written by ``tex_to_text``."""
    html = _MATH_SPAN.sub(lambda m: tex_to_text(m[1], macros), html)
    return _TAG.sub("", html)


def _macros(app: Sphinx) -> dict[str, Any]:
    return ((app.config.mathjax3_config or {}).get("tex") or {}).get("macros") or {}


def _plain_page_title(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """The browser tab shows the page's ``<title>`` as text, and the theme prints ``pagetitle`` as
    text (the print-only heading of sphinx-book-theme): no TeX in either."""
    if "math" in (context.get("title") or ""):
        context["title"] = html_to_text(context["title"], _macros(app))
        context["pagetitle"] = context["title"]


def _search_page_script(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Search results quote the pages' text: book/_static/iclgd-search.js writes their math as
    text (Sphinx's excerpt would show the TeX source)."""
    if pagename == "search":
        app.add_js_file("iclgd-search.js", loading_method="defer")


def _unique_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Each script once: sphinx-thebe's inline configuration reaches the page twice (once with
    filename None, once with ""), and the second copy is a script error on every page
    (``const THEBE_JS_URL`` declared again)."""
    seen: set[str] = set()
    unique = []
    for script in context.get("script_files") or []:
        filename = getattr(script, "filename", script) or ""  # None and "" both mean inline
        key = json.dumps([str(filename), getattr(script, "attributes", {})], sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def _plain_search_titles(app: Sphinx, exception: Exception | None) -> None:
    """Search results show the titles of the search index as text: no TeX there."""
    path = Path(app.outdir) / "searchindex.js"
    if exception is not None or app.builder.format != "html" or not path.is_file():
        return
    text = path.read_text(encoding="utf8")
    prefix, suffix = "Search.setIndex(", ")"
    if not (text.startswith(prefix) and text.endswith(suffix)):
        logger.warning("[iclgd] unexpected format of %s: search titles left as they are", path)
        return
    index = json.loads(text[len(prefix) : -len(suffix)])
    macros = _macros(app)
    index["titles"] = [html_to_text(t, macros) for t in index.get("titles", [])]
    alltitles: dict[str, list] = {}
    for title, places in index.get("alltitles", {}).items():
        alltitles.setdefault(tex_to_text(title, macros) if "\\" in title else title, []).extend(
            places
        )
    index["alltitles"] = alltitles
    path.write_text(prefix + json.dumps(index, sort_keys=True) + suffix, encoding="utf8")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", _expand)
    app.connect("builder-inited", _note_undocumented)
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
    # MathJax on every page: headings with math appear on all of them (sidebar, prev/next).
    app.set_html_assets_policy("always")
    app.add_post_transform(HeadingLinkTexts)
    app.add_transform(BootstrapBelowTitle)
    # priority 600: after sphinx-book-theme has set pagetitle
    app.connect("html-page-context", _plain_page_title, priority=600)
    app.connect("html-page-context", _search_page_script)
    app.connect("html-page-context", _unique_scripts, priority=900)  # after the scripts' adders
    app.connect("build-finished", _plain_search_titles)
    iclgd_paper_runs.setup(app)  # paper-scale tabs, the page line, the {paper-glue} role
    iclgd_verdicts.setup(app)  # verdict badges, claim <-> erratum links
    iclgd_proofs.setup(app)  # theorem boxes unnumbered, named by the papers' numbers
    iclgd_figures.setup(app)  # figure-caption: a code cell's figure, numbered and captioned
    iclgd_tables.setup(app)  # long inline formulas in table cells may break across lines
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
