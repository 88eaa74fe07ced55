#!/usr/bin/env python
"""Collect the execution record of every notebook of the book into ``book/_generated/status.json``.

Convention
----------
A notebook that was executed for commit by ``scripts/execute_notebooks.py`` carries its own record
in its notebook-level metadata::

    "metadata": {
      "iclgd": {
        "execution": {
          "wall_time_s": 41.7,              # whole notebook, fresh kernel, kernel start included
          "scale": "ci",                    # ICLGD_SCALE it ran at ("ci" or "paper")
          "executed_at": "2025-01-31T12:00:00Z",
          "cpu_count": 2,
          "python": "3.11.2",
          "platform": "Linux-...-x86_64",
          "versions": {"jax": "0.10.2", "numpy": "...", ...}
        }
      }
    }

nbval ignores notebook metadata, and Jupyter Book does not render it. This script reads those
records (for the notebooks named in ``_toc.yml``, in book order) and writes them to
``book/_generated/status.json``; the book's status page (``book/status.md``) renders that file at
build time (see ``book/_ext/iclgd_sphinx.py``). The JSON holds nothing but what the notebooks
hold, so it is deterministic: ``--check`` fails when it is stale.

Usage::

    python scripts/record_status.py            # (re)write book/_generated/status.json
    python scripts/record_status.py --check    # exit 1 if book/_generated/status.json is stale
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TOC = REPO / "_toc.yml"
STATUS_JSON = REPO / "book" / "_generated" / "status.json"
BOOK_DIR = REPO / "book"

#: Packages whose versions are recorded with each execution and shown on the status page.
PACKAGES = (
    "jax",
    "jaxlib",
    "numpy",
    "sympy",
    "optax",
    "matplotlib",
    "jupyter-book",
    "sphinx",
    "myst-nb",
    "nbval",
    "nbclient",
    "ipykernel",
)

#: Packages whose versions at HTML-build time are shown too.
BUILD_PACKAGES = ("jupyter-book", "sphinx", "myst-nb", "sphinx-proof", "sphinxcontrib-bibtex")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (``None`` if not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            out[name] = None
    return out


def _toc_files(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key in ("root", "file"):
            if isinstance(node.get(key), str):
                yield node[key]
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key) or []:
                yield from _toc_files(child)
    elif isinstance(node, list):
        for child in node:
            yield from _toc_files(child)


def toc_notebooks() -> list[Path]:
    """The ``.ipynb`` files named in ``_toc.yml``, in book order (missing files are skipped)."""
    import yaml

    toc = yaml.safe_load(TOC.read_text(encoding="utf8"))
    out: list[Path] = []
    for entry in _toc_files(toc):
        entry_path = REPO / entry
        path = (
            entry_path
            if entry_path.suffix == ".ipynb"
            else entry_path.with_name(entry_path.name + ".ipynb")
        )
        if path.is_file() and path not in out:
            out.append(path)
    return out


def notebook_title(nb: dict) -> str | None:
    """Text of the first ``# `` heading of the notebook, if any."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        for line in source.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return None


#: What ``code_sha256`` puts between two code cells' sources (a line no chapter writes).
CODE_CELL_SEPARATOR = "\n# ---- iclgd: next code cell ----\n"


def code_sha256(nb: dict) -> str:
    """sha256 (hex) of a notebook's code: the sources of its code cells, in order.

    The one definition of "the chapter's code" for the paper-scale records
    (``scripts/record_paper_run.py``): code cells only, each source as written (a list of lines
    is joined), joined with :data:`CODE_CELL_SEPARATOR`; outputs, execution counts, metadata and
    markdown cells are left out. ``scripts/execute_notebooks.py`` changes no source, so a
    committed notebook and any executed copy of it give the same hash.

    Args:
        nb: a notebook as read by ``json.loads`` (nbformat 4).
    """
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError("nb must be a notebook dict with a 'cells' list")
    sources = []
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        sources.append("".join(source) if isinstance(source, list) else str(source))
    return hashlib.sha256(CODE_CELL_SEPARATOR.join(sources).encode("utf8")).hexdigest()


def notebook_record(path: Path) -> dict[str, Any]:
    """The status entry of one notebook: its path, title and execution record (or ``None``)."""
    nb = json.loads(path.read_text(encoding="utf8"))
    execution = (nb.get("metadata", {}).get("iclgd") or {}).get("execution")
    return {
        "path": path.relative_to(REPO).as_posix(),
        "title": notebook_title(nb),
        "execution": execution,
    }


