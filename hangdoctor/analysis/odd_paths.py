"""When every rank sits in the same place, the way each came there may still set some apart.

A rank-dependent branch can lead every rank into the same function from different lines: with SyncBatchNorm in
two sub-models, the rank whose input skipped the second enters the first one's all-reduce while the others wait
in the second's; the innermost frames agree, the caller's line does not. So, when one place holds every rank that
answered and each of them is stuck or waits, their stacks are compared outermost first: at the first frame where
they part, a majority (at least half) that came one way and a few (at most a third) that came another set those
few apart. Evidence, not proof (the few may be where the program meant every rank to be): low.
"""

from __future__ import annotations

from hangdoctor.analysis.ahead import compare
from hangdoctor.analysis.places import Place
from hangdoctor.analysis.ranks import STUCK, RankView
from hangdoctor.analysis.suspects import Suspect
from hangdoctor.topology import fold_ranks


def odd_path_suspects(views: dict[int, RankView], places: list[Place], blocks: dict | None = None) -> list[Suspect]:
    """Low suspects for the few ranks whose path into the one shared place parts from the majority's; with the
    loops' counters (`blocks` and --locals), the side a pass further through the loop, whatever its size."""
    answered = [v for v in views.values() if v.responded and v.stack]
    if len(answered) < 3 or len([p for p in places if p.ranks]) != 1:
        return []
    if not all(v.progress == STUCK or v.wait is not None for v in answered):
        return []  # ranks that move are anywhere: their paths tell nothing
    paths = {v.rank: [f for f in reversed(v.stack) if not f.native] for v in answered}
    depth = _parting(list(paths.values()))
    if depth is None:
        return []
    groups: dict[tuple, list[int]] = {}
    for rank, path in paths.items():
        frame = path[depth] if depth < len(path) else None
        groups.setdefault((frame.name, frame.file, frame.line) if frame else (), []).append(rank)
    if len(groups) == 2 and all(groups):
        further = _a_pass_further(views, list(groups.values()), blocks)
        if further:
            return further
    largest = max(groups.values(), key=len)
    if 2 * len(largest) < len(answered):
        return []
    majority = paths[largest[0]][depth] if depth < len(paths[largest[0]]) else None
    suspects = []
    for key, ranks in sorted(groups.items(), key=lambda item: (len(item[1]), min(item[1]))):
        if ranks is largest or 3 * len(ranks) > len(answered) or not key:
            continue
        name, file, line = key
        who = f"rank{'s' if len(ranks) > 1 else ''} {fold_ranks(sorted(ranks))}"
        came = f"{name} ({file}:{line})"
        others = f"{majority.name} ({majority.file}:{majority.line})" if majority else "elsewhere"
        reason = (f"every rank is in the same place, but {who} came there through {came}, the others through "
                  f"{others}: a branch only {'they' if len(ranks) > 1 else 'it'} took (a condition on its data or "
                  f"rank), so the same call may stand for different steps")
        suspects.append(Suspect(sorted(ranks), came, reason, "odd-path", "low",
                                [{"type": "frame", "text": came}]))
    return suspects


def _parting(paths: list[list]) -> int | None:
    """The first depth (outermost first) at which the paths do not all hold the same frame; None if none."""
    shortest = min(len(p) for p in paths)
    for depth in range(shortest):
        first = paths[0][depth]
        if any(p[depth] is not first and p[depth] != first for p in paths[1:]):
            return depth
    return None if all(len(p) == shortest for p in paths) else shortest


def _a_pass_further(views: dict[int, RankView], sides: list[list[int]], blocks: dict | None) -> list[Suspect]:
    """Two sides in the same call from two lines of one function (`all_reduce(x, group=tp)` and, further down the
    loop, `all_reduce(g, group=dp)`): where the loop's counter in their locals differs, the side a pass further
    went past a collective the other still waits in (it returned for that side alone: a skipped call, or a group
    the rank is not in). Medium: the counter proves the order, the stacks do not say why it returned."""
    a, b = (views[side[0]] for side in sides)
    order = compare(a.stack, b.stack, blocks, a.frame_locals, b.frame_locals)
    if order is None or not order.by_counter:
        return []
    ahead, behind = sides[order.ahead], sides[1 - order.ahead]
    if any(compare(views[r].stack, a.stack if order.ahead == 0 else b.stack, blocks, views[r].frame_locals,
                   a.frame_locals if order.ahead == 0 else b.frame_locals) is not None for r in ahead[1:]):
        return []  # the side is not one pass: its own ranks are at different points
    frame = order.frame
    who = f"rank{'s' if len(ahead) > 1 else ''} {fold_ranks(sorted(ahead))}"
    came = f"{frame.name} ({frame.file}:{order.lines[order.ahead]})"
    reason = (f"every rank waits in the same call, but from two lines of {frame.name} ({frame.file}): {order.why}; "
              f"{who} went past a collective rank{'s' if len(behind) > 1 else ''} {fold_ranks(sorted(behind))} "
              f"still wait{'' if len(behind) > 1 else 's'} in (it returned for {'them' if len(ahead) > 1 else 'it'} "
              "alone: a call skipped, or a group it is not in)")
    return [Suspect(sorted(ahead), came, reason, "odd-path", "medium", [{"type": "locals", "text": order.why}])]
