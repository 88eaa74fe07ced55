"""The paper-scale run beside the ci one, on every chapter page (loaded by ``iclgd_sphinx``).

The committed notebooks hold their ``ci``-scale outputs; ``book/_generated/paper_runs.json``
(``scripts/record_paper_run.py``) holds each chapter's run at ``ICLGD_SCALE=paper``. This module
puts the second beside the first, with nothing to write in the chapters:

1. **Each output that depends on the scale** — a code cell whose recorded paper-scale output has
   a figure, or printed text other than the ci output's — becomes a tab set
   (sphinx-design's nodes): *Paper scale*, selected by default, with the recorded text and
   figures and the line "asserts of this cell held / failed: …" where the cell asserts (the
   record's device and date are said once, in the line of item 2); *ci (this page)* with the
   cell's own output. Cells whose output is the same at both scales (exact computations) are left
   as they are.
2. **A line under each chapter's title** says which paper-scale run the page shows: device, date,
   commit, whether the record is *fresh* (same code-cell sha256 as the committed notebook) or
   *stale* (the chapter's code changed since), how many of its asserting cells held, and this
   page's own ci run (date, cores, wall time, JAX), in one paragraph; with a link to the
   chapter's entry on the status page (``record_paper_run.status_label``). A chapter without a
   record says that.
3. **The role** ``{paper-glue}`key``` (or ``{paper-glue}`other.ipynb::key```, a path relative to the
   page, as for myst-nb's ``{glue:text}``) writes a value that the paper-scale run glued, so a
   paper-scale number in prose or in a claims table is never typed. It renders as
   ``<abbr title="paper scale: device, date">value</abbr>``, with " (stale record)" after it
   where the record is stale. An unknown chapter or key is a build warning (an error under
   ``-W``).

4. **The directive** ``paper-figure``, the chapter's headline figure near its top (the markdown
   cell right after "In short"):

   ````md
   ```{paper-figure} fig-p1-fig2
   What to see first, then the verdict, in at most 40 words.
   ```
   ````

   Its argument is the label of one of the chapter's figures (its ``figure-caption``). It shows
   that figure's paper-scale run from the record (the cell's recorded PNG), unnumbered: the number
   belongs to the figure itself, further down, where the experiment runs. The figure is drawn
   once: there, its paper-scale tab links back to the top instead of drawing it again, and its ci
   tab holds the ci run's figure. The caption starts "Fig. N at paper scale" (a link
   to Fig. N), then the text of the directive ("Stale record." where the chapter's code changed
   since the run; the device and date are in the line of item 2), and a link to the section where
   the figure's experiment runs. A label that is no figure of the chapter, or a chapter whose
   record has no figure for that cell (no record, or a run that drew none), is a build warning
   (an error under ``-W``).

``scripts/make_reader_notebooks.py`` writes the role's value into the reader notebooks (Colab),
and the directive as a paragraph with the paper-scale PNG attached to the cell.
``tests/test_book_html.py`` checks in a browser that every recorded chapter shows its paper-scale
line and opens its tab sets on the paper-scale tab; ``tests/test_reader_path.py`` that the first
figure of each chapter with a paper-scale figure is within three screens of its top, and builds
small pages with the directive.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import record_paper_run  # scripts/ (put on sys.path by iclgd_sphinx)
import record_status  # scripts/ (put on sys.path by iclgd_sphinx)
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

PAPER_LABEL = "Paper scale"
CI_LABEL = "ci (this page)"


_CACHE: dict[str, Any] = {}


def _runs(env: Any) -> dict[str, Any]:
    """``paper_runs.json`` (read again when the file changes)."""
    stamp = record_paper_run.RUNS_JSON.stat().st_mtime_ns
    if _CACHE.get("stamp") != stamp:
        _CACHE.clear()
        _CACHE.update(stamp=stamp, runs=record_paper_run.migrate(record_paper_run.load_runs()))
    return _CACHE["runs"]


def _freshness(env: Any, key: str) -> str:
    """``fresh`` / ``stale`` / ``missing`` of chapter ``key`` (``book/....ipynb``)."""
    path = record_paper_run.REPO / key
    if not path.is_file():
        return "missing"
    env.note_dependency(str(path))  # its code decides fresh or stale
    return record_paper_run.freshness(_runs(env), {key: path})[key]


def _when(run: dict[str, Any]) -> str:
    ex = run.get("execution") or {}
    when = str(ex.get("executed_at") or run.get("recorded_at") or "?")
    return when.replace("T", " ").removesuffix("Z")[:10]


def describe(run: dict[str, Any]) -> str:
    """``"2 CPU cores (...); JAX 0.10.2; 2026-11-26, commit b7e57a8"``: where and when."""
    device = str(run.get("device") or "unknown device")
    jax = run.get("jax_version")
    if jax and jax not in device:
        device += f"; JAX {jax}"
    commit = f", commit {run['commit']}" if run.get("commit") else ""
    return f"{device}; {_when(run)}{commit}"


def ci_text(cell: dict[str, Any]) -> str:
    """A committed code cell's printed text as ``record_paper_run.cell_outputs`` records it."""
    cells, _ = record_paper_run.cell_outputs({"cells": [cell]}, "ci")
    return cells[0]["text"] if cells else ""


