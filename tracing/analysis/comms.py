"""`tracing diverge`, communication first: the collective or p2p call that some ranks stopped making (or made once
more) while the ranks that made it with them went on as before.

Communication calls are those of functions whose names say so (broadcast, all_reduce, all_gather, reduce_scatter,
all_to_all, barrier, send, recv: torch.distributed's collectives and p2p, deepspeed.comm, a framework's own
wrappers such as DeepSpeed's `_exec_send_activations`), not predicates such as `_is_valid_send_recv`, nor
helpers named after a collective (`init_all_gather_outputs`, `_all_gather_process_group`, `..._copy_out`). Each call is
keyed by its function, the communication functions it sits in and the nearest other function above them, e.g.
"PipelineEngine._aggregate_total_loss > broadcast" or "_exec_schedule > _exec_recv_activations > recv > recv".

Ranks are compared round by round. A round is one call of the anchor, the function every rank calls again and
again around its communication (the training step): the trace's --start-at function when every rank called it
at least twice, else the function that encloses the most communication calls among those every rank called at
least twice. A round lasts until the anchor's next call; rounds are paired across ranks by time (round 1 is the
first that every rank has: a ring keeps only the newest events).

Pipeline stages and tensor-parallel groups communicate differently by design, but each makes the same calls in
every round. So a key tells of a divergence when, from one round to the next, some of the ranks that make that
call change how often they make it and the others do not: the changed ranks skipped it (or made it once more),
and their peers, who went on as before, are usually the ones waiting in it. A change of every rank that makes the
call (the first step's extra p2p of tensor shapes, a checkpoint save) is no divergence. Each rank's last round may
still be running: there a call made more often is a change, and one not made yet is no evidence.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from hangdoctor.topology import fold_ranks
from hangdoctor.topology.comm_calls import COLLECTIVE_MODULES, COLLECTIVE_PHRASES, GENERIC_COLLECTIVES, P2P_WORDS
from tracing.records import CALL, C_CALL, ENTERS, GAP, CodeLocation, Event, OpenFrame, ThreadTrace

_PHRASES = re.compile(COLLECTIVE_PHRASES)  # the words of a communication call: topology/comm_calls.py
_PREDICATES = frozenset({"is", "can", "get", "has", "check", "should", "validate", "warn", "supports",
                         "init", "alloc", "allocate", "free", "make", "create", "build", "register", "set"})
# A word right after the collective's name that makes the function a helper about it, not the call itself:
# FSDP's `_all_gather_process_group`, `foreach_all_gather_copy_out`, `_wait_all_gather_streams_on_event`.
_HELPER_WORDS = frozenset({"process", "group", "groups", "pg", "pgs", "input", "inputs", "output", "outputs", "copy",
                           "stream", "streams", "event", "events", "size", "sizes", "shape", "shapes", "dtype",
                           "handle", "handles", "hook", "hooks", "state", "states"})
UNKNOWN_PARENT = "?"  # a parent entered before the file's first event and no longer open
_DECORATOR_INNER = frozenset({"wrapper", "inner", "wrapped", "_fn", "decorate_context", "_wrapper"})


def is_decorator_closure(loc: CodeLocation) -> bool:
    """A decorator's inner function (torch's `_exception_logger.<locals>.wrapper`, `_dynamo_disable.<locals>
    .wrapper`): it names nothing of the program, so it is neither a call's parent nor a round's anchor."""
    head, _, last = loc.qualname.rpartition(".")
    return head.endswith("<locals>") and last in _DECORATOR_INNER


def is_communication(loc: CodeLocation) -> bool:
    """Does the function's name say that it communicates (see the module docstring)?"""
    name = loc.qualname.rsplit(".", 1)[-1].lower()
    words = [w for w in name.split("_") if w]
    if not words or words[0] in _PREDICATES:
        return False
    phrase = _PHRASES.search(name)
    if phrase:
        after = [w for w in name[phrase.end():].split("_") if w]
        return not (after and after[0] in _HELPER_WORDS)
    if P2P_WORDS.intersection(words):
        return True
    return name in GENERIC_COLLECTIVES and loc.module.startswith(COLLECTIVE_MODULES)


@dataclass
class CommSide:
    """Ranks that made a call equally often in both rounds: before, and in the round where they split."""

    ranks: list[int]
    ranks_text: str
    before: int  # calls in the round before
    calls: int  # calls in this round (so far, in a round still running)
    changed: bool
    event: Event | None  # the first rank's first such call in this round
    open_frames: list[OpenFrame]  # where the first rank is now


