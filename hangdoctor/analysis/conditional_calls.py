"""A collective of the whole job issued inside a branch on the rank: only the ranks that take the branch reach it.

`if is_last: dist.all_reduce(loss)` (the world group, where the dp group was meant), `if rank == 0:
dist.barrier()`: the ranks outside the branch never issue the call, so the ranks inside wait in it for ever, and
where the others wait for them in turn (a pipeline's `send` to the last stage, named by its `dst`), the two sides
wait for each other with nothing in the line order to say which is out of step. The branch says it: a call of the
default group (no group given, or the locals say `group: None`) inside an `if` whose test names the rank
(`is_last`, `rank == 0`, `is_main_process`: ahead.py's words, and `is_first`/`is_last`), which the other sides'
frames of the same function are not in, while they wait for its ranks by their own locals (a send's `dst`: they
stand where the program's exchange with these ranks is due). Where the others only went on past the branch (a
rank that skipped `else: wait_for_everyone()` and waits in the next epoch's all-reduce, for these ranks by
elimination), the one that went on is the one to look at, and this reads nothing. Read from the source's
branches (attach, or `analyze --source`): a guess from line order would be no better than the tie.
"""

from __future__ import annotations

import re

from hangdoctor.analysis.ahead import RANK_WORDS

_PATH_WORDS = re.compile(RANK_WORDS.pattern + r"|\b(?:is_last|is_first|is_last_rank|is_first_rank)\b")
_DEFAULT_GROUP = "every rank not in this call"  # waitgraph's words for a call whose group is the default one
_WHOLE_JOB_CALLS = ("collective", "barrier")


def conditional_collective(nodes: list, blocks: dict | None, into: dict) -> tuple[object, str] | None:
    """(the node whose ranks issued a whole-job collective in a branch on the rank, the reason) where exactly one
    side of the cycle did, the others' frames of that function stand outside the branch, and another side waits
    for it by its own locals (`into`: node id -> edges into it); else None."""
    found = []
    for node in nodes:
        place = node.place
        if place is None or place.wait is None or place.wait.kind not in _WHOLE_JOB_CALLS \
                or not node.peers.startswith(_DEFAULT_GROUP):
            continue
        branch = _rank_branch_around(place.views[0].stack, blocks)
        if branch is None:
            continue
        frame, (first, last, test) = branch
        others = [n for n in nodes if n is not node]
        outside = all(n.place is not None and any(f.file == frame.file and f.name == frame.name
                                                  and not first <= f.line <= last for f in n.place.views[0].stack)
                      for n in others)
        waited = any(e.strength == "explicit" for e in into.get(node.id, []))
        if outside and waited:
            found.append((node, frame, first, test))
    if len(found) != 1:
        return None
    node, frame, first, test = found[0]
    return node, (f"issued {node.place.wait.op} of the whole job (no group given: the default one) inside "
                  f"`if {test}:` (line {first} of {frame.name} ({frame.file})), a branch on the rank that the others "
                  f"did not take: they never issue it, and wait for {'it' if len(node.ranks) == 1 else 'them'} in "
                  f"calls of their own")


def _rank_branch_around(stack, blocks: dict | None):
    """(the frame, (first, last, test)) of the innermost branch on the rank around the stack's Python frames,
    from the wait outwards; None without the source's branches."""
    if not blocks:
        return None
    for frame in stack:
        known = blocks.get((frame.file, frame.line)) if not frame.native else None
        if not known:
            continue
        branches = [(first, last, text) for first, last, text in known.get("tests", [])
                    if first <= frame.line <= last and _PATH_WORDS.search(text)]
        if branches:
            return frame, max(branches)  # the innermost: it starts last
    return None
