"""Slow one rank of ANY torch job from outside it, changeable while it runs: bench/stragglers.py's injector.

Put this folder first on a job's PYTHONPATH with HD_STRAGGLER_CONTROL=FILE in its environment: Python imports
this `sitecustomize` at start-up in every process, and in a process with a RANK (a torchrun or srun worker) it
registers torch's *global* optimizer step pre-hook (`torch.optim.optimizer.register_optimizer_step_pre_hook`),
which every torch optimizer runs before its step: plain torch optimizers under DDP, and the torch optimizer that
DeepSpeed's ZeRO-1 optimizer wraps (DeepSpeed steps it once per parameter group, so a step starts where a group
already seen comes again). No line of the job changes.

The control file, JSON, read again whenever it changes: {"rank": R, "factor": F, "how": "compute"|"sleep"|"share"}.
Rank R spends, before each of its optimizer steps, (F - 1) x its own healthy step time: the median time between
its steps while no rank was slowed (the last 50 such steps; nothing is injected before 5 of them were seen), in
Python arithmetic ("compute": the CPU is busy, its stack moves in Python frames) or in time.sleep ("sleep": held
up outside Python's work), or ("share") by a lower CPU share: its threads' niceness raised until the job's steps
take F times the healthy step (what other work on its node does to it), or ("neighbour") by another process on its
core: a CPU-bound process pinned beside it (not its child: started through an intermediate that exits), whose share
of each 20 ms is raised or lowered until the job's steps take F times the healthy step. Rank -1 or factor 1: nobody
is slowed.

HD_STRAGGLER_PIN=1: each rank is pinned at start-up to one core of those it may use (LOCAL_RANK modulo their
number; its threads, made later, inherit it), as a launcher's CPU binding does (`srun --cpu-bind`, one rank per
core): a rank then waits for a core only when something else runs on its own.

HD_STRAGGLER_TIMES=FILE: rank 0 appends "iteration N at T" (time.time()) at each of its steps, the iteration
end times bench/stragglers.py reads (the same format as tests/hangdoctor/fixtures/slow_job.py's --times).
Processes without RANK (torchrun's agent, py-spy's callers) or without HD_STRAGGLER_CONTROL: nothing happens,
and torch is not imported.

A sitecustomize already on the path (a distribution's or a virtualenv's) is shadowed by this one: it is run
afterwards if found further along sys.path.
"""

from __future__ import annotations

import os
import sys


def _chain_next_sitecustomize() -> None:
    """Run the sitecustomize this one shadows, if any, as Python would have."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


class _Injector:
    KEEP = 50  # healthy step intervals kept
    NEEDED = 5  # healthy intervals needed before anything is injected

    def __init__(self, control: str, times: str | None, rank: int):
        self.control, self.rank = control, rank
        self.times = open(times, "a") if times and rank == 0 else None
        self.mtime = None
        self.slow_rank, self.factor, self.how = -1, 1.0, "compute"
        self.seen: set[int] = set()  # the parameter groups stepped in this step
        self.last: float | None = None  # when the previous step began (after its injected delay)
        self.last_healthy = False  # whether nobody was slowed during the previous step
        self.healthy: list[float] = []
        self.steps = 0
        self.share = _Share()
        self.neighbour = _Neighbour(control)

    def refresh(self) -> None:
        import json

        try:
            mtime = os.stat(self.control).st_mtime_ns
            if mtime == self.mtime:
                return
            with open(self.control) as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return
        self.mtime = mtime
        self.slow_rank = int(data.get("rank", -1))
        self.factor = float(data.get("factor", 1.0))
        self.how = data.get("how", "compute")

    def nobody_slowed(self) -> bool:
        return self.slow_rank < 0 or self.factor == 1.0

    def hook(self, optimizer, args, kwargs) -> None:
        import time

        key = id(optimizer.param_groups[0]) if optimizer.param_groups else 0
        if key not in self.seen and self.seen:
            self.seen.add(key)  # another parameter group of the same step (DeepSpeed's ZeRO steps each alone)
            return
        self.seen = {key}
        now = time.perf_counter()
        self.refresh()
        healthy = self.nobody_slowed()
        if self.last is not None and healthy and self.last_healthy:
            self.healthy.append(now - self.last)
            del self.healthy[:-self.KEEP]
        self.last_healthy = healthy
        slowed = not healthy and self.rank == self.slow_rank and len(self.healthy) >= self.NEEDED
        if slowed and self.how in ("share", "neighbour"):
            knob = self.share if self.how == "share" else self.neighbour
            knob.adjust(now - self.last, self.factor * sorted(self.healthy)[len(self.healthy) // 2])
        elif slowed:
            ordered = sorted(self.healthy)
            extra = (self.factor - 1.0) * ordered[len(ordered) // 2]
            if self.how == "sleep":
                time.sleep(extra)
            else:
                _spin(extra)
        if not (slowed and self.how == "share"):
            self.share.reset()
        if not (slowed and self.how == "neighbour"):
            self.neighbour.reset()
        self.last = time.perf_counter()
        self.steps += 1
        if self.times is not None:
            self.times.write(f"iteration {self.steps} at {time.time():.4f}\n")
            self.times.flush()


class _Share:
    """A lower CPU share: the rank's threads' niceness (the kernel's weight for them when they wait for a core
    beside other tasks), raised one step while the job's steps are shorter than the target, lowered while they are
    over it by 10%: the rank gets less of the cores the job shares, the job runs about `factor` times slower."""

    def __init__(self):
        self.nice, self.recent = 0, []

    def adjust(self, interval: float, target: float) -> None:
        self.recent = (self.recent + [interval])[-3:]
        if self.nice == 0:  # a first guess: each nice level is about 20% less weight
            self._set(1 if target > 0 else 0)
            return
        middle = sorted(self.recent)[len(self.recent) // 2]
        if middle < 0.97 * target and self.nice < 19:
            self._set(self.nice + 1)
        elif middle > 1.1 * target and self.nice > 1:
            self._set(self.nice - 1)

    def reset(self) -> None:
        if self.nice:
            self._set(0)
        self.recent = []

    def _set(self, nice: int) -> None:
        """Every thread of this process (Linux's setpriority on a thread id is that thread's alone)."""
        self.nice = nice
        try:
            threads = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            threads = [0]
        for tid in threads:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                pass


# The neighbour: argv = its duty file, the rank's pid, the core. Every 20 ms it computes for `duty` of them and
# sleeps the rest; it reads the duty again every quarter second and ends when the rank is gone.
_HOG = """
import os, sys, time
duty_file, pid, core = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.sched_setaffinity(0, {core})
duty, checked = 0.0, 0.0
while True:
    now = time.monotonic()
    if now - checked > 0.25:
        checked = now
        try:
            os.kill(pid, 0)
        except OSError:
            break
        try:
            duty = float(open(duty_file).read() or 0)
        except (OSError, ValueError):
            duty = 0.0
    if duty <= 0:
        time.sleep(0.25)
        continue
    end = now + 0.02 * duty
    while time.monotonic() < end:
        pass
    time.sleep(0.02 * (1 - duty))