@dataclass
class CommDivergence:
    anchor: str  # the function whose calls make the rounds
    round: int  # 1 = the first round every compared rank has
    call: str  # the key, e.g. "PipelineEngine._aggregate_total_loss > broadcast"
    function: CodeLocation  # the communication function itself
    sides: list[CommSide]  # those that changed first
    summary: str  # one line, e.g. "ranks 2-3 skipped ... in round 2 of train_batch; ranks 0-1 made it"


@dataclass
class _Round:
    counts: Counter  # key -> calls
    first: dict  # key -> first Event of it
    complete: bool


def _stack_before(thread: ThreadTrace, events: list[Event]) -> list[CodeLocation | None]:
    """The open frames just before events[0], replayed backwards from the frames open now (unknown: None)."""
    stack: list[CodeLocation | None] = list(thread.open_frames)
    for e in reversed(events):
        if e.kind == GAP:
            return []
        if e.kind in ENTERS:
            del stack[e.depth:]
        else:
            stack.extend([None] * (e.depth - len(stack)))
            stack[e.depth:] = [e.loc]
    return stack


def calls_with_callers(thread: ThreadTrace, events: list[Event]):
    """(index, event, stack of its frame's callers, outermost first) of every call event, in order."""
    stack = _stack_before(thread, events)
    for i, e in enumerate(events):
        if e.kind == GAP:
            stack = []
            continue
        del stack[e.depth:]
        if e.kind in ENTERS:
            stack.extend([None] * (e.depth - len(stack)))
            yield i, e, stack
            stack.append(e.loc)


def _key(loc: CodeLocation, callers: list[CodeLocation | None], comm) -> tuple[tuple[str, ...], str]:
    chain = [loc]
    parent = UNKNOWN_PARENT
    for caller in reversed(callers):
        if caller is None:
            break
        if is_decorator_closure(caller):
            continue
        if not comm(caller):
            parent = caller.qualname
            break
        chain.insert(0, caller)
    return tuple(c.name for c in chain) + (parent,), " > ".join([parent] + [c.qualname for c in chain])


class _Rank:
    """One rank's events, calls and communication calls (with keys), computed once."""

    def __init__(self, rank: int, thread: ThreadTrace, comm) -> None:
        self.rank, self.thread = rank, thread
        self.events = thread.events
        self.calls: list[tuple[int, Event, int]] = []  # (index, event, depth) of calls, and of frames found open
        self.comm: list[tuple[int, tuple, str, Event]] = []  # (index, key, key text, event)
        self.enclosing: Counter = Counter()  # function name -> communication calls inside it
        for i, e, callers in calls_with_callers(thread, self.events):
            self.calls.append((i, e, e.depth))  # an OPEN frame may be --start-at's first round: it counts
            if e.kind in (CALL, C_CALL) and comm(e.loc):
                key, text = _key(e.loc, callers, comm)
                self.comm.append((i, key, text, e))
                self.enclosing.update({c.name for c in callers if c is not None and not comm(c) and
                                       not is_decorator_closure(c)})


def _anchor(ranks: list[_Rank], start_at: str | None, comm) -> str | None:
    counts = [Counter(e.loc.name for _, e, _ in r.calls) for r in ranks]
    repeated = set.intersection(*({name for name, n in c.items() if n >= 2} for c in counts))
    if start_at:
        wanted = start_at if ":" in start_at else None
        for name in sorted(repeated):
            qualname = name.partition(":")[2] or name
            if name == wanted or qualname == start_at or qualname.endswith("." + start_at):
                return name
    score = Counter()
    for r in ranks:
        score.update({name: n for name, n in r.enclosing.items() if name in repeated})
    if not score:
        return None
    return min(score, key=lambda name: (-score[name], sum(c[name] for c in counts), name))


def _rounds(r: _Rank, anchor: str) -> tuple[list[int], list[int]]:
    """(event index, wall ns) of the anchor's calls at its outermost depth."""
    calls = [(i, e, d) for i, e, d in r.calls if e.loc.name == anchor]
    depth = min(d for _, _, d in calls)
    calls = [(i, e) for i, e, d in calls if d == depth]
    return [i for i, _ in calls], [e.wall_ns for _, e in calls]


def _count_rounds(r: _Rank, starts: list[int]) -> list[_Round]:
    rounds = []
    bounds = starts + [len(r.events)]
    gaps = [i for i, e in enumerate(r.events) if e.kind == GAP]
    comm = iter(r.comm)
    item = next(comm, None)
    for j, start in enumerate(starts):
        end = bounds[j + 1]
        counts: Counter = Counter()
        first: dict = {}
        while item is not None and item[0] < end:
            if item[0] >= start:
                counts[item[1]] += 1
                first.setdefault(item[1], (item[2], item[3]))
            item = next(comm, None)
        if any(start <= g < end for g in gaps):
            counts = None  # events are missing: no evidence either way
        rounds.append(_Round(counts, first, complete=j + 1 < len(starts)))
    return rounds


