"""What py-spy's --locals costs `attach` (it is on by default): dump time and node-file size, side by side.

On the hung gloo fixture (tests/hangdoctor/fixtures/hung_gloo.py under torchrun, --ranks ranks, PP=2), each
round dumps every rank with `py-spy dump --json` and with `--json --locals`, alternating which goes first; the
ratio is the median over rounds of the per-rank time with locals over without. Then one collector run each
way (2 samples) gives the node file's size, with locals as stored (object addresses dropped, frames factored).

    .venv/bin/python bench/hangdoctor_locals.py --ranks 4 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from hangdoctor.collector import node  # noqa: E402
from hangdoctor.collector.options import CollectOptions, Selection  # noqa: E402
from tests.hangdoctor.livejobs import GlooJob  # noqa: E402

PYSPY = str(Path(sys.executable).with_name("py-spy"))


def dump_all(pids: list[int], flags: list[str]) -> float:
    started = time.perf_counter()
    for pid in pids:
        subprocess.run([PYSPY, "dump", "--json", "--pid", str(pid), *flags], capture_output=True, check=True)
    return (time.perf_counter() - started) / len(pids)


def node_bytes(pids: list[int], local_vars: bool) -> int:
    doc = node.collect(CollectOptions(pyspy=PYSPY, samples=2, interval=0.5, locals=local_vars), Selection(pids=pids))
    return len(json.dumps(doc))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        job = GlooJob(Path(tmp), nproc=args.ranks, extra=["--pp", "2"]).start()
        try:
            pids = sorted(job.pids.values())
            plain, with_locals = [], []
            for round_ in range(args.rounds):
                order = [(plain, []), (with_locals, ["--locals"])]
                for sink, flags in (order if round_ % 2 == 0 else order[::-1]):
                    sink.append(dump_all(pids, flags))
            sizes = (node_bytes(pids, False), node_bytes(pids, True))
        finally:
            job.stop()
    ratio = statistics.median(l / p for l, p in zip(with_locals, plain))
    print(f"| ranks | dump ms per rank, plain | with --locals | ratio (median of {args.rounds} rounds) | "
          f"node file KiB, plain | with --locals |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.ranks} | {statistics.median(plain) * 1000:.1f} | {statistics.median(with_locals) * 1000:.1f} | "
          f"{ratio:.2f}x | {sizes[0] / 1024:.0f} | {sizes[1] / 1024:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
