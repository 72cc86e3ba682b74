"""The collector's command line for other machines (srun steps, pdsh): a list of arguments, never a shell string.

The collector is started by its file path (`PYTHON -S .../hangdoctor/collector/__main__.py`), which works under
any Python 3 that sees this file (a shared file system), whether or not hangdoctor is installed there.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from hangdoctor.collector.options import to_argv
from hangdoctor.sources import CollectOptions, Selection
from hangdoctor.sources.pyspy import pyspy_version

COLLECTOR_MAIN = Path(__file__).resolve().parents[1] / "collector" / "__main__.py"




def collector_argv(options: CollectOptions, *, python: str = sys.executable, match: dict | None = None,
                   time_limit: float, node: str | None = None, chunked: bool = False) -> list[str]:
    # -S: no site-packages (the collector is stdlib only), a third of Python's start-up saved on every node.
    # pyspy_version: saves every node a `py-spy --version`; the same path is the same py-spy on a shared install
    options = replace(options, pyspy_version=options.pyspy_version or pyspy_version(options.pyspy))
    argv = [python, "-S", str(COLLECTOR_MAIN), *to_argv(options, Selection(match=match or {}, node=node)),
            "--time-limit", f"{time_limit:g}"]
    return argv + ["--chunked"] if chunked else argv
