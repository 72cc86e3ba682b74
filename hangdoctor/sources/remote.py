"""The collector's command line for other machines (srun steps, pdsh): a list of arguments, never a shell string.

The collector is started by its file path (`PYTHON .../hangdoctor/collector/__main__.py`), which works under
any Python 3 that sees this file (a shared file system), whether or not hangdoctor is installed there.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hangdoctor.sources import CollectOptions

COLLECTOR_MAIN = Path(__file__).resolve().parents[1] / "collector" / "__main__.py"


def collector_argv(options: CollectOptions, *, python: str = sys.executable, match: dict | None = None,
                   time_limit: float, node: str | None = None) -> list[str]:
    argv = [python, str(COLLECTOR_MAIN), "--py-spy", options.pyspy, "--samples", str(options.samples),
            "--interval", f"{options.interval:g}", "--dump-timeout", f"{options.dump_timeout:g}",
            "--time-limit", f"{time_limit:g}"]
    for key, value in (match or {}).items():
        argv += ["--match", key if value is None else f"{key}={value}"]
    if options.native:
        argv.append("--native")
    if options.nonblocking:
        argv.append("--nonblocking")
    if node:
        argv += ["--node", node]
    return argv
