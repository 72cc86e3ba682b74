"""`tracing diverge`, collective by collective: each rank's collective calls numbered in order, as the ranks that
make them together must make them, and the first number at which ranks that agreed so far part.

A rank's collective calls are its calls of a collective API (torch.distributed's c10d functions and functional
collectives, deepspeed.comm), the outermost only: DeepSpeed's `broadcast` calling torch's is one call. They are
numbered per rank across every process group, from the start of tracing; when a ring dropped the oldest events,
from the oldest call that every rank still has (paired across ranks by time).

Ranks that make the same calls in the same order are in step. At the first number where they differ they part:
- into parts that all go on making calls ("roles"): they differ by design (pipeline stages send where others
  receive), and each part is followed further the same way, so that a replica that parts from its own role's
  ranks is still found;
- into parts of which some make no more calls ("last"): they wait in their last call, or left the loop. That is
  the hang's own evidence, the same that Flight Recorder's sequence numbers give, e.g. for an FSDP job where
  rank 1 skipped a step: "collective #38, after 37 alike: rank 0 all_gather_into_tensor (from
  foreach_all_gather), its last; rank 1 barrier (from main), its last".
A rank that made a collective call the others did not and went on is not told from a role here (the calls pair
off shifted from there, and names alone cannot tell that from a pipeline's schedule): the round-by-round
comparison (comms.py) names such a call "made once more". Needs the collective API in the selection (e.g. `--include
torch.distributed`); without it nothing is numbered and the other comparisons stand alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoctor.topology import fold_ranks
from tracing.analysis.comms import calls_with_callers, is_communication
from tracing.records import CALL, C_CALL, GAP, CodeLocation, Event, OpenFrame, ThreadTrace

API_MODULES = ("torch.distributed.distributed_c10d", "torch.distributed._functional_collectives",
               "torch.distributed.c10d", "deepspeed.comm")
LAST, ROLES = "last", "roles"
ALIGN = 4  # calls either way that a ring's pairing by time may be off by (asynchronous collectives)


@dataclass(frozen=True)
class CollectiveCall:
    number: int  # 1-based, per rank (see the module docstring)
    event: Event
    caller: str  # the nearest enclosing function outside the collective API, "" when none is traced

    @property
    def name(self) -> str:
        return self.event.loc.qualname


@dataclass
class SeqSide:
    ranks: list[int]
    ranks_text: str
    call: CollectiveCall | None  # its call at this number; None: it made no more
    more: int  # calls its first rank made after this one
    open_frames: list[OpenFrame]  # where its first rank is now


@dataclass
class SeqDivergence:
    number: int  # the collective number at which the ranks part
    ranks: list[int]  # the ranks that agreed on every call before it
    ranks_text: str
    kind: str  # "last" or "roles" (see the module docstring)
    sides: list[SeqSide]  # the odd ones out first
    summary: str = ""


def is_api(loc: CodeLocation) -> bool:
    return loc.module.startswith(API_MODULES) and is_communication(loc)


def collective_calls(thread: ThreadTrace) -> list[tuple[Event, str]] | None:
    """(event, caller) of the thread's outermost collective API calls, oldest first; None if events are missing
    inside (a gap)."""
    if any(e.kind == GAP for e in thread.events):
        return None
    found = []
    for _, e, callers in calls_with_callers(thread, thread.events):
        if e.kind not in (CALL, C_CALL) or not is_api(e.loc):
            continue
        if any(c is not None and is_api(c) for c in callers):
            continue
        caller = next((c.qualname for c in reversed(callers) if c is not None and
                       not c.module.startswith(API_MODULES)), "")
        found.append((e, caller))
    return found


def number_calls(threads: dict[int, ThreadTrace]) -> tuple[dict[int, list[CollectiveCall]], bool]:
    """Each rank's collective calls, numbered; and whether the numbers count from the start of tracing."""
    calls = {r: c for r, t in threads.items() if t.events and (c := collective_calls(t)) is not None}
    whole = all(threads[r].events[0].thread_seq == 0 for r in calls)
    if whole:  # a rank with no collective call at all counts: it made none
        return {r: [CollectiveCall(i, e, c) for i, (e, c) in enumerate(cs, 1)] for r, cs in calls.items()}, True
    made = {r: c for r, c in calls.items() if c}
    if not made:
        return {}, False
    # Pair by time: the rank whose oldest call is the latest (`lead`) started that call at t0, and every other
    # rank was then in the same call (it entered before t0 and waited): its last call entered by t0. Asynchronous
    # collectives return at once, so a rank may have entered a few more by then: of the calls near that one, the
    # start from which the most calls agree with the lead's names is taken.
    lead = max(made, key=lambda r: made[r][0][0].wall_ns)
    t0 = made[lead][0][0].wall_ns
    # A rank whose window holds no call counts only if it was traced at t0: it made none since.
    calls = {r: c for r, c in calls.items() if c or threads[r].events[0].wall_ns <= t0}
    names = {r: [e.loc.qualname for e, _ in cs] for r, cs in calls.items()}
    numbered = {}
    for r, cs in calls.items():
        base = max((k for k in range(len(cs)) if cs[k][0].wall_ns <= t0), default=0)
        start = max(range(max(0, base - ALIGN), min(len(cs), base + ALIGN + 1)),
                    key=lambda k: (_agreeing(names[r][k:], names[lead]), -abs(k - base)), default=0)
        numbered[r] = [CollectiveCall(i, e, c) for i, (e, c) in enumerate(cs[start:], 1)]
    return numbered, False


