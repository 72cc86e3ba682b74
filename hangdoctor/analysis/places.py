"""Places: ranks that answered and sit in the same call (or the same function outside any call), the anchor
(where the job as a whole is), how two places relate, and the words that name ranks.

The anchor is the largest place in a communication call (a collective or barrier before a point-to-point
receive, which usually waits for a sender stuck elsewhere); or, when more ranks sit outside any communication
frame than in the largest call, that place (with NCCL, ranks that issued a collective are found later at a GPU
synchronisation: the few still inside a call are the odd ones).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hangdoctor.analysis.classes import where
from hangdoctor.analysis.ranks import BUSY, PROGRESSING, UNKNOWN, RankView
from hangdoctor.analysis.stores import StoreKey, store_keys
from hangdoctor.analysis.waits import Wait
from hangdoctor.identity import natural_key
from hangdoctor.topology import ParallelDims, fold_ranks


@dataclass
class Place:
    """Ranks that answered and sit in the same call (or the same function outside any call)."""

    position: str
    wait: Wait | None
    ranks: list[int]
    where: str
    hosts: list[str]
    progress: dict[str, int] = field(default_factory=dict)
    activity: str = UNKNOWN  # the wait's kind, "busy" or "unknown" (the most common among its ranks)
    views: list[RankView] = field(default_factory=list, repr=False)
    store: StoreKey | None = None  # the rendezvous store its ranks try to reach, where that sets ranks apart

    @property
    def in_collective(self) -> bool:
        """In a communication call (collective, p2p, barrier, work handle, backward's reducer, store)."""
        return self.wait is not None and self.wait.communicates

    @property
    def moving(self) -> bool:
        return self.progress.get(PROGRESSING, 0) == len(self.ranks)

    @property
    def idle_untitled(self) -> bool:
        """Idle in a task loop (a Ray actor's) in dumps that name no process (py-spy's --json): a framework's own
        helper actors idle in that loop too, so this may be no rank at all."""
        return self.wait is not None and self.wait.idle and any(not v.identity.cmdline for v in self.views)

    @property
    def gpu(self) -> bool | None:
        """True when any of its ranks uses a GPU, False when all are known not to, else None."""
        values = {v.gpu for v in self.views}
        return True if True in values else (False if values == {False} else None)


def build_places(views: list[RankView], dims: ParallelDims | None) -> list[Place]:
    """Ranks grouped by where they wait; in a rendezvous store, also by the store they try to reach and their part
    there (stores.py: ranks given different MASTER_ADDR:MASTER_PORT wait in different stores, whatever their
    frames)."""
    groups: dict[tuple[str, StoreKey | None], list[RankView]] = defaultdict(list)
    keys = store_keys(views)
    for view in views:
        if view.responded:
            groups[view.position, keys.get(view.rank)].append(view)
    places = []
    for (position, store), members in groups.items():
        ranks = sorted(v.rank for v in members)
        progress: dict[str, int] = defaultdict(int)
        activities: dict[str, int] = defaultdict(int)
        for v in members:
            progress[v.progress] += 1
            activities[v.activity] += 1
        if store:
            position += f" ({store.words()})"
        places.append(Place(position=position, wait=members[0].wait, ranks=ranks, where=where(ranks, dims),
                            hosts=sorted({v.identity.host for v in members}, key=natural_key), progress=dict(progress),
                            activity=max(activities, key=lambda a: (activities[a], a == BUSY)), views=members,
                            store=store))
    places.sort(key=lambda p: (-len(p.ranks), p.ranks[0]))
    return places


def pick_anchor(places: list[Place]) -> Place | None:
    """Where the job as a whole is (see the module docstring), or None when nobody is stuck anywhere."""
    stuck = [p for p in places if not p.moving and p.activity != BUSY]
    calls = [p for p in stuck if p.in_collective]
    best = min(calls, key=lambda p: (p.wait.kind == "p2p", -len(p.ranks), p.ranks[0])) if calls else None
    # a worker idle in its task loop is where the job is when nobody communicates: the rank still in a task is
    # then the odd one out (the driver waits for its result), not the idle ones
    outside = [p for p in stuck if p.activity in (UNKNOWN, "device-sync") or (p.wait is not None and p.wait.idle)]
    largest = max(outside, key=lambda p: (len(p.ranks), -p.ranks[0])) if outside else None
    if largest is not None and (best is None or len(largest.ranks) > len(best.ranks)):
        return largest if best is not None or len(stuck) > 1 else None
    if best is not None:
        return best
    return max(stuck, key=lambda p: (len(p.ranks), -p.ranks[0])) if len(stuck) > 1 else None


def undecided(place: Place, anchor: Place) -> str:
    """Why two places in different calls do not say which one is out of step, or ""."""
    if place.wait.kind == "p2p" and anchor.wait.kind == "p2p":
        return "sends and receives pair up across stages: this alone is no mismatch"
    if len(place.ranks) == len(anchor.ranks):
        return "as many ranks on each side: the stacks alone cannot say which side is out of step"
    return ""


def strip_outside(position: str) -> str:
    return position.replace("outside any collective, ", "")


def peer_tie(place: Place, anchor: Place) -> str:
    """A local that links the two places: an anchor rank waits for a peer that sits here, or the reverse."""
    for waiting, other in ((anchor, place), (place, anchor)):
        peers = {v.peer.value for v in waiting.views if v.peer is not None and v.peer.is_global and not v.peer.root}
        hit = sorted(peers & set(other.ranks))
        if hit:
            names = {v.peer.name for v in waiting.views if v.peer is not None}
            seen = {v.peer.seen for v in waiting.views if v.peer is not None}
            held = f"{verb(waiting.ranks, 'its', 'their')} locals" if seen == {"locals"} else (
                verb(waiting.ranks, "its call's source line", "their calls' source lines") if seen == {"source"} else
                f"{verb(waiting.ranks, 'its', 'their')} locals or source line")
            return (f"{who_plain(waiting.ranks)} {verb(waiting.ranks, 'waits', 'wait')} for {who_plain(hit)} "
                    f"({'/'.join(sorted(names))} in {held}), "
                    f"{verb(hit, 'which is', 'which are')} in {other.position}")
    return ""


def verb(ranks: list[int], one: str, many: str) -> str:
    return one if len(ranks) == 1 else many


def who_plain(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {fold_ranks(ranks)}"


def who(ranks: list[int], dims: ParallelDims | None) -> str:
    """"pp=1 (all tp, all dp)" with the topology (plus the ranks when few); "rank 3" / "ranks 0-5" without it."""
    if dims is not None:
        text = where(ranks, dims)
        if len(ranks) <= 4:
            text += f" [rank{'s' if len(ranks) > 1 else ''} {fold_ranks(ranks)}]"
        return text
    return who_plain(ranks)
