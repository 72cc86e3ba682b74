"""Slow, not hung: which rank the others wait for, read from every rank's time profile (`attach --profile`).

In a synchronous job every collective ends when its last rank arrives, so a rank that is slower than its peers
waits *less* in communication than they do: they wait for it. Per rank, each sample of its main thread is
classified like a hang's stack (the wait table: collective, p2p, barrier, ... or none of them: work), giving
the share of its time in each activity. Ranks are compared with their peers: the ranks of the same pipeline
stage when the topology is known (stages differ by design: the first and last wait differently), otherwise the
whole job. A rank is a straggler when the median share its peers spend waiting on communication exceeds its own
by more than the noise of the measurement allows (`threshold`): that difference is the share of time the others
waited for it. Device syncs are not counted as waiting on peers: a slow GPU shows there too.

In a rank that runs DDP's reducer the share is measured twice, with and without backward: the reducer waits for
its peers inside backward, among samples that are mostly the rank's own compute, and where the others wait for a
rank in a call of their own that noise drowns the gap. The measure that sets the rank further apart from its
peers' noise decides, the second look against a higher bar (`SECOND_LOOK`). Elsewhere (DeepSpeed's pipeline
engine) backward stays in the one measure: taking it out there raised the reference trainer's false alarms from
1/20 to 9/20 (bench/stragglers.py --rescore, docs/BENCHMARKS.md).

The samples are a sample: at a rate bounded by what the samplers cost (collector/sampling_cost.py), a rank has a
few hundred, and a 10% slower one's gap can sit under the noise bar. The kernel's own count of each rank's time on
a core over the same window (per-thread schedstat, read by the collector: exact) tells a rank that computes more
than its peers; such a rank is named unless the samples say the opposite beyond their noise (its peers waited
less than it did by more than the noise bar): with one peer (a pipeline stage of two ranks) a straggler's few
samples can put it level with its peer (bench/stragglers.py --rescore: 39/40 named with the gap's sign as the gate,
40/40 so, false alarms 1/40 either way). Where its peers had cores to spare (a core to each rank), a rank that
waits for a core more than they do is named the same way: something else runs on its core (the same count). The
evidence says which kind of straggler it is: more work, more waiting for a core (other work on its node), or
neither (held up off the CPU).

On a GPU the wait for a slow rank happens inside the NCCL kernel, where no CPU sample sees it: where the ranks'
Flight Recorder traces carry kernel times (TORCH_NCCL_ENABLE_TIMING=1), kernel_times.py reads who the kernels
waited for, and its stragglers join these (evidence added to a rank both name).

What the straggler does instead is the differential view: the activities and the innermost Python frames where
its share of samples exceeds its peers' median. No straggler: the job is simply slow, and where time goes
(the median share of each activity) is said instead.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from statistics import median

from hangdoctor.analysis.kernel_times import MIN_GAP as KERNEL_GAP
from hangdoctor.analysis.kernel_times import KernelComparison, KernelStraggler, compare_kernel_times
from hangdoctor.analysis.loader_workers import loader_busy
from hangdoctor.analysis.wait_rule import COMM_KINDS
from hangdoctor.analysis.waits import WaitTable, default_table, innermost_python
from hangdoctor.model import OK, Collection, RankRecord, Stack

DDP_FILE = "torch/nn/parallel/distributed.py"
WORK = "work"  # a main-thread sample in no known wait: computing, or in a call the wait table does not know
MIN_GAP = 0.04  # the smallest share of time the others waited for a rank that is reported at all
Z = 3.0  # how many standard errors of the two shares the gap must exceed
# the bar for the second look (outside backward) at the same samples: two tests instead of one, and a short wait's
# few samples are less independent than the binomial model says (bench/stragglers.py --rescore: at 1.0 a 4-rank DDP
# job on 2 cores named its rank 0, which prints every step, in 5 of 10 healthy runs; at 1.3 in 1, as without it)
SECOND_LOOK = 1.3
# how much more than its peers' (median) a rank's main thread must run on a core to be said to compute more, at
# least (and at least half MIN_GAP of the wall time, the bar of `instead`: a rank that sleeps through its step and
# prints a line more is not slower for it): healthy ranks of one pipeline stage of the reference trainer differ by up to 3% on 2
# oversubscribed cores, a 10% slower one by about 20% (bench/stragglers.py, docs/BENCHMARKS.md)
WORK_FLOOR = 0.06
# waits on peers, and a wait on the device (on a GPU the fast ranks wait there for the slow one's kernels): never time
# of a rank's own that its peers wait for
COMM_ACTIVITIES = COMM_KINDS | {"device-sync"}
OWN_FRAME = 0.01  # a frame or activity its peers spend at most this share of their samples in is the rank's own
CORE_WAIT_GAP = 0.15  # how much more of the time than its peers a rank must wait for a core to be said to lack CPU
# where its peers wait for a core at most this share of the time (a core to each rank, as a launcher's CPU binding
# gives), a rank that waits for one MIN_GAP of the time more than they do lacks CPU: something else runs on its core
SPARE_CORES = 0.05


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
    # the same outside backward: DDP's reducer waits for peers inside backward, whose samples are mostly the rank's
    # own compute; where the others wait for a rank in a call of their own, this measure is the cleaner one
    call_wait: float = 0.0
    frames: dict[str, float] = field(default_factory=dict)  # innermost Python frame (and line) of WORK samples -> share
    loader_busy: float | None = None  # busy share of its DataLoader workers' samples (analysis/loader_workers.py)
    loader_samples: int = 0
    # from the kernel's counters over the same window (exact, not sampled): the share of wall time its main thread
    # ran on a core, and waited for one; None where the collector could not read them
    on_core: float | None = None
    core_wait: float | None = None


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
    notes: list[str] = field(default_factory=list)  # ranks the others waited for that are not stragglers, and why
    kernels: list[KernelComparison] = field(default_factory=list)  # the GPU's kernel times, per process group


def main_stacks(record: RankRecord) -> list[tuple[Stack, int]]:
    """The rank's main thread's stacks and counts: its thread whose id is the pid, else "MainThread"."""
    stacks = record.profile.stacks if record.profile else ()
    chosen = [s for s in stacks if s.thread_id == record.identity.pid]
    if not chosen:
        chosen = [s for s in stacks if s.thread_name == "MainThread"]
    return [(s.frames, s.count) for s in chosen]


def _runs_ddp(stacks: list[tuple[Stack, int]]) -> bool:
    """Whether DDP's reducer is in this rank's samples: a DistributedDataParallel module's frames, or a native
    c10d::Reducer frame. Then backward mixes the reducer's waits for peers (its all_reduce of gradient buckets)
    with the rank's own compute, and the share outside backward is measured too."""
    return any(any(f.file.endswith(DDP_FILE) or (f.native and "c10d::Reducer" in f.name) for f in stack)
               for stack, _ in stacks)


