"""How fast each tool answers `--help` (and its most-used verb's `--help`): wall time of the installed console
script, beside a bare `python -c pass` measured in the same run, repeats interleaved, medians reported.

    .venv/bin/python bench/cli_startup.py --repeats 15

The aim (issue 14): `hangdoctor --help` and `tracing --help` under 0.3 s, `weightdiff --help` under 0.5 s here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "hangdoctor --help": [str(BIN / "hangdoctor"), "--help"],
    "hangdoctor attach --help": [str(BIN / "hangdoctor"), "attach", "--help"],
    "tracing --help": [str(BIN / "tracing"), "--help"],
    "tracing last --help": [str(BIN / "tracing"), "last", "--help"],
    "weightdiff --help": [str(BIN / "weightdiff"), "--help"],
    "weightdiff diff --help": [str(BIN / "weightdiff"), "diff", "--help"],
}


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=60)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    for argv in COMMANDS.values():  # warm the page cache and the .pyc files first
        timed(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, argv in COMMANDS.items():
            times[name].append(timed(argv))
    base = statistics.median(times["python -c pass (baseline)"])
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}; {args.repeats} repeats")
    print("| command | median | min | x bare python |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| `{name}` | {median * 1000:.0f} ms | {min(values) * 1000:.0f} ms | {median / base:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
