"""First contact 'by process': is the verdict's first suspect the right *process*, not just the right number?

Text dumps number ranks in reading order after launchers are set aside; a non-rank process taken for a rank shifts
the numbers, and a wrong answer can then carry the expected number. This maps the verdict's first suspect (and its
confident suspects) to pids through the verdict's own `ranks` table, and the case's expected ranks to pids through
recorded.json, on the same forms bench/first_contact.py scores (the user's form and the text dumps).

    PYTHONPATH=. .venv/bin/python -m tests.hangdoctor.corpus.by_process fci_
"""

from __future__ import annotations

import json
import sys

from tests.hangdoctor.corpus.check import CONFIDENT, CORPUS, entries, run_entry, unfold


def pids_of(verdict: dict, ranks: list[int]) -> set[int]:
    table = {r["rank"]: r.get("pid") for r in verdict.get("ranks", [])}
    return {table.get(r) for r in ranks}


def judge(case, entry, expect, recorded) -> tuple[bool, str]:
    _, verdict, _ = run_entry(case, entry)
    by_rank = {p["rank"]: p["pid"] for p in recorded["processes"] if p["rank"] is not None}
    suspects = verdict.get("suspects", [])
    want = expect.get("first_suspect")
    innocent = {by_rank[r] for r in unfold(expect["innocent"])} if expect.get("innocent") else set()
    confident = [s for s in suspects if s["confidence"] in CONFIDENT]
    if want is None:
        good, said = not confident, "no confident suspect" if not confident else "confident suspect named"
    else:
        got = pids_of(verdict, suspects[0]["ranks"]) if suspects else set()
        good = got == {by_rank[r] for r in unfold(want)}
        said = f"pids {sorted(p for p in got if p is not None)} for expected {sorted(by_rank[r] for r in unfold(want))}"
    blamed = set().union(*(pids_of(verdict, s["ranks"]) for s in confident)) & innocent if confident else set()
    if blamed:
        good = False
        said += f"; innocent pids {sorted(blamed)} blamed"
    return good, said


def main(prefixes: list[str]) -> int:
    right = {"primary": 0, "text": 0}
    rows = 0
    for case in sorted(p.parent for p in CORPUS.glob("*/case.json")):
        if not any(case.name.startswith(p) for p in prefixes):
            continue
        data = json.loads((case / "case.json").read_text())
        recorded = json.loads((case / "recorded.json").read_text())
        forms = {"+".join(e["paths"]): (e, x) for e, x in entries(case)}
        primary = "attach" if data["origin"] in ("live", "gpu") and "attach" in forms else next(
            (k for k in forms if k.startswith("paste")), next(iter(forms)))
        text = next((k for k in forms if k.startswith("text/")), primary)
        rows += 1
        line = [case.name]
        for label, key in (("primary", primary), ("text", text)):
            good, said = judge(case, *forms[key], recorded)
            right[label] += good
            line.append(f"{key}: {'yes' if good else 'NO'} ({said})")
        print(" | ".join(line))
    print(f"by process: {right['primary']}/{rows} on the user's form, {right['text']}/{rows} on the text dumps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["fci_"]))
