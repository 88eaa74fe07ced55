"""Tables that fit the text column: long inline formulas in table cells may break across lines.

Loaded by ``iclgd_sphinx.setup``. MathJax 3 does not break an inline formula, so one long formula
in a table cell (``$X_{k+1} \\approx X_k(I - \\lvert a_kb_k\\rvert MX_k^\\top X_k)$``, 250 px) sets
the minimum width of its column, and a claims table with two of them no longer fits beside the
contents column. Here, in the HTML of every table (``doctree-resolved``), an inline formula longer
than :data:`MIN_CHARS` characters of TeX is cut at its relations, arrows, ``+``, ``-``, ``/``
and commas outside braces into several formulas with a break opportunity (a zero-width space)
between them; each piece keeps balanced braces and ``\\left ... \\right`` pairs, so each is
valid TeX and the pieces read as the formula did. ``tests/test_book_html.py`` measures every
table at 1920 to 800 px and in print.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

MIN_CHARS = 16  # shorter formulas are left whole (about 120 px)
MIN_PIECE = 8  # nor is a piece shorter than this cut off

#: Where a formula may be cut (before the match): relations, arrows, binary + and -, a slash,
#: and after a comma (the comma stays with the left piece).
_CUT = re.compile(
    r"\\(?:approx|leq?|geq?|neq|to|mapsto|propto|sim|xrightarrow|rightarrow|Rightarrow)(?![A-Za-z])"
    r"|=|<|>|\+|-"
)


def split_tex(tex: str) -> list[str]:
    """``tex`` cut at its outermost cut points (see the module docstring) into pieces of at most
    about :data:`MIN_CHARS` characters where it can be; ``"".join(pieces) == tex``."""
    cuts: list[int] = []
    depth = 0  # braces and \left...\right
    i = 0
    while i < len(tex):
        ch = tex[i]
        if ch == "\\":
            m = re.match(r"\\(left|right)(?![A-Za-z])", tex[i:])
            if m:
                depth += 1 if m.group(1) == "left" else -1
                i += len(m.group(0))
                continue
            if depth == 0 and i > 0:
                cut = _CUT.match(tex, i)
                if cut:
                    cuts.append(i)
                    i = cut.end()
                    continue
            i += 2  # an escaped character or the first letter of a command
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0 and i > 0:
            if ch == ",":
                cuts.append(i + 1)
            elif ch in "=<>+-/" and tex[i - 1] not in "^_{(":
                cuts.append(i)
        i += 1
    pieces, start, last = [], 0, 0
    for cut in cuts + [len(tex)]:
        if cut - start > MIN_CHARS and last > start:
            pieces.append(tex[start:last])
            start = last
        last = cut
    pieces.append(tex[start:])
    pieces = [p for p in pieces if p.strip()]
    merged: list[str] = []  # no piece shorter than MIN_PIECE: "+1)" stays with its formula
    for piece in pieces:
        if merged and (len(piece.strip()) < MIN_PIECE or len(merged[-1].strip()) < MIN_PIECE):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


def break_table_math(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.builder.format != "html":
        return
    for table in doctree.findall(nodes.table):
        for math in list(table.findall(nodes.math)):
            tex = math.astext()
            if len(tex) <= MIN_CHARS:
                continue
            pieces = split_tex(tex)
            if len(pieces) < 2:
                continue
            parent = math.parent
            index = parent.index(math)
            parent.remove(math)
            new: list[nodes.Node] = []
            for k, piece in enumerate(pieces):
                if k:
                    new.append(nodes.Text("\u200b"))  # a break opportunity between the pieces
                new.append(nodes.math(piece, piece))
            for offset, node in enumerate(new):
                parent.insert(index + offset, node)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", break_table_math)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
