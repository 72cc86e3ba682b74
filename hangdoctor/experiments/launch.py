"""What the runner needs from a launcher: start a run, ask its state, say how hangdoctor attaches, stop it.

Two launchers implement it: `launch_sbatch` (one batch job per run: `sbatch` + `scontrol show job` + `scancel`)
and `launch_torchrun` (one local `torchrun` per run, its whole process tree killed at the end). Both write every
rank's stdout and stderr to RUN/train.log, where the watchdog reads the iteration lines.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hangdoctor.experiments.matrix import RunSpec
from slurm.jobstate import JobState

LOG_NAME = "train.log"


@dataclass
class Launched:
    """A started run. `ident` names it for people ("job 12", "torchrun pid 4242")."""

    ident: str
    job_id: str = ""  # the SLURM job id ("" under torchrun)
    pid: int | None = None  # torchrun's pid (None under sbatch)
    log_path: Path = field(default=Path(LOG_NAME))
    attach_args: list[str] = field(default_factory=list)  # `hangdoctor attach` flags that select this run


class Launcher(Protocol):
    name: str

    def describe(self, spec: RunSpec, run_dir: Path) -> str:
        """What would run (the sbatch script, the torchrun command), for --dry-run and the run's folder."""

    def start(self, spec: RunSpec, run_dir: Path) -> Launched:
        """Start the run; raise LaunchError when it cannot be started."""

    def state(self, run: Launched) -> JobState:
        """The run's state now (bounded: a few seconds at most)."""

    def stop(self, run: Launched) -> str:
        """End the run and everything it started (bounded); say what was done, e.g. "cancelled"."""


class LaunchError(Exception):
    """A run could not be started: one line, and whether the whole experiment should stop (no sbatch at all)."""

    def __init__(self, message: str, hint: str = "", *, fatal: bool = False):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.fatal = fatal


def free_port() -> int:
    """A TCP port free on this machine now (the rendezvous port of a run whose first node is this one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]
