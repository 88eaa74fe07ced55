#!/usr/bin/env python
"""Reader notebooks: the chapters with their glued numbers written into the markdown.

In the book, myst-nb pastes each glued value where the markdown says ``{glue:text}`name```. A
notebook opened anywhere else (Colab, the page's download button, a plain Jupyter) shows the role
itself. This script writes, for every notebook of ``_toc.yml``, a copy whose markdown has each
``{glue:text}`name``` (and ``{glue:text}`other.ipynb::name:s```) replaced by the value that the
committed outputs glue, and each ``{paper-glue}`name``` by the value the chapter's paper-scale
run glued (``book/_generated/paper_runs.json``), so a reader sees the numbers the book shows.
A figure's caption (the ``{figure-caption}`` block of ``book/_ext/iclgd_figures.py``) becomes a
paragraph "**Figure.** ...", and a chapter's headline figure (the ``{paper-figure}`` block of
``book/_ext/iclgd_paper_runs.py``) a paragraph "**The figure below, at paper scale** (recorded on
...)" with the recorded PNG attached to the cell (``attachment:``, which Jupyter and Colab show),
and a collapsed block (``{dropdown}``) HTML ``<details>``. Code cells and outputs are unchanged.

    python scripts/make_reader_notebooks.py                 # into _build/reader/ (same paths)
    python scripts/make_reader_notebooks.py --html _build/html
        # ... and over the built site's download copies (_build/html/_sources/book/...ipynb)

``scripts/build_book.sh`` runs it after every build; the publish workflow pushes
``_build/reader/`` to the ``notebooks`` branch, which is the branch the Colab buttons open
(``repository.branch`` in ``_config.yml``). Exits 1 if a role names a value that no notebook glues,
or a headline figure has no recorded figure.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_paper_run import freshness, glued, load_runs  # noqa: E402  (sibling: glue, records)

REPO = Path(__file__).resolve().parents[1]
ROLE = re.compile(r"\{glue:text\}`([^`]+)`")
#: ``{paper-glue}`[path.ipynb::]key```: a value glued by the chapter's paper-scale run
#: (``book/_generated/paper_runs.json``, shown in the book by ``book/_ext/iclgd_paper_runs.py``).
PAPER_ROLE = re.compile(r"\{paper-glue\}`([^`]+)`")
#: A figure's caption block (book/_ext/iclgd_figures.py): its fence, label and text.
CAPTION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{figure-caption\}[ \t]+\S+[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)

#: A chapter's headline figure (book/_ext/iclgd_paper_runs.py): its fence, label and text.
PAPER_FIGURE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{paper-figure\}[ \t]+(?P<label>\S+)[ \t]*\n(?P<body>.*?)"
    r"^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


#: A collapsed block (``{dropdown}``, sphinx-design's, in the book's ``:::`` or backtick fences):
#: its fence, title, options (``:open:``, ``:class: ...``) and body.
DROPDOWN = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{dropdown\}[ \t]*(?P<title>[^\n]*)\n"
    r"(?P<options>(?:[ \t]*:[\w-]+:[^\n]*\n)*)(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def dropdowns_as_details(text: str) -> str:
    """``text`` with each ``{dropdown}`` block written as HTML ``<details>`` (collapsed, its title
    the ``<summary>``), which Jupyter and Colab render, with the markdown inside kept; nested
    blocks too."""

    def one(m: re.Match) -> str:
        title = m.group("title").strip() or "Details"
        state = " open" if ":open:" in m.group("options") else ""
        body = dropdowns_as_details(m.group("body").strip("\n"))
        return f"<details{state}><summary>{title}</summary>\n\n{body}\n\n</details>"

    return DROPDOWN.sub(one, text)


def captions_as_text(text: str) -> str:
    """``text`` with each ``{figure-caption}`` block written as a paragraph "**Figure.** ..."."""
    return CAPTION.sub(lambda m: "**Figure.** " + m.group("body").strip(), text)


def toc_notebooks(repo: Path = REPO) -> list[Path]:
    """The notebooks that ``_toc.yml`` names, as paths under ``repo``."""
    files = re.findall(r"file:\s*(\S+)", (repo / "_toc.yml").read_text(encoding="utf8"))
    return [repo / f"{f}.ipynb" for f in files if (repo / f"{f}.ipynb").is_file()]


def _format(value: str, spec: str) -> str:
    """Apply a glue role's format spec (``name:.2f``); ``s`` or none keeps the text."""
    if spec in ("", "s"):
        return value
    try:
        return format(float(value), spec)
    except ValueError:
        return value


def substitute(
    text: str,
    path: Path,
    values: dict[Path, dict[str, str]],
    paper: dict[Path, dict[str, str]] | None = None,
) -> tuple[str, list[str]]:
    """``text`` with every glue role of the notebook at ``path`` replaced (``values``: each
    notebook's glued values), and every ``{paper-glue}`` role (``paper``: each notebook's
    paper-scale glued values); also the roles whose value was not found."""
    missing: list[str] = []
    if paper is not None:
        text, missing = substitute_roles(text, path, paper, PAPER_ROLE)
    text, more = substitute_roles(text, path, values, ROLE)
    return text, missing + more


