"""First contact: how often hangdoctor names the cause first on corpus cases nobody shaped it on.

A case is right when the verdict's first suspect is exactly the case's `first_suspect` (for null: nobody named
with more than low confidence) and no innocent rank is in a high- or medium-confidence suspect. Scored on the form
a user would have: `attach` for live and GPU cases (what `hangdoctor attach` collects: locals, source lines, two
samples), the paste or text dumps for shape cases; and, beside it, on the text dumps of every case (py-spy's plain
output, two samples). Each is read as `hangdoctor analyze` reads it by default, with the job's code where it is on
this machine (the fixtures are: the frames' source lines come from them), so a text form can score above the same
form in the corpus test, which reads it with --no-source. --rev runs the hangdoctor of that git revision (a temporary worktree, as a subprocess), so
that a batch's score before a change is measured by the same script as after it.

    .venv/bin/python bench/first_contact.py fca_ fcb_ gpu_               # today's code, every case with a prefix
    .venv/bin/python bench/first_contact.py fca_ fcb_ gpu_ --rev 3a3cdc5 # as the code was at 3a3cdc5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.hangdoctor.corpus.check import CORPUS, CONFIDENT, entries, form_name, unfold  # noqa: E402


def verdict_of(tree: Path, case: Path, entry: dict) -> dict:
    argv = [sys.executable, "-m", "hangdoctor", "analyze", *(str(case / p) for p in entry["paths"]), "--json",
            *entry.get("args", [])]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tree, env={"PYTHONPATH": str(tree)}, timeout=300)
    try:
        return json.loads(done.stdout)
    except ValueError:
        return {}


def judge(verdict: dict, expect: dict) -> tuple[bool, str]:
    suspects = verdict.get("suspects", [])
    first = f"{suspects[0]['folded']} ({suspects[0]['kind']}, {suspects[0]['confidence']})" if suspects else "none"
    want = expect.get("first_suspect")
    confident = [s for s in suspects if s["confidence"] in CONFIDENT]
    if want is None:
        good = not confident
    else:
        good = bool(suspects) and suspects[0]["folded"] == want
    innocent = set(unfold(expect["innocent"])) if expect.get("innocent") else set()
    blamed = sorted({r for s in confident for r in s["ranks"]} & innocent)
    if blamed:
        good = False
        first += f"; innocent {blamed} blamed"
    return good, first


def score(tree: Path, prefixes: list[str]) -> list[dict]:
    rows = []
    for case in sorted(p.parent for p in CORPUS.glob("*/case.json")):
        if not any(case.name.startswith(p) for p in prefixes):
            continue
        data = json.loads((case / "case.json").read_text())
        forms = {form_name(e): (e, x) for e, x in entries(case)}
        primary = "attach" if data["origin"] in ("live", "gpu") and "attach" in forms else next(
            (k for k in forms if k.startswith("paste")), next(iter(forms)))
        text = next((k for k in forms if k.startswith("text/")), primary)
        row = {"case": case.name, "origin": data["origin"], "expected": data["expect"].get("first_suspect")}
        for label, key in (("primary", primary), ("text", text)):
            entry, expect = forms[key]
            good, said = judge(verdict_of(tree, case, entry), expect)
            row[label] = {"form": key, "right": good, "said": said}
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefixes", nargs="+", help="case name prefixes, e.g. fca_ fcb_")
    parser.add_argument("--rev", help="score the hangdoctor of this git revision instead of the working tree")
    args = parser.parse_args()
    if args.rev:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), args.rev], cwd=REPO, check=True)
            try:
                rows = score(tree, args.prefixes)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
    else:
        rows = score(REPO, args.prefixes)
    print(f"hangdoctor {'at ' + args.rev if args.rev else '(working tree)'}: first contact on {len(rows)} cases")
    print("| case | origin | expected | form | right | first suspect | text dumps right | first suspect (text) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        p, t = r["primary"], r["text"]
        print(f"| {r['case']} | {r['origin']} | {r['expected']} | {p['form']} | {'yes' if p['right'] else 'NO'} | "
              f"{p['said']} | {'yes' if t['right'] else 'NO'} | {t['said']} |")
    right = sum(r["primary"]["right"] for r in rows)
    text = sum(r["text"]["right"] for r in rows)
    print(f"\nfirst contact: {right}/{len(rows)} on the user's form, {text}/{len(rows)} on the text dumps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