def shares_of(record: RankRecord, table: WaitTable, memo: dict) -> tuple[int, dict[str, float], float, dict, bool]:
    activity: Counter = Counter()
    frames: Counter = Counter()
    waiting = 0
    stacks = main_stacks(record)
    ddp = _runs_ddp(stacks)
    for stack, count in stacks:
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
        return 0, {}, 0.0, {}, ddp
    return (total, {k: v / total for k, v in activity.most_common()}, waiting / total,
            {k: v / total for k, v in frames.most_common(20)}, ddp)


def threshold(p_rank: float, n_rank: int, p_peers: float, n_peers: int) -> float:
    """The gap two shares must exceed to be told apart: Z standard errors of their difference (as if the samples
    were drawn at random; sampling at a fixed rate a job that repeats itself errs less), at least MIN_GAP."""
    def variance(p: float, n: int) -> float:
        p = min(max(p, 0.05), 0.95)
        return p * (1 - p) / max(1, n)
    return max(MIN_GAP, Z * math.sqrt(variance(p_rank, n_rank) + variance(p_peers, n_peers)))


def _rate_notes(collection: Collection) -> list[str]:
    """Each node's line on what its samplers cost (collector/sampling_cost.py), once per node."""
    by_host: dict[str, str] = {}
    for record in sorted(collection.records, key=lambda r: r.rank):
        if record.profile is not None and record.profile.rate_note:
            by_host.setdefault(record.identity.host or "?", record.profile.rate_note)
    return [f"{host}: {note}" if len(by_host) > 1 else note for host, note in by_host.items()]


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
        samples, shares, peer_wait, frames, ddp = shares_of(record, table, memo)
        if not samples:
            unprofiled.append((record.rank, "no sample of its main thread"))
            continue
        coords = record.identity.coords
        busy, busy_samples = loader_busy(profile) or (None, 0)
        ranks.append(RankShares(
            rank=record.rank, host=record.identity.host, pid=record.identity.pid,
            coords=record.identity.coords_label(), group=f"pp={coords.pp}" if coords and _pipelined(collection)
            else "the job", samples=samples, shares=shares, peer_wait=peer_wait,
            call_wait=peer_wait - shares.get("ddp-reducer", 0.0) if ddp else peer_wait, frames=frames,
            loader_busy=busy, loader_samples=busy_samples,
            on_core=profile.cpu.on_core / profile.cpu.seconds if profile.cpu else None,
            core_wait=profile.cpu.waiting / profile.cpu.seconds if profile.cpu else None))
    groups: dict[str, list[RankShares]] = defaultdict(list)
    for shares in ranks:
        groups[shares.group].append(shares)
    stragglers, notes = [], []
    for members in groups.values():
        for one in members:
            others = [m for m in members if m is not one]
            if not others:
                continue
            measure, peers_wait, gap, needed = max(
                (_gap(one, others, measure) for measure in ("peer_wait", "call_wait")),
                key=lambda found: found[2] / found[3])
            work, core, own = _work_gap(one, others), _core_gap(one, others), _own_time(one, others)
            if gap > needed or (gap > -needed and any(found is not None and found[0] - found[1] > found[2]
                                                      for found in (work, core))) or (gap > 0 and own is not None):
                found = _straggler(one, others, peers_wait, gap, needed, measure, work, own)
                in_phase = _only_in_phase(one, others) if found.instead and found.instead[0].what == "dataloader" \
                    else None
                if in_phase:
                    notes.append(in_phase)
                else:
                    stragglers.append(found)
    kernels = compare_kernel_times(collection.flight_recorder)
    loader_notes = list(notes)
    if collection.flight_recorder_unread:  # their kernel times, if any, could not be compared: said, not guessed
        unread = sorted(set(collection.flight_recorder_unread))
        notes.append(f"the Flight Recorder of rank{'s' if len(unread) > 1 else ''} {', '.join(map(str, unread))} "
                     f"could not be read, so its kernel times were not compared: {'; '.join(collection.errors)}")
    for comparison in kernels:
        for found in comparison.stragglers:
            _add_kernel_straggler(stragglers, found, collection)
    stragglers.sort(key=lambda s: -s.waited_for)
    notes.extend(_rate_notes(collection))
    where = _where_time_goes(ranks)
    return ProfileFinding(seconds=seconds, rate=rate, ranks=ranks, stragglers=stragglers,
                          headline=_headline(stragglers, ranks, where, unprofiled, loader_notes), where_time_goes=where,
                          unprofiled=unprofiled, notes=notes, kernels=kernels)


