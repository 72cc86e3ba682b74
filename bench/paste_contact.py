"""First contact for pastes: does `hangdoctor analyze` read what people paste, process by process?

A batch is a folder of pastes, each `<name>.txt` (our own reproduction of the shape of a paste from a public
thread: its prefixes, wrapping, grouping and headers, not its text) beside `<name>.truth.json`, written before
any verdict was read:

    {"source": "https://github.com/...", "shape": "one line: what the paste is",
     "args": [],                       # what a user would add to analyze (normally nothing)
     "processes": [                    # in reading order
       {"rank": 3,                     # or null when the paste names no rank
        "role": "rank",                # "rank", or "aside" for a launcher, a helper, a watchdog
        "responded": true,             # false: py-spy's error, or no stack, for this process
        "frames": ["<module>", "main", "train", "all_reduce"]}]}   # work thread, Python frames, outermost first

A paste that holds no frame at all has `"processes": []`: it is read rightly when analyze exits 3 (nothing to
analyse) with one `Error:` line and no traceback. Any other paste is read rightly when analyze gives a verdict (no
error, no refusal), finds as many ranks and as many processes set aside as the truth, and each rank (matched by
number when the truth names them, else in reading order) answered or not as the truth says and has exactly its
frames: every frame present, none added, in order.
A frame matches by name, a qualified name matching its last part (py-spy says `Trainer.train`, faulthandler
`train`). --rev scores the hangdoctor of a git revision (a temporary worktree), so before and after are measured
by one script.

    .venv/bin/python bench/paste_contact.py tests/hangdoctor/pastes/batch1
    .venv/bin/python bench/paste_contact.py tests/hangdoctor/pastes/batch1 --rev c2a9944
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def unfold(text: str) -> set[int]:
    ranks: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        low, _, high = part.partition("-")
        ranks.update(range(int(low), int(high or low) + 1))
    return ranks


def stacks_of(verdict: dict) -> dict[int, list[str]]:
    """Each rank's main-thread frame names, outermost first, from the merged tree."""
    stacks: dict[int, list[str]] = {}
    for node in verdict.get("tree", []):
        if node.get("frame") is None or node["frame"].get("native"):
            continue  # a native frame (py-spy --native) is not counted: the truth lists Python frames
        for rank in unfold(node.get("ranks", "")):
            stacks.setdefault(rank, []).append(node["frame"]["name"])
    return stacks


def same_frame(seen: str, expected: str) -> bool:
    return seen == expected or seen.rsplit(".", 1)[-1] == expected.rsplit(".", 1)[-1]


def judge(verdict: dict, code: int, stderr: str, truth: dict) -> list[str]:
    """What analyze got wrong on one paste (empty: read rightly)."""
    if not truth["processes"]:
        errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
        ok = code == 3 and len(errors) == 1 and "Traceback" not in stderr
        return [] if ok else [f"a paste without frames: exit {code}, {len(errors)} Error lines"]
    if not verdict:
        return [f"no verdict (exit {code})"]
    wrong = [f"error: {e}" for e in verdict.get("errors", [])]
    want = [p for p in truth["processes"] if p.get("role", "rank") == "rank"]
    aside = [p for p in truth["processes"] if p.get("role", "rank") != "rank"]
    ranks = sorted(verdict.get("ranks", []), key=lambda r: r["rank"])
    if len(ranks) != len(want):
        wrong.append(f"{len(ranks)} ranks found, {len(want)} in the paste")
    if len(verdict.get("set_aside", [])) != len(aside):
        wrong.append(f"{len(verdict.get('set_aside', []))} set aside, {len(aside)} in the paste")
    named = all(p.get("rank") is not None for p in want)
    by_rank = {r["rank"]: r for r in ranks}
    stacks = stacks_of(verdict)
    for i, expected in enumerate(want):
        seen = by_rank.get(expected["rank"]) if named else (ranks[i] if i < len(ranks) else None)
        label = f"rank {expected['rank']}" if named else f"process {i}"
        if seen is None:
            wrong.append(f"{label}: not found")
            continue
        answered = seen.get("status") == "ok"
        if answered != expected.get("responded", True):
            wrong.append(f"{label}: status {seen.get('status')}")
        frames, truth_frames = stacks.get(seen["rank"], []), expected.get("frames", [])
        if expected.get("responded", True) and (
                len(frames) != len(truth_frames) or not all(map(same_frame, frames, truth_frames))):
            wrong.append(f"{label}: frames {' > '.join(frames[-4:]) or 'none'} ({len(frames)}), "
                         f"expected {' > '.join(truth_frames[-4:])} ({len(truth_frames)})")
    return wrong


def analyze(tree: Path, paste: Path, args: list[str]) -> tuple[dict, int, str]:
    argv = [sys.executable, "-m", "hangdoctor", "analyze", str(paste), "--json", *args]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tree, env={"PYTHONPATH": str(tree)}, timeout=300)
    try:
        return json.loads(done.stdout), done.returncode, done.stderr
    except ValueError:
        return {}, done.returncode, done.stderr


def score(tree: Path, folder: Path) -> int:
    pastes = sorted(p for p in folder.glob("*.txt"))
    right = 0
    print("| paste | shape | read rightly | what went wrong |\n|---|---|---|---|")
    for paste in pastes:
        truth = json.loads(paste.with_suffix(".truth.json").read_text())
        verdict, code, stderr = analyze(tree, paste.resolve(), truth.get("args", []))
        wrong = judge(verdict, code, stderr, truth)
        right += not wrong
        print(f"| {paste.stem} | {truth.get('shape', '')[:80]} | {'y' if not wrong else '**n**'} | "
              f"{'; '.join(wrong)[:300]} |")
    print(f"\n**{right}/{len(pastes)}** read rightly")
    return right


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--rev", help="score the hangdoctor of this git revision")
    args = parser.parse_args()
    if not args.rev:
        score(REPO, args.folder)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), args.rev],
                       check=True, capture_output=True)
        try:
            score(tree, args.folder)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
