"""`tracing diverge`: the first points where ranks' call sequences part ways.

Each rank's thread (the main thread by default) is a sequence of events (kind, module:qualname), numbered by its
per-thread sequence number, so the same position means "the n-th event since tracing started" on every rank.
The comparison starts where every rank still has its events (a ring keeps only the newest ones); a rank whose
events all end before that point is reported as having stopped early.

From there the ranks form one group; the group is cut at the first position where its members disagree (or
where some have no more events: they stopped, e.g. blocked in a collective), each branch is followed the same
way, and every cut is a divergence. Pipeline stages run different code on purpose, so their cut comes first;
the cuts inside each stage are the interesting ones.

Communication is weighed first. Ranks' collective calls are numbered and compared one by one (sequence.py):
where ranks that made the same ones part and some make no more, that is named first. Then come the communication
calls that some ranks stopped making round by round while their peers went on (comms.py): that is how a skipped
collective across pipeline stages shows, which no cut can find once the stages have parted. Among the cuts,
those where a branch makes or waits in a communication call come before the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.topology import fold_ranks
from tracing.analysis.comms import CommDivergence, comm_divergences, is_communication
from tracing.analysis.sequence import ROLES, SeqDivergence, sequence_divergences
from hangdoctor.clicore.bulk import paused_gc
from tracing.records import CALL, C_CALL, RETURN, CodeLocation, Event, OpenFrame, RankTrace, ThreadTrace

END = -1  # token of "no more events"
CONTEXT = 3  # common events shown before a divergence
AHEAD = 3  # events shown after it, per branch
COMM_AHEAD = 64  # events looked through after it, per branch, for the first communication call
_CHUNK = 256


@dataclass
class Branch:
    ranks: list[int]
    ranks_text: str
    events: list[Event]  # the first events of this branch from the divergence on (empty: it stopped)
    stopped: bool  # no more events: the rank is inside its open frames, or finished
    open_frames: list[OpenFrame]  # where a stopped branch sits (its first rank)
    communication: CodeLocation | None = None  # its first communication call soon after (COMM_AHEAD events)


@dataclass
class Divergence:
    position: int  # per-thread event number where the branches differ
    ranks: list[int]  # the group that split
    ranks_text: str
    context: list[Event]  # the common events just before (from the first rank of the group)
    branches: list[Branch]  # largest first
    communication: bool = False  # a branch calls, or waits in, a communication function


@dataclass
class EarlyStop:
    rank: int
    last_position: int
    open_frames: list[OpenFrame]


@dataclass
class DivergeReport:
    source: str
    thread: str
    ranks: list[int]
    start: int | None  # first compared position
    divergences: list[Divergence]  # communication first, then by position
    early: list[EarlyStop]  # ranks whose events end before the common window
    warnings: list[str] = field(default_factory=list)
    anchor: str | None = None  # the function whose calls make the rounds of the communication comparison
    communication: list[CommDivergence] = field(default_factory=list)  # named before the divergences
    collectives: list[SeqDivergence] = field(default_factory=list)  # collective by collective (sequence.py)
    collectives_from_start: bool = True  # numbered from the start of tracing (else from a ring's oldest)
    first: str | None = None  # the first departure in one line, as the human view says it

    @property
    def evidence(self) -> list[SeqDivergence]:
        """The collective-by-collective partings that are not roles by design."""
        return [d for d in self.collectives if d.kind != ROLES]

    @property
    def identical(self) -> bool:
        return not self.divergences and not self.early and not self.communication and not self.evidence


def _pick_thread(trace: RankTrace, name: str | None) -> ThreadTrace | None:
    if name is None:
        return trace.main_thread
    return next((t for t in trace.threads if t.name == name), None)


def _first_difference(a: list[int], b: list[int], start: int) -> int | None:
    """First position >= start where a and b differ (running out counts as a difference); None if equal."""
    end = min(len(a), len(b))
    i = start
    while i < end:
        j = min(i + _CHUNK, end)
        if a[i:j] != b[i:j]:
            while a[i] == b[i]:
                i += 1
            return i
        i = j
    return None if len(a) == len(b) else end


@paused_gc()  # tuples and lists over every event, none in a cycle (clicore/bulk.py)
def diverge_report(source: str, traces: list[RankTrace], thread: str | None = None, limit: int = 20,
                   warnings: list[str] | None = None) -> DivergeReport:
    warnings = list(warnings or [])
    picked: dict[int, ThreadTrace] = {}
    for trace in traces:
        chosen = _pick_thread(trace, thread)
        if chosen is None or not chosen.events:
            warnings.append(f"rank {trace.identity.rank}: no events in thread {thread or 'main'}; left out")
            continue
        picked[trace.identity.rank] = chosen
    if len(picked) < 2:
        return DivergeReport(source, thread or "main", sorted(picked), None, [], [], warnings)
    start_at = next((t.config.get("start_at") for t in traces if t.config.get("start_at")), None)
    collectives, from_start = sequence_divergences(picked, limit)
    anchor, communication = None, []
    if not any(d.kind != ROLES and d.ranks == sorted(picked) for d in collectives):
        # (else every rank made the same collectives up to where some made no more: no roles differ, so rounds
        # could only repeat that, or, paired across a skipped step, mislead)
        anchor, communication = comm_divergences(picked, start_at if isinstance(start_at, str) else None, limit)
    # The common window: where every remaining rank still has events. Ranks that end before it stopped early.
    early: list[EarlyStop] = []
    active = dict(picked)
    while True:
        start = max(t.events[0].thread_seq for t in active.values())
        ended = [r for r, t in active.items() if t.events[-1].thread_seq < start]
        if not ended or len(ended) == len(active):
            break
        for r in ended:
            t = active.pop(r)
            early.append(EarlyStop(r, t.events[-1].thread_seq, t.frames))
    tokens: dict[tuple[int, str], int] = {}
    sequences: dict[int, list[int]] = {}
    windows: dict[int, list[Event]] = {}
    for r, t in active.items():
        events = [e for e in t.events if e.thread_seq >= start]
        windows[r] = events
        sequences[r] = [tokens.setdefault((e.kind, e.loc.name), len(tokens)) for e in events]
    divergences: list[Divergence] = []
    pending = [(sorted(active), 0)]
    while pending and len(divergences) < limit:
        pending.sort(key=lambda item: item[1])
        group, offset = pending.pop(0)
        lead = sequences[group[0]]
        cut = None
        for r in group[1:]:
            d = _first_difference(lead, sequences[r], offset)
            if d is not None and (cut is None or d < cut):
                cut = d
        if cut is None:
            continue
        parts: dict[int, list[int]] = {}
        for r in group:
            seq = sequences[r]
            parts.setdefault(seq[cut] if cut < len(seq) else END, []).append(r)
        branches = []
        for token, members in sorted(parts.items(), key=lambda kv: (-len(kv[1]), kv[1][0])):
            events = windows[members[0]][cut:cut + AHEAD]
            comm = next((e.loc for e in windows[members[0]][cut:cut + COMM_AHEAD]
                         if e.kind in (CALL, C_CALL) and is_communication(e.loc)), None)
            branches.append(Branch(members, fold_ranks(members), events, token == END,
                                   picked[members[0]].frames if token == END else [], comm))
            if token != END and len(members) > 1:
                pending.append((members, cut + 1))
        divergences.append(Divergence(start + cut, group, fold_ranks(group),
                                      windows[group[0]][max(0, cut - CONTEXT):cut], branches,
                                      any(_communicates(b) for b in branches)))
    divergences.sort(key=lambda d: (not d.communication, d.position))
    early.sort(key=lambda e: e.rank)
    report = DivergeReport(source, thread or "main", sorted(picked), start, divergences, early, warnings, anchor,
                           communication, collectives, from_start)
    report.first = first_departure(report)
    return report


def _communicates(branch: Branch) -> bool:
    if branch.stopped:
        return any(is_communication(f.loc) for f in branch.open_frames)
    return branch.communication is not None


def branch_label(ranks: list[int], folded: str) -> str:
    return f"rank {folded}" if len(ranks) == 1 else f"ranks {folded}"


def first_departure(report: DivergeReport) -> str | None:
    """The first divergence named in one line: where ranks in step part at a collective with some making no more,
    else a communication call skipped round by round, else the first split of the event sequences."""
    if report.evidence:
        return report.evidence[0].summary + "."
    if report.communication:
        return report.communication[0].summary + "."
    if not report.divergences:
        return None
    first = report.divergences[0]
    branches = sorted(first.branches, key=lambda b: (len(b.ranks), b.ranks[0]))  # the odd ones out first
    return f"event {first.position}: " + "; ".join(_what_it_did(b) for b in branches) + "."


def _what_it_did(branch: Branch) -> str:
    """"rank 0 called Trainer._save_snapshot, then barrier", "ranks 2-3 made no more calls (inside recv)"."""
    label = branch_label(branch.ranks, branch.ranks_text)
    if branch.stopped:
        inner = branch.open_frames[-1].qualname if branch.open_frames else ""
        return f"{label} made no more calls" + (f" (inside {inner})" if inner else "")
    event = branch.events[0]
    verb = {CALL: "called", C_CALL: "called", RETURN: "returned from"}.get(event.kind, event.word)
    said = f"{label} {verb} {event.loc.qualname}"
    if branch.communication is not None and branch.communication != event.loc:
        said += f", then {branch.communication.qualname}"
    return said
