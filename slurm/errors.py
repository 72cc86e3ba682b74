"""Errors a SLURM user can act on: a one-line message plus a hint that says how to fix it.

The CLI layer (hangdoctor's commands) turns a `SlurmError` into `Error: <message>` and `Hint: <hint>` lines on
stderr and a non-zero exit code; nothing in `slurm/` prints or exits by itself.
"""

from __future__ import annotations


class SlurmError(Exception):
    """Base class: `message` is one line, `hint` (possibly empty) is one line."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class SlurmCommandMissing(SlurmError):
    """squeue, scontrol, srun, sbatch... is not on PATH: not a SLURM login node, or the module is not loaded."""


class SlurmCommandFailed(SlurmError):
    """A SLURM command exited non-zero or ran past its bound; `stderr` keeps what it said."""

    def __init__(self, message: str, hint: str = "", *, stderr: str = "", returncode: int | None = None) -> None:
        super().__init__(message, hint)
        self.stderr = stderr
        self.returncode = returncode


class JobNotFound(SlurmError):
    """SLURM does not know the job id (never existed, or finished longer ago than MinJobAge)."""


class JobNotRunning(SlurmError):
    """The job exists but is pending, completing or finished: there are no processes to look at."""


class NotJobOwner(SlurmError):
    """The job belongs to another user: SLURM refuses to add a step to it, even for root."""


class ClusterError(SlurmError):
    """The local test cluster could not start, answer or stop."""