"""


class _Neighbour:
    """Another process on the rank's core, CPU-bound for a share of the time (`duty`) raised one step while the
    job's steps are shorter than the target and lowered while they are over it by 10%. Started at the first slowed
    step, through a short-lived intermediate so that it is no child of the rank (a rank's children are its loader
    workers to a profiler); it idles at duty 0 while the rank is not slowed."""

    STEP = 0.05

    def __init__(self, control: str):
        self.duty_file = f"{control}.neighbour.{os.getpid()}"
        self.duty, self.recent, self.started = 0.0, [], False

    def adjust(self, interval: float, target: float) -> None:
        self.recent = (self.recent + [interval])[-3:]
        if not self.started:
            self._start()
            self._set(0.2)
            return
        middle = sorted(self.recent)[len(self.recent) // 2]
        if middle < 0.97 * target and self.duty < 0.95:
            self._set(self.duty + self.STEP)
        elif middle > 1.1 * target and self.duty > self.STEP:
            self._set(self.duty - self.STEP)

    def reset(self) -> None:
        if self.duty:
            self._set(0.0)
        self.recent = []

    def _start(self) -> None:
        import subprocess

        self.started = True
        core = min(os.sched_getaffinity(0))
        hog = [sys.executable, "-I", "-S", "-c", _HOG, self.duty_file, str(os.getpid()), str(core)]
        starter = ("import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True, "
                   "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
        subprocess.run([sys.executable, "-I", "-S", "-c", starter, *hog], timeout=30)

    def _set(self, duty: float) -> None:
        self.duty = round(min(max(duty, 0.0), 0.95), 2)
        with open(self.duty_file + ".tmp", "w") as handle:
            handle.write(str(self.duty))
        os.replace(self.duty_file + ".tmp", self.duty_file)


def _pin() -> None:
    """One core per rank, LOCAL_RANK modulo the cores it may use (HD_STRAGGLER_PIN=1)."""
    cores = sorted(os.sched_getaffinity(0))
    local = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    os.sched_setaffinity(0, {cores[local % len(cores)]})


def _spin(seconds: float) -> int:
    """Python arithmetic for about `seconds` of wall time."""
    import time

    end, total = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        for i in range(2000):
            total += i * i
    return total


def _install() -> None:
    control = os.environ.get("HD_STRAGGLER_CONTROL")
    rank = os.environ.get("RANK")
    if not control or rank is None:
        return
    if os.environ.get("HD_STRAGGLER_PIN") == "1":
        _pin()
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    injector = _Injector(control, os.environ.get("HD_STRAGGLER_TIMES"), int(rank))
    register_optimizer_step_pre_hook(injector.hook)


_chain_next_sitecustomize()
_install()
