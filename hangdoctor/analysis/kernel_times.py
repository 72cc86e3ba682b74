"""Slow, not hung, seen on the GPU: the rank whose collectives the others' NCCL kernels waited for, read from the
Flight Recorder's kernel times.

A CPU sampler does not see a slow GPU: every rank's host thread waits about as long at its next synchronisation
(`loss.item()`), and the wait for the slow peer happens inside the NCCL kernel on the GPU. With
TORCH_NCCL_ENABLE_TIMING=1 torch times each collective's kernel (CUDA events around it). The kernels of one
collective end together on every rank of its group (each waits for all the others), so a kernel's time is how
long its rank waited for the last one to arrive, plus the transfer: the rank that arrived last has the shortest
kernel, and each peer's kernel is longer by the time it waited for it.

Per process group, each collective id that at least two of its ranks timed, with the same op and sizes, is
compared: the rank with the shortest kernel arrived last, and the others waited their time less its time. A rank
is a straggler when it arrived last in at least LAST_SHARE of at least MIN_COLLECTIVES collectives, and the time
its peers waited for it (their median wait, summed over the collectives) is at least MIN_GAP of the time those
collectives spanned on its clock. Ranks that are equally fast take turns at arriving last (two ranks sharing one
GPU came last in two collectives of three in a healthy recording), a slow one comes last in nearly all.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

LAST_SHARE = 0.9
MIN_COLLECTIVES = 20
MIN_GAP = 0.04  # as the sampled profile's (stragglers.py)


@dataclass
class KernelStraggler:
    rank: int
    group: str  # the process group's name ("0": the default group)
    last: int  # collectives it arrived last in
    compared: int  # collectives of the group it was compared in
    waited_ms: float  # the peers' median wait for it, per collective it came last in
    share: float  # the peers' wait for it as a share of the time the compared collectives spanned

    @property
    def evidence(self) -> str:
        return (f"the Flight Recorder's kernel times (process group {self.group}): it arrived last in {self.last} of "
                f"{self.compared} collectives, its peers' NCCL kernels waited {self.waited_ms:.1f} ms for it each "
                f"time ({self.share:.0%} of the time they spanned)")


@dataclass
class KernelComparison:
    """What the kernel times said of one process group, straggler or not."""

    group: str
    ranks: list[int]
    compared: int  # collectives timed on at least two of its ranks
    last_counts: dict[int, int]  # rank -> collectives it arrived last in
    stragglers: list[KernelStraggler]


def compare_kernel_times(dumps: list) -> list[KernelComparison]:
    """`dumps`: formats.flight_recorder.FrDump, one per rank. Groups without kernel times are left out."""
    timed: dict[str, dict[int, tuple]] = {}  # group -> rank -> (kernel times, codes by seq, GroupTrace)
    for dump in dumps:
        for name, trace in dump.sequences.items():
            times = trace.kernel_times()
            if times:
                timed.setdefault(name, {})[dump.rank] = (times, trace.seqs()[0], trace)
    return [_compare(name, ranks) for name, ranks in sorted(timed.items()) if len(ranks) >= 2]


def _compare(group: str, ranks: dict[int, tuple]) -> KernelComparison:
    seqs = sorted(set().union(*(times.keys() for times, _, _ in ranks.values())))
    last_counts = {rank: 0 for rank in ranks}
    waits: dict[int, list[float]] = {rank: [] for rank in ranks}  # the peers' median wait, per collective it came last
    came_last: dict[int, list[int]] = {rank: [] for rank in ranks}
    compared = 0
    for seq in seqs:
        held = {rank: times[seq] for rank, (times, codes, _) in ranks.items() if seq in times}
        if len(held) < 2 or len({ranks[rank][1].get(seq) for rank in held}) != 1:
            continue  # timed on one rank only, or not the same collective on every rank that holds the id
        compared += 1
        last = min(held, key=held.get)
        last_counts[last] += 1
        came_last[last].append(seq)
        waits[last].append(median(t - held[last] for rank, t in held.items() if rank != last))
    stragglers = []
    for rank, count in last_counts.items():
        if compared < MIN_COLLECTIVES or count < LAST_SHARE * compared:
            continue
        trace = ranks[rank][2]
        span = (trace.time_of(came_last[rank][-1]) - trace.time_of(came_last[rank][0])) / 1e6
        waited = sum(waits[rank])
        share = waited / span if span > 0 else 0.0
        if share >= MIN_GAP:
            stragglers.append(KernelStraggler(rank=rank, group=group, last=count, compared=compared,
                                              waited_ms=round(median(waits[rank]), 3), share=round(min(share, 1.0), 4)))
    return KernelComparison(group=group, ranks=sorted(ranks), compared=compared, last_counts=last_counts,
                            stragglers=stragglers)
