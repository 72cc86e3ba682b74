"""hangdoctor against its corpus of hangs (tests/hangdoctor/corpus/): how many cases it gets right, and how
long `analyze` takes on each.

A case is right when every recorded form of it (text dumps as two samples, --native, --locals, --json,
attach's node files, pastes) meets the case's expectations: the first suspect, no confident blame on the
innocent, every rank's wait kind, launchers and workers set aside, the hints (tests/hangdoctor/corpus/README.md).
Each form runs `hangdoctor analyze --json` in this process (the CLI's main, as the test does); the time per case
is the median over --repeat runs of all its forms together.

    .venv/bin/python bench/hangdoctor_corpus.py --repeat 5
    .venv/bin/python bench/hangdoctor_corpus.py --against bc056aa   # and an older hangdoctor, first suspects only

--against REV also runs the hangdoctor of git revision REV (checked out in a temporary worktree, run as a
subprocess) on every form that names a first suspect, and counts the forms where its first suspect is the
expected one (for "nobody", that it names none): older verdicts carry no confidence, kinds or set-aside
processes, so only the first suspect can be compared.
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
from tests.hangdoctor.corpus.check import cases, dishonest, entries, form_name, problems, run_entry, source_args  # noqa: E402


def first_suspects_of(tree: Path) -> tuple[int, int, int]:
    """(forms right, forms, cases with every such form right) for the hangdoctor in `tree`."""
    right = total = whole = 0
    for case in cases():
        case_right = True
        for entry, expect in entries(case):
            if "first_suspect" not in expect:
                continue
            reads_source = (tree / "hangdoctor/formats/job_source.py").exists()  # older trees read none
            argv = [sys.executable, "-m", "hangdoctor", "analyze", *(str(case / p) for p in entry["paths"]), "--json",
                    *entry.get("args", []), *(source_args(entry) if reads_source else [])]
            done = subprocess.run(argv, capture_output=True, text=True, cwd=tree, env={"PYTHONPATH": str(tree)},
                                  timeout=120)
            total += 1
            try:
                suspects = json.loads(done.stdout)["suspects"]
            except (ValueError, KeyError):
                case_right = False
                continue
            got = suspects[0]["folded"] if suspects else None
            good = got == expect["first_suspect"]
            right += good
            case_right &= good
        whole += case_right
    return right, total, whole


def against(rev: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), rev], cwd=REPO, check=True)
        try:
            right, total, whole = first_suspects_of(tree)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
    print(f"hangdoctor at {rev}: first suspect right in {right}/{total} forms; cases with every form right: "
          f"{whole}/{len(cases())}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", metavar="REV", help="also the first suspects of the hangdoctor at this git revision")
    args = parser.parse_args()
    if args.against:
        against(args.against)
    rows, right, missed, confident = [], 0, 0, 0
    for case in cases():
        data = json.loads((case / "case.json").read_text())
        forms = entries(case)
        times, wrong, blamed = [], [], False
        for attempt in range(args.repeat):
            started = time.perf_counter()
            for entry, expect in forms:
                code, verdict, _ = run_entry(case, entry)
                if attempt == 0:
                    found = problems(verdict, expect, code) if verdict else ["no verdict"]
                    wrong += [f"{form_name(entry)}: {p}" for p in found]
                    blamed = blamed or bool(found and verdict and dishonest(verdict, expect))
            times.append(time.perf_counter() - started)
        right += not wrong
        missed += bool(data.get("known_miss")) and bool(wrong)
        confident += bool(data.get("known_miss")) and blamed
        rows.append((case.name, data["origin"], len(forms), statistics.median(times) / len(forms), wrong))
    print(f"corpus: {right}/{len(rows)} right" + (f" ({missed} known misses, in case.json's known_miss; "
                                                  f"{missed - confident} of them blame nobody with confidence, "
                                                  f"{confident} do)" if missed else ""))
    print("| case | origin | forms | analyze s per form (median) | right |")
    print("|---|---|---:|---:|---|")
    for name, origin, forms, seconds, wrong in rows:
        print(f"| {name} | {origin} | {forms} | {seconds:.3f} | {'yes' if not wrong else 'NO: ' + wrong[0]} |")
    return 0 if right + missed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
