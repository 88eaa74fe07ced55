"""Root pytest configuration for nbval runs over book/.

nbval compares each cell's stdout and its text/plain and text/latex outputs exactly. stderr (tqdm
progress bars, JAX and library warnings) differs between runs and machines, so it is kept out of
the comparison here -- nbval's documented hook (``collector.skip_compare``).
"""


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr", "application/javascript", "text/html")
