"""Who is out of step, why we think so, and how sure we are.

Every place other than the anchor (places.py: where the job as a whole is) is out of step with it, and its
evidence says how much that means:

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
locals, /proc state, CPU) for the JSON. Two places in different calls say nothing about which is out of step
when they hold as many ranks each, or are a send and a receive (low, and the hints point to the Flight
Recorder).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace

from hangdoctor.analysis.causes import Cause
from hangdoctor.analysis.classes import where
from hangdoctor.analysis.hints import lone_hints, mismatch_hints, relaunch_hints, worker_hints
from hangdoctor.analysis.places import Place, peer_tie, pick_anchor, strip_outside, undecided, verb, who
from hangdoctor.analysis.ranks import BUSY, PROGRESSING, STUCK, UNKNOWN, RankView
from hangdoctor.analysis.wait_rule import LOCAL_KINDS
from hangdoctor.analysis.waitgraph import COMMUNICATING, STRENGTH, Node, WaitGraph, describe
from hangdoctor.model import (D_STATE, ERROR, GONE, MISSING, NO_FR_DUMP, NOT_PYTHON, PTRACE_DENIED, STOPPED, TIMEOUT,
                              SetAside)
from hangdoctor.topology import ParallelDims

UNRESPONSIVE_REASONS = {
    STOPPED: "stopped (state T): SIGSTOPped or held by a debugger; it cannot progress until it gets SIGCONT",
    D_STATE: "in D state (uninterruptible sleep): blocked in the kernel (filesystem, driver, device)",
    TIMEOUT: "timed out: py-spy did not answer in time (stuck in the kernel, or the machine overloaded)",
    GONE: "it exited during collection",
    NOT_PYTHON: "not Python: py-spy found no Python interpreter in it",
    ERROR: "py-spy failed on it",
    MISSING: "no collector found it (it exited before collection, was never started, or its node did not answer)",
    NO_FR_DUMP: "no Flight Recorder dump of it was read (none given, or its file unreadable; see the errors)",
}
_UNRESPONSIVE_SURE = {STOPPED: "high", D_STATE: "high", GONE: "medium", MISSING: "medium"}
_ORDER = ("busy", "straggler", "local-wait", "unresponsive-high", "other-call", "inside-call", "outside",
          "unresponsive-medium", "minority", "odd-thread", "device-sync", "unresponsive-low")
_CONFIDENCE = {"high": 0, "medium": 1, "low": 2}

# what a local wait is, where its row says nothing more
_LOCAL_SAYS = {"lock": "a lock, a condition or a thread's join", "io": "another process: a file, socket, pipe or child",
               "sleep": "sleeping", "dataloader": "a batch from its DataLoader"}


@dataclass
class Suspect:
    ranks: list[int]
    where: str
    reason: str
    kind: str  # busy, straggler, local-wait, unresponsive, other-call, inside-call, outside, device-sync, minority,
    # odd-thread (odd_threads.py), odd-path (odd_paths.py), odd-locals (odd_locals.py)
    confidence: str = "medium"  # high, medium, low
    evidence: list[dict] = field(default_factory=list)  # [{"type": "frame"|"samples"|"cpu"|"thread"|"local"|..., "text": ...}]


def find_suspects(views: list[RankView], places: list[Place], dims: ParallelDims | None, missing: list[int],
                  *, native: bool = False, set_aside: list[SetAside] | None = None,
                  decided: frozenset[int] = frozenset(), graph: WaitGraph | None = None
                  ) -> tuple[list[Suspect], list[str]]:
    """(suspects, hints): the most certain first. decided: the ranks the wait-for graph names as out of step;
    graph: who waits for whom (the mismatch hint names only the ranks the anchor waits for)."""
    anchor = pick_anchor(places)
    others = [p for p in places if p is not anchor]
    waited_for = any(not p.moving for p in places)  # a straggler is one only if some rank waits for it
    alone = len(places) == 1
    suspects: list[Suspect] = [_judge(place, anchor, dims, alone) for place in others if waited_for or not place.moving]
    waited = None
    if graph is not None and anchor is not None:
        node = next((n for n in graph.nodes if n.place is anchor), None)
        waited = {r for e in graph.out.get(node.id, []) if e.strength != "possible" for r in e.ranks} if node else None
    hints = (mismatch_hints(anchor, others, dims, views, native, decided, waited) if anchor is not None
             else lone_hints(places, dims, native))
    hints += worker_hints(places, set_aside or [], dims)
    hints += relaunch_hints([v for p in places for v in p.views], dims)
    silent_suspects, silent_hints = _silent(views, missing, dims, bool(places))
    suspects += silent_suspects
    hints += silent_hints
    if places and all(p.progress.get(UNKNOWN, 0) == len(p.ranks) for p in places):
        hints.append("one sample only: add --samples 3 --interval 2 to tell stuck ranks from slow ones")
    suspects.sort(key=lambda s: (_CONFIDENCE[s.confidence], _ORDER.index(_order_key(s)), len(s.ranks), s.ranks[0]))
    return suspects, hints


def _op(place: Place) -> str:
    if place.wait is None:
        return place.position
    return f"{place.wait.op} ({place.store.words()})" if place.store else place.wait.op


def _order_key(suspect: Suspect) -> str:
    return f"unresponsive-{suspect.confidence}" if suspect.kind == "unresponsive" else suspect.kind


def _judge(place: Place, anchor: Place | None, dims: ParallelDims | None, alone: bool = False) -> Suspect:
    """Why this place is out of step with the anchor, and how sure that is. alone: it holds every rank."""
    evidence = _evidence(place)
    here = place.position
    there = f"{who(anchor.ranks, dims)} {verb(anchor.ranks, 'waits', 'wait')} in {anchor.position}" if anchor and \
        anchor.in_collective else (f"{who(anchor.ranks, dims)} {verb(anchor.ranks, 'is', 'are')} {anchor.position}"
                                   if anchor else "")
    if place.moving:
        return Suspect(place.ranks, place.where, f"{here}: progressing, its stack changed between samples (a "
                       f"straggler, slow but not hung, or a rank retrying in a loop: the others wait for it either "
                       f"way){'; ' + there if there else ''}", "straggler", "high", evidence)
    if place.activity == BUSY:
        return Suspect(place.ranks, place.where, f"busy {strip_outside(here)}, running outside any wait"
                       f"{' while ' + there if there else ''}", "busy", "high", evidence)
    kind = place.activity
    if kind in LOCAL_KINDS:
        says = (place.wait.says if place.wait else "") or _LOCAL_SAYS.get(kind, kind)
        # beside ranks in a collective it holds them up; alone, it is one of several places; every rank in it:
        # nothing sets one apart (vLLM's workers all sleeping in their broadcast queue's back-off)
        # (a worker idle in its task loop holds up only peers in a collective: else it just has no task)
        idle = place.wait is not None and place.wait.idle
        sure = "high" if anchor is not None and anchor.in_collective else "low" if alone or idle else "medium"
        if place.idle_untitled:
            sure = "low"
            says += (" (or not a rank at all: these dumps name no process, and a framework's own actors, Ray Train's "
                     "controller and synchronization actor, idle there too)")
        return Suspect(place.ranks, place.where, f"waits in {here}: {says}{' while ' + there if there else ''}",
                       "local-wait", sure, evidence)
    if place.in_collective:
        if anchor is not None and anchor.in_collective:
            tied = peer_tie(place, anchor)
            # the calls by name only: "Who is where" (and the mismatch hint) give both places in full
            reason = (f"{verb(place.ranks, 'waits', 'wait')} in {_op(place)}, not in {_op(anchor)} with "
                      f"{who(anchor.ranks, dims)}")
            open_question = undecided(place, anchor)
            if tied:
                reason += f"; {tied}"
                evidence.append({"type": "local", "text": tied})
            elif open_question:
                reason += f"; {open_question}"
            return Suspect(place.ranks, place.where, reason + _stuck_note(place), "other-call",
                           "high" if tied else "low" if open_question else "medium", evidence)
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
    if alone:  # every rank is here: there are no others to be apart from
        return Suspect(place.ranks, place.where, f"{here}, every rank alike: nothing in the stacks tells one rank "
                       f"from the others" + _stuck_note(place), "minority", "low", evidence)
    return Suspect(place.ranks, place.where, f"{here}, apart from {there or 'the others'}" + _stuck_note(place),
                   "minority", "low", evidence)


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
    elif view.awaited is not None:
        name, what = view.awaited
        items.append({"type": "thread", "text": f"its thread {name!r} {what}" if name else what})
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
        items.append({"type": "local" if view.peer.seen == "locals" else "source",
                      "text": f"{view.peer.name}={view.peer.value} in {view.peer.frame.label()}"})
    states = sorted({v.state for v in place.views if v.state})
    if states:
        items.append({"type": "state", "text": f"/proc state {', '.join(states)}"})
    return items


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
        hints.append(f"{who(ranks, dims)} did not respond ({', '.join(sorted(silent))}): the others may be "
                     f"waiting for {'it' if len(ranks) == 1 else 'them'}")
    return suspects, hints




JOINT_RULES = ("lock-order", "one-loop")  # causes whose places are one suspect: they hold up the others together
# causes that may span several places, whose ranks are then one suspect: they are out of step together (a pipeline
# row whose send and receive both name the wrong peers), and the cause's reason already speaks of all of them
SHARED_RULES = ("odd-one-out", "other-store")


def apply_causes(suspects: list[Suspect], causes: list[Cause], graph: WaitGraph,
                 dims: ParallelDims | None) -> list[Suspect]:
    """The suspects ordered by the wait-for graph: its causes first, with the graph's confidence and why; every
    other suspect that waits for a peer is at most low (nothing is confident against the direction of an edge)."""
    by_ranks = {tuple(s.ranks): s for s in suspects}
    first: list[Suspect] = []
    done: set[int] = set()
    node_of: dict[int, Node] = {}  # a place's suspect split by a cause that names only some of its ranks
    for cause in causes:
        before = len(first)
        for node_id in cause.nodes:
            node = graph.nodes[node_id]
            suspect = by_ranks.get(tuple(node.ranks))
            if suspect is None:
                suspect = Suspect(node.ranks, where(node.ranks, dims), node.label, _kind_of(node), "low", [])
            named = [r for r in node.ranks if r in cause.ranks]
            if named and len(named) < len(node.ranks) and id(suspect) not in done:
                rest_ranks = [r for r in node.ranks if r not in named]
                rest = replace(suspect, ranks=rest_ranks, where=where(rest_ranks, dims), evidence=list(suspect.evidence))
                suspects = [rest if s is suspect else s for s in suspects]
                node_of[id(rest)] = node
                suspect = replace(suspect, ranks=named, where=where(named, dims), evidence=list(suspect.evidence))
            suspect.confidence = cause.confidence
            suspect.reason = _cause_sentence(suspect, cause, node, graph, dims)
            suspect.evidence = [*suspect.evidence, *({"type": "wait-for", "text": describe(graph, e),
                                                      "strength": e.strength} for e in cause.edges[:4])]
            if id(suspect) not in done:
                first.append(suspect)
                done.add(id(suspect))
        if cause.rule in JOINT_RULES + SHARED_RULES and len(first) - before > 1:  # one cause of places: one suspect
            parts = first[before:]
            ranks = sorted(r for p in parts for r in p.ranks)
            joint = replace(parts[0], ranks=ranks, where=where(ranks, dims),
                            evidence=list({json.dumps(e, sort_keys=True): e for p in parts for e in p.evidence}.values()))
            del first[before:]
            first.append(joint)
            done.add(id(joint))
            suspects = [s for s in suspects if all(s is not p for p in parts)] + [joint]
    cause_nodes = {n for c in causes for n in c.nodes}
    rest = []
    for suspect in suspects:
        if id(suspect) in done:
            continue
        node = node_of.get(id(suspect)) or next((n for n in graph.nodes if n.ranks == suspect.ranks), None)
        if node is not None and _unseen(node, graph):
            suspect.confidence = "low"
            suspect.reason += "; no dump of them, so nobody looked"
        if node is None:
            rest.append(suspect)
            continue
        seen_causes = {n for n in cause_nodes if not _unseen(graph.nodes[n], graph)}
        waits = [e for e in graph.out.get(node.id, []) if e.strength != "possible" or (
            node.state == COMMUNICATING and e.target in seen_causes)]
        if not waits and causes and node.state in ("silent", "running") and not graph.into.get(node.id):
            suspect.confidence = "low"  # nobody waits for it: not what holds the others up
            suspect.reason += "; no rank waits for it"

        if waits and causes:
            suspect.confidence = "low"
            suspect.reason = _settled(suspect.reason)
            onto = [e for e in waits if e.target in cause_nodes] or waits
            suspect.reason += (f"; {verb(suspect.ranks, 'it waits', 'they wait')} for "
                               f"{who(sorted({r for e in onto for r in e.ranks}), dims)} ({onto[0].evidence})")
        rest.append(suspect)
    rest.sort(key=lambda s: (_CONFIDENCE[s.confidence], _ORDER.index(_order_key(s)), len(s.ranks), s.ranks[0]))
    ordered = first + rest  # causes first at each confidence; a stack rule's surer suspect before a doubtful cause
    unseen = {id(s) for s in ordered if s.kind == "unresponsive" and "no dump of them" in s.reason}
    return sorted(ordered, key=lambda s: (_CONFIDENCE[s.confidence], id(s) in unseen))


def _cause_sentence(suspect: Suspect, cause: Cause, node: Node, graph: WaitGraph, dims: ParallelDims | None) -> str:
    """One sentence per suspect: what it does (its stacks) or what it never entered (the graph's rule), then who
    waits for it and by what evidence; said once, the hints do not repeat it."""
    own = _settled(suspect.reason)
    if _unseen(node, graph):
        asked = sorted({r for e in cause.edges for r in e.ranks})
        return (f"{own}; no dump of them, so nobody looked; the others wait for "
                f"{who(asked, dims) if len(asked) < len(node.ranks) else 'them'}: dump those")
    waited = _waited_words(cause, dims)
    if cause.rule in JOINT_RULES:  # what they do together: said by the cause
        return "; ".join(part for part in (cause.reason, waited) if part)
    if cause.rule in ("sink", "evidence") or node.state != "communicating":  # what it does says it best
        return "; ".join(part for part in (own, waited, f"but {cause.doubt}" if cause.doubt else "") if part)
    return "; ".join(part for part in (cause.reason, waited if waited and waited not in cause.reason else "") if part)


_UNDECIDED = ("; as many ranks on each side: the stacks alone cannot say which side is out of step",
              "; sends and receives pair up across stages: this alone is no mismatch")


def _settled(reason: str) -> str:
    """A stack rule's reason without its "cannot say which side" clause: the graph has said."""
    for clause in _UNDECIDED:
        reason = reason.replace(clause, "")
    return reason


def _unseen(node: Node, graph: WaitGraph) -> bool:
    """Ranks nobody dumped, that others may (not must) wait for: they may be fine."""
    edges = graph.into.get(node.id, [])
    return node.status == MISSING and all(e.strength == "possible" for e in edges)


def _waited_words(cause: Cause, dims: ParallelDims | None) -> str:
    if not cause.waiting:
        return ""
    strongest = max(cause.edges, key=lambda e: STRENGTH.index(e.strength), default=None)
    why = f" ({strongest.evidence})" if strongest is not None and strongest.strength != "assumed" else ""
    return (f"{who(cause.waiting, dims)} {verb(cause.waiting, 'waits', 'wait')} for "
            f"{'it' if len(cause.ranks) == 1 else 'them'}{why}")


def _kind_of(node: Node) -> str:
    return {"running": "busy", "local": "local-wait", "silent": "unresponsive", "device": "device-sync",
            "communicating": "other-call"}.get(node.state, "outside")
