#!/usr/bin/env python
"""Reader load of the book's sources: the words a reader sees without opening anything.

*Visible words* are the words of a page's markdown outside collapsed blocks (``{dropdown}``,
``{toggle}``, an admonition with ``:class: dropdown``, HTML ``<details>``), code fences and math
blocks; a math span or a role (``{glue:text}`...```) counts as one word. Notebooks count their
markdown cells (not those tagged ``hide-cell``/``remove-cell``). ``tests/test_reader_shape.py``
holds the book to its budgets with these counts (CONTRIBUTING.md, "The shape of a part and of a
chapter").

    python scripts/reader_load.py      # one line per page, then the totals
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
FENCE = re.compile(r"^(`{3,}|:{3,})\s*\{?([\w:-]*)\}?(.*)$")
SKIPPED = ("math", "", "include", "tableofcontents", "glue:figure", "figure", "bibliography")


def strip_hidden(md: str) -> tuple[str, int]:
    """``(visible text, hidden words)``: collapsed blocks, code fences and math blocks dropped
    from ``md`` (the words of collapsed blocks counted as hidden)."""
    md, hidden = _strip_details(md)
    out, stack = [], []
    lines = md.splitlines()
    for i, line in enumerate(lines):
        m = FENCE.match(line.strip())
        if m and (not stack or m.group(1) != stack[-1][0] or m.group(2)):
            kind = m.group(2)
            opts = "\n".join(lines[i + 1 : i + 5])
            collapsed = kind in ("dropdown", "toggle") or bool(
                re.search(r":class:.*\b(dropdown|toggle)\b", opts)
            )
            plain_code = m.group(1).startswith("`") and "{" not in line  # ```python
            skip = kind in SKIPPED or kind.startswith("code") or plain_code
            stack.append(
                (
                    m.group(1),
                    collapsed or any(s[1] for s in stack),
                    skip or any(s[2] for s in stack),
                )
            )
            continue
        if stack and line.strip() == stack[-1][0]:
            stack.pop()
            continue
        if stack and stack[-1][1]:
            hidden += len(line.split())
        elif not (stack and stack[-1][2]):
            out.append(line)
    return "\n".join(out), hidden


def _strip_details(md: str) -> tuple[str, int]:
    hidden = 0

    def drop(m: re.Match) -> str:
        nonlocal hidden
        hidden += len(m.group(0).split())
        return " "

    return re.sub(r"<details\b.*?</details>", drop, md, flags=re.S | re.I), hidden


def words(text: str) -> int:
    """Words of ``text``, a math span or a role counting as one."""
    text = re.sub(r"\$\$.*?\$\$", " M ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " M ", text)
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", " R ", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return len(re.findall(r"[A-Za-z0-9][\w'’.-]*", text))


def cell_words(md: str) -> list[int]:
    """Words of every table cell of ``md`` (separator rows aside)."""
    out = []
    for line in md.splitlines():
        if line.startswith("|") and not re.match(r"^\|\s*-{3}", line):
            out += [words(c) for c in line.strip().strip("|").split("|")]
    return out


def page_markdown(path: Path) -> str:
    """The markdown a page is written in (a notebook's markdown cells, joined)."""
    if path.suffix == ".md":
        return path.read_text(encoding="utf8")
    nb = json.loads(path.read_text(encoding="utf8"))
    hidden_tags = ("hide-cell", "remove-cell", "dropdown", "toggle")
    return "\n\n".join(
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
        and not any(t in c.get("metadata", {}).get("tags", []) for t in hidden_tags)
    )


def pages() -> list[Path]:
    """The book's pages (the API reference, generated and private files aside)."""
    out = [p for ext in ("md", "ipynb") for p in sorted(BOOK.rglob(f"*.{ext}"))]
    inside = [p.relative_to(BOOK).parts for p in out]
    return [
        p
        for p, parts in zip(out, inside)
        if not any(x.startswith("_") for x in parts) and parts[0] not in ("api", "api.md")
    ]


class Load(NamedTuple):
    visible: int
    hidden: int
    cells: list[int]  # words of each visible table cell


def load(path: Path) -> Load:
    vis, hidden = strip_hidden(page_markdown(path))
    return Load(words(vis), hidden, cell_words(vis))


def opener(path: Path) -> int:
    """Visible words of a part page before its ``## Claims table`` (the part's argument)."""
    head = page_markdown(path).split("\n## Claims table", 1)[0]
    return words(strip_hidden(head)[0])


def main() -> int:
    total = hidden = 0
    for path in pages():
        got = load(path)
        total, hidden = total + got.visible, hidden + got.hidden
        longest = max(got.cells, default=0)
        print(
            f"{str(path.relative_to(REPO)):42s} visible {got.visible:6d} hidden {got.hidden:6d} "
            f"longest-cell {longest:4d} cells>45 {sum(c > 45 for c in got.cells):3d}"
        )
    errata = cell_words((BOOK / "_generated" / "errata.md").read_text(encoding="utf8"))
    print(f"{'book/_generated/errata.md':42s} longest-cell {max(errata, default=0):4d}")
    print(f"TOTAL visible {total}; hidden {hidden}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
