"""A first-contact batch, form by form: every analyze form of every case with the given name prefixes, its first
suspect, whether it is right (first suspect exact, no innocent in a high/medium suspect) and check.problems; and the
first suspect mapped back to pids (recorded.json: ranks in text dumps are numbered in pid order after launchers, so
a rank number is checked against the process that holds it).
Run: PYTHONPATH=. python -m tests.hangdoctor.first_contact.forms fdj_ [fdk_ ...]"""

import json
import sys

from tests.hangdoctor.corpus.check import CONFIDENT, CORPUS, entries, problems, run_entry, unfold


def main(prefixes: list[str]) -> int:
    if not prefixes:
        print("usage: python -m tests.hangdoctor.first_contact.forms PREFIX [PREFIX ...]  (e.g. fdj_)", file=sys.stderr)
        return 2
    for case in sorted({p.parent for prefix in prefixes for p in CORPUS.glob(f"{prefix}*/case.json")}):
        rec = json.loads((case / "recorded.json").read_text())
        procs = rec["processes"]
        rank_pid = {p["rank"]: p["pid"] for p in procs if p["rank"] is not None}
        print(f"== {case.name}  ranks->pids {rank_pid}  launchers/others "
              f"{[p['pid'] for p in procs if p['rank'] is None]}")
        for entry, expect in entries(case):
            code, verdict, _ = run_entry(case, entry)
            suspects = verdict.get("suspects", [])
            first = suspects[0] if suspects else None
            confident = [s for s in suspects if s["confidence"] in CONFIDENT]
            want = expect.get("first_suspect")
            right = (not confident) if want is None else bool(first) and first["folded"] == want
            innocent = set(unfold(expect["innocent"])) if expect.get("innocent") else set()
            blamed = sorted({r for s in confident for r in s["ranks"]} & innocent)
            right = right and not blamed
            said = f"{first['folded']} ({first['kind']}, {first['confidence']})" if first else "none"
            pids = [rank_pid.get(r) for r in first["ranks"]] if first else []
            print(f"  {'+'.join(entry['paths']):16s} right={'y' if right else 'n'} first={said} pids={pids} "
                  f"blamed={blamed} problems={problems(verdict, expect, code)}")
            if entry["paths"][0] in ("attach", "text/s1"):
                print(f"      summary: {verdict.get('headline', '')!s:.500}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