def build_status() -> dict[str, Any]:
    """The content of ``book/_generated/status.json``."""
    return {
        "about": "Generated by scripts/record_status.py from the notebooks' "
        "metadata.iclgd.execution; do not edit by hand.",
        "notebooks": [notebook_record(p) for p in toc_notebooks()],
    }


def dumps(status: dict[str, Any]) -> str:
    return json.dumps(status, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def write_status() -> Path:
    STATUS_JSON.write_text(dumps(build_status()), encoding="utf8")
    return STATUS_JSON


def load_status(path: Path = STATUS_JSON) -> dict[str, Any]:
    """Read ``book/_generated/status.json``; an absent file reads as "no notebooks"."""
    if not path.is_file():
        return {"notebooks": []}
    return json.loads(path.read_text(encoding="utf8"))


# ------------------------------------------------------------------------------------------------
# Rendering (used by book/_ext/iclgd_sphinx.py for book/status.md)


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(
    status: dict[str, Any],
    build_versions: dict[str, str | None] | None = None,
    link_for: Any = None,
) -> str:
    """MyST markdown for the status page.

    Args:
        status: content of ``book/_generated/status.json``.
        build_versions: package versions of the environment building the HTML (optional).
        link_for: optional callable mapping a notebook's repository path to a MyST link target
            (``None`` renders plain text).
    """
    notebooks = status.get("notebooks") or []
    lines: list[str] = []
    executed = [nb for nb in notebooks if nb.get("execution")]

    lines.append("## Notebooks")
    lines.append("")
    if not notebooks:
        lines.append(
            "No notebook is listed yet: `book/_generated/status.json` names none. "
            "Run `python scripts/execute_notebooks.py` to execute the book's notebooks "
            "and record them."
        )
    else:
        total = sum(float(nb["execution"].get("wall_time_s") or 0.0) for nb in executed)
        lines.append(
            f"{len(executed)} of {len(notebooks)} notebooks carry an execution record; "
            f"together they ran in {_fmt_seconds(total)}."
        )
        lines.append("")
        lines.append(
            "| Notebook | Scale (`ICLGD_SCALE`) | Wall time | Executed (UTC) | CPU cores |"
        )
        lines.append("| --- | --- | --: | --- | --: |")
        for nb in notebooks:
            title = nb.get("title") or nb["path"]
            target = link_for(nb["path"]) if link_for else None
            name = f"[{_cell(title)}]({target})" if target else _cell(title)
            name += f"<br>`{nb['path']}`"
            ex = nb.get("execution")
            if not ex:
                lines.append(f"| {name} | not recorded | – | – | – |")
                continue
            when = str(ex.get("executed_at") or "–").replace("T", " ").replace("Z", "")
            lines.append(
                f"| {name} | `{_cell(ex.get('scale', '?'))}` "
                f"| {_fmt_seconds(ex.get('wall_time_s'))} "
                f"| {_cell(when)} | {_cell(ex.get('cpu_count', '–'))} |"
            )
    lines.append("")

    lines.append("## Versions")
    lines.append("")
    exec_versions: dict[str, set[str]] = {}
    for nb in executed:
        for name, version in (nb["execution"].get("versions") or {}).items():
            exec_versions.setdefault(name, set()).add(version or "not installed")
    names = list(PACKAGES) + [n for n in (build_versions or {}) if n not in PACKAGES]
    names += sorted(n for n in exec_versions if n not in names)
    header = "| Package | When the notebooks were executed |"
    rule = "| --- | --- |"
    if build_versions is not None:
        header += " When this HTML was built |"
        rule += " --- |"
    lines.append(header)
    lines.append(rule)
    for name in names:
        if name not in exec_versions and name not in (build_versions or {}):
            continue
        at_exec = ", ".join(sorted(exec_versions[name])) if name in exec_versions else "–"
        row = f"| `{name}` | {_cell(at_exec)} |"
        if build_versions is not None:
            row += f" {_cell(build_versions.get(name) or '–')} |"
        lines.append(row)
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if book/_generated/status.json is stale"
    )
    parser.add_argument("--print", action="store_true", help="print the status page's markdown")
    args = parser.parse_args(argv)
    if args.check:
        current = STATUS_JSON.read_text(encoding="utf8") if STATUS_JSON.is_file() else ""
        expected = dumps(build_status())
        if current != expected:
            print(
                f"{STATUS_JSON.relative_to(REPO)} is out of date: "
                "run python scripts/record_status.py",
                file=sys.stderr,
            )
            return 1
        print(f"{STATUS_JSON.relative_to(REPO)} is up to date")
        return 0
    if args.print:
        print(render_markdown(build_status()))
        return 0
    path = write_status()
    n = len(load_status(path)["notebooks"])
    print(f"wrote {path.relative_to(REPO)} ({n} notebooks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
