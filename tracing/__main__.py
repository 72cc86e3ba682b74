"""python -m tracing: see tracing/cli.py."""

import sys

from tracing.cli import main

if __name__ == "__main__":
    sys.exit(main())