def _status_ref(docname: str, text: str, label: str | None = None) -> nodes.Node:
    """A link to the status page, or to its target ``label`` (a chapter's entry there)."""
    ref = addnodes.pending_xref(
        "",
        refdomain="std",
        reftype="ref" if label else "doc",
        reftarget=label or "/book/status",
        refexplicit=True,
        refdoc=docname,
        refwarn=True,
    )
    ref += nodes.inline(text, text)
    return ref


def _assert_line(entry: dict[str, Any] | None) -> nodes.Node | None:
    if entry is None:
        return None
    if entry["held"] is True:
        n = len(entry.get("asserts") or [])
        text = f"The {n} assert{'s' if n != 1 else ''} of this cell held at paper scale."
        return nodes.paragraph(text, text, classes=["iclgd-assert-held"])
    if entry["held"] is None:
        text = "This cell did not run at paper scale (the run's deadline had passed)."
        return nodes.paragraph(text, text, classes=["iclgd-assert-failed"])
    para = nodes.paragraph(classes=["iclgd-assert-failed"])
    para += nodes.strong("", "An assert of this cell failed at paper scale: ")
    error = str(entry.get("error") or "error")
    para += nodes.literal(error, error)
    return para


class PaperRunTabs(SphinxTransform):
    """Items 1 and 2 of the module docstring, on every notebook page with a record."""

    default_priority = 800  # after myst-nb has built the cells

    def apply(self, **kwargs: Any) -> None:
        docname = self.env.docname
        path = Path(self.env.doc2path(docname))
        if path.suffix != ".ipynb":
            return
        self.env.note_dependency(str(record_paper_run.RUNS_JSON))
        key = f"{docname}.ipynb"
        run = (_runs(self.env).get("runs") or {}).get(key)
        state = _freshness(self.env, key)
        self._page_line(docname, run, state)
        if run is None:
            return
        nb = json.loads(path.read_text(encoding="utf8"))
        code_numbers = {}  # notebook cell index -> code-cell number (from 1)
        for index, cell in enumerate(nb.get("cells", [])):
            if cell.get("cell_type") == "code":
                code_numbers[index] = len(code_numbers) + 1
        recorded = {c["cell"]: c for c in run.get("cells") or []}
        asserts = {a["cell"]: a for a in run.get("asserts") or []}
        for container in list(self.document.findall(nodes.container)):
            if container.get("nb_element") != "cell_code":
                continue
            index = container.get("cell_index")
            number = code_numbers.get(index)
            entry = asserts.get(number)
            failed = entry is not None and entry["held"] is not True
            paper = recorded.get(number) or ({"cell": number, "text": ""} if failed else None)
            if paper is None:
                continue  # printed nothing at paper scale, and did not fail
            output = next(
                (c for c in container.children if c.get("nb_element") == "cell_code_output"),
                None,
            )
            if output is None:
                continue
            same_text = paper.get("text", "") == ci_text(nb["cells"][index])
            if same_text and not paper.get("figures") and not failed:
                continue  # the same at both scales: nothing to put beside it
            tabs = self._tabs(paper, entry, output, container.get("iclgd_previewed"))
            container.replace(output, tabs)

    def _tabs(
        self,
        paper: dict[str, Any],
        entry: dict[str, Any] | None,
        output: nodes.Element,
        previewed: str | None = None,
    ) -> nodes.Element:
        from sphinx_design.shared import create_component

        content = create_component("tab-content", classes=["sd-tab-content"])
        # where and when the run was made: once per page, in the line under the title
        line = _assert_line(entry)
        if line is not None:
            content += line
        shown = nodes.container(classes=["output", "iclgd-paper-output"])
        if paper.get("text"):
            block = nodes.literal_block(paper["text"], paper["text"])
            block["language"] = "none"
            shown += block
        if previewed and paper.get("figures"):
            # the chapter's headline figure: drawn once, at the top (item 4), not again here
            para = nodes.paragraph(classes=["iclgd-paper-drawn-above"])
            para += nodes.Text("The paper-scale figure is drawn at the ")
            ref = nodes.reference("", "", internal=True, refid=previewed)
            ref += nodes.Text("top of this page")
            para += [ref, nodes.Text("; the ci run's is in the next tab.")]
            content += para
        else:
            for fig in paper.get("figures") or []:
                uri = "/book/" + fig  # a leading "/": relative to the source directory
                alt = f"paper-scale figure ({fig.rsplit('/', 1)[-1]})"
                shown += nodes.image(uri=uri, alt=alt)
        if shown.children:
            content += shown
        tab_set = create_component("tab-set", classes=["sd-tab-set", "iclgd-paper-tabs"])
        for label, body, selected in (
            (PAPER_LABEL, content, True),
            (CI_LABEL, None, False),
        ):
            item = create_component("tab-item", classes=["sd-tab-item"], selected=selected)
            item += nodes.rubric(label, label, classes=["sd-tab-label"])
            if body is None:
                body = create_component("tab-content", classes=["sd-tab-content"])
                body += output
            item += body
            tab_set += item
        return tab_set

    def _page_line(self, docname: str, run: dict[str, Any] | None, state: str) -> None:
        """One line under the title: the paper-scale run (where, when, fresh or stale, asserts),
        this page's ci run, and a link to the chapter's entry on the status page."""
        section = next(iter(self.document.findall(nodes.section)), None)
        if section is None or not section.children:
            return
        self.env.note_dependency(str(record_status.STATUS_JSON))
        execution = next(
            (
                nb["execution"]
                for nb in record_status.load_status()["notebooks"]
                if nb["path"] == f"{docname}.ipynb" and nb.get("execution")
            ),
            None,
        )
        ci = "this page's ci run"
        if execution is not None:  # the run whose outputs the page shows
            ci += (
                f" ({execution['executed_at'][:10]}, {execution['cpu_count']} CPU cores, "
                f"{execution['wall_time_s']:.0f} s, JAX {execution['versions'].get('jax')})"
            )
        para = nodes.paragraph(classes=["iclgd-paper-run"])
        para += nodes.strong("", "Paper-scale run: ")
        if run is None:
            para += nodes.Text(f"none recorded yet; the outputs below are {ci} (")
            para += _status_ref(docname, "status page")
        else:
            held = record_paper_run.asserts_held(run)
            para += nodes.Text(
                f"{describe(run)}; {state} record; asserting cells held: {held}. Where an output "
                f"depends on the scale, its first tab is this run, its second {ci} ("
            )
            para += _status_ref(docname, "status", record_paper_run.status_label(docname))
        para += nodes.Text(").")
        section.insert(1, para)


