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
