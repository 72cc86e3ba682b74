"""What `attach --profile`'s samplers cost the job on this node, and the sampling rate that keeps it in bounds.

py-spy samples a rank without stopping it, so what sampling costs the job is the CPU the samplers take from it.
A rank loses time to them only while it is ready to run and waits for a core: on a node with spare cores (a GPU
node, 8 ranks on 100 cores) nobody waits and sampling costs nothing; where the ranks already take every core (4
CPU-bound ranks on 2 cores) they wait, and the samplers are part of what they wait behind. So, a second into the
profile, `measure` reads over a window the samplers' CPU `s`, the job's processes' time on a core `R` and waiting
for one `Q` (the kernel's schedstat of each of their threads), and what every other task of the node waited too.
The kernel shares a core among the tasks that wait for it, so the CPU the samplers take would have gone to the
waiting tasks, the job's share in proportion to its waits: `lost = s * Q / (everything's wait but the samplers')`.
How much slower that makes the job depends on what bounds it. A job bound by its CPU (its `n` ranks ready to run
all the time, `R + Q = n`) progresses with the CPU it gets: `lost / (R + lost)` slower. A job bound by anything
else (sleep, I/O, a GPU: its ranks seldom ready to run) only waits a little longer each time it wakes: `lost / n`
of its wall time. The two are weighted by the share of time its ranks were ready to run, `rho = (R + Q) / n`:

    cost = rho * lost / (R + lost) + (1 - rho) * lost / n

and where the cost is over the budget, `bounded_rate` is the highest rate at which it fits, the samplers' CPU
taken as proportional to their rate. A rank's child processes (DataLoader workers) count with the job. Linux only
(/proc); elsewhere nothing is measured and the rate stays. Stdlib only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hangdoctor.collector import procs

MIN_RATE = 2  # samples a second: below this a profile of tens of seconds says too little to be worth taking


@dataclass(frozen=True)
class CpuSnapshot:
    """Seconds so far, read at one moment: the node's idle and total (every core) and every task's wait for a
    core; per process asked for, its CPU (every thread) and its threads' time on a core and waiting for one."""

    idle: float
    total: float
    cores: int
    waited: float
    processes: dict[int, tuple[float, float, float]]  # pid -> (cpu, on a core, waiting for a core)


@dataclass(frozen=True)
class SamplingCost:
    """Over a window, in cores' worth: the samplers' CPU, the node's idle, the job's time on a core and waiting
    for one, and the wait of every task of the node but the samplers (the job's included)."""

    rate: int  # the rate the samplers ran at
    cores: int
    samplers: float
    idle: float
    ranks: float
    waited: float
    all_waited: float
    processes: int = 1  # the ranks (their workers' time is in `ranks` and `waited`, their wall time is not)

    def cost_at(self, samplers: float) -> float:
        """The share of its time the job would lose to samplers taking `samplers` cores (the waits as measured)."""
        if self.waited <= 0:
            return 0.0
        lost = samplers * self.waited / max(self.all_waited, self.waited)
        n = max(1, self.processes)
        rho = min(1.0, (self.ranks + self.waited) / n)
        return rho * lost / (self.ranks + lost) + (1 - rho) * lost / n

    @property
    def cost(self) -> float:
        return self.cost_at(self.samplers)


def _ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


def thread_times(pid: int) -> tuple[int, int, int, int]:
    """Nanoseconds a process's threads ran on a core and waited for one, then the same of its main thread (the one
    whose id is the pid): each thread's schedstat, 0 where the kernel keeps none or a thread ended between the
    listing and the read."""
    run = wait = main_run = main_wait = 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0, 0, 0
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as file:
                values = file.read().split()
            ran, waited = int(values[0]), int(values[1])
        except (OSError, IndexError, ValueError):
            continue
        run, wait = run + ran, wait + waited
        if tid == str(pid):
            main_run, main_wait = ran, waited
    return run, wait, main_run, main_wait


def _process_times(pid: int, tick: int) -> tuple[float, float, float] | None:
    """(CPU seconds of every thread, seconds its threads ran on a core, seconds they waited for one); None when
    it is gone or unreadable."""
    stat = procs.read_stat(pid)
    if stat is None:
        return None
    run, wait, *_ = thread_times(pid)
    return stat["ticks"] / tick, run / 1e9, wait / 1e9


