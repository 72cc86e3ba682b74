"""hangdoctor against its corpus of hangs (tests/hangdoctor/corpus/): how many cases it gets right, and how
long `analyze` takes on each.

A case is right when every recorded form of it (text dumps as two samples, --native, --locals, --json,
attach's node files, pastes) meets the case's expectations: the first suspect, no confident blame on the
innocent, every rank's wait kind, launchers and workers set aside, the hints (tests/hangdoctor/corpus/README.md).
Each form runs `hangdoctor analyze --json` in this process (the CLI's main, as the test does); the time per case
is the median over --repeat runs of all its forms together.

    .venv/bin/python bench/hangdoctor_corpus.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.hangdoctor.corpus.check import cases, entries, problems, run_entry  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows, right = [], 0
    for case in cases():
        data = json.loads((case / "case.json").read_text())
        forms = entries(case)
        times, wrong = [], []
        for attempt in range(args.repeat):
            started = time.perf_counter()
            for entry, expect in forms:
                code, verdict, _ = run_entry(case, entry)
                if attempt == 0:
                    found = problems(verdict, expect, code) if verdict else ["no verdict"]
                    wrong += [f"{'+'.join(entry['paths'])}: {p}" for p in found]
            times.append(time.perf_counter() - started)
        right += not wrong
        rows.append((case.name, data["origin"], len(forms), statistics.median(times) / len(forms), wrong))
    print(f"corpus: {right}/{len(rows)} right")
    print("| case | origin | forms | analyze s per form (median) | right |")
    print("|---|---|---:|---:|---|")
    for name, origin, forms, seconds, wrong in rows:
        print(f"| {name} | {origin} | {forms} | {seconds:.3f} | {'yes' if not wrong else 'NO: ' + wrong[0]} |")
    return 0 if right == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
