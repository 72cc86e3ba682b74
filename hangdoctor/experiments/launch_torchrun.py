"""One local `torchrun --standalone` per run, on this machine; its whole process tree is killed at the end.

torchrun runs the reference trainer (`-m trainer` with its topology flags) or the user's own command
(user_program.py: a `python SCRIPT` as torchrun's script, anything else with `--no-python`).

Every process of a run carries HANGDOCTOR_EXPERIMENT_RUN=<token> in its environment. hangdoctor attaches to
exactly those ranks (`attach --local --match HANGDOCTOR_EXPERIMENT_RUN=<token> --match RANK`, whatever other
torchrun jobs share the machine), and `stop` finds them by it too: torchrun starts each worker in a session of
its own, so a signal to torchrun's process group never reaches them, and a killed torchrun leaves them orphaned.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import psutil

from hangdoctor.experiments.launch import LOG_NAME, Launched, LaunchError
from hangdoctor.experiments.matrix import RunSpec
from hangdoctor.experiments.trainer_job import trainer_command
from hangdoctor.experiments.user_program import UserProgram, torchrun_target
from slurm.jobstate import DONE, RUNNING, JobState
from slurm.process import environ_of, start_time, wait_until_gone

RUN_TAG = "HANGDOCTOR_EXPERIMENT_RUN"


def tagged_processes(token: str) -> list[int]:
    """Every process whose environment carries RUN_TAG=token (ranks orphaned by a dead torchrun included)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid != os.getpid() and environ_of(proc.pid).get(RUN_TAG) == token:
            found.append(proc.pid)
    return found


def kill_run(pid: int | None, token: str) -> int:
    """SIGKILL torchrun, everything below it and every process tagged with the run's token; return how many."""
    targets: set[int] = set(tagged_processes(token))
    if pid is not None:
        try:
            root = psutil.Process(pid)
            targets |= {child.pid for child in root.children(recursive=True)} | {pid}
        except psutil.NoSuchProcess:
            pass
    started = {p: start_time(p) for p in targets}
    for target in targets:
        try:
            os.kill(target, signal.SIGKILL)  # also ends a SIGSTOPped rank
        except ProcessLookupError:
            pass
    wait_until_gone({p: s for p, s in started.items() if p != pid and s is not None}, 10.0)
    return len(targets)


class TorchrunLauncher:
    name = "torchrun"

    def __init__(self, *, python: str, env: dict[str, str] | None = None, program: UserProgram | None = None):
        self.python = python
        self.program = program  # the user's per-rank command; None: the reference trainer
        self.env = env
        self._procs: dict[int, tuple[subprocess.Popen, str]] = {}

    def command(self, spec: RunSpec, run_dir: Path) -> list[str]:
        world = spec.config.gpus
        torchrun = (self.python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}")
        if self.program is not None:
            return [*torchrun, *torchrun_target(self.program.command(spec, run_dir))]
        return trainer_command(spec.config.dims, spec.trainer_args(run_dir), program=(*torchrun, "-m", "trainer"))

    def describe(self, spec: RunSpec, run_dir: Path) -> str:
        exports = " ".join(f"{k}={v}" for k, v in spec.env.items())
        return (exports + " " if exports else "") + " ".join(self.command(spec, run_dir))

    def start(self, spec: RunSpec, run_dir: Path) -> Launched:
        token = uuid.uuid4().hex[:16]
        env = dict(self.env if self.env is not None else os.environ)
        env.update(spec.env)
        env.update({RUN_TAG: token, "PYTHONUNBUFFERED": "1"})
        command = self.command(spec, run_dir)
        (run_dir / "command.txt").write_text(self.describe(spec, run_dir) + "\n")
        log_path = run_dir / LOG_NAME
        try:
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=env, cwd=run_dir if self.program is None else None,
                                        start_new_session=True)  # the user's command: from where they are
        except OSError as exc:
            raise LaunchError(f"cannot start {command[0]}: {exc.strerror or exc}",
                              "pass --python with a Python that has torch and the trainer", fatal=True) from None
        self._procs[proc.pid] = (proc, token)
        return Launched(ident=f"torchrun pid {proc.pid}", pid=proc.pid, log_path=log_path,
                        attach_args=["--local", "--match", f"{RUN_TAG}={token}", "--match", "RANK"])

    def state(self, run: Launched) -> JobState:
        proc, _ = self._procs[run.pid]
        code = proc.poll()
        if code is None:
            return JobState(RUNNING, "running")
        return JobState(DONE, f"exit {code}", code)

    def stop(self, run: Launched) -> str:
        proc, token = self._procs.pop(run.pid)
        was = proc.poll()
        killed = kill_run(proc.pid if was is None else None, token)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return f"killed {killed} processes; torchrun (pid {proc.pid}) still there after 10s"
        if was is not None and not killed:
            return f"exit {was}"
        return f"killed {killed} process{'es' if killed != 1 else ''}" + (f" (torchrun had exited {was})"
                                                                          if was is not None else "")
