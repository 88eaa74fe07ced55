"""Root pytest configuration for nbval runs over book/.

nbval compares each cell's stdout and its text/plain and text/latex outputs exactly. stderr (tqdm
progress bars, JAX and library warnings) differs between runs and machines, so it is kept out of
the comparison here -- nbval's documented hook (``collector.skip_compare``).

Tests run on two pytest-xdist workers (``addopts`` in pyproject.toml), each starting its own
notebook kernels; on a GPU, JAX's default of preallocating 75 % of the device memory per process
would let only one of them run, so it allocates on demand here (kernels inherit the environment).
"""

import os

# A notebook whose name starts with "_" is not a chapter: the chapter template
# (book/_template.ipynb, tested by tests/test_layout.py) is not collected by `pytest --nbval book`
# (naming it on the command line still runs it).
collect_ignore_glob = ["book/_*.ipynb"]

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr", "application/javascript", "text/html")


#: The tests of the built book (the browser check and the PDF): skipped, not failed, where
#: ``_build/html``, Chromium or the PDF is missing (``ICLGD_REQUIRE_BOOK=1`` makes that a failure).
BOOK_CHECKS = ("tests/test_book_html.py", "tests/test_pdf.py")


def book_check_skips(skipped) -> dict[str, int]:
    """``{reason: count}`` of the skipped test reports that belong to :data:`BOOK_CHECKS`."""
    out: dict[str, int] = {}
    for report in skipped:
        if not str(getattr(report, "nodeid", "")).startswith(BOOK_CHECKS):
            continue
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        out[reason] = out.get(reason, 0) + 1
    return out


def pytest_terminal_summary(terminalreporter):
    """Say at the end of the run that the browser check did not run, and why: so that nobody
    mistakes its skips for a pass."""
    skips = book_check_skips(terminalreporter.stats.get("skipped", []))
    if not skips:
        return
    terminalreporter.section("the browser check of the built book did NOT run", sep="!")
    for reason, n in sorted(skips.items()):
        terminalreporter.line(f"{n} skipped: {reason}")
    terminalreporter.line(
        "To run it: build the book (README command 1), `apt-get install -y chromium` (or set "
        "$CHROMIUM to a Chromium binary), then run the tests again; ICLGD_REQUIRE_BOOK=1 turns "
        "these skips into failures (CI sets it)."
    )
