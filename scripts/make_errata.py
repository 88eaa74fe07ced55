#!/usr/bin/env python
"""Generate the errata page ``book/errata.md`` and the landing overview from the claims tables.

The claims tables at the top of each part (``book/part*/index.md``) are the one source of truth:
every row whose status says the paper's statement does not survive exact computation (corrected,
not reproduced, false, vacuous, typos) is copied here, grouped by paper, with its links and glued
numbers rewritten for the page's location (``book/``).

``book/_overview.md`` (included by the landing page) counts each part's claims by verdict and adds
the notebooks' run times at ci scale from ``book/_status.json`` (written by
``scripts/record_status.py``). ``scripts/execute_notebooks.py`` rewrites both after executing.
Never edit the two files by hand:

    python scripts/make_errata.py            # rewrite book/errata.md and book/_overview.md
    python scripts/make_errata.py --check    # exit 1 if either is out of date (.ci/run)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
OUT = BOOK / "errata.md"
OVERVIEW = BOOK / "_overview.md"
STATUS = BOOK / "_status.json"

#: A status containing one of these words is an erratum of the paper (not of the book).
ERRATUM = re.compile(r"corrected|not reproduced|false|vacuous|typo", re.IGNORECASE)

HEADER = """\
# Errata of the three papers

Every statement of the three papers that this book corrects or does not reproduce, one row each,
with the numbers of its counterexample and a link to the cell that asserts what holds instead.
This page is generated from the parts' claims tables by `scripts/make_errata.py` (one source of
truth; `.ci/run` fails when it is out of date), so each row reads as it does there: the claim as the
paper states it, the verdict, and the evidence. Numbers are glued from the cells that compute them.
"""


def parts() -> list[Path]:
    """The parts' claims-table pages, in order."""
    return sorted(BOOK.glob("part*/index.md"))


def split_row(line: str) -> list[str]:
    """Cells of a markdown table row (``|`` inside math or code spans is not a separator)."""
    cells, cur, depth_math, in_code = [], "", False, False
    body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur += body[i : i + 2]
            i += 2
            continue
        if ch == "`":
            in_code = not in_code
        elif ch == "$" and not in_code:
            depth_math = not depth_math
        if ch == "|" and not depth_math and not in_code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    cells.append(cur.strip())
    return cells


