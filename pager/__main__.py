"""``python -m mempager``: the same command line as ``mempager``."""

from __future__ import annotations

import sys

from mempager.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
