"""`scontrol listpids JOB NODE`: which processes of a job run on a node, and which of them are tasks.

    PID      JOBID    STEPID   LOCALID GLOBALID
    6784     1        0        0       0
    6742     1        batch    0       0
    6743     1        batch    -       -

A row whose task numbers are `-` is a helper of the step (srun, its forwarder, a shell), not a task. A task
that slurmstepd has not forked yet shows PID -1 (kept as pid None). Without
the node argument scontrol answers for one node only, so we always name it.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm.errors import SlurmCommandFailed
from slurm.jobs import check_job_id
from slurm.process import run_command


# What scontrol says when the job has no process on that node (pending job, or a node outside it).
NO_STEPS = ("There are no steps for job", "does not exist on node")


@dataclass(frozen=True)
class StepProcess:
    pid: int | None  # None (-1 in scontrol's output) while the task is being launched
    job_id: str
    step: str  # "0", "1", ..., "batch", "extern"
    local_id: int | None  # None for helpers
    global_id: int | None  # the task's rank in its step (SLURM_PROCID); None for helpers
    node: str = ""

    @property
    def is_task(self) -> bool:
        return self.local_id is not None


def _task_number(text: str) -> int | None:
    return None if text == "-" else int(text)


def parse_listpids(text: str, *, node: str = "") -> list[StepProcess]:
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] == "PID" or any(m in line for m in NO_STEPS):
            continue
        if len(parts) != 5 or not parts[0].lstrip("-").isdigit():
            raise ValueError(f"unexpected `scontrol listpids` line {line.strip()!r}")
        pid, job_id, step, local_id, global_id = parts
        rows.append(StepProcess(
            None if int(pid) < 0 else int(pid), job_id, step, _task_number(local_id), _task_number(global_id), node,
        ))
    return rows


def list_pids(job_id: str | int, node: str, *, env: dict[str, str] | None = None,
              timeout: float = 10.0) -> list[StepProcess]:
    """The job's processes on `node` ([] when the job has none there, or does not exist: scontrol says the same).

    scontrol asks the slurmd of `node` directly, so on a real cluster run it on that node (e.g. inside the step
    of `run_step_on_each_node`); on the local test cluster every slurmd is on this machine."""
    job_id = check_job_id(job_id)
    result = run_command(["scontrol", "listpids", job_id, node], timeout=timeout, env=env)
    if result.timed_out:
        raise SlurmCommandFailed(f"scontrol listpids {job_id} {node} did not answer within {timeout:.0f}s",
                                 f"slurmd on {node} may be hung or down; try `scontrol ping` and `sinfo -n {node}`")
    if any(m in result.stderr or m in result.stdout for m in NO_STEPS):
        return []
    if not result.ok:
        raise SlurmCommandFailed(f"scontrol listpids {job_id} {node} failed: {result.first_error_line()}",
                                 stderr=result.stderr, returncode=result.returncode)
    return parse_listpids(result.stdout, node=node)
