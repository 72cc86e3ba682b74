"""Who is out of step, why we think so, how sure we are, and the likely mismatch.

Responding ranks are grouped by place: the call they wait in, or the function they sit in outside any wait.
The anchor is where the job as a whole is: the largest place in a communication call (a collective or barrier
before a point-to-point receive, which usually waits for a sender stuck elsewhere); or, when more ranks sit
outside any communication frame than in the largest call, that place (with NCCL, ranks that issued a
collective are found later at a GPU synchronisation: the few still inside a call are the odd ones).
Every other place is out of step with the anchor, and its evidence says how much that means:

    busy / straggler   outside any wait and running (stack changed, CPU used, GIL held)       high
    local-wait         waits on a lock, a batch, a sleep or I/O while the anchor communicates high
    unresponsive       stopped (T) or in D state: it cannot progress                          high
    other-call         waits in another communication call than the anchor's                  medium (high when a
                                                                                               peer local ties them)
    inside-call        still inside a call that the anchor's ranks are past                   medium
    outside            outside any wait we know, nothing says it runs                         medium without a GPU,
                                                                                               low with one
    unresponsive       gone or missing                                                        medium
    device-sync        waits on the GPU: probably for an earlier asynchronous collective      low (not blamed alone)
    minority           a smaller place where nobody communicates                              low
    unresponsive       py-spy timed out or failed: under load that proves nothing             low

Suspects are ordered by confidence, then by that order; every suspect carries its evidence (frames, samples,
locals, /proc state, CPU) for the JSON.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hangdoctor.analysis.classes import where
from hangdoctor.analysis.ranks import BUSY, PROGRESSING, STUCK, UNKNOWN, RankView
from hangdoctor.analysis.wait_rules import COMM_KINDS, LOCAL_KINDS
from hangdoctor.analysis.waits import Wait
from hangdoctor.identity import natural_key
from hangdoctor.model import (D_STATE, ERROR, GONE, MISSING, NOT_PYTHON, PTRACE_DENIED, STOPPED, TIMEOUT,
                              SetAside)
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
_UNRESPONSIVE_SURE = {STOPPED: "high", D_STATE: "high", GONE: "medium", MISSING: "medium"}
_ORDER = ("busy", "straggler", "local-wait", "unresponsive-high", "other-call", "inside-call", "outside",
          "unresponsive-medium", "minority", "device-sync", "unresponsive-low")
_CONFIDENCE = {"high": 0, "medium": 1, "low": 2}
SEQUENCE_HINT = ("record PyTorch's Flight Recorder (TORCH_FR_BUFFER_SIZE=2000 in the job's environment) to compare "
                 "each rank's sequence of collectives, or rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL, which checks "
                 "that every rank calls the same collective")
NCCL_HINT = "NCCL_DEBUG=INFO shows where NCCL stalls (its transport: P2P, SHM, network)"
GPU_HINT = ("to see where they really wait, rerun with CUDA_LAUNCH_BLOCKING=1 (collectives then block where they "
            "are called: that is how BigScience's 200B hang showed its frames), or record PyTorch's Flight Recorder "
            "(TORCH_FR_BUFFER_SIZE=2000 in the job's environment) to compare each rank's last collective; "
            "`attach --native` shows the CUDA and NCCL frames")


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

    @property
    def in_collective(self) -> bool:
        """In a communication call (collective, p2p, barrier, work handle, backward's reducer, store)."""
        return self.wait is not None and self.wait.communicates

    @property
    def moving(self) -> bool:
        return self.progress.get(PROGRESSING, 0) == len(self.ranks)

    @property
    def gpu(self) -> bool | None:
        """True when any of its ranks uses a GPU, False when all are known not to, else None."""
        values = {v.gpu for v in self.views}
        return True if True in values else (False if values == {False} else None)


@dataclass
class Suspect:
    ranks: list[int]
    where: str
    reason: str
    kind: str  # busy, straggler, local-wait, unresponsive, other-call, inside-call, outside, device-sync, minority
    confidence: str = "medium"  # high, medium, low
    evidence: list[dict] = field(default_factory=list)  # [{"type": "frame"|"samples"|"cpu"|"thread"|"local"|..., "text": ...}]


def build_places(views: list[RankView], dims: ParallelDims | None) -> list[Place]:
    groups: dict[str, list[RankView]] = defaultdict(list)
    for view in views:
        if view.responded:
            groups[view.position].append(view)
    places = []
    for position, members in groups.items():
        ranks = sorted(v.rank for v in members)
        progress: dict[str, int] = defaultdict(int)
        activities: dict[str, int] = defaultdict(int)
        for v in members:
            progress[v.progress] += 1
            activities[v.activity] += 1
        places.append(Place(position=position, wait=members[0].wait, ranks=ranks, where=where(ranks, dims),
                            hosts=sorted({v.identity.host for v in members}, key=natural_key), progress=dict(progress),
                            activity=max(activities, key=lambda a: (activities[a], a == BUSY)), views=members))
    places.sort(key=lambda p: (-len(p.ranks), p.ranks[0]))
    return places


def pick_anchor(places: list[Place]) -> Place | None:
    """Where the job as a whole is (see the module docstring), or None when nobody is stuck anywhere."""
    stuck = [p for p in places if not p.moving and p.activity != BUSY]
    calls = [p for p in stuck if p.in_collective]
    best = min(calls, key=lambda p: (p.wait.kind == "p2p", -len(p.ranks), p.ranks[0])) if calls else None
    outside = [p for p in stuck if p.activity in (UNKNOWN, "device-sync")]
    largest = max(outside, key=lambda p: (len(p.ranks), -p.ranks[0])) if outside else None
    if largest is not None and (best is None or len(largest.ranks) > len(best.ranks)):
        return largest if best is not None or len(stuck) > 1 else None
    if best is not None:
        return best
    return max(stuck, key=lambda p: (len(p.ranks), -p.ranks[0])) if len(stuck) > 1 else None


def find_suspects(views: list[RankView], places: list[Place], dims: ParallelDims | None, missing: list[int],
                  *, native: bool = False, set_aside: list[SetAside] | None = None) -> tuple[list[Suspect], list[str]]:
    """(suspects, hints): the most certain first."""
    anchor = pick_anchor(places)
    others = [p for p in places if p is not anchor]
    suspects: list[Suspect] = [_judge(place, anchor, dims) for place in others]
    hints = _mismatch_hints(anchor, others, dims, views, native) if anchor is not None else _lone_hints(places, dims, native)
    hints += _worker_hints(places, set_aside or [], dims)
    silent_suspects, silent_hints = _silent(views, missing, dims, bool(places))
    suspects += silent_suspects
    hints += silent_hints
    if places and all(p.progress.get(UNKNOWN, 0) == len(p.ranks) for p in places):
        hints.append("one sample only: add --samples 3 --interval 2 to tell stuck ranks from slow ones")
    suspects.sort(key=lambda s: (_CONFIDENCE[s.confidence], _ORDER.index(_order_key(s)), len(s.ranks), s.ranks[0]))
    return suspects, hints


def _order_key(suspect: Suspect) -> str:
    return f"unresponsive-{suspect.confidence}" if suspect.kind == "unresponsive" else suspect.kind


def _judge(place: Place, anchor: Place | None, dims: ParallelDims | None) -> Suspect:
    """Why this place is out of step with the anchor, and how sure that is."""
    evidence = _evidence(place)
    here = place.position
    there = f"{_who(anchor.ranks, dims)} {_verb(anchor.ranks, 'waits', 'wait')} in {anchor.position}" if anchor and \
        anchor.in_collective else (f"{_who(anchor.ranks, dims)} {_verb(anchor.ranks, 'is', 'are')} {anchor.position}"
                                   if anchor else "")
    if place.moving:
        return Suspect(place.ranks, place.where, f"{here}: progressing, its stack changed between samples (a "
                       f"straggler, slow but not hung){'; ' + there if there else ''}", "straggler", "high", evidence)
    if place.activity == BUSY:
        return Suspect(place.ranks, place.where, f"busy {_strip_outside(here)}, running outside any wait"
                       f"{' while ' + there if there else ''}", "busy", "high", evidence)
    kind = place.activity
    if kind in LOCAL_KINDS:
        says = place.wait.says if place.wait else kind
        sure = "high" if anchor is not None and anchor.in_collective else "medium"
        return Suspect(place.ranks, place.where, f"waits in {here}: {says}{' while ' + there if there else ''}",
                       "local-wait", sure, evidence)
    if place.in_collective:
        if anchor is not None and anchor.in_collective:
            tied = _peer_tie(place, anchor)
            reason = f"{_verb(place.ranks, 'waits', 'wait')} in {here} instead of {anchor.position}"
            undecided = _undecided(place, anchor)
            if tied:
                reason += f"; {tied}"
                evidence.append({"type": "local", "text": tied})
            elif undecided:
                reason += f"; {undecided}"
            return Suspect(place.ranks, place.where, reason + _stuck_note(place), "other-call",
                           "high" if tied else "low" if undecided else "medium", evidence)
        return Suspect(place.ranks, place.where, f"still inside {here} while {there or 'the others show no call'} with "
                       f"no communication frame (past this call, or waiting on the GPU after issuing it)"
                       + _stuck_note(place), "inside-call", "medium", evidence)
    if kind == "device-sync":
        return Suspect(place.ranks, place.where, f"waits on the GPU in {here}, probably for an earlier asynchronous "
                       f"collective{' while ' + there if there else ''}: not blamed alone", "device-sync", "low", evidence)
    if anchor is not None and anchor.in_collective:
        gpu = place.gpu
        reason = f"{here} while {there}"
        if gpu is False:
            reason += "; no GPU is in use, so it is not waiting on one: it never entered that call"
        else:
            reason += ("; it may have issued that call and wait on the GPU (NCCL collectives return before they "
                       "complete), or be blocked in a C call" if gpu else
                       "; it may be blocked in a C call we cannot see (add --native), or, with NCCL, wait on the GPU "
                       "after issuing that call")
        return Suspect(place.ranks, place.where, reason + _stuck_note(place), "outside",
                       "medium" if gpu is False else "low", evidence)
    return Suspect(place.ranks, place.where, f"{here}, apart from {there or 'the others'}" + _stuck_note(place),
                   "minority", "low", evidence)


def _undecided(place: Place, anchor: Place) -> str:
    """Why two places in different calls do not say which one is out of step, or ""."""
    if place.wait.kind == "p2p" and anchor.wait.kind == "p2p":
        return "sends and receives pair up across stages: this alone is no mismatch"
    if len(place.ranks) == len(anchor.ranks):
        return "as many ranks on each side: the stacks alone cannot say which side is out of step"
    return ""


def _strip_outside(position: str) -> str:
    return position.replace("outside any collective, ", "")


def _stuck_note(place: Place) -> str:
    return "; its stack did not change between samples" if place.progress.get(STUCK) else ""


def _evidence(place: Place) -> list[dict]:
    """What we saw, from the place's first rank (all of them sit in the same place)."""
    view = place.views[0]
    items = []
    if view.wait is not None:
        wait = view.wait
        items.append({"type": "frame", "text": wait.call.label(), "kind": wait.kind, "sure": wait.sure,
                      "via": wait.evidence, "says": wait.says})
    elif view.innermost is not None:
        items.append({"type": "frame", "text": view.innermost.label(), "kind": UNKNOWN})
    if view.helper is not None:
        name, wait = view.helper
        items.append({"type": "thread-wait", "text": f"its thread {name!r} waits in {wait.label}", "kind": wait.kind})
    moving = place.progress.get(PROGRESSING, 0)
    if moving or place.progress.get(STUCK):
        items.append({"type": "samples", "text": f"stack changed between samples on {moving} of {len(place.ranks)}"
                      if moving else f"stack unchanged over {view.answered} samples"})
    cpus = [v.cpu_percent for v in place.views if v.cpu_percent is not None]
    if cpus:
        items.append({"type": "cpu", "text": f"CPU {max(cpus):.0f}% of a core (highest of the place)"})
    if view.active is not None:
        items.append({"type": "thread", "text": "py-spy: " + ("active" if view.active else "idle")
                      + (", holding the GIL" if view.gil else "")})
    if view.peer is not None:
        items.append({"type": "local", "text": f"{view.peer.name}={view.peer.value} in {view.peer.frame.label()}"})
    states = sorted({v.state for v in place.views if v.state})
    if states:
        items.append({"type": "state", "text": f"/proc state {', '.join(states)}"})
    return items


def _peer_tie(place: Place, anchor: Place) -> str:
    """A local that links the two places: an anchor rank waits for a peer that sits here, or the reverse."""
    for waiting, other in ((anchor, place), (place, anchor)):
        peers = {v.peer.value for v in waiting.views if v.peer is not None and v.peer.is_global}
        hit = sorted(peers & set(other.ranks))
        if hit:
            names = {v.peer.name for v in waiting.views if v.peer is not None}
            return (f"{_who_plain(waiting.ranks)} {_verb(waiting.ranks, 'waits', 'wait')} for {_who_plain(hit)} "
                    f"({'/'.join(sorted(names))} in {_verb(waiting.ranks, 'its', 'their')} locals), "
                    f"{_verb(hit, 'which is', 'which are')} in {other.position}")
    return ""


def _mismatch_hints(anchor: Place, others: list[Place], dims: ParallelDims | None, views: list[RankView],
                    native: bool) -> list[str]:
    hints = []
    waits = _verb(anchor.ranks, "waits", "wait")
    stuck = [p for p in others if not p.moving]
    if anchor.in_collective and stuck:
        ranks = sorted(r for p in stuck for r in p.ranks)
        detail = "; ".join(f"{_who(p.ranks, dims)} {_verb(p.ranks, 'waits', 'wait')} in {p.position}"
                           if p.wait is not None else f"{_who(p.ranks, dims)} {_verb(p.ranks, 'is', 'are')} {p.position}"
                           for p in stuck)
        hints.append(f"{_who(anchor.ranks, dims)} {waits} in {anchor.position} that {_who(ranks, dims)} never "
                     f"entered ({detail})")
    elif not anchor.in_collective and stuck:
        inside = [p for p in stuck if p.in_collective]
        if inside:
            hints.append(f"{_who(anchor.ranks, dims)} {_verb(anchor.ranks, 'shows', 'show')} no communication frame "
                         f"({_strip_outside(anchor.position)}) while " + "; ".join(
                             f"{_who(p.ranks, dims)} {_verb(p.ranks, 'is', 'are')} still in {p.position}" for p in inside)
                         + ": with NCCL a collective returns before it completes, so ranks that issued it are found "
                         "later at a GPU synchronisation (.item(), .cpu(), torch.cuda.synchronize); the ranks still "
                         "inside the call are the ones to look at")
    for place in (p for p in others if p.moving):
        hints.append(f"{_who(anchor.ranks, dims)} {waits if anchor.in_collective else 'sit'} in {anchor.position} "
                     f"for {_who(place.ranks, dims)}, still progressing (a straggler, not a hang)")
    if not others and anchor.in_collective:
        hints.append(f"every rank that answered waits in {anchor.position}: if none is missing, the collective "
                     f"itself is stuck (network, NCCL/gloo), not a mismatch between ranks: {NCCL_HINT}")
    elif anchor.in_collective and any(p.in_collective and _undecided(p, anchor) and not _peer_tie(p, anchor)
                                      for p in stuck):
        hints.append(f"the ranks wait in calls that do not match, and nothing in their stacks says which side is "
                     f"out of step: {SEQUENCE_HINT}")
    hints += _peer_hints(anchor, views, dims)
    for place in [anchor, *stuck]:
        helped = [v for v in place.views if v.helper is not None]
        if helped:
            name, wait = helped[0].helper
            hints.append(f"{_who(place.ranks, dims)} {_verb(place.ranks, 'sits', 'sit')} in backward while another "
                         f"thread ({name!r}) waits in {wait.label}: the communication backward waits for")
    gpu_places = [p for p in [anchor, *stuck] if p.activity == "device-sync" or (
        p.activity == UNKNOWN and p.gpu is not False and any(q.in_collective for q in [anchor, *stuck]))]
    if gpu_places:
        ranks = sorted(r for p in gpu_places for r in p.ranks)
        hints.append(f"{_who(ranks, dims)} may be waiting on the GPU for an asynchronous collective: {GPU_HINT}")
    elif not native and any(p.activity == UNKNOWN for p in [anchor, *stuck]):
        hints.append("add --native to see waits inside C++/CUDA calls of the ranks outside any known wait")
    return hints


def _worker_hints(places: list[Place], set_aside: list[SetAside], dims: ParallelDims | None) -> list[str]:
    """A rank waiting for its DataLoader: what its workers are doing (the busy or blocked ones)."""
    hints = []
    for place in (p for p in places if p.activity == "dataloader"):
        pids = {v.identity.pid: v for v in place.views}
        hosts = {v.identity.host for v in place.views}
        workers = [a for a in set_aside if a.role == "worker" and a.host in hosts and (a.ppid in pids or a.ppid is None)]
        working = [a for a in workers if not a.idle]
        if working:
            hints.append(f"{_who(place.ranks, dims)} {_verb(place.ranks, 'waits', 'wait')} for a batch from its "
                         f"DataLoader workers; " + "; ".join(
                             f"worker pid {a.pid}" + (f" (of rank {pids[a.ppid].rank})" if a.ppid in pids else "")
                             + f" is in {a.where}" for a in working[:4]))
        elif workers:
            hints.append(f"{_who(place.ranks, dims)} {_verb(place.ranks, 'waits', 'wait')} for a batch, but its "
                         f"DataLoader workers all wait for work: a worker may have died (check the job's log)")
        else:
            hints.append(f"{_who(place.ranks, dims)} {_verb(place.ranks, 'waits', 'wait')} for a batch from its "
                         f"DataLoader workers: dump them too (py-spy dump --pid <worker>) to see what they do")
    return hints


def _lone_hints(places: list[Place], dims: ParallelDims | None, native: bool) -> list[str]:
    if not places:
        return []
    if len(places) == 1 and places[0].activity in COMM_KINDS | {"device-sync"} and not places[0].moving:
        return [f"every rank that answered waits in {places[0].position}: if none is missing, the collective "
                f"itself is stuck (network, NCCL/gloo), not a mismatch between ranks: {NCCL_HINT}"]
    if any(p.activity == UNKNOWN for p in places) and not native:
        return ["no rank waits in a recognised call: compare the places above (add --native to see waits inside "
                "C++/CUDA calls)"]
    return []


def _peer_hints(anchor: Place, views: list[RankView], dims: ParallelDims | None) -> list[str]:
    """"ranks 2-3 wait in broadcast from rank 6; rank 6 is in recv <- ..." from the anchor's locals."""
    by_rank = {v.rank: v for v in views}
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for view in anchor.views:
        if view.peer is not None and view.peer.is_global:
            groups[(view.peer.name, view.peer.value)].append(view.rank)
    hints = []
    for (name, peer), ranks in sorted(groups.items(), key=lambda item: item[0][1]):
        direction = "from" if "src" in name else "to" if "dst" in name else "with"
        other = by_rank.get(peer)
        if other is None:
            state = "no dump of it"
        elif not other.responded:
            state = f"it did not respond ({other.status})"
        elif other.position == anchor.position:
            continue
        else:
            state = f"rank {peer} is {'in ' + other.position if other.wait else other.position}"
        hints.append(f"{_who(sorted(ranks), dims)} {_verb(ranks, 'waits', 'wait')} in {anchor.wait.op if anchor.wait else 'a call'} "
                     f"{direction} rank {peer} ({name}); {state}")
    return hints


def _silent(views: list[RankView], missing: list[int], dims: ParallelDims | None,
            others_answered: bool) -> tuple[list[Suspect], list[str]]:
    """Ranks that did not answer (ptrace refusals are a collection problem, reported as a warning)."""
    silent: dict[str, list[int]] = defaultdict(list)
    for view in views:
        if not view.responded and view.status != PTRACE_DENIED:
            silent[view.status].append(view.rank)
    if missing:
        silent[MISSING].extend(missing)
    suspects = []
    for status, ranks in silent.items():
        ranks = sorted(ranks)
        evidence = [{"type": "status", "text": status}]
        errors = sorted({v.error for v in views if v.rank in set(ranks) and v.error})
        if errors:
            evidence.append({"type": "error", "text": errors[0][:300]})
        suspects.append(Suspect(ranks, where(ranks, dims), UNRESPONSIVE_REASONS.get(status, status), "unresponsive",
                                _UNRESPONSIVE_SURE.get(status, "low"), evidence))
    hints = []
    if silent and others_answered:
        ranks = sorted(r for rs in silent.values() for r in rs)
        hints.append(f"{_who(ranks, dims)} did not respond ({', '.join(sorted(silent))}): the others may be "
                     f"waiting for {'it' if len(ranks) == 1 else 'them'}")
    return suspects, hints


def _verb(ranks: list[int], one: str, many: str) -> str:
    return one if len(ranks) == 1 else many


def _who_plain(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {fold_ranks(ranks)}"


def _who(ranks: list[int], dims: ParallelDims | None) -> str:
    """"pp=1 (all tp, all dp)" with the topology (plus the ranks when few); "rank 3" / "ranks 0-5" without it."""
    if dims is not None:
        text = where(ranks, dims)
        if len(ranks) <= 4:
            text += f" [rank{'s' if len(ranks) > 1 else ''} {fold_ranks(ranks)}]"
        return text
    return _who_plain(ranks)
