"""The corpus's live cases: programs of ours that hang the way public examples and reports do, run for real.

A live case is a command (run from the repository root, in a session of its own) whose ranks each write
`$HD_CORPUS_MARKERS/rank<R>` (their pid) just before they block (fixtures/corpus/common.py: `ready`). `LiveJob`
starts it, waits for every marker within a bound, lists the job's Python processes as `ps | grep python` would
(launchers included), and kills the whole tree afterwards, process by process (torchrun puts workers in
sessions of their own). The job's TMPDIR is a folder of its own, removed with it: what a killed rank leaves there
goes too.
The recorder (record.py) and the live test (test_corpus_live.py) share it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import PYTHON, REPO, child_env, descendants

FIXTURES = REPO / "tests" / "hangdoctor" / "fixtures" / "corpus"
TORCHRUN = (PYTHON, "-m", "torch.distributed.run", "--standalone")


@dataclass(frozen=True)
class LiveCase:
    name: str  # the corpus folder's name
    argv: tuple[str, ...]  # the command; "{fixtures}" is replaced by the fixtures folder
    ranks: int  # markers to wait for
    env: dict[str, str] = field(default_factory=dict)
    settle: float = 1.0  # seconds from the last marker until every rank is inside its blocking call
    start_timeout: float = 180.0  # DeepSpeed starts take 10-18 s here, more on a loaded machine
    shape: bool = False  # a shape stand-in (GPU/NCCL frames from our stand-in library): recorded, not run live
    gpu: bool = False  # needs a real GPU: recorded on a machine that has one, not run live here

    def command(self) -> list[str]:
        return [arg.replace("{fixtures}", str(FIXTURES)) for arg in self.argv]


CASES: dict[str, LiveCase] = {}


def register(case: LiveCase) -> LiveCase:
    CASES[case.name] = case
    return case


def torchrun(nproc: int, script: str, *args: str) -> tuple[str, ...]:
    return (*TORCHRUN, f"--nproc-per-node={nproc}", f"{{fixtures}}/{script}", *args)


class LiveJob:
    """with LiveJob(CASES["ddp_barrier"]) as job: job.python_pids(), job.rank_pids"""

    def __init__(self, case: LiveCase, workdir: Path | None = None):
        self.case = case
        self._tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix=f"corpus-{case.name}-")
        self.workdir = Path(workdir or self._tmp.name)
        self.markers = self.workdir / "markers"
        self.log = self.workdir / "job.log"
        self.fr_dir = self.workdir / "fr"  # where a fixture that keeps a Flight Recorder writes its dumps
        self.proc: subprocess.Popen | None = None
        self.job_tmp = ""
        self.seen: set[int] = set()

    def __enter__(self) -> "LiveJob":
        self.markers.mkdir(parents=True, exist_ok=True)
        # the job's own temporary folder, removed with it; short, for the AF_UNIX sockets made in it (108 bytes)
        self.job_tmp = tempfile.mkdtemp(prefix="hd-job-")
        env = child_env(HD_CORPUS_MARKERS=str(self.markers), HD_CORPUS_FR=str(self.fr_dir), TMPDIR=self.job_tmp,
                        **self.case.env)
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(self.case.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=REPO, start_new_session=True, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.case.start_timeout
        while len(self.rank_pids) < self.case.ranks:
            self.seen.update(descendants(self.proc.pid))
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = "exited" if self.proc.poll() is not None else f"not ready in {self.case.start_timeout:.0f}s"
                raise AssertionError(f"{self.case.name}: {why}, {len(self.rank_pids)}/{self.case.ranks} ranks "
                                     f"ready:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.2)
        time.sleep(self.case.settle)  # from the marker to inside the blocking call: a few lines of Python
        self.seen.update(descendants(self.proc.pid))

    @property
    def rank_pids(self) -> dict[int, int]:
        """rank -> pid, from the markers the ranks wrote."""
        pids = {}
        for marker in self.markers.glob("rank*"):
            if not marker.name[4:].isdigit():
                continue  # "rank1.tmp": being written, renamed to "rank1" in a moment (common.ready)
            try:
                text = marker.read_text().strip()
            except FileNotFoundError:
                continue
            if text.isdigit():
                pids[int(marker.name[4:])] = int(text)
        return pids

    def python_pids(self) -> list[int]:
        """Every live Python process of the job, launchers included, in pid order (as `ps | grep python`)."""
        pids = []
        for pid in sorted({self.proc.pid, *descendants(self.proc.pid), *self.rank_pids.values()}):
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if "python" in os.path.basename(exe):
                pids.append(pid)
        return pids

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        targets = {self.proc.pid, *descendants(self.proc.pid), *self.seen, *self.rank_pids.values()}
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.job_tmp:
            shutil.rmtree(self.job_tmp, ignore_errors=True)
        if self._tmp is not None:
            self._tmp.cleanup()


def host_of(pid: int, default: str = "node1") -> str:
    """The node a process stands for: HD_CORPUS_HOST in its environment (a shape of several nodes runs its
    "nodes" as groups of processes on this machine), else `default`."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return default
    for item in raw.split(b"\0"):
        if item.startswith(b"HD_CORPUS_HOST="):
            return item.split(b"=", 1)[1].decode(errors="replace") or default
    return default


def load_cases() -> dict[str, LiveCase]:
    """Every case, from the `cases_*.py` modules beside this one (each calls `register`)."""
    import importlib

    for module in sorted(Path(__file__).parent.glob("cases_*.py")):
        importlib.import_module(f"tests.hangdoctor.corpus.{module.stem}")
    return CASES
