#!/usr/bin/env python
"""Reader notebooks: the chapters with their glued numbers written into the markdown.

In the book, myst-nb pastes each glued value where the markdown says ``{glue:text}`name```. A
notebook opened anywhere else (Colab, the page's download button, a plain Jupyter) shows the role
itself. This script writes, for every notebook of ``_toc.yml``, a copy whose markdown has each
``{glue:text}`name``` (and ``{glue:text}`other.ipynb::name:s```) replaced by the value that the
committed outputs glue, and each ``{paper-glue}`name``` by the value the chapter's paper-scale
run glued (``book/_generated/paper_runs.json``), so a reader sees the numbers the book shows.
A figure's caption (the ``{figure-caption}`` block of ``book/_ext/iclgd_figures.py``) becomes a
paragraph "**Figure.** ...". Code cells and outputs are unchanged.

    python scripts/make_reader_notebooks.py                 # into _build/reader/ (same paths)
    python scripts/make_reader_notebooks.py --html _build/html
        # ... and over the built site's download copies (_build/html/_sources/book/...ipynb)

``scripts/build_book.sh`` runs it after every build; the publish workflow pushes
``_build/reader/`` to the ``notebooks`` branch, which is the branch the Colab buttons open
(``repository.branch`` in ``_config.yml``). Exits 1 if a role names a value that no notebook glues.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_paper_run import glued, load_runs  # noqa: E402  (sibling: one parser of glue outputs)

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


def reader_notebook(
    path: Path,
    values: dict[Path, dict[str, str]],
    paper: dict[Path, dict[str, str]] | None = None,
) -> tuple[dict, list[str]]:
    """The reader copy of the notebook at ``path`` and the roles left unresolved."""
    nb = json.loads(path.read_text(encoding="utf8"))
    missing: list[str] = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text, miss = substitute("".join(cell["source"]), path.resolve(), values, paper)
        text = captions_as_text(text)
        missing += miss
        cell["source"] = text.splitlines(keepends=True)
    return nb, missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "_build" / "reader")
    ap.add_argument("--html", type=Path, help="a built site: overwrite its _sources/ copies too")
    args = ap.parse_args(argv)
    paths = toc_notebooks()
    values = {p.resolve(): glued(json.loads(p.read_text(encoding="utf8"))) for p in paths}
    paper = paper_values()
    bad = 0
    for p in paths:
        nb, missing = reader_notebook(p, values, paper)
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
