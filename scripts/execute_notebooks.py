#!/usr/bin/env python
"""Execute the book's notebooks for commit, in place, and record how long each took.

Each notebook runs top to bottom in a fresh kernel (nbclient), with the notebook's own folder as
working directory. On success its outputs are written back into the ``.ipynb`` and its
notebook-level metadata gets ``metadata.iclgd.execution`` (wall time, ``ICLGD_SCALE``, time stamp,
CPU count, package versions); then ``book/_generated/status.json`` is regenerated
(``scripts/record_status.py``), which the status page of the book renders, and the errata page and
the landing page's overview are regenerated (``scripts/make_errata.py``). A notebook that fails is
left untouched on disk, and the script exits with status 1 after trying the others.

Usage::

    python scripts/execute_notebooks.py                          # every notebook in _toc.yml
    python scripts/execute_notebooks.py book/part1/foo.ipynb     # just these
    python scripts/execute_notebooks.py --scale paper            # the papers' settings
    python scripts/execute_notebooks.py --timeout 3600           # seconds per cell
    python scripts/execute_notebooks.py --scale paper --allow-errors book/part3/gdpp.ipynb

``--allow-errors`` (for long paper-scale runs on a copy of the book, see
``scripts/record_paper_run.py``): a failing cell does not stop the notebook; the notebook is written
with the error in that cell's output and the failures listed in its execution record
(``failed_cells``), and the script still exits with status 1.

``--deadline SECONDS`` (for a machine lent for a fixed time): past that many seconds from the
script's start, the cell running is interrupted (its output shows the ``KeyboardInterrupt``) and
the cells after it are not run; the notebook is still written, with what ran, and its execution
record lists the cells left out (``not_run_cells``). Implies ``--allow-errors``. A notebook
whose turn comes after the deadline is not started (nor written): ``[skipped]``.

``--no-status``: leave ``book/_generated`` alone (``status.json``, the errata page, the overview);
for the lanes of ``scripts/paper_run.sh``, which run side by side in one copy of the book.

The kernel is the notebook's kernelspec (default ``python3``), i.e. the Python environment running
this script when ipykernel is installed in it; the versions recorded are this environment's. The
kernel imports ``iclgd`` from this script's checkout (its root first on ``PYTHONPATH``), also when
the environment's ``iclgd`` is an editable install of another checkout.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_errata  # noqa: E402  (sibling script)
import record_status  # noqa: E402  (sibling script)

REPO = record_status.REPO


def current_scale() -> str:
    """``ICLGD_SCALE`` as iclgd reads it (validated by iclgd.config when importable)."""
    sys.path.insert(0, str(REPO))
    try:
        from iclgd import config
    except ImportError:
        return os.environ.get("ICLGD_SCALE", "ci").strip().lower() or "ci"
    return config.scale()


def _client(nb: Any, deadline: float | None, **kwargs: Any) -> Any:
    """An nbclient ``NotebookClient``; with ``deadline`` (a ``time.monotonic()`` value) each cell's
    timeout ends at the deadline (the kernel is interrupted) and cells after it are not run."""
    from nbclient import NotebookClient

    class DeadlineClient(NotebookClient):
        async def async_execute_cell(self, cell: Any, cell_index: int, **kw: Any) -> Any:
            if cell.cell_type == "code" and time.monotonic() >= deadline - 1:
                cell.outputs, cell.execution_count = [], None
                cell.metadata.setdefault("iclgd", {})["not_run"] = "deadline"
                return cell
            return await super().async_execute_cell(cell, cell_index, **kw)

    if deadline is None:
        return NotebookClient(nb, **kwargs)
    cap = kwargs.pop("timeout")
    return DeadlineClient(
        nb,
        timeout_func=lambda cell: max(1, min(cap, int(deadline - time.monotonic()))),
        interrupt_on_timeout=True,
        **kwargs,
    )


def kernel_pythonpath(current: str | None = None) -> str:
    """``PYTHONPATH`` for the kernels: this checkout first, so a copy of the book (a git worktree,
    ``scripts/paper_run.sh``'s copy) runs its own ``iclgd``, not the one an editable install of
    another checkout points to; ``current`` (default: the environment's) is kept after it."""
    current = os.environ.get("PYTHONPATH", "") if current is None else current
    rest = [p for p in current.split(os.pathsep) if p and Path(p).resolve() != REPO]
    return os.pathsep.join([str(REPO), *rest])


def execute_one(
    path: Path,
    *,
    timeout: int,
    kernel: str | None,
    scale: str,
    allow_errors: bool = False,
    deadline: float | None = None,
) -> tuple[float, list[dict]]:
    """Execute ``path`` in place; return its wall time in seconds and its failed cells.

    Without ``allow_errors`` the first failing cell raises (and nothing is written). With
    ``deadline`` (a ``time.monotonic()`` value) the cell running then is interrupted, later cells
    are left out and listed as ``not_run_cells`` (each also counts as failed)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    os.environ["PYTHONPATH"] = kernel_pythonpath()  # the kernel inherits it: this checkout's iclgd
    kernel_name = kernel or nb.metadata.get("kernelspec", {}).get("name") or "python3"
    client = _client(
        nb,
        deadline,
        timeout=timeout,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        allow_errors=allow_errors or deadline is not None,
    )
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    failed, not_run = [], []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code, start=1):
        if cell.get("metadata", {}).get("iclgd", {}).pop("not_run", None):
            not_run.append(i)
            if not cell.metadata["iclgd"]:
                del cell.metadata["iclgd"]
            continue
        if "raises-exception" in cell.get("metadata", {}).get("tags", []):
            continue  # meant to fail
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                failed.append({"cell": i, "error": f"{out['ename']}: {out['evalue']}"[:500]})
    nb.metadata.setdefault("iclgd", {})["execution"] = {
        "wall_time_s": round(wall, 1),
        "scale": scale,
        "executed_at": _dt.datetime.now(_dt.UTC)
        .replace(microsecond=0)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": record_status.package_versions(),
    }
    if failed:
        nb.metadata["iclgd"]["execution"]["failed_cells"] = failed
    if not_run:
        nb.metadata["iclgd"]["execution"]["not_run_cells"] = not_run
        failed = failed + [
            {"cell": i, "error": "not run: the --deadline had passed"} for i in not_run
        ]
    nbformat.write(nb, path)
    return wall, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="default: every notebook in _toc.yml"
    )
    parser.add_argument("--scale", choices=("ci", "paper"), help="set ICLGD_SCALE for the kernels")
    parser.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="seconds per cell (default 3600 at ci scale, 14400 at paper scale: a paper-scale "
        "training cell can run past an hour on a CPU)",
    )
    parser.add_argument("--kernel", default=None, help="kernel name (default: the notebook's)")
    parser.add_argument(
        "--allow-errors",
        action="store_true",
        help="run every cell even after one fails; write the notebook with its errors",
    )
    parser.add_argument(
        "--no-status",
        action="store_true",
        help="do not regenerate status.json, the errata page and the overview afterwards",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds from now after which the running cell is interrupted and later cells "
        "are left out (the notebooks are still written; implies --allow-errors)",
    )
    args = parser.parse_args(argv)
    deadline = None if args.deadline is None else time.monotonic() + args.deadline

    if args.scale:
        os.environ["ICLGD_SCALE"] = args.scale
    scale = current_scale()
    if args.timeout is None:
        args.timeout = 14400 if scale == "paper" else 3600
    paths = [p.resolve() for p in args.notebooks] or record_status.toc_notebooks()
    if not paths:
        print("no notebooks to execute (none named in _toc.yml exists yet)")
    failed: list[Path] = []
    for path in paths:
        rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        if deadline is not None and time.monotonic() >= deadline - 1:
            failed.append(path)
            print(f"[skipped] {rel}: the --deadline had passed; not started", flush=True)
            continue
        print(f"[execute] {rel} (ICLGD_SCALE={scale}) ...", flush=True)
        try:
            wall, bad = execute_one(
                path,
                timeout=args.timeout,
                kernel=args.kernel,
                scale=scale,
                allow_errors=args.allow_errors,
                deadline=deadline,
            )
        except Exception as exc:  # nbclient.exceptions.CellExecutionError, timeouts, kernel death
            failed.append(path)
            print(
                f"[FAILED]  {rel}: {type(exc).__name__}: {str(exc)[-2000:]}",
                file=sys.stderr,
                flush=True,
            )
            continue
        if bad:
            failed.append(path)
            cells = "; ".join(f"cell {b['cell']}: {b['error']}" for b in bad)
            print(f"[FAILED]  {rel}: {wall:.1f} s, written with errors: {cells}", flush=True)
            continue
        print(f"[ok]      {rel}: {wall:.1f} s", flush=True)
    if not args.no_status:
        status = record_status.write_status()
        print(f"wrote {status.relative_to(REPO)}")
        make_errata.main([])  # the errata page and the landing overview read the new times
    if failed:
        print(
            f"{len(failed)} notebook(s) failed: " + ", ".join(str(p) for p in failed),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