def substitute_roles(
    text: str, path: Path, values: dict[Path, dict[str, str]], role: re.Pattern
) -> tuple[str, list[str]]:
    """``text`` with every match of ``role`` replaced by its value in ``values``."""
    missing: list[str] = []

    def one(m: re.Match) -> str:
        ref = m.group(1)
        target, key = path, ref
        if "::" in ref:
            rel, key = ref.split("::", 1)
            target = (path.parent / rel).resolve()
        name, _, spec = key.partition(":")
        found = values.get(target, {}).get(name)
        if found is None:
            missing.append(ref)
            return m.group(0)
        return _format(found, spec)

    return role.sub(one, text), missing


def paper_values() -> dict[Path, dict[str, str]]:
    """Each recorded chapter's paper-scale glued values, by notebook path."""
    runs = load_runs().get("runs") or {}
    return {(REPO / key).resolve(): dict(run.get("glue") or {}) for key, run in runs.items()}


def paper_figures() -> dict[Path, dict]:
    """Each recorded chapter's paper-scale record, by notebook path, with its ``freshness``."""
    runs = load_runs()
    records = runs.get("runs") or {}
    chapters = {key: REPO / key for key in records if (REPO / key).is_file()}
    state = freshness(runs, chapters)
    return {
        (REPO / key).resolve(): {**run, "freshness": state.get(key, "missing")}
        for key, run in records.items()
    }


def figure_cell(nb: dict, label: str) -> int | None:
    """The code-cell number (from 1, as the records count) of the figure ``label``: the code
    cell that its ``{figure-caption}`` block follows."""
    code = 0
    for index, cell in enumerate(nb["cells"]):
        code += cell["cell_type"] == "code"
        if cell["cell_type"] != "markdown":
            continue
        for m in re.finditer(r"\{figure-caption\}[ \t]+(\S+)", "".join(cell["source"])):
            above = nb["cells"][index - 1] if index else {}
            if m.group(1) == label and above.get("cell_type") == "code":
                return code
    return None


def headline_figure(
    text: str, nb: dict, run: dict | None
) -> tuple[str, dict[str, dict[str, str]], list[str]]:
    """``text`` with each ``{paper-figure}`` block written as a paragraph and an image, the
    cell's attachments (the recorded PNGs) and the labels without a recorded figure."""
    attachments: dict[str, dict[str, str]] = {}
    missing: list[str] = []

    def one(m: re.Match) -> str:
        label, body = m.group("label"), m.group("body").strip()
        number = figure_cell(nb, label)
        cells = {c["cell"]: c for c in (run or {}).get("cells") or []}
        figures = ((cells.get(number) or {}).get("figures") or []) if number else []
        if not figures:
            missing.append(f"paper-figure {label}")
            return f"**The figure below, at paper scale** (no recorded run). {body}"
        ex = run.get("execution") or {}
        when = str(ex.get("executed_at") or run.get("recorded_at") or "?")[:10]
        stale = "; stale record: the chapter's code has changed since" * (
            run.get("freshness") == "stale"
        )
        out = f"**The figure below, at paper scale** (recorded {when} on {run.get('device')}"
        out += f"{stale}). {body}"
        for fig in figures:
            name = f"paper-{label}-{len(attachments) + 1}.png"
            png = (REPO / "book" / fig).read_bytes()
            attachments[name] = {"image/png": base64.b64encode(png).decode("ascii")}
            out += f"\n\n![the figure below, at paper scale](attachment:{name})"
        return out

    return PAPER_FIGURE.sub(one, text), attachments, missing


def reader_notebook(
    path: Path,
    values: dict[Path, dict[str, str]],
    paper: dict[Path, dict[str, str]] | None = None,
    figures: dict[Path, dict] | None = None,
) -> tuple[dict, list[str]]:
    """The reader copy of the notebook at ``path`` and the roles left unresolved (``figures``:
    each chapter's paper-scale record, :func:`paper_figures`, for its headline figure)."""
    nb = json.loads(path.read_text(encoding="utf8"))
    source = json.loads(path.read_text(encoding="utf8"))  # the cells as written, to find figures
    run = (figures or {}).get(path.resolve())
    missing: list[str] = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text, miss = substitute("".join(cell["source"]), path.resolve(), values, paper)
        text, attachments, more = headline_figure(text, source, run)
        text = dropdowns_as_details(captions_as_text(text))
        missing += miss + more
        cell["source"] = text.splitlines(keepends=True)
        if attachments:
            cell["attachments"] = {**cell.get("attachments", {}), **attachments}
    return nb, missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "_build" / "reader")
    ap.add_argument("--html", type=Path, help="a built site: overwrite its _sources/ copies too")
    args = ap.parse_args(argv)
    paths = toc_notebooks()
    values = {p.resolve(): glued(json.loads(p.read_text(encoding="utf8"))) for p in paths}
    paper, figures = paper_values(), paper_figures()
    bad = 0
    for p in paths:
        nb, missing = reader_notebook(p, values, paper, figures)
        rel = p.relative_to(REPO)
        if missing:
            bad += 1
            print(f"{rel}: no glued value for {', '.join(sorted(set(missing)))}", file=sys.stderr)
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        targets = [args.out / rel]
        if args.html is not None:
            targets.append(args.html / "_sources" / rel)
        for t in targets:
            t.parent.mkdir(parents=True, exist_ok=True)
            t.write_text(text, encoding="utf8")
    also = f" and {args.html}" if args.html is not None else ""
    print(f"{len(paths)} reader notebooks in {args.out}{also}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
