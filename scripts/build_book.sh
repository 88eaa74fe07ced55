#!/usr/bin/env bash
# Build the book the way CI does, then (with --check) open it in headless Chromium.
#
#     bash scripts/build_book.sh            # clean build of every page, warnings are errors
#     bash scripts/build_book.sh --check    # ... then tests/test_book_html.py (screenshots in
#                                           #     _build/screenshots/)
#
# Uses the Python in $PYTHON (default: python3 on PATH) and the jupyter-book next to it.
# Needs no network: MathJax is vendored in book/_static/mathjax (scripts/vendor_mathjax.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
bindir="$("$PYTHON" -c 'import os, sys; print(os.path.dirname(sys.executable))')"
JB="$bindir/jupyter-book"
[ -x "$JB" ] || JB="jupyter-book"

"$PYTHON" scripts/record_status.py --check
start=$(date +%s)
"$JB" build . --all -W --keep-going
echo "book built in $(( $(date +%s) - start )) s: _build/html/index.html"
# the notebooks a reader downloads (and the Colab branch's): glued numbers written into the markdown
"$PYTHON" scripts/make_reader_notebooks.py --html _build/html

if [ "${1:-}" = "--check" ]; then
    ICLGD_REQUIRE_BOOK=1 "$PYTHON" -m pytest tests/test_book_html.py -q -s  # -s: its timing line
fi