def with_descendants(pids: list[int]) -> list[int]:
    """These processes and every process below them (one pass over /proc)."""
    children: dict[int, list[int]] = {}
    try:
        parent_of = procs.parents()
    except OSError:
        return list(pids)
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, list(pids)  # a dict: insertion order, and membership at once
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = None
            todo.extend(children.get(pid, ()))
    return list(found)


def snapshot(pids: list[int]) -> CpuSnapshot | None:
    """The node's and these processes' CPU seconds now; None where /proc/stat cannot be read (not Linux)."""
    tick = _ticks()
    try:
        with open("/proc/stat", "rb") as file:
            lines = file.read().decode("ascii", "replace").splitlines()
    except OSError:
        return None
    head = lines[0].split() if lines else []
    if not head or head[0] != "cpu" or len(head) < 6:
        return None
    values = [int(v) for v in head[1:] if v.isdigit()]
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    idle = values[3] + values[4]  # idle and iowait
    processes = {pid: times for pid in pids if (times := _process_times(pid, tick)) is not None}
    return CpuSnapshot(idle=idle / tick, total=sum(values[:8]) / tick, cores=max(1, cores), waited=_all_waits(),
                       processes=processes)


def _all_waits() -> float:
    """Seconds every task of the node has waited for a core (one pass over /proc)."""
    try:
        return sum(thread_times(pid)[1] for pid in procs.all_pids()) / 1e9
    except OSError:
        return 0.0


def measure(before: CpuSnapshot, after: CpuSnapshot, samplers: list[int], job: list[int], rate: int,
            ranks: int = 0) -> SamplingCost | None:
    """The window between two snapshots in cores' worth (`job`: the ranks and their child processes, `ranks` of
    them ranks); None if the window is empty."""
    wall = (after.total - before.total) / after.cores  # seconds of wall time the node's counters advanced
    if wall <= 0:
        return None

    def delta(pids: list[int], field: int) -> float:
        return sum(max(0.0, after.processes[pid][field] - before.processes[pid][field]) for pid in pids
                   if pid in before.processes and pid in after.processes) / wall

    # the samplers' CPU from their threads' schedstat where the kernel keeps it (nanoseconds: a sampler of one
    # child-less rank takes under a clock tick a second, which the tick count reads as nothing), else their ticks
    return SamplingCost(rate=rate, cores=after.cores, samplers=max(delta(samplers, 0), delta(samplers, 1)),
                        idle=max(0.0, (after.idle - before.idle) / wall), ranks=delta(job, 1), waited=delta(job, 2),
                        all_waited=max(0.0, (after.waited - before.waited) / wall - delta(samplers, 2)),
                        processes=ranks or len(job))


def bounded_rate(found: SamplingCost, budget: float) -> int:
    """The highest rate, at most the one measured, whose cost fits `budget` (a share: 0.02); never below MIN_RATE."""
    if found.cost <= budget or found.samplers <= 0:
        return found.rate
    for rate in range(found.rate - 1, MIN_RATE, -1):  # the cost grows with the samplers' CPU: the first that fits
        if found.cost_at(found.samplers * rate / found.rate) <= budget:
            return rate
    return MIN_RATE


def explain(found: SamplingCost, chosen: int, budget: float) -> str:
    """One line for the report: what the samplers cost and why the rate is what it is."""
    measured = (f"at {found.rate}/s the samplers took {found.samplers:.2f} of the node's {found.cores} cores "
                f"({found.idle:.2f} idle), the job's processes ran {found.ranks:.2f} and waited {found.waited:.2f} "
                f"for a core (every task {found.all_waited:.2f}): the job about {100 * found.cost:.1f}% slower")
    if chosen == found.rate:
        return f"sampled at {chosen}/s: {measured}, within the {100 * budget:g}% bound"
    over = found.cost_at(found.samplers * chosen / found.rate) > budget
    short = " (the lowest rate taken; the bound is not met)" if over else ""
    return (f"sampled at {chosen}/s, not {found.rate}/s{short}: {measured}, over the {100 * budget:g}% bound "
            f"(--profile-cost); fewer samples make a smaller gap harder to see: a longer --profile makes up for it")