def glue_children(value: str) -> list[nodes.Node]:
    """The nodes of a glued value: inline TeX (``"$B_0$ 0.11, ..."``) as math, the rest as text."""
    pieces = re.split(r"\$([^$]+)\$", value)
    return [
        nodes.math(piece, piece) if i % 2 else nodes.Text(piece)
        for i, piece in enumerate(pieces)
        if piece
    ]


def paper_glue_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Any,
    options: dict | None = None,
    content: list | None = None,
) -> tuple[list[nodes.Node], list[nodes.Node]]:
    """``{paper-glue}`[path.ipynb::]key```: the value ``key`` glued by the chapter's paper-scale
    run (the page's own notebook when no path is given)."""
    env = inliner.document.settings.env
    docname = env.docname
    env.note_dependency(str(record_paper_run.RUNS_JSON))
    if "::" in text:
        rel, key = text.split("::", 1)
        base = Path(docname).parent
        chapter = (base / rel).as_posix()
        parts: list[str] = []
        for part in chapter.split("/"):
            if part == "..":
                parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        chapter = "/".join(parts)
    else:
        chapter, key = f"{docname}.ipynb", text
    run = (_runs(env).get("runs") or {}).get(chapter)
    value = None if run is None else (run.get("glue") or {}).get(key)
    if value is None:
        msg = inliner.reporter.error(
            f"[iclgd] {{paper-glue}}: no paper-scale record glues {key!r} for {chapter}",
            line=lineno,
        )
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    state = _freshness(env, chapter)
    title = f"paper scale: {describe(run)}" + ("; stale record" if state == "stale" else "")
    out: list[nodes.Node] = [
        nodes.abbreviation(
            value, "", *glue_children(value), explanation=title, classes=["iclgd-paper-glue"]
        )
    ]
    if state == "stale":
        out.append(nodes.emphasis(" (stale record)", " (stale record)"))
    return out, []


