"""Batch J's per-form detail: for every case fcj_*, every entry of its analyze list: the first suspect, whether it is
right (first suspect exactly the expected one, or nobody confident for null; no innocent rank in a high/medium
suspect) and the full `problems` list of tests.hangdoctor.corpus.check; then, from recorded.json, which process
(pid, cmdline, real rank) the text dumps' first-suspect rank numbers stand for ("by process").

    PYTHONPATH=. .venv/bin/python -m tests.hangdoctor.first_contact.fcj_forms [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys

from tests.hangdoctor.corpus.check import CONFIDENT, CORPUS, entries, problems, run_entry, unfold


def right(verdict: dict, expect: dict) -> tuple[bool, bool, str]:
    suspects = verdict.get("suspects", [])
    want = expect.get("first_suspect")
    confident = [s for s in suspects if s["confidence"] in CONFIDENT]
    first_ok = (not confident) if want is None else (bool(suspects) and suspects[0]["folded"] == want)
    innocent = set(unfold(expect["innocent"])) if expect.get("innocent") else set()
    blamed = sorted({r for s in confident for r in s["ranks"]} & innocent)
    said = f"{suspects[0]['folded']} ({suspects[0]['kind']}, {suspects[0]['confidence']})" if suspects else "none"
    return first_ok and not blamed, bool(blamed), said


def by_process(case, verdict: dict, expect: dict) -> tuple[bool | None, str]:
    """Which processes the verdict's first suspect stands for: its ranks -> pids (the verdict's `ranks` table, what
    hangdoctor numbered) -> the real rank of each pid (recorded.json). Right by process when the real ranks of those
    pids are exactly the expected first suspect (null expected: None, not applicable)."""
    meta = json.loads((case / "recorded.json").read_text())
    real = {p["pid"]: p["rank"] for p in meta["processes"]}
    suspects = verdict.get("suspects", [])
    if not suspects:
        return (None if expect.get("first_suspect") is None else False), "no suspect"
    pids = {r["rank"]: r.get("pid") for r in verdict.get("ranks", [])}
    parts, got = [], []
    for r in suspects[0]["ranks"]:
        pid = pids.get(r)
        got.append(real.get(pid))
        parts.append(f"rank {r} = pid {pid} (real rank {real.get(pid)})")
    want = expect.get("first_suspect")
    ok = None if want is None else (sorted(x for x in got if x is not None) == sorted(unfold(want))
                                     and None not in got)
    return ok, "; ".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows = []
    for case in sorted(p.parent for p in CORPUS.glob("fcj_*/case.json")):
        for entry, expect in entries(case):
            code, verdict, _ = run_entry(case, entry)
            ok, blamed, said = right(verdict, expect)
            form = "+".join(entry["paths"])
            row = {"case": case.name, "form": form, "right": ok, "innocent_blamed": blamed, "said": said,
                   "expected": expect.get("first_suspect"), "problems": problems(verdict, expect, code),
                   "first_sentence": verdict.get("headline", "")}
            row["by_process_right"], row["by_process"] = by_process(case, verdict, expect)
            rows.append(row)
            print(f"{case.name} | {form} | {'yes' if ok else 'NO'} | {said} | blamed={blamed} | "
                  f"by process {row['by_process_right']}: {row['by_process']}")
            print(f"    headline: {row['first_sentence']}")
            for p in row["problems"]:
                print(f"    - {p}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
