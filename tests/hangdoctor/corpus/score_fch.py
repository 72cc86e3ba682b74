"""Batch H's first-contact detail, form by form: `python -m tests.hangdoctor.corpus.score_fch [PREFIX]`.

For every entry of every case whose name starts with PREFIX (default fch_): the verdict's first suspect (ranks, kind,
confidence, and the pids behind those ranks), whether it is right by ranks (bench/first_contact.py's rule: exactly
the expected first suspect, or no confident suspect when it is null, and no innocent rank in a high- or
medium-confidence suspect) and by process (the same rule on the processes: the verdict's ranks mapped to pids
through its own rank table, the pids to ranks through recorded.json), and check.problems() in full.
"""

from __future__ import annotations

import json
import sys

from tests.hangdoctor.corpus.check import CONFIDENT, CORPUS, entries, problems, run_entry, unfold


def pids_of(verdict: dict, ranks: list[int]) -> list[int]:
    table = {r["rank"]: r.get("pid") for r in verdict.get("ranks", [])}
    return [table.get(rank) for rank in ranks]


def main(prefix: str = "fch_") -> int:
    for case in sorted(p.parent for p in CORPUS.glob(f"{prefix}*/case.json")):
        data = json.loads((case / "case.json").read_text())
        recorded = json.loads((case / "recorded.json").read_text())
        rank_of_pid = {p["pid"]: p["rank"] for p in recorded["processes"]}
        want = data["expect"].get("first_suspect")
        innocent = set(unfold(data["expect"]["innocent"])) if data["expect"].get("innocent") else set()
        print(f"## {case.name} (expected first suspect: {want})")
        for entry, expect in entries(case):
            code, verdict, _ = run_entry(case, entry)
            suspects = verdict.get("suspects", [])
            confident = [s for s in suspects if s["confidence"] in CONFIDENT]
            form = "+".join(entry["paths"])
            if suspects:
                first = suspects[0]
                pids = pids_of(verdict, first["ranks"])
                real = sorted(rank_of_pid.get(pid) for pid in pids if rank_of_pid.get(pid) is not None)
                said = (f"{first['folded']} ({first['kind']}, {first['confidence']}); pids {pids} = recorded "
                        f"ranks {real}")
            else:
                first, real, said = None, [], "none"
            blamed_ranks = sorted({r for s in confident for r in s["ranks"]} & innocent)
            blamed_procs = sorted({rank_of_pid.get(pid) for s in confident for pid in pids_of(verdict, s["ranks"])}
                                  & innocent)
            if want is None:
                by_rank = by_proc = not confident
            else:
                by_rank = bool(first) and first["folded"] == want
                by_proc = bool(first) and real == unfold(want) and None not in real
            by_rank, by_proc = by_rank and not blamed_ranks, by_proc and not blamed_procs
            print(f"- {form}: {said}; right by ranks: {'yes' if by_rank else 'no'}, by process: "
                  f"{'yes' if by_proc else 'no'}; innocent blamed: {blamed_ranks or 'none'}")
            print(f"  headline: {verdict.get('headline', '')}")
            for line in problems(verdict, expect, code):
                print(f"  problem: {line}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
