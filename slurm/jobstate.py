"""Is the job still running, and how did it end. Every question is bounded (scontrol: 10 s).

SLURM: `scontrol show job` (queued, running, or its final state and exit code; slurmctld forgets a job
MinJobAge after it ends, which is said as such). COMPLETING is not an end: the final state (CANCELLED, FAILED,
COMPLETED) and exit code come after it, so it is `ENDING` until then, at most `ENDING_LIMIT` seconds (a node
that never releases the job: a process that ignores SIGKILL in state D). A busy slurmctld is not an ended job: it is given
`UNSEEN_LIMIT` seconds. A job known by its local processes: hangdoctor/watch/processes.py, the same `JobState`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from slurm.errors import JobNotFound, SlurmError
from slurm.jobs import show_job
from slurm.sbatch import TERMINAL_STATES

PENDING, RUNNING, ENDING, DONE = "pending", "running", "ending", "done"
QUEUED_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD"}
UNSEEN_LIMIT = 30.0  # seconds of scontrol failures in a row before the job is given up as unreachable
ENDING_LIMIT = 60.0  # seconds of COMPLETING before it is taken as the end


@dataclass(frozen=True)
class JobState:
    phase: str  # PENDING (queued), RUNNING, ENDING (its processes are being ended), DONE
    detail: str = ""  # e.g. "RUNNING", "FAILED (exit 1)", "CANCELLED", "exit -9"
    exit_code: int | None = None  # once DONE: 0 for success; None when unknown (cancelled, vanished)

    @property
    def succeeded(self) -> bool:
        return self.phase == DONE and self.exit_code == 0


def exit_code_of(text: str) -> int | None:
    """SLURM's ExitCode "status:signal": 1:0 -> 1, 0:9 -> -9 (killed by SIGKILL), anything else -> None."""
    status, sep, sig = text.partition(":")
    if not sep or not status.isdigit() or not sig.isdigit():
        return None
    return -int(sig) if int(sig) else int(status)


class SlurmJobState:
    """The state of one SLURM job, asked of slurmctld."""

    def __init__(self, job_id: str, env: dict[str, str] | None = None, *, show=show_job,
                 clock=time.monotonic):
        self.job_id = job_id
        self.env = env
        self.show = show  # show_job; a test passes recorded scontrol states
        self.clock = clock
        self._unseen_since: float | None = None
        self._ending_since: float | None = None

    def __call__(self) -> JobState:
        try:
            job = self.show(self.job_id, env=self.env, timeout=10.0)
        except JobNotFound:
            return JobState(DONE, "gone from slurmctld (finished longer ago than MinJobAge?)")
        except SlurmError as exc:  # slurmctld busy or restarting: the job may be fine; give it a while
            if self._unseen_since is None:
                self._unseen_since = self.clock()
            if self.clock() - self._unseen_since > UNSEEN_LIMIT:
                return JobState(DONE, f"unreachable for {UNSEEN_LIMIT:.0f}s: {exc.message}")
            return JobState(RUNNING, f"not seen: {exc.message}")
        self._unseen_since = None
        if job.state in QUEUED_STATES:
            return JobState(PENDING, job.state + (f" ({job.reason})" if job.reason not in ("", "None") else ""))
        if job.state == "COMPLETING":
            if self._ending_since is None:
                self._ending_since = self.clock()
            if self.clock() - self._ending_since <= ENDING_LIMIT:
                return JobState(ENDING, job.state)
        if job.state in TERMINAL_STATES or job.state == "COMPLETING":
            code = exit_code_of(job.fields.get("ExitCode", ""))
            if job.state == "CANCELLED":
                code = None if code == 0 else code
            shown = f"{job.state} (exit {code})" if code not in (None, 0) else job.state
            if job.state == "COMPLETING":
                shown += f" for {ENDING_LIMIT:.0f}s: a node has not released the job"
            return JobState(DONE, shown, code)
        return JobState(RUNNING, job.state)