def _add_kernel_straggler(stragglers: list[Straggler], found: KernelStraggler, collection: Collection) -> None:
    """A rank the GPU's kernel times name: its evidence joins the sampled profile's where that named it too."""
    for straggler in stragglers:
        if straggler.ranks == [found.rank]:
            straggler.evidence += f"; and {found.evidence}"
            straggler.waited_for = max(straggler.waited_for, found.share)
            return
    record = next((r for r in collection.records if r.rank == found.rank), None)
    coords = record.identity.coords_label() if record is not None else ""
    host = record.identity.host if record is not None else ""
    where = f"rank {found.rank}" + (f" ({coords})" if coords else "") + (f" on {host}" if host else "")
    stragglers.append(Straggler(ranks=[found.rank], coords=[coords], hosts=[host], waited_for=found.share,
                                own_wait=0.0, peers_wait=found.share, threshold=KERNEL_GAP,
                                group=f"process group {found.group}", evidence=f"{where}: {found.evidence}"))


def _pipelined(collection: Collection) -> bool:
    dims = collection.dims
    return dims is not None and dims.pp > 1


def _mad(values: list[float]) -> float:
    """The median absolute deviation, scaled to a standard deviation; 0 for fewer than 3 values."""
    if len(values) < 3:
        return 0.0
    middle = median(values)
    return 1.4826 * median(abs(v - middle) for v in values)


