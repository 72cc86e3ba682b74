"""A launcher for the runner's and the watchdog's tests: one real local process per run (fixtures/iterations.py),
its output in RUN/train.log, hangdoctor attaching with --pid. It speaks the same protocol as the sbatch and
torchrun launchers, so the watchdog and the runner run unchanged; those two are tested for real elsewhere."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hangdoctor.experiments.launch import LOG_NAME, Launched
from slurm.jobstate import DONE, RUNNING, JobState
from hangdoctor.experiments.matrix import RunSpec
from tests.support import PYTHON, child_env, kill_tree

FIXTURE = Path(__file__).parent / "fixtures" / "iterations.py"


class ProcessLauncher:
    name = "process"

    def __init__(self, argv_of=None):
        self.argv_of = argv_of or (lambda spec: list(spec.config.trainer_args))  # fixture flags from the config
        self.procs: dict[int, subprocess.Popen] = {}
        self.alive_at_stop: dict[int, bool] = {}

    def describe(self, spec: RunSpec, run_dir: Path) -> str:
        return " ".join([PYTHON, str(FIXTURE), *self.argv_of(spec)])

    def start(self, spec: RunSpec, run_dir: Path) -> Launched:
        with open(run_dir / LOG_NAME, "ab") as log:
            proc = subprocess.Popen([PYTHON, str(FIXTURE), *self.argv_of(spec)], stdout=log, stderr=subprocess.STDOUT,
                                    env=child_env(**spec.env), start_new_session=True)
        self.procs[proc.pid] = proc
        return Launched(ident=f"pid {proc.pid}", pid=proc.pid, log_path=run_dir / LOG_NAME,
                        attach_args=["--pid", str(proc.pid)])

    def state(self, run: Launched) -> JobState:
        code = self.procs[run.pid].poll()
        return JobState(RUNNING, "running") if code is None else JobState(DONE, f"exit {code}", code)

    def stop(self, run: Launched) -> str:
        proc = self.procs[run.pid]
        self.alive_at_stop[run.pid] = proc.poll() is None
        kill_tree(proc.pid)
        proc.wait(timeout=10)
        return "killed"

    def kill_all(self) -> None:
        for proc in self.procs.values():
            kill_tree(proc.pid)
            proc.wait(timeout=10)