def _agreeing(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def sequence_divergences(threads: dict[int, ThreadTrace], limit: int = 20) -> tuple[list[SeqDivergence], bool]:
    """(the points where ranks that agreed part, in order of number; whether numbers count from the start)."""
    numbered, whole = number_calls(threads)
    if len(numbered) < 2:
        return [], whole
    names = {r: [c.name for c in cs] for r, cs in numbered.items()}
    found: list[SeqDivergence] = []
    pending = [(sorted(numbered), 0)]
    while pending and len(found) < limit:
        group, start = pending.pop(0)
        k = _first_difference(group, names, start)
        if k is None:
            continue
        parts: dict[str | None, list[int]] = {}
        for r in group:
            parts.setdefault(names[r][k] if k < len(names[r]) else None, []).append(r)
        sides = [_side(members, k, numbered, threads) for members in parts.values()]
        sides.sort(key=lambda s: (len(s.ranks), s.ranks[0]))
        kind = LAST if any(s.call is None or s.more == 0 for s in sides) else ROLES
        d = SeqDivergence(k + 1, sorted(group), fold_ranks(sorted(group)), kind, sides)
        d.summary = _summary(d)
        found.append(d)
        pending += [(s.ranks, k + 1) for s in sides if len(s.ranks) > 1 and s.more]
        pending.sort(key=lambda item: item[1])
    found.sort(key=lambda d: (d.kind == ROLES, d.number))
    return found, whole


def _first_difference(group: list[int], names: dict[int, list[str]], start: int) -> int | None:
    lead = names[group[0]]
    longest = max(len(names[r]) for r in group)
    for k in range(start, longest):
        here = lead[k] if k < len(lead) else None
        if any((names[r][k] if k < len(names[r]) else None) != here for r in group[1:]):
            return k
    return None


def _side(members: list[int], k: int, numbered: dict[int, list[CollectiveCall]],
          threads: dict[int, ThreadTrace]) -> SeqSide:
    members = sorted(members)
    calls = numbered[members[0]]
    return SeqSide(members, fold_ranks(members), calls[k] if k < len(calls) else None, max(0, len(calls) - k - 1),
                   threads[members[0]].frames)


def _label(side: SeqSide) -> str:
    return f"rank {side.ranks_text}" if len(side.ranks) == 1 else f"ranks {side.ranks_text}"


def _said(side: SeqSide, number: int) -> str:
    if side.call is None:
        inside = side.open_frames[-1].qualname if side.open_frames else ""
        return f"{_label(side)} made {'no more' if side.more or number > 1 else 'none'}" + (
            f" (now inside {inside})" if inside else "")
    where = f" (from {side.call.caller})" if side.call.caller else ""
    tail = ", its last" if side.more == 0 else f", then {side.more} more"
    return f"{_label(side)} {side.call.name}{where}{tail}"


def _summary(d: SeqDivergence) -> str:
    head = f"collective #{d.number}, after {d.number - 1} alike: " if d.number > 1 else "collective #1: "
    return head + "; ".join(_said(s, d.number) for s in d.sides)
