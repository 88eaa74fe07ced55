#!/usr/bin/env python3
"""Fetch and verify the offline assets of Part I §5.3: see :mod:`iclgd.llm.fetch` (``--help``)."""

import sys

from iclgd.llm.fetch import main

if __name__ == "__main__":
    sys.exit(main())
