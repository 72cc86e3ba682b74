"""Is a job known by its processes on this machine (--local, --pid) still running: while any of them is (state Z
counts as gone); from outside, their exit status cannot be known, and the state says so. The same `JobState` as
a SLURM job's (slurm/jobstate.py)."""

from __future__ import annotations

from hangdoctor.collector import procs
from slurm.jobstate import DONE, RUNNING, JobState


class ProcessesState:
    """A job known by its processes on this machine: running while any of them is."""

    def __init__(self, pids: list[int]):
        self.pids = list(pids)

    def __call__(self) -> JobState:
        alive = [pid for pid in self.pids if (stat := procs.read_stat(pid)) is not None
                 and stat["state"] not in ("Z", "X", "x")]
        if alive:
            return JobState(RUNNING, f"{len(alive)} of {len(self.pids)} processes running")
        return JobState(DONE, f"its {len(self.pids)} process{'es' if len(self.pids) > 1 else ''} ended "
                              f"(their exit status cannot be seen from outside)")