# ------------------------------------------------------------------------------------------------
# The headline figure


class paper_figure(nodes.General, nodes.Element):  # noqa: N801  (docutils node naming)
    """Placeholder for a ``paper-figure`` directive, replaced by :class:`PaperFigures`."""


class PaperFigure(SphinxDirective):
    """``paper-figure``: the paper-scale run of the chapter's figure ``label``, near the top."""

    required_arguments = 1  # the label of the figure (its figure-caption)
    has_content = True

    def run(self) -> list[nodes.Node]:
        node = paper_figure(label=self.arguments[0])
        self.set_source_info(node)
        body = nodes.paragraph()
        self.state.nested_parse(self.content, self.content_offset, body)
        for child in body.children:  # paragraphs inside: keep their inline children
            node += child.children if isinstance(child, nodes.paragraph) else [child]
        return [node]


def _code_numbers(path: Path) -> dict[int, int]:
    """Notebook cell index -> code-cell number (from 1, as the records number cells)."""
    nb = json.loads(path.read_text(encoding="utf8"))
    numbers: dict[int, int] = {}
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code":
            numbers[index] = len(numbers) + 1
    return numbers


def _section_link(figure: nodes.Element) -> nodes.Node | None:
    """A link to the section that holds ``figure``, its title as the text (math included)."""
    section = figure.parent
    while section is not None and not isinstance(section, nodes.section):
        section = section.parent
    if section is None or not section["ids"] or not isinstance(section[0], nodes.title):
        return None
    if isinstance(section.parent, nodes.document):
        return None  # the chapter's own title: the figure's link says enough
    ref = nodes.reference("", "", internal=True, refid=section["ids"][0])
    ref += [child.deepcopy() for child in section[0].children]
    return ref


