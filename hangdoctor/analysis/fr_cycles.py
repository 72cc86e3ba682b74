"""Two process groups whose Flight Recorder partings point at each other: a cycle the recorder alone cannot break.

In one group rank A issued a collective that rank B never issued; in another, B issued one that A never issued.
Each waits for the other (an expert-parallel all_to_all that one rank skipped, and the world all_reduce it went on
to). "Never issued, high" would blame whichever side's parting came first by the clocks, a few milliseconds apart.
The stacks break the cycle: the side further along in the program (ahead.py: the later line of the function both
sides are in, or a loop's counter) went past the collective the other still waits in, and is named (medium when
the source or the locals made the order sure, low from the lines alone; from the lines alone, where one side has
fewer ranks, that side instead: both lines may sit in one loop, where the later line says nothing). Where the stacks cannot order the two
sides, nobody is named from the recorder and the cycle is said.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoctor.analysis.ahead import compare
from hangdoctor.analysis.ranks import RankView
from hangdoctor.analysis.sequence import GroupSequence
from hangdoctor.topology import fold_ranks


@dataclass
class Cycle:
    groups: tuple[str, str]  # the two groups' names (GroupSequence.group)
    ranks: list[int]  # the side that went on; [] when the stacks cannot say
    confidence: str
    reason: str
    sides: frozenset[int] = frozenset()  # every rank of both sides


def find_cycle(groups: list[GroupSequence], views: dict[int, RankView], blocks: dict | None) -> Cycle | None:
    missing = [g for g in groups if g.parting is not None and g.parting.kind == "missing"]
    for i, first in enumerate(missing):
        for second in missing[i + 1:]:
            one, other = _issuers(first), _issuers(second)
            x = sorted(one & set(second.parting.never))  # issued in the first group, never in the second
            y = sorted(other & set(first.parting.never))
            if x and y:
                return _broken(first, second, x, y, views, blocks)
    return None


def _issuers(group: GroupSequence) -> set[int]:
    return {rank for ranks in group.parting.issued.values() for rank in ranks}


def _what(group: GroupSequence) -> str:
    ops = "/".join(sorted({w.split(" [", 1)[0] for w in group.parting.issued}))
    return f"{ops} #{group.parting.seq} of the {group.name}"


def _broken(first: GroupSequence, second: GroupSequence, x: list[int], y: list[int],
            views: dict[int, RankView], blocks: dict | None) -> Cycle:
    said = (f"the Flight Recorder shows a cycle: rank{'s' if len(x) > 1 else ''} {fold_ranks(x)} issued "
            f"{_what(first)}, which rank{'s' if len(y) > 1 else ''} {fold_ranks(y)} never issued, and "
            f"{fold_ranks(y)} issued {_what(second)}, which {fold_ranks(x)} never issued: each side waits for the other")
    names, sides = (first.group, second.group), frozenset(x) | frozenset(y)
    a, b = views.get(x[0]), views.get(y[0])
    if a is None or b is None or not a.stack or not b.stack:
        return Cycle(names, [], "low", said, sides)
    order = compare(a.stack, b.stack, blocks, a.frame_locals, b.frame_locals)
    if order is None:
        return Cycle(names, [], "low", f"{said}; the stacks do not say which side is further along", sides)
    ahead, skipped = (x, second) if order.ahead == 0 else (y, first)
    if not order.sure and len(x) != len(y):  # the lines alone guess; fewer ranks going their own way is likelier
        fewer, skipped = (x, second) if len(x) < len(y) else (y, first)
        return Cycle(names, fewer, "low", f"{said}; {fold_ranks(fewer)} {'are' if len(fewer) > 1 else 'is'} the odd "
                     f"one out (fewer ranks), and the stacks' order is a guess from the lines alone ({order.why}): "
                     f"{'they' if len(fewer) > 1 else 'it'} may have gone past {_what(skipped)}, which the others "
                     f"wait in", sides)
    return Cycle(names, ahead, "medium" if order.sure else "low",
                 f"{said}; in the program {fold_ranks(ahead)} {'are' if len(ahead) > 1 else 'is'} further along "
                 f"({order.why}): went past {_what(skipped)}, which the others wait in", sides)