def _state(before: _Round, now: _Round, key) -> str | None:
    """'same', 'changed' or None (no evidence) for one rank and key between two consecutive rounds."""
    if before.counts is None or now.counts is None:
        return None
    prev, cur = before.counts[key], now.counts[key]
    if cur == prev:
        return "same"
    if now.complete or cur > prev:
        return "changed"
    return None  # a round still running: the call may come yet


def comm_divergences(threads: dict[int, ThreadTrace], start_at: str | None = None,
                     limit: int = 20) -> tuple[str | None, list[CommDivergence]]:
    """(the anchor's name or None, divergences in order: round, then where in the round)."""
    cache: dict[CodeLocation, bool] = {}

    def comm(loc: CodeLocation) -> bool:
        found = cache.get(loc)
        if found is None:
            found = cache[loc] = is_communication(loc)
        return found

    ranks = [_Rank(rank, thread, comm) for rank, thread in sorted(threads.items())]
    if len(ranks) < 2:
        return None, []
    anchor = _anchor(ranks, start_at, comm)
    if anchor is None:
        return None, []
    per_rank: dict[int, list[_Round]] = {}
    starts = {r.rank: _rounds(r, anchor) for r in ranks}
    # Every file still holds its thread's first event: rounds are numbered from the start. Else a ring dropped
    # the oldest rounds, differently on each rank: round 1 is the one nearest in time to the latest first round
    # (ranks that communicate stay within a fraction of a round of each other).
    whole = all(r.events[0].thread_seq == 0 for r in ranks)
    t0 = max(times[0] for _, times in starts.values())
    for r in ranks:
        indices, times = starts[r.rank]
        offset = 0 if whole else min(range(len(times)), key=lambda k: abs(times[k] - t0))
        per_rank[r.rank] = _count_rounds(r, indices[offset:])
    by_rank = {r.rank: r for r in ranks}
    found: list[tuple[int, int, CommDivergence]] = []
    for j in range(1, max(len(rounds) for rounds in per_rank.values())):
        keys = {}
        for rounds in per_rank.values():
            for rnd in rounds[j - 1:j + 1]:
                if rnd.counts is not None:
                    keys.update((key, text_event[0]) for key, text_event in rnd.first.items())
        for key, text in keys.items():
            states = {}
            for rank, rounds in per_rank.items():
                if len(rounds) > j:
                    state = _state(rounds[j - 1], rounds[j], key)
                    if state and (rounds[j - 1].counts[key] or rounds[j].counts[key]):
                        states[rank] = state
            if "changed" in states.values() and "same" in states.values():
                found.append(_divergence(anchor, j, key, text, states, per_rank, by_rank))
    found.sort(key=lambda item: (item[0], item[1]))
    return anchor, [d for _, _, d in found[:limit]]


def _divergence(anchor: str, j: int, key, text: str, states: dict[int, str], per_rank, by_rank):
    groups: dict[tuple, list[int]] = {}
    for rank, state in states.items():
        before, now = per_rank[rank][j - 1], per_rank[rank][j]
        groups.setdefault((state == "changed", before.counts[key], now.counts[key]), []).append(rank)
    sides = []
    for (changed, before, calls), members in sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[1][0])):
        members.sort()
        first = per_rank[members[0]][j].first.get(key)
        sides.append(CommSide(members, fold_ranks(members), before, calls, changed, first[1] if first else None,
                              by_rank[members[0]].thread.frames))
    event = next((s.event for s in sides if s.event is not None), None)
    function = event.loc if event else CodeLocation("", text.rsplit(" > ", 1)[-1], "", 0)
    where = min((s.event.thread_seq for s in sides if s.event is not None), default=0)
    return j, where, CommDivergence(anchor.partition(":")[2] or anchor, j + 1, text, function, sides,
                                    _summary(anchor, j + 1, text, sides))


def _label(side: CommSide) -> str:
    return f"rank {side.ranks_text}" if len(side.ranks) == 1 else f"ranks {side.ranks_text}"


def calls_text(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"


def _summary(anchor: str, round_no: int, text: str, sides: list[CommSide]) -> str:
    changed = [s for s in sides if s.changed]
    kept = [s for s in sides if not s.changed]
    what = []
    for s in changed:
        verb = "skipped" if s.calls < s.before else "made once more" if s.calls == s.before + 1 else "changed"
        what.append(f"{_label(s)} {verb} {text} ({calls_text(s.before)} in round {round_no - 1}, {s.calls} in "
                    f"round {round_no})")
    others = " and ".join(_label(s) for s in kept)
    anchor_name = anchor.partition(":")[2] or anchor
    return f"in round {round_no} of {anchor_name}, " + "; ".join(what) + f"; {others} went on as before"
