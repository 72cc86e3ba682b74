"""Score the first-contact cases (fca_*): `python -m tests.hangdoctor.corpus.score_fca [--json OUT]`.

For every analyze entry of every fca_* case: run hangdoctor analyze --json (check.run_entry) and list the
problems (check.problems). A case is right on an entry when the first suspect is exactly the expected one (or no
confident suspect when first_suspect is null) and no innocent rank is in a high/medium suspect; the primary
entry is text/s1 + text/s2.
"""

from __future__ import annotations

import argparse
import json
import sys

from tests.hangdoctor.corpus.check import CONFIDENT, CORPUS, entries, problems, run_entry, unfold


def core_ok(verdict: dict, expect: dict) -> tuple[bool, bool]:
    """(first suspect right, no innocent blamed high/medium)."""
    suspects = verdict.get("suspects", [])
    confident = [s for s in suspects if s["confidence"] in CONFIDENT]
    want = expect.get("first_suspect")
    if want is None:
        first = not confident
    else:
        first = bool(suspects) and suspects[0]["folded"] == want
    innocent = set(unfold(expect["innocent"])) if expect.get("innocent") else set()
    blamed = any(innocent & set(s["ranks"]) for s in confident)
    return first, not blamed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    out = []
    for case in sorted(p for p in CORPUS.glob("fca_*") if (p / "case.json").exists()):
        rows = []
        for entry, expect in entries(case):
            code, verdict, err = run_entry(case, entry)
            first, clean = core_ok(verdict, expect)
            s = verdict.get("suspects", [])
            rows.append({"paths": entry["paths"], "code": code, "first_ok": first, "innocent_ok": clean,
                         "first": [{k: x.get(k) for k in ("folded", "kind", "confidence")} for x in s[:3]],
                         "summary": verdict.get("summary") or verdict.get("headline"),
                         "problems": problems(verdict, expect, code), "stderr": err[-500:]})
        out.append({"case": case.name, "entries": rows})
        prim = rows[0]
        print(f"{case.name}: primary first_ok={prim['first_ok']} innocent_ok={prim['innocent_ok']} "
              f"all={all(r['first_ok'] and r['innocent_ok'] for r in rows)} first={prim['first'][:1]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
