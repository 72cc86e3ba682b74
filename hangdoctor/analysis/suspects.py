"""Who is out of step with its peers, and the likely mismatch.

Responding ranks are grouped by place: the call they wait in, or the function they sit in outside any
collective. The anchor is the call most ranks wait in, preferring a collective or barrier over a p2p
receive (a receiver usually waits for a sender stuck elsewhere). Then:
- a rank outside any collective while others wait in the anchor is a prime suspect; if its stack changed
  between samples it is a straggler (slow, not hung);
- a rank in a different call than the anchor's is a suspect: it never entered the anchor's call;
- a rank that did not answer (stopped, D state, timed out, gone, missing) is a suspect with its reason.
When nobody waits in a collective, the minorities (places with fewer ranks than the largest) are suspects.
The hint phrases the mismatch with coordinates: "pp=0 waits in broadcast <- ... that pp=1 never entered".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hangdoctor.analysis.classes import where
from hangdoctor.analysis.ranks import PROGRESSING, STUCK, UNKNOWN, RankView
from hangdoctor.analysis.waits import Wait
from hangdoctor.identity import natural_key
from hangdoctor.model import D_STATE, ERROR, GONE, MISSING, NOT_PYTHON, PTRACE_DENIED, STOPPED, TIMEOUT
from topology import ParallelDims, fold_ranks

UNRESPONSIVE_REASONS = {
    STOPPED: "stopped (state T): SIGSTOPped or held by a debugger; it cannot progress until it gets SIGCONT",
    D_STATE: "in D state (uninterruptible sleep): blocked in the kernel (filesystem, driver, device)",
    TIMEOUT: "timed out: py-spy did not answer in time (stuck in the kernel, or the machine overloaded)",
    GONE: "gone: it exited during collection",
    NOT_PYTHON: "not Python: py-spy found no Python interpreter in it",
    ERROR: "py-spy failed on it",
    MISSING: "missing: no collector found it (it exited before collection, or its node did not answer)",
}


@dataclass
class Place:
    """Ranks that answered and sit in the same call (or the same function outside any call)."""

    position: str
    wait: Wait | None
    ranks: list[int]
    where: str
    hosts: list[str]
    progress: dict[str, int] = field(default_factory=dict)

    @property
    def in_collective(self) -> bool:
        return self.wait is not None


@dataclass
class Suspect:
    ranks: list[int]
    where: str
    reason: str
    kind: str  # "unresponsive", "outside", "other-call", "minority", "straggler"


def build_places(views: list[RankView], dims: ParallelDims | None) -> list[Place]:
    groups: dict[str, list[RankView]] = defaultdict(list)
    for view in views:
        if view.responded:
            groups[view.position].append(view)
    places = []
    for position, members in groups.items():
        ranks = sorted(v.rank for v in members)
        progress: dict[str, int] = defaultdict(int)
        for v in members:
            progress[v.progress] += 1
        places.append(Place(position=position, wait=members[0].wait, ranks=ranks, where=where(ranks, dims),
                            hosts=sorted({v.identity.host for v in members}, key=natural_key), progress=dict(progress)))
    places.sort(key=lambda p: (-len(p.ranks), p.ranks[0]))
    return places


def pick_anchor(places: list[Place]) -> Place | None:
    waiting = [p for p in places if p.in_collective and p.progress.get(PROGRESSING, 0) < len(p.ranks)]
    if not waiting:
        return None
    return min(waiting, key=lambda p: (p.wait.kind in ("p2p", "wait"), -len(p.ranks), p.ranks[0]))


def _moving(place: Place) -> bool:
    return place.progress.get(PROGRESSING, 0) == len(place.ranks)


def find_suspects(views: list[RankView], places: list[Place], dims: ParallelDims | None,
                  missing: list[int]) -> tuple[list[Suspect], list[str]]:
    """(suspects, hints): out-of-step places first, then the ranks that did not answer."""
    anchor = pick_anchor(places)
    if anchor is not None:
        suspects, hints = _around_anchor(anchor, [p for p in places if p is not anchor], dims)
    else:
        suspects, hints = _minorities(places, dims)
    silent_suspects, silent_hints = _silent(views, missing, dims, bool(places))
    suspects += silent_suspects
    hints += silent_hints
    if places and all(p.progress.get(UNKNOWN, 0) == len(p.ranks) for p in places):
        hints.append("one sample only: add --samples 3 --interval 2 to tell stuck ranks from slow ones")
    return suspects, hints


def _around_anchor(anchor: Place, others: list[Place], dims: ParallelDims | None) -> tuple[list[Suspect], list[str]]:
    suspects, hints = [], []
    waits = _verb(anchor.ranks, "waits", "wait")
    for place in others:
        if place.in_collective:
            reason = f"{_verb(place.ranks, 'waits', 'wait')} in {place.position} instead of {anchor.position}"
            kind = "other-call"
        else:
            reason = f"{place.position} while {_who(anchor.ranks, dims)} {waits} in {anchor.position}"
            kind = "outside"
        if _moving(place):
            reason += "; progressing: its stack changed between samples (a straggler, slow but not hung)"
            kind = "straggler"
        elif place.progress.get(STUCK):
            reason += "; its stack did not change between samples"
        suspects.append(Suspect(place.ranks, place.where, reason, kind))
    never = [p for p in others if not _moving(p)]
    if never:
        ranks = sorted(r for p in never for r in p.ranks)
        detail = "; ".join(f"{_who(p.ranks, dims)} {_verb(p.ranks, 'waits', 'wait')} in {p.position}"
                           if p.in_collective else f"{_who(p.ranks, dims)} {_verb(p.ranks, 'is', 'are')} {p.position}"
                           for p in never)
        hints.append(f"{_who(anchor.ranks, dims)} {waits} in {anchor.position} that {_who(ranks, dims)} never "
                     f"entered ({detail})")
    for place in (p for p in others if _moving(p)):
        hints.append(f"{_who(anchor.ranks, dims)} {waits} in {anchor.position} for {_who(place.ranks, dims)}, "
                     f"still progressing (a straggler, not a hang)")
    if not others:
        hints.append(f"every rank that answered waits in {anchor.position}: if none is missing, the collective "
                     f"itself is stuck (network, NCCL/gloo), not a mismatch between ranks")
    return suspects, hints


def _minorities(places: list[Place], dims: ParallelDims | None) -> tuple[list[Suspect], list[str]]:
    """No rank in a collective: the places with fewer ranks than the largest stand out."""
    if len(places) < 2:
        return [], []
    majority, suspects = places[0], []
    for place in places[1:]:
        reason = f"{place.position}, apart from the majority ({_who(majority.ranks, dims)}: {majority.position})"
        kind = "straggler" if _moving(place) else "minority"
        suspects.append(Suspect(place.ranks, place.where, reason + ("; progressing" if _moving(place) else ""), kind))
    return suspects, ["no rank waits in a recognised collective: compare the places above (add --native to see "
                      "waits inside C++/CUDA calls)"]


def _silent(views: list[RankView], missing: list[int], dims: ParallelDims | None,
            others_answered: bool) -> tuple[list[Suspect], list[str]]:
    """Ranks that did not answer (ptrace refusals are a collection problem, reported as a warning)."""
    silent: dict[str, list[int]] = defaultdict(list)
    for view in views:
        if not view.responded and view.status != PTRACE_DENIED:
            silent[view.status].append(view.rank)
    if missing:
        silent[MISSING].extend(missing)
    suspects = [Suspect(sorted(ranks), where(sorted(ranks), dims), UNRESPONSIVE_REASONS.get(status, status),
                        "unresponsive") for status, ranks in silent.items()]
    hints = []
    if silent and others_answered:
        ranks = sorted(r for rs in silent.values() for r in rs)
        hints.append(f"{_who(ranks, dims)} did not respond ({', '.join(sorted(silent))}): the others may be "
                     f"waiting for {'it' if len(ranks) == 1 else 'them'}")
    return suspects, hints


def _verb(ranks: list[int], one: str, many: str) -> str:
    return one if len(ranks) == 1 else many


def _who(ranks: list[int], dims: ParallelDims | None) -> str:
    """"pp=1 (all tp, all dp)" with the topology (plus the ranks when few); "rank 3" / "ranks 0-5" without it."""
    if dims is not None:
        text = where(ranks, dims)
        if len(ranks) <= 4:
            text += f" [rank{'s' if len(ranks) > 1 else ''} {fold_ranks(ranks)}]"
        return text
    return f"rank{'s' if len(ranks) > 1 else ''} {fold_ranks(ranks)}"
