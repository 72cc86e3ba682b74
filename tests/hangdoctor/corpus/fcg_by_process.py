"""Score batch G's cases form by form, with check.problems and process by process:
`python -m tests.hangdoctor.corpus.fcg_by_process [PREFIX]` (default fcg_).

For every analyze entry of every case: the verdict's first suspect (ranks, kind, confidence), the problems that
check.problems lists, whether the form is right (check's rule: first suspect exactly the expected ranks, no innocent
rank in a high/medium suspect), and whether it is right process by process: the pids behind the verdict's first
suspect (the verdict's own rank -> pid table) are exactly the pids of the expected ranks (recorded.json), and no
pid of an innocent rank is in a high/medium suspect. A non-rank process numbered as a rank can make a rank-number
answer look right; the pids cannot."""

from __future__ import annotations

import json
import sys

from tests.hangdoctor.corpus.check import CONFIDENT, CORPUS, entries, problems, run_entry, unfold


def pids_of_ranks(case) -> dict[int, int]:
    recorded = json.loads((case / "recorded.json").read_text())
    return {p["rank"]: p["pid"] for p in recorded["processes"] if p["rank"] is not None}


def judge(case, entry, expect):
    code, verdict, _err = run_entry(case, entry)
    suspects = verdict.get("suspects", [])
    confident = [s for s in suspects if s["confidence"] in CONFIDENT]
    want = expect.get("first_suspect")
    innocent = set(unfold(expect["innocent"])) if expect.get("innocent") else set()
    right = (not confident) if want is None else bool(suspects) and suspects[0]["folded"] == want
    right = right and not ({r for s in confident for r in s["ranks"]} & innocent)
    pid_of = {r["rank"]: r.get("pid") for r in verdict.get("ranks", [])}
    truth = pids_of_ranks(case)
    innocent_pids = {truth[r] for r in innocent}
    if want is None:
        by_pid = not confident
    else:
        by_pid = bool(suspects) and {pid_of.get(r) for r in suspects[0]["ranks"]} == {truth[r] for r in unfold(want)}
    by_pid = by_pid and not ({pid_of.get(r) for s in confident for r in s["ranks"]} & innocent_pids)
    first = suspects[0] if suspects else None
    said = f"{first['folded']} ({first['kind']}, {first['confidence']})" if first else "none"
    said_pids = sorted(pid_of.get(r) for r in first["ranks"]) if first else []
    return {"form": "+".join(entry["paths"]), "right": right, "by_process": by_pid, "said": said,
            "said_pids": said_pids, "headline": verdict.get("headline", ""), "problems": problems(verdict, expect, code),
            "set_aside": [(a.get("role"), a.get("pid")) for a in verdict.get("set_aside", [])]}


def main(argv: list[str]) -> int:
    prefix = argv[0] if argv else "fcg_"
    for case in sorted(p.parent for p in CORPUS.glob(f"{prefix}*/case.json")):
        truth = pids_of_ranks(case)
        print(f"## {case.name}  (expected pids by rank: {truth})")
        for entry, expect in entries(case):
            r = judge(case, entry, expect)
            print(f"- {r['form']}: right={'y' if r['right'] else 'n'} by_process={'y' if r['by_process'] else 'n'} "
                  f"first={r['said']} pids={r['said_pids']} set_aside={r['set_aside']}")
            print(f"    headline: {r['headline']}")
            for p in r["problems"]:
                print(f"    problem: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
