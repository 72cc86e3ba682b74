"""Slow, not hung: which rank the others wait for, read from every rank's time profile (`attach --profile`).

In a synchronous job every collective ends when its last rank arrives, so a rank that is slower than its peers
waits *less* in communication than they do: they wait for it. Per rank, each sample of its main thread is
classified like a hang's stack (the wait table: collective, p2p, barrier, ... or none of them: work), giving
the share of its time in each activity. Ranks are compared with their peers: the ranks of the same pipeline
stage when the topology is known (stages differ by design: the first and last wait differently), otherwise the
whole job. A rank is a straggler when the median share its peers spend waiting on communication exceeds its own
by more than the noise of the measurement allows (`threshold`): that difference is the share of time the others
waited for it. Device syncs are not counted as waiting on peers: a slow GPU shows there too.

What the straggler does instead is the differential view: the activities and the innermost Python frames where
its share of samples exceeds its peers' median. No straggler: the job is simply slow, and where time goes
(the median share of each activity) is said instead.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from statistics import median

from hangdoctor.analysis.waits import WaitTable, default_table, innermost_python
from hangdoctor.model import OK, Collection, RankRecord, Stack

WORK = "work"  # a main-thread sample in no known wait: computing, or in a call the wait table does not know
MIN_GAP = 0.04  # the smallest share of time the others waited for a rank that is reported at all
Z = 3.0  # how many standard errors of the two shares the gap must exceed


@dataclass
class RankShares:
    rank: int
    host: str
    pid: int
    coords: str  # "dp=0 pp=1 tp=0", or ""
    group: str  # whom it is compared with: "pp=1" (its pipeline stage) or "the job"
    samples: int  # main-thread samples
    shares: dict[str, float]  # activity (a wait kind, or WORK) -> share of its samples
    peer_wait: float  # share of samples waiting on communication with peers
    frames: dict[str, float] = field(default_factory=dict)  # innermost Python frame (and line) of WORK samples -> share


@dataclass
class Excess:
    """Where a straggler spends more of its time than its peers do."""

    what: str  # an activity, or "work in <frame>"
    share: float
    peers: float  # the peers' median share


@dataclass
class Straggler:
    ranks: list[int]
    coords: list[str]
    hosts: list[str]
    waited_for: float  # the peers' median share waiting on communication, less its own
    own_wait: float
    peers_wait: float
    threshold: float  # what the gap had to exceed at these sample counts
    group: str
    evidence: str
    instead: list[Excess] = field(default_factory=list)


@dataclass
class ProfileFinding:
    seconds: float
    rate: int
    ranks: list[RankShares]
    stragglers: list[Straggler]
    headline: str
    where_time_goes: list[tuple[str, float]]  # activity -> median share over ranks, largest first
    unprofiled: list[tuple[int, str]]  # (rank, why) of ranks without a profile


def main_stacks(record: RankRecord) -> list[tuple[Stack, int]]:
    """The rank's main thread's stacks and counts: its thread whose id is the pid, else "MainThread"."""
    stacks = record.profile.stacks if record.profile else ()
    chosen = [s for s in stacks if s.thread_id == record.identity.pid]
    if not chosen:
        chosen = [s for s in stacks if s.thread_name == "MainThread"]
    return [(s.frames, s.count) for s in chosen]


def shares_of(record: RankRecord, table: WaitTable, memo: dict) -> tuple[int, dict[str, float], float, dict]:
    activity: Counter = Counter()
    frames: Counter = Counter()
    waiting = 0
    for stack, count in main_stacks(record):
        known = memo.get(id(stack))
        if known is None:
            wait = table.classify(stack)
            inner = innermost_python(stack)
            known = memo[id(stack)] = (stack, wait.kind if wait else WORK, bool(wait and wait.communicates),
                                       inner.label() if inner else "?")
        _, kind, communicates, inner_label = known
        activity[kind] += count
        waiting += count if communicates else 0
        if kind == WORK:
            frames[inner_label] += count
    total = sum(activity.values())
    if not total:
        return 0, {}, 0.0, {}
    return (total, {k: v / total for k, v in activity.most_common()}, waiting / total,
            {k: v / total for k, v in frames.most_common(20)})


def threshold(p_rank: float, n_rank: int, p_peers: float, n_peers: int) -> float:
    """The gap two shares must exceed to be told apart: Z standard errors of their difference (as if the samples
    were drawn at random; sampling at a fixed rate a job that repeats itself errs less), at least MIN_GAP."""
    def variance(p: float, n: int) -> float:
        p = min(max(p, 0.05), 0.95)
        return p * (1 - p) / max(1, n)
    return max(MIN_GAP, Z * math.sqrt(variance(p_rank, n_rank) + variance(p_peers, n_peers)))


def find_stragglers(collection: Collection, table: WaitTable | None = None) -> ProfileFinding:
    table = table or default_table()
    memo: dict = {}
    ranks, unprofiled = [], []
    seconds, rate = 0.0, 0
    for record in sorted(collection.records, key=lambda r: r.rank):
        profile = record.profile
        if profile is None or profile.status != OK:
            why = "no profile taken" if profile is None else f"{profile.status}: {profile.error}".rstrip(": ")
            unprofiled.append((record.rank, why))
            continue
        seconds, rate = max(seconds, profile.seconds), max(rate, profile.rate)
        samples, shares, peer_wait, frames = shares_of(record, table, memo)
        if not samples:
            unprofiled.append((record.rank, "no sample of its main thread"))
            continue
        coords = record.identity.coords
        ranks.append(RankShares(
            rank=record.rank, host=record.identity.host, pid=record.identity.pid,
            coords=record.identity.coords_label(), group=f"pp={coords.pp}" if coords and _pipelined(collection)
            else "the job", samples=samples, shares=shares, peer_wait=peer_wait, frames=frames))
    groups: dict[str, list[RankShares]] = defaultdict(list)
    for shares in ranks:
        groups[shares.group].append(shares)
    stragglers = []
    for members in groups.values():
        for one in members:
            others = [m for m in members if m is not one]
            if not others:
                continue
            peers_wait = median(m.peer_wait for m in others)
            peer_samples = sum(m.samples for m in others) // len(others)
            gap = peers_wait - one.peer_wait
            needed = threshold(one.peer_wait, one.samples, peers_wait, peer_samples)
            spread = _mad([m.peer_wait for m in others])
            needed = max(needed, 3 * spread)
            if gap > needed:
                stragglers.append(_straggler(one, others, peers_wait, gap, needed))
    stragglers.sort(key=lambda s: -s.waited_for)
    where = _where_time_goes(ranks)
    return ProfileFinding(seconds=seconds, rate=rate, ranks=ranks, stragglers=stragglers,
                          headline=_headline(stragglers, ranks, where, unprofiled), where_time_goes=where,
                          unprofiled=unprofiled)


def _pipelined(collection: Collection) -> bool:
    dims = collection.dims
    return dims is not None and dims.pp > 1


def _mad(values: list[float]) -> float:
    """The median absolute deviation, scaled to a standard deviation; 0 for fewer than 3 values."""
    if len(values) < 3:
        return 0.0
    middle = median(values)
    return 1.4826 * median(abs(v - middle) for v in values)


def _straggler(one: RankShares, others: list[RankShares], peers_wait: float, gap: float,
               needed: float) -> Straggler:
    instead = []
    for what in one.shares:
        peers = median(m.shares.get(what, 0.0) for m in others)
        if one.shares[what] - peers >= MIN_GAP / 2:
            instead.append(Excess(what, one.shares[what], peers))
    for frame in one.frames:
        peers = median(m.frames.get(frame, 0.0) for m in others)
        if one.frames[frame] - peers >= MIN_GAP / 2:
            instead.append(Excess(f"{WORK} in {frame}", one.frames[frame], peers))
    instead.sort(key=lambda e: -(e.share - e.peers))
    where = f"rank {one.rank}" + (f" ({one.coords})" if one.coords else "") + f" on {one.host}"
    evidence = (f"{where} waited on its peers {one.peer_wait:.0%} of its samples; the {len(others)} other rank"
                f"{'s' if len(others) > 1 else ''} of {one.group} waited {peers_wait:.0%} (median): {gap:.0%} of the "
                f"time they waited for it (noise at {one.samples} samples: {needed:.0%})")
    if instead and instead[0].what == "dataloader":  # measured: a loader-bound job looks like this with no slow rank
        evidence += ("; its extra time is in its DataLoader: if every rank's loader is as slow (a data-bound job), "
                     "this rank may only be the last to arrive (bench/stragglers.py measures how often a healthy "
                     "loader-bound job looks so): the loader workers' speed tells")
    return Straggler(ranks=[one.rank], coords=[one.coords], hosts=[one.host], waited_for=gap, own_wait=one.peer_wait,
                     peers_wait=peers_wait, threshold=needed, group=one.group, evidence=evidence, instead=instead[:6])


def _where_time_goes(ranks: list[RankShares]) -> list[tuple[str, float]]:
    activities = {a for r in ranks for a in r.shares}
    where = [(a, median(r.shares.get(a, 0.0) for r in ranks)) for a in activities]
    return sorted((w for w in where if w[1] > 0), key=lambda w: -w[1])


def _headline(stragglers: list[Straggler], ranks: list[RankShares], where: list[tuple[str, float]],
              unprofiled: list) -> str:
    if not ranks:
        return "NO PROFILE: no rank could be profiled"
    if stragglers:
        first = stragglers[0]
        label = f"rank {first.ranks[0]}" + (f" ({first.coords[0]})" if first.coords[0] else "")
        more = f" (and {len(stragglers) - 1} more)" if len(stragglers) > 1 else ""
        return f"SLOW RANK: {label}{more}: its peers waited for it {first.waited_for:.0%} of the time"
    waits = sorted(r.peer_wait for r in ranks)
    time_goes = ", ".join(f"{what} {share:.0%}" for what, share in where[:4])
    partial = f"; {len(unprofiled)} rank(s) not profiled" if unprofiled else ""
    return (f"NO STRAGGLER: every rank waits on its peers about the same ({waits[0]:.0%}-{waits[-1]:.0%} of its time)"
            f"; time goes to {time_goes}{partial}")