class PaperFigures(SphinxTransform):
    """Item 4 of the module docstring: each ``paper-figure`` becomes the recorded figure."""

    default_priority = 797  # after iclgd_figures' figures (795), before the tabs (800)

    def apply(self, **kwargs: Any) -> None:
        placeholders = list(self.document.findall(paper_figure))
        if not placeholders:
            return
        docname = self.env.docname
        key = f"{docname}.ipynb"
        self.env.note_dependency(str(record_paper_run.RUNS_JSON))
        path = Path(self.env.doc2path(docname))
        run = (_runs(self.env).get("runs") or {}).get(key)
        numbers = _code_numbers(path) if path.suffix == ".ipynb" else {}
        for node in placeholders:
            label = node["label"]
            target = self.document.ids.get(nodes.make_id(label))
            cell = None
            if isinstance(target, nodes.figure):
                cell = next(
                    (c for c in target.children if c.get("nb_element") == "cell_code"), None
                )
            if cell is None:
                logger.warning(
                    "[iclgd] paper-figure %r: no figure of this chapter has that label "
                    "(a figure-caption below a figure's code cell)",
                    label,
                    location=node,
                )
                node.parent.remove(node)
                continue
            number = numbers.get(cell.get("cell_index"))
            recorded = {c["cell"]: c for c in (run or {}).get("cells") or []}
            figures = (recorded.get(number) or {}).get("figures") or []
            if not figures:
                why = "no paper-scale record" if run is None else "no figure in its record"
                logger.warning(
                    "[iclgd] paper-figure %r: code cell %s of %s has %s "
                    "(record the chapter's paper-scale run: scripts/record_paper_run.py)",
                    label,
                    number,
                    key,
                    why,
                    location=node,
                )
                node.parent.remove(node)
                continue
            node.replace_self(self._figure(docname, key, run, label, target, figures, node))
            # drawn once on the page: the figure's own paper-scale tab links here (PaperRunTabs)
            cell["iclgd_previewed"] = nodes.make_id(f"paper-{label}")

    def _figure(
        self,
        docname: str,
        key: str,
        run: dict[str, Any],
        label: str,
        target: nodes.Element,
        figures: list[str],
        node: nodes.Element,
    ) -> nodes.Element:
        # a container, not a nodes.figure: a captioned figure would be numbered (numfig), and
        # the number is the figure's own, further down
        box = nodes.container(classes=["iclgd-paper-figure"])
        box["ids"].append(nodes.make_id(f"paper-{label}"))
        for fig in figures:
            alt = f"the paper-scale run of the figure {label}"
            box += nodes.image(uri="/book/" + fig, alt=alt)  # "/": from the source directory
        caption = nodes.paragraph(classes=["caption", "iclgd-paper-caption"])
        head = nodes.strong()
        ref = addnodes.pending_xref(
            "",
            refdomain="std",
            reftype="numref",
            reftarget=label,
            refexplicit=True,
            refdoc=docname,
            refwarn=True,
        )
        ref += nodes.inline("Fig. %s", "Fig. %s")
        head += ref
        head += nodes.Text(" at paper scale.")
        caption += [head, nodes.Text(" ")]
        caption += [child.deepcopy() for child in node.children]
        # the run's device and date: in the line under the page's title, once per page
        if _freshness(self.env, key) == "stale":
            caption += nodes.Text(" ")
            caption += nodes.strong("Stale record.", "Stale record.")
        section = _section_link(target)
        if section is not None:
            caption += nodes.Text(" (In \N{SECTION SIGN} ")
            caption += section
            caption += nodes.Text(", beside the ci run.)")
        box += caption
        return box


def setup(app: Sphinx) -> None:
    app.add_node(paper_figure)
    app.add_directive("paper-figure", PaperFigure)
    app.add_transform(PaperFigures)
    app.add_transform(PaperRunTabs)
    app.add_role("paper-glue", paper_glue_role)
