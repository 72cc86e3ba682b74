"""Check a verdict (hangdoctor's `--json`) against a corpus case's expectations (README.md in this folder).

`run_entry` runs `hangdoctor analyze --json` on one entry of a case's "analyze" list through the CLI's
`main(argv)` (no subprocess) and returns the exit code and the verdict; `problems` lists every expectation the
verdict misses, in words, so that a failing case says all of what is wrong at once.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from hangdoctor.cli import main

CORPUS = Path(__file__).parent
CONFIDENT = ("high", "medium")


def cases() -> list[Path]:
    return sorted(p.parent for p in CORPUS.glob("*/case.json"))


def entries(case: Path) -> list[tuple[dict, dict]]:
    """[(entry, expect)] for one case: each analyze entry with the case's expectations, the entry's on top."""
    data = json.loads((case / "case.json").read_text())
    return [(entry, {**data["expect"], **entry.get("expect", {})}) for entry in data["analyze"]]


def known_miss(case: Path, entry: dict) -> str:
    """Why hangdoctor is known to get this form of the case wrong (case.json's "known_miss": {"forms": [paths
    joined by '+', or "all"], "why": ...}), or "" when it must be right."""
    miss = json.loads((case / "case.json").read_text()).get("known_miss")
    if not miss:
        return ""
    forms = miss.get("forms", "all")
    return miss["why"] if forms == "all" or form_name(entry) in forms else ""


def misreads(case: Path, entry: dict) -> bool:
    """The case's known miss blames with confidence on this form (known_miss's "misreads": true, or a list of the
    forms, `+source` ones included): an innocent rank, or a first suspect the truth does not name, at medium or
    high. Every other known miss must stay honest (`dishonest`): where its form lacks the evidence (a wait kind read
    unknown, a tie, a low guess), it does not blame."""
    said = (json.loads((case / "case.json").read_text()).get("known_miss") or {}).get("misreads")
    return said is True or isinstance(said, list) and form_name(entry) in said


def dishonest(verdict: dict, expect: dict) -> list[str]:
    """What a verdict may not do even where its form lacks the evidence for the truth: name an innocent rank or a
    first suspect other than the truth with medium or high confidence."""
    found = problems(verdict, {"innocent": expect["innocent"]}, 0) if expect.get("innocent") else []
    suspects = verdict.get("suspects", [])
    want = expect.get("first_suspect", "")
    if suspects and suspects[0]["confidence"] in CONFIDENT and want is not None and suspects[0]["folded"] != want:
        found.append(f"a confident first suspect the truth does not name: {suspects[0]['folded']} "
                     f"({suspects[0]['kind']}, {suspects[0]['confidence']}; expected {want})")
    return found


def form_name(entry: dict) -> str:
    """An entry's form: its paths joined by '+', and '+source' where the job's code is read beside them."""
    return "+".join(entry["paths"]) + ("+source" if entry.get("source") else "")


def source_args(entry: dict) -> list[str]:
    """What the entry's analysis may read beside its dumps: the job's code (this repository, where the corpus
    programs are) where the entry says `"source": true`, else nothing on this machine (the dumps' own paths
    would otherwise find files here that CI's clone has elsewhere)."""
    return ["--source", str(CORPUS.parents[2])] if entry.get("source") else ["--no-source"]


def unfold(text: str) -> list[int]:
    ranks = []
    for part in str(text).split(","):
        first, _, last = part.strip().partition("-")
        ranks += list(range(int(first), int(last or first) + 1))
    return ranks


def run_entry(case: Path, entry: dict) -> tuple[int, dict, str]:
    """(exit code, verdict, stderr) of `hangdoctor analyze --json` on the entry's paths."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["analyze", *(str(case / p) for p in entry["paths"]), "--json", *entry.get("args", []), *source_args(entry)]
    code = main(argv, out=Console(file=out, width=200), err=Console(file=err, width=200))
    text = out.getvalue()
    return code, (json.loads(text) if text.strip() else {}), err.getvalue()


def problems(verdict: dict, expect: dict, code: int) -> list[str]:
    found = []
    suspects = verdict.get("suspects", [])
    confident = [s for s in suspects if s["confidence"] in CONFIDENT]
    if "first_suspect" in expect:
        want = expect["first_suspect"]
        if want is None:
            if confident:
                found.append(f"no confident suspect expected, got {confident[0]['folded']} ({confident[0]['kind']})")
        elif not suspects or suspects[0]["folded"] != want:
            got = f"{suspects[0]['folded']} ({suspects[0]['kind']}, {suspects[0]['confidence']})" if suspects else "none"
            found.append(f"first suspect: expected {want}, got {got}")
    if expect.get("innocent"):
        innocent = set(unfold(expect["innocent"]))
        for s in confident:
            blamed = innocent & set(s["ranks"])
            if blamed:
                found.append(f"innocent ranks {sorted(blamed)} named in a {s['confidence']} suspect ({s['kind']})")
    by_rank = {r["rank"]: r for r in verdict.get("ranks", [])}
    for folded, kinds in (expect.get("kinds") or {}).items():
        allowed = set(kinds.split("|"))
        for rank in unfold(folded):
            got = by_rank.get(rank, {}).get("activity")
            if got is None and "unknown" in allowed and rank in by_rank:
                continue  # a rank that did not answer has no stack, so no kind: unknown
            if got not in allowed:
                found.append(f"rank {rank}: expected {kinds}, got {got}")
    roles = [a["role"] for a in verdict.get("set_aside", [])]
    for key, role in (("launchers", "launcher"), ("workers", "worker")):
        if key in expect and roles.count(role) != expect[key]:
            found.append(f"{key}: expected {expect[key]}, got {roles.count(role)}")
    if "hung" in expect and verdict.get("hung") != expect["hung"]:
        found.append(f"hung: expected {expect['hung']}, got {verdict.get('hung')}")
    said = verdict.get("hints", []) + [s["reason"] for s in suspects]  # each thing is said once, here or there
    for text in expect.get("hints", []):
        if not any(text in line for line in said):
            found.append(f"neither a hint nor a suspect mentions {text!r}")
    for folded, peer in (expect.get("peers") or {}).items():
        for rank in unfold(folded):
            got = (by_rank.get(rank, {}).get("peer") or {}).get("rank")
            if got != int(peer):
                found.append(f"rank {rank}: expected peer {peer}, got {got}")
    if expect.get("partial") and code != 1:
        found.append(f"partial report expected (exit 1), got exit {code}")
    return found