def claims_table(page: Path) -> tuple[str, list[list[str]]]:
    """The citation key of the part's paper and the rows of its claims table."""
    text = page.read_text()
    m = re.search(r"^## Claims table$(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    if not m:
        raise ValueError(f"{page}: no '## Claims table' section")
    lines = [ln for ln in m.group(1).splitlines() if ln.startswith("|")]
    if len(lines) < 3:
        raise ValueError(f"{page}: the claims table has no rows")
    header = split_row(lines[0])
    cite = re.search(r"\{cite:t\}`([^`]+)`", header[0])
    if not cite or [h.split()[0] for h in header[1:]] != ["status", "where", "evidence"]:
        raise ValueError(f"{page}: unexpected claims-table header {header}")
    rows = [split_row(ln) for ln in lines[2:]]
    bad = [r for r in rows if len(r) != 4]
    if bad:
        raise ValueError(f"{page}: rows without 4 cells: {bad[:2]}")
    return cite.group(1), rows


def relocate(cell: str, part: str) -> str:
    """Rewrite a cell of ``book/<part>/index.md`` for a page in ``book/``."""
    cell = re.sub(r"\{glue:text\}`([\w.-]+\.ipynb::)", rf"{{glue:text}}`{part}/\1", cell)
    cell = re.sub(r"\{glue:text\}`\.\./", "{glue:text}`", cell)

    def doc(m: re.Match) -> str:  # {doc}`target` or {doc}`title <target>`
        title, target = m.group(1), m.group(2)
        target = target[3:] if target.startswith("../") else f"{part}/{target}"
        return f"{{doc}}`{title}<{target}>`" if title else f"{{doc}}`{target}`"

    return re.sub(r"\{doc\}`([^`<]*?)<?([\w./-]+)>?`", doc, cell)


def errata_rows(page: Path) -> tuple[str, list[list[str]]]:
    """The part's paper and its erratum rows, relocated."""
    cite, rows = claims_table(page)
    part = page.parent.name
    return cite, [[relocate(c, part) for c in r] for r in rows if ERRATUM.search(r[1])]


def render() -> str:
    out = [HEADER]
    total = 0
    for page in parts():
        cite, rows = errata_rows(page)
        title = page.read_text().splitlines()[0].lstrip("# ").strip()
        out.append(f"\n## {title}\n")
        out.append(f"\n{{cite:t}}`{cite}` ({{doc}}`claims table <{page.parent.name}/index>`).\n")
        if not rows:
            out.append("\nNo statement of this paper is corrected.\n")
            continue
        out.append("\n| printed claim | verdict | where | what holds (evidence) |\n")
        out.append("| --- | --- | --- | --- |\n")
        for r in rows:
            out.append("| " + " | ".join(r) + " |\n")
        total += len(rows)
    out.append(f"\n{total} statements in all.\n")
    return "".join(out)


ROMAN = {"part1": "I", "part2": "II", "part3": "III", "part4": "IV"}
VERDICTS = ("reproduced", "corrected", "not reproduced", "other")


def verdict(status: str) -> str:
    """One of :data:`VERDICTS` for a claims-table status (``other``: the book's own additions)."""
    s = status.lower()
    if "not reproduced" in s and "partly" not in s:
        return "not reproduced"
    if ERRATUM.search(s):
        return "corrected"
    if "reproduced" in s or "made exact" in s:
        return "reproduced"
    return "other"


def render_overview() -> str:
    """The landing page's table: claims per part by verdict, and ci run times."""
    runs = json.loads(STATUS.read_text())["notebooks"]
    out = [
        "| part | paper | claims | reproduced | corrected | not reproduced | new "
        "| notebooks | time |\n",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    ]
    tot = dict.fromkeys(VERDICTS, 0)
    tot_t = tot_n = 0
    for page in parts():
        cite, rows = claims_table(page)
        cnt = dict.fromkeys(VERDICTS, 0)
        for r in rows:
            cnt[verdict(r[1])] += 1
        nbs = [r for r in runs if r["path"].startswith(f"book/{page.parent.name}/")]
        t = sum(r["execution"]["wall_time_s"] for r in nbs)
        out.append(
            f"| {{doc}}`Part {ROMAN[page.parent.name]} <{page.parent.name}/index>` "
            f"| {{cite:t}}`{cite}` "
            f"| {len(rows)} | "
            + " | ".join(str(cnt[k]) for k in VERDICTS)
            + f" | {len(nbs)} | {t:.0f} s |\n"
        )
        tot = {k: tot[k] + cnt[k] for k in VERDICTS}
        tot_t, tot_n = tot_t + t, tot_n + len(nbs)
    rest = [r for r in runs if not re.match(r"book/part\d/", r["path"])]
    t_rest = sum(r["execution"]["wall_time_s"] for r in rest)
    out.append(
        f"| introduction, risk ladder | — | — | — | — | — | — | {len(rest)} | {t_rest:.0f} s |\n"
        f"| **all** | | **{sum(tot.values())}** | "
        + " | ".join(f"**{tot[k]}**" for k in VERDICTS)
        + f" | **{tot_n + len(rest)}** | **{(tot_t + t_rest) / 60:.1f} min** |\n"
    )
    scales = sorted({r["execution"]["scale"] for r in runs})
    out.append(
        "\n*new*: the book's own additions (not claims of the paper). *time*: the sum of the "
        f"notebooks' last executions, one at a time, at {', '.join(scales)} scale on "
        f"{runs[0]['execution']['cpu_count']} CPU cores (with whatever else ran then). "
        "Generated from the claims tables and the execution records; paper-scale runs are on the "
        "{doc}`status` page.\n"
    )
    return "".join(out)


def outputs() -> dict[Path, str]:
    return {OUT: render(), OVERVIEW: render_overview()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if a generated page is out of date")
    args = ap.parse_args(argv)
    for path, text in outputs().items():
        rel = path.relative_to(REPO)
        if args.check:
            if not path.exists() or path.read_text() != text:
                print(f"{rel} is out of date: run python scripts/make_errata.py", file=sys.stderr)
                return 1
            print(f"{rel} is up to date")
        else:
            path.write_text(text)
            print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
