"""Batch fde: every form of every fde_ case: first suspect, right (first suspect + no innocent blamed), problems."""
import json
import sys
from pathlib import Path

from tests.hangdoctor.corpus.check import CONFIDENT, CORPUS, entries, problems, run_entry, unfold

out = {}
for case in sorted(p.parent for p in CORPUS.glob("fde_*/case.json")):
    if len(sys.argv) > 1 and case.name not in sys.argv[1:]:
        continue
    rows = []
    for entry, expect in entries(case):
        code, verdict, err = run_entry(case, entry)
        sus = verdict.get("suspects", [])
        first = f"{sus[0]['folded']} ({sus[0]['kind']}, {sus[0]['confidence']})" if sus else "none"
        want = expect.get("first_suspect")
        confident = [s for s in sus if s["confidence"] in CONFIDENT]
        good = (not confident) if want is None else bool(sus) and sus[0]["folded"] == want
        innocent = set(unfold(expect["innocent"])) if expect.get("innocent") else set()
        blamed = sorted({r for s in confident for r in s["ranks"]} & innocent)
        rows.append({"form": "+".join(entry["paths"]), "first": first, "right": good and not blamed,
                     "innocent_blamed": blamed, "problems": problems(verdict, expect, code),
                     "summary": verdict.get("summary") or verdict.get("headline") or "",
                     "suspects": [(s["folded"], s["kind"], s["confidence"]) for s in sus]})
    out[case.name] = rows
print(json.dumps(out, indent=1))