def _gap(one: RankShares, others: list[RankShares], measure: str) -> tuple[str, float, float, float]:
    """(measure, the peers' median share, how much more they waited than this rank, what the gap must exceed)."""
    own = getattr(one, measure)
    theirs = [getattr(m, measure) for m in others]
    peers_wait = median(theirs)
    needed = threshold(own, one.samples, peers_wait, sum(m.samples for m in others) // len(others))
    bar = SECOND_LOOK if measure == "call_wait" else 1.0
    return measure, peers_wait, peers_wait - own, bar * max(needed, 3 * _mad(theirs))


def _work_gap(one: RankShares, others: list[RankShares]) -> tuple[float, float, float] | None:
    """(its main thread's share of the window on a core, its peers' median, what its excess must clear) from the
    kernel's counters, where they were read for it and a peer; None otherwise. Exact where the samples are a
    sample: at a rate bounded by the samplers' cost, a rank that computes more is seen here when its few samples
    cannot tell its peers' wait for it from noise."""
    peers = [m.on_core for m in others if m.on_core is not None]
    if one.on_core is None or not peers:
        return None
    theirs = median(peers)
    return one.on_core, theirs, max(MIN_GAP / 2, WORK_FLOOR * theirs, 3 * _mad(peers))


def _own_time(one: RankShares, others: list[RankShares]) -> tuple[str, float, float, float] | None:
    """(what, its share, its peers' median, the noise bar) of the frame or activity outside communication that its
    peers are hardly ever seen in (at most OWN_FRAME of their samples) and where this rank spends more of its
    samples than that beyond their noise, the largest; None where none does. Its peers do the same steps: time in
    code of its own (a sleep, a retry, a print, a collection) is time they wait for it, and a share near nothing on
    every peer is far less noisy than the wait the peers share. Code they run too is left out: on busy cores a
    rank's share of a layer's forward swings with the scheduler (bench/stragglers.py, docs/BENCHMARKS.md)."""
    found = None
    peers_samples = sum(m.samples for m in others) // len(others)
    candidates = [(f"{WORK} in {frame}", one.frames[frame], [m.frames.get(frame, 0.0) for m in others])
                  for frame in one.frames]
    candidates += [(what, share, [m.shares.get(what, 0.0) for m in others]) for what, share in one.shares.items()
                   if what != WORK and what not in COMM_ACTIVITIES]
    for what, share, theirs in candidates:
        peers = median(theirs)
        if peers > OWN_FRAME:
            continue  # code its peers run as well (the model's layers): its share there swings with the scheduler
        bar = threshold(share, one.samples, peers, peers_samples)
        if share - peers > bar and (found is None or share - peers > found[1] - found[2]):
            found = (what, share, peers, bar)
    return found


def _core_gap(one: RankShares, others: list[RankShares]) -> tuple[float, float, float] | None:
    """(its main thread's share of the window waiting for a core, its peers' median, what its excess must clear),
    where its peers had cores to spare (they waited for one at most SPARE_CORES of the time); None otherwise. Where
    the ranks themselves contend for the cores, the scheduler's shares among them swing by up to 15 points of the
    time (the reference trainer's 4 ranks on 2 cores) and one rank's lower share cannot be told from that; where
    each has a core, one that waits for it has a neighbour on it (exact: the kernel's count)."""
    peers = [m.core_wait for m in others if m.core_wait is not None]
    if one.core_wait is None or not peers or median(peers) > SPARE_CORES:
        return None
    return one.core_wait, median(peers), max(MIN_GAP, 3 * _mad(peers))


def _straggler(one: RankShares, others: list[RankShares], peers_wait: float, gap: float,
               needed: float, measure: str = "peer_wait", work: tuple[float, float, float] | None = None,
               own_time: tuple[str, float, float, float] | None = None) -> Straggler:
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
    own = getattr(one, measure)
    outside = " outside backward" if measure == "call_wait" and one.call_wait != one.peer_wait else ""
    evidence = (f"{where} waited on its peers{outside} {own:.0%} of its samples; the {len(others)} other rank"
                f"{'s' if len(others) > 1 else ''} of {one.group} waited {peers_wait:.0%} (median): {gap:.0%} of the "
                f"time they waited for it (noise at {one.samples} samples: {needed:.0%})")
    if gap <= needed:  # named for the work it does more, or time of its own: its peers' wait for it too short (or
        # noisy) to stand alone
        evidence += " (under it, but see its time on a core)" if own_time is None else " (under it, but see below)"
    if own_time is not None:
        what, share, peers, bar = own_time
        evidence += (f"; it spent {share:.0%} of its samples in {what}, where its peers were seen {peers:.0%} of "
                     f"theirs (noise at these counts: {bar:.0%}): time of its own that they wait for")
    if work is not None:
        evidence += "; " + _work_evidence(one, others, work)
    busy = _loader_gap(one, others)
    if instead and instead[0].what == "dataloader" and busy is not None:
        evidence += (f"; its DataLoader workers were busy {busy[0]:.0%} of their samples, its peers' {busy[1]:.0%} "
                     f"(median): its loader takes longer per batch")
    elif instead and instead[0].what == "dataloader":  # measured: a loader-bound job looks like this with no slow rank
        evidence += ("; its extra time is in its DataLoader: if every rank's loader is as slow (a data-bound job), "
                     "this rank may only be the last to arrive (bench/stragglers.py measures how often a healthy "
                     "loader-bound job looks so): its loader workers were not profiled, and their speed would tell")
    return Straggler(ranks=[one.rank], coords=[one.coords], hosts=[one.host], waited_for=gap, own_wait=own,
                     peers_wait=peers_wait, threshold=needed, group=one.group, evidence=evidence, instead=instead[:6])


def _work_evidence(one: RankShares, others: list[RankShares], work: tuple[float, float, float]) -> str:
    """What the kernel's counters say of the straggler against its peers: more work on a core, more time waiting
    for a core (a lower CPU share: other processes on its node), or neither (it waits on something else)."""
    own, theirs, bar = work
    said = f"its main thread ran on a core {own:.0%} of the time, its peers' {theirs:.0%} (median)"
    if own - theirs > bar:
        said += f": it computes {own / theirs - 1:.0%} more than they do (the kernel's count, not sampled)"
    waits = [m.core_wait for m in others if m.core_wait is not None]
    if one.core_wait is None or not waits:
        return said
    said += f"; it waited for a core {one.core_wait:.0%} of the time, its peers {median(waits):.0%}"
    # waits for a core vary from rank to rank on a busy node (0.24-0.42 of the time among the reference trainer's
    # healthy ranks on 2 cores): only a wide margin says the node's other work takes its CPU; where its peers had
    # cores to spare, the narrow one of _core_gap
    core = _core_gap(one, others)
    if (core is not None and core[0] - core[1] > core[2]) or \
            one.core_wait - median(waits) > max(CORE_WAIT_GAP, 3 * _mad(waits)):
        said += ": other work on its node takes its CPU"
    elif own - theirs <= bar:
        said += (": no more work than theirs, no less CPU; what holds it up is off the CPU (a sleep, I/O, a lock, "
                 "its loader)")
    return said


def _loader_gap(one: RankShares, others: list[RankShares]) -> tuple[float, float, float] | None:
    """(its workers' busy share, its peers' median, the gap it must exceed), where its and some peers' loader
    workers were profiled."""
    peers = [m for m in others if m.loader_busy is not None]
    if one.loader_busy is None or not peers:
        return None
    peers_busy = median(m.loader_busy for m in peers)
    needed = threshold(one.loader_busy, one.loader_samples, peers_busy, sum(m.loader_samples for m in peers)
                       // len(peers))
    return one.loader_busy, peers_busy, needed


def _only_in_phase(one: RankShares, others: list[RankShares]) -> str | None:
    """A loader-bound job whose loaders are all as fast still has a rank that gets its batch last, every step (the
    steps lock in phase), and its peers wait for it in the collective: its main thread looks like a slow loader's.
    Its workers tell: no busier than its peers' (analysis/loader_workers.py), it is not slower, only last."""
    busy = _loader_gap(one, others)
    if busy is None or busy[0] - busy[1] > busy[2]:
        return None
    return (f"rank {one.rank} gets its batch last and its peers wait for it in their collectives, but its DataLoader "
            f"workers are no busier than theirs ({busy[0]:.0%} of their samples against {busy[1]:.0%}, median): "
            "every loader is about as slow (a data-bound job, its steps in phase), not one slow loader")


def _where_time_goes(ranks: list[RankShares]) -> list[tuple[str, float]]:
    activities = {a for r in ranks for a in r.shares}
    where = [(a, median(r.shares.get(a, 0.0) for r in ranks)) for a in activities]
    return sorted((w for w in where if w[1] > 0), key=lambda w: -w[1])


def _headline(stragglers: list[Straggler], ranks: list[RankShares], where: list[tuple[str, float]],
              unprofiled: list, loader_notes: list[str]) -> str:
    if stragglers:
        first = stragglers[0]
        label = f"rank {first.ranks[0]}" + (f" ({first.coords[0]})" if first.coords[0] else "")
        more = f" (and {len(stragglers) - 1} more)" if len(stragglers) > 1 else ""
        return f"SLOW RANK: {label}{more}: its peers waited for it {first.waited_for:.0%} of the time"
    if not ranks:
        return "NO PROFILE: no rank could be profiled"
    waits = sorted(r.peer_wait for r in ranks)
    time_goes = ", ".join(f"{what} {share:.0%}" for what, share in where[:4])
    partial = f"; {len(unprofiled)} rank(s) not profiled" if unprofiled else ""
    if loader_notes:
        return (f"NO STRAGGLER: every rank's DataLoader is about as slow (the rank last to get its batch is no slower: "
                f"see notes); time goes to {time_goes}{partial}")
    return (f"NO STRAGGLER: every rank waits on its peers about the same ({waits[0]:.0%}-{waits[-1]:.0%} of its time)"
            f"; time goes to {time_goes}{partial}")
