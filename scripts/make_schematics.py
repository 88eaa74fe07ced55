#!/usr/bin/env python
"""Draw the part pages' schematics as SVG files, deterministically.

``iclgd.plot.part1_schematic``, ``part2_schematic`` and ``part3_schematic`` are written to
``book/_generated/schematics/part1.svg``, ``part2.svg`` and ``part3.svg``, which the part pages
(``book/part*/index.md``) show with a ``{figure}`` directive. The files are reproducible byte for
byte under one matplotlib version: the SVG's element ids come from a fixed salt
(``svg.hashsalt``), no date is written, text is drawn as paths (no font needed to show it), and
the background is transparent (the book's dark mode inverts figures: ``book/_static/iclgd.css``).

Each file names, in its metadata, the matplotlib version that drew it and a digest of the drawing
code (``iclgd/plot/schematic.py``, the page style of ``iclgd/plot/core.py``, this script).
``--check`` draws the three again into a temporary directory and compares them with the committed
files: it fails when one differs, except where the matplotlib version differs from the one that
drew it and the drawing code is unchanged (the committed file is then what this code draws under
that version, and only matplotlib's own output may have moved; run the script to refresh it):

    python scripts/make_schematics.py            # rewrite book/_generated/schematics/*.svg
    python scripts/make_schematics.py --check    # exit 1 if one is out of date (.ci/run)
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "book" / "_generated" / "schematics"
SOURCES = (REPO / "iclgd" / "plot" / "schematic.py", Path(__file__).resolve())
#: file name -> (function of iclgd.plot, title written into the SVG)
SCHEMATICS = {
    "part1.svg": ("part1_schematic", "Part I: the prompt matrix E, its initial guess, one layer"),
    "part2.svg": ("part2_schematic", "Part II: the prompt E, the softmax heads, the ridge limit"),
    "part3.svg": ("part3_schematic", "Part III: the prompt Z_0, L layers, preconditioned GD"),
}
SALT = "iclgd-schematics"
_META = re.compile(r"matplotlib (\S+); drawing code sha256 ([0-9a-f]{16})")


def code_digest() -> str:
    """The first 16 hex digits of the sha256 of the drawing code: the files of :data:`SOURCES`
    and the page style they draw with (``iclgd.plot.STYLE``, ``DPI``, ``MAX_WIDTH``)."""
    sys.path.insert(0, str(REPO))
    from iclgd.plot import core

    h = hashlib.sha256()
    for path in SOURCES:
        h.update(path.read_bytes())
    h.update(repr((sorted(core.STYLE.items()), core.DPI, core.MAX_WIDTH)).encode())
    return h.hexdigest()[:16]


def render(out: Path) -> list[Path]:
    """Write every schematic of :data:`SCHEMATICS` into the directory ``out``; return the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sys.path.insert(0, str(REPO))
    import iclgd.plot

    out.mkdir(parents=True, exist_ok=True)
    about = f"matplotlib {matplotlib.__version__}; drawing code sha256 {code_digest()}"
    paths = []
    with matplotlib.rc_context({"svg.hashsalt": SALT, "svg.fonttype": "path"}):
        for name, (func, title) in SCHEMATICS.items():
            fig = getattr(iclgd.plot, func)()
            path = out / name
            meta = {
                "Title": title,
                "Description": f"iclgd.plot.{func}, drawn by scripts/make_schematics.py ({about})",
                "Date": None,
            }
            fig.savefig(path, format="svg", transparent=True, metadata=meta)
            plt.close(fig)
            paths.append(path)
    return paths


def _drawn_by(path: Path) -> tuple[str, str] | None:
    """``(matplotlib version, code digest)`` recorded in an SVG's metadata, or None."""
    m = _META.search(path.read_text(encoding="utf8"))
    return (m[1], m[2]) if m else None


def check() -> int:
    """Draw into a temporary directory and compare with :data:`OUT`: 0 if up to date, else 1."""
    import matplotlib

    stale = 0
    with tempfile.TemporaryDirectory() as tmp:
        for new in render(Path(tmp)):
            old = OUT / new.name
            rel = old.relative_to(REPO)
            if old.is_file() and old.read_bytes() == new.read_bytes():
                print(f"{rel} is up to date")
                continue
            drawn = _drawn_by(old) if old.is_file() else None
            if drawn and drawn[0] != matplotlib.__version__ and drawn[1] == code_digest():
                print(
                    f"{rel} is up to date (drawn by matplotlib {drawn[0]}, this is "
                    f"{matplotlib.__version__}; the drawing code is unchanged)"
                )
                continue
            print(f"{rel} is out of date: run python scripts/make_schematics.py", file=sys.stderr)
            stale = 1
    return stale


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if a schematic is out of date")
    args = ap.parse_args(argv)
    if args.check:
        return check()
    for path in render(OUT):
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
