"""Verdicts at a glance: badges in the claims tables, and links between a claim and its erratum.

Loaded by ``iclgd_sphinx.setup``. The claims tables (``book/part*/index.md``, one source of truth,
``scripts/make_errata.py``) give each claim a status that starts with one of four verdicts —
*reproduced*, *corrected*, *not reproduced*, *inconclusive* — with an optional note in
parentheses. Once references are resolved (``doctree-resolved``), for HTML builders:

* every table with a ``status`` or ``verdict ...`` column shows the verdict at the start of each
  of its cells as a coloured badge (``span.iclgd-badge.iclgd-badge-<verdict>``; style in
  ``book/_static/iclgd.css``), the note after it as it is written;
* a root-cause tag at the end of a status (``[root: key]``, ``[from: key]``: the errata page
  groups a root cause's rows by it) is dropped from the rendered text;
* on a part's page, each claim that the errata page lists (an erratum verdict — corrected, not
  reproduced —, a typo or slip, or a consequence of a root cause) gets the id
  ``erratum-<part>-<h>`` (``h`` a short hash of the claim's text, so the errata page may order
  its rows by root cause), and its badge links to the row of the same id on the errata page
  (``book/errata``, generated from these tables); there, each row's badge links back to its
  claim.

Other builders (LaTeX) see the tables as written.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

VERDICT = re.compile(r"^(not reproduced|reproduced|corrected|inconclusive)\b")
TAG = re.compile(r"\s*\[(root|from): p\d+-[a-z0-9-]+\]\s*$")  # scripts/make_errata.py
MINOR = re.compile(r"^\s*\((typo|slip)\b")
ERRATA = ("corrected", "not reproduced")
ERRATA_DOC = "book/errata"
PART_DOC = re.compile(r"^book/(part\d+)/index$")


def _column(table: nodes.table) -> int | None:
    """Index of the table's status/verdict column (from its header row), or ``None``."""
    head = next(iter(table.findall(nodes.thead)), None)
    if head is None:
        return None
    row = next(iter(head.findall(nodes.row)), None)
    if row is None:
        return None
    for i, entry in enumerate(row.children):
        text = entry.astext().strip().lower()
        if text == "status" or text.startswith("verdict"):
            return i
    return None


def _body_rows(table: nodes.table) -> list[nodes.row]:
    return [row for body in table.findall(nodes.tbody) for row in body.children]


def _badge(entry: nodes.entry) -> tuple[str, nodes.inline] | None:
    """Turn the verdict that starts ``entry``'s text into a badge; return it and its kind: the
    verdict, or ``"listed"`` for a claim the errata page lists although its verdict is not an
    erratum (a typo or slip, a consequence of a root cause). A root-cause tag is dropped."""
    para = next(iter(entry.findall(nodes.paragraph)), None)
    if para is None or not para.children or not isinstance(para[0], nodes.Text):
        return None
    text = str(para[0])
    m = VERDICT.match(text)
    if not m:
        return None
    verdict = m.group(1)
    last = para[len(para) - 1]
    tagged = isinstance(last, nodes.Text) and TAG.search(str(last))
    if tagged:
        kept = TAG.sub("", str(last))
        if last is para[0]:
            text = kept
        elif kept:
            para.replace(last, nodes.Text(kept))
        else:
            para.remove(last)
    listed = bool(MINOR.match(text[m.end() :])) or (tagged and tagged.group(1) == "from")
    badge = nodes.inline(
        verdict, verdict, classes=["iclgd-badge", f"iclgd-badge-{verdict.replace(' ', '-')}"]
    )
    rest = text[m.end() :]
    para.remove(para[0])
    if rest:
        para.insert(0, nodes.Text(rest))
    para.insert(0, badge)
    return ("listed" if listed and verdict not in ERRATA else verdict), badge


def _anchor(part: str, row: nodes.row) -> str:
    """``erratum-<part>-<hash>``: the same on the part's page and on the errata page (the
    claim's text, its ``↳`` mark of a consequence aside)."""
    claim = " ".join(row.children[0].astext().split()).removeprefix("↳").strip()
    return f"erratum-{part}-{hashlib.sha1(claim.encode()).hexdigest()[:8]}"


def _link(badge: nodes.inline, refuri: str) -> None:
    """Wrap ``badge`` in a link to ``refuri``."""
    parent = badge.parent
    ref = nodes.reference("", "", refuri=refuri, internal=True, classes=["iclgd-badge-link"])
    parent.replace(badge, ref)
    ref += badge


def _part_of(table: nodes.table) -> str | None:
    """On the errata page: the part whose claims a table lists (its section links to it)."""
    node = table.parent  # the nearest section that links a part's page (the paper's section;
    while node is not None:  # its errors and typos are subsections of it)
        if isinstance(node, nodes.section):
            for ref in node.findall(nodes.reference):
                m = re.search(r"(part\d+)/index\.html", ref.get("refuri", ""))
                if m:
                    return m.group(1)
        node = node.parent
    return None


def add_badges(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.builder.format != "html":
        return
    part_page = PART_DOC.match(docname)
    errata_page = docname == ERRATA_DOC
    for table in list(doctree.findall(nodes.table)):
        col = _column(table)
        if col is None:
            continue
        table["classes"].append("iclgd-claims")  # book/_static/iclgd.css: its verdict column
        part = part_page.group(1) if part_page else (_part_of(table) if errata_page else None)
        for row in _body_rows(table):
            if col >= len(row.children):
                continue
            found = _badge(row.children[col])
            if found is None or part is None or found[0] not in (*ERRATA, "listed"):
                continue
            anchor = _anchor(part, row)
            row["ids"].append(anchor)
            target = ERRATA_DOC if part_page else f"book/{part}/index"
            uri = app.builder.get_relative_uri(docname, target) + "#" + anchor
            _link(found[1], uri)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", add_badges)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
