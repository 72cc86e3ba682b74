"""Real processes for hangdoctor's live tests, started in their own sessions and always killed afterwards.

`Procs` starts small stdlib processes (fixtures/procs.py) with chosen environments; `GlooJob` starts the torch
gloo fixture (fixtures/hung_gloo.py) under torchrun and waits until every rank is in place. Both bound every
wait and kill whole process groups on exit (SIGKILL also ends stopped and D-state processes' groups).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
import uuid
from pathlib import Path

from tests.support import PYTHON, REPO, child_env

FIXTURES = Path(__file__).parent / "fixtures"


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=max(0.0, deadline - time.monotonic())):
            line = proc.stdout.readline()
            if line:
                return line.strip()
            break
    raise AssertionError(f"{proc.args} printed nothing within {timeout:.0f}s")


class Procs:
    """with Procs() as procs: pid = procs.start("sleeper", RANK="0")"""

    def __init__(self):
        self.token = uuid.uuid4().hex[:12]  # HDTEST=<token> marks this test's processes
        self.procs: list[subprocess.Popen] = []

    def start(self, role: str, *, launcher: bool = False, argv: list[str] | None = None, **env: str) -> int:
        """Start a fixture process; returns the pid it reports (the Python process, not its launcher)."""
        command = argv or [PYTHON, str(FIXTURES / "procs.py"), role, "120"]
        if launcher:  # a shell that stays the parent, as a job script or srun's wrapper would
            command = ["bash", "-c", " ".join(command) + "; true"]
        env.setdefault("HDTEST", self.token)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=child_env(**env), start_new_session=True)
        self.procs.append(proc)
        return proc.pid if argv else int(read_line(proc, 30))

    def __enter__(self) -> "Procs":
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            kill_group(proc)


def kill_torchrun_workers(run_id: str) -> None:
    """SIGKILL every worker of a torchrun job: they run in their own sessions, so killing torchrun's process
    group leaves them behind (a stopped worker would stay forever)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = open(f"/proc/{name}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"TORCHELASTIC_RUN_ID={run_id}".encode() in env:
            try:
                os.kill(int(name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def torchrun_run_id(text: str) -> str:
    """TORCHELASTIC_RUN_ID of the workers whose command line contains `text`."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{name}/cmdline", "rb").read().decode(errors="replace")
            env = open(f"/proc/{name}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if text in cmdline:
            for item in env:
                if item.startswith(b"TORCHELASTIC_RUN_ID="):
                    return item.split(b"=", 1)[1].decode()
    raise AssertionError(f"no torchrun worker with {text!r} in its command line")


def proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


class GlooJob:
    """The hung gloo fixture under torchrun: 8 ranks, tp=2 pp=2 dp=2, rank 2 stopped, rank 7 a straggler."""

    def __init__(self, tmp: Path, *, nproc: int = 8, extra: list[str] | None = None, lifetime: float = 300):
        self.ready_dir = tmp / "ready"
        self.nproc = nproc
        args = extra if extra is not None else ["--tp", "2", "--pp", "2", "--stop-rank", "2", "--straggler-rank", "7"]
        self.command = [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                        str(FIXTURES / "hung_gloo.py"), *args, "--ready-dir", str(self.ready_dir),
                        "--lifetime", str(lifetime)]
        self.log = tmp / "torchrun.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180) -> "GlooJob":
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=child_env(),
                                         cwd=REPO, start_new_session=True)
        deadline = time.monotonic() + timeout
        while len(list(self.ready_dir.glob("rank*"))) < self.nproc:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"gloo fixture not ready: {self.log.read_text()[-4000:]}")
            time.sleep(0.3)
        time.sleep(1.0)  # from "ready" to blocked in the collective: a few lines of Python
        return self

    @property
    def pids(self) -> dict[int, int]:
        return {int(p.name[4:]): int(p.read_text()) for p in self.ready_dir.glob("rank*")}

    @property
    def run_id(self) -> str:
        env = open(f"/proc/{min(self.pids.values())}/environ", "rb").read().split(b"\0")
        return next(item.split(b"=", 1)[1].decode() for item in env if item.startswith(b"TORCHELASTIC_RUN_ID="))

    def stop(self) -> None:
        run_id = None
        try:
            run_id = self.run_id
        except (OSError, KeyError, StopIteration):
            pass
        if self.proc is not None:
            kill_group(self.proc)
        for pid in self.pids.values():  # also the ones that never showed a run id
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if run_id:
            kill_torchrun_workers(run_id)
