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
       one section per module (heading + ``automodule``); adding a module is adding a line.

   ````md
   ```{iclgd-status}
   ```
   ````
       the tables of ``book/_status.json`` (written by ``scripts/record_status.py``).

   ````md
   ```{iclgd-macros}
   ```
   ````
       the MathJax macros of ``_config.yml`` as a table, plus ``\\newcommand`` lines for notebooks.

3. Skips NamedTuple field accessors in autodoc (their Google-style ``Attributes:`` section
   documents them; both would be a duplicate-description warning).
"""

from __future__ import annotations

import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import record_status  # noqa: E402  (sibling script)

logger = logging.getLogger(__name__)

_BLOCK = re.compile(
    r"^(?P<fence>`{3,})\{(?P<name>iclgd-modules|iclgd-status|iclgd-macros)\}[^\n]*\n"
    r"(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)

# Example arguments used to show macros that take arguments.
_MACRO_EXAMPLES = {"T": r"\x^\T", "norm": r"\norm{\x}", "ip": r"\ip{\x}{\w}"}


def _modules_markdown(body: str) -> str:
    modules = [
        line.strip()
        for line in body.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    out = []
    for mod in modules:
        out.append(f"## `{mod}`\n")
        out.append("```{eval-rst}")
        out.append(f".. automodule:: {mod}")
        out.append("```\n")
    _note_undocumented(modules)
    return "\n".join(out)


def _note_undocumented(listed: list[str]) -> None:
    package = REPO / "iclgd"
    if not package.is_dir():
        return
    public = sorted(
        f"iclgd.{m.name}"
        for m in pkgutil.iter_modules([str(package)])
        if not m.name.startswith("_")
    )
    missing = [m for m in public if m not in listed]
    if missing:
        logger.info(
            "[iclgd] API page does not list: %s (add a line to book/api.md)", ", ".join(missing)
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


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", _expand)
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
