"""Real processes for hangdoctor's live tests, started in their own sessions and always killed afterwards.

`Procs` starts small stdlib processes (fixtures/procs.py) with chosen environments; `GlooJob` starts the torch
gloo fixture (fixtures/hung_gloo.py) under torchrun and waits until every rank is in place. Both bound every
wait and kill whole process groups on exit (SIGKILL also ends stopped and D-state processes' groups).

A hung job is declared in place by evidence the test reads itself, never by a pause or by hangdoctor's own
verdict: `wait_until_stacks_hold` samples every rank's main thread twice with the py-spy binary directly and
returns once each stack is the same in both samples (and `wait_until` waits for any other condition, such as a
rank's /proc state). A test then asks hangdoctor once and asserts its first answer.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
import uuid
from pathlib import Path

from tests.support import PYTHON, REPO, child_env, run_bounded

FIXTURES = Path(__file__).parent / "fixtures"
PYSPY = str(Path(PYTHON).parent / "py-spy")
Stack = tuple[tuple[str, str, int], ...]  # (function, file, line) of each frame, innermost first


def wait_until(condition, *, timeout: float, what: str, poll: float = 0.2) -> None:
    """Poll `condition` until it holds; after `timeout` seconds fail, naming what was awaited."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout:.0f}s")
        time.sleep(poll)


def main_thread_stack(pid: int) -> Stack | str:
    """The main thread's Python stack, as `py-spy dump --json --pid PID` reads it; or py-spy's error text."""
    result = run_bounded([PYSPY, "dump", "--json", "--pid", str(pid)], timeout=60)
    if result.returncode != 0:
        return f"py-spy exited {result.returncode}: {result.stderr.strip()[-300:]}"
    for thread in json.loads(result.stdout):
        if thread["os_thread_id"] == pid:  # the main thread's OS id is the process id
            return tuple((f["name"], f["filename"], f["line"]) for f in thread["frames"])
    return "no main thread in py-spy's dump"


def innermost(stack: Stack | str) -> str:
    return stack if isinstance(stack, str) else " <- ".join(f"{name}:{line}" for name, _, line in stack[:3])


def wait_until_stacks_hold(pids: dict[int, int], *, timeout: float, interval: float = 1.0) -> dict[int, Stack]:
    """{rank: pid} -> {rank: main-thread stack}, once every rank's main-thread stack is the same in two py-spy
    samples `interval` seconds apart (sampled by the test, not by hangdoctor): the evidence that the ranks sit
    where they stay. Fails after `timeout` seconds naming the ranks that still moved and where they were."""
    deadline = time.monotonic() + timeout
    before = {rank: main_thread_stack(pid) for rank, pid in pids.items()}
    while True:
        time.sleep(interval)  # the time between the two samples compared, not a wait for anything
        after = {rank: main_thread_stack(pid) for rank, pid in pids.items()}
        moved = sorted(rank for rank in pids if isinstance(after[rank], str) or after[rank] != before[rank])
        if not moved:
            return after
        if time.monotonic() > deadline:
            raise AssertionError(f"ranks {moved} never kept the same main-thread stack in two py-spy samples "
                                 f"{interval:g}s apart within {timeout:.0f}s; last samples: "
                                 + "; ".join(f"rank {r}: {innermost(after[r])}" for r in moved))
        before = after


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


def torchrun_ranks(run_id: str) -> dict[int, int]:
    """{rank: pid} of the workers of a torchrun job (a worker's own children, with the same environment, left
    out)."""
    found: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = dict(item.split(b"=", 1) for item in open(f"/proc/{name}/environ", "rb").read().split(b"\0")
                       if b"=" in item)
        except OSError:
            continue
        if env.get(b"TORCHELASTIC_RUN_ID") == run_id.encode() and b"RANK" in env:
            found.setdefault(int(env[b"RANK"]), []).append(int(name))
    workers = {pid for pids in found.values() for pid in pids}
    return {rank: next(pid for pid in pids if parent_pid(pid) not in workers) for rank, pids in found.items()}


def parent_pid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


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
    """The hung gloo fixture under torchrun: 8 ranks, tp=2 pp=2 dp=2, rank 2 stopped, rank 7 a straggler.

    `start` returns once the job is in place, by evidence read here: every rank wrote its ready marker, each
    --stop-rank is in state T and each --dstate-rank in state D (/proc), and every other rank but the stragglers
    (which never settle) shows the same main-thread stack in two py-spy samples."""

    def __init__(self, tmp: Path, *, nproc: int = 8, extra: list[str] | None = None, lifetime: float = 300):
        self.ready_dir = tmp / "ready"
        self.nproc = nproc
        args = extra if extra is not None else ["--tp", "2", "--pp", "2", "--stop-rank", "2", "--straggler-rank", "7"]
        self.command = [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                        str(FIXTURES / "hung_gloo.py"), *args, "--ready-dir", str(self.ready_dir),
                        "--lifetime", str(lifetime)]
        self.log = tmp / "torchrun.log"
        self.proc: subprocess.Popen | None = None
        self.stacks: dict[int, Stack] = {}  # the settled ranks' main-thread stacks, as `start` last sampled them

    def start(self, timeout: float = 180) -> "GlooJob":
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=child_env(),
                                         cwd=REPO, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            wait_until(lambda: self.proc.poll() is not None or len(list(self.ready_dir.glob("rank*[0-9]"))) == self.nproc,
                       timeout=timeout, what=f"every one of the {self.nproc} gloo ranks' ready markers")
            assert self.proc.poll() is None, "torchrun ended before every rank was ready"
            states = {rank: "T" for rank in self.ranks_given("--stop-rank")}
            states.update({rank: "D" for rank in self.ranks_given("--dstate-rank")})
            pids = self.pids
            for rank, state in states.items():
                wait_until(lambda: proc_state(pids[rank]) == state, timeout=max(1.0, deadline - time.monotonic()),
                           what=f"rank {rank} in state {state}")
            not_sampled = set(states) | set(self.ranks_given("--straggler-rank"))  # blocked in T/D, or never settle
            self.stacks = wait_until_stacks_hold({r: pid for r, pid in pids.items() if r not in not_sampled},
                                                 timeout=max(1.0, deadline - time.monotonic()))
        except AssertionError as exc:
            self.stop()
            raise AssertionError(f"gloo fixture not in place: {exc}\n{self.log.read_text()[-4000:]}") from None
        return self

    def ranks_given(self, flag: str) -> list[int]:
        """The ranks given to `flag` (e.g. --stop-rank) on the fixture's command line."""
        return [int(self.command[i + 1]) for i, arg in enumerate(self.command[:-1]) if arg == flag]

    @property
    def pids(self) -> dict[int, int]:
        return {int(p.name[4:]): int(p.read_text()) for p in self.ready_dir.glob("rank*[0-9]")}

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


class SlowJob(GlooJob):
    """fixtures/slow_job.py under torchrun: a running (not hung) gloo job whose slow rank, factor and kind of work
    are set through its control file (`slow`). `start` returns once every rank wrote its ready marker."""

    def __init__(self, tmp: Path, *, nproc: int = 4, how: str = "sleep", work: float = 0.05, lifetime: float = 300):
        super().__init__(tmp, nproc=nproc, extra=[])
        self.control, self.times = tmp / "control.json", tmp / "times.txt"
        self.control.write_text(json.dumps({"rank": -1, "factor": 1.0, "how": how}))
        self.how = how
        self.command = [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                        str(FIXTURES / "slow_job.py"), "--how", how, "--work", str(work), "--control",
                        str(self.control), "--times", str(self.times), "--ready-dir", str(self.ready_dir),
                        "--lifetime", str(lifetime)]

    def start(self, timeout: float = 180) -> "SlowJob":
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=child_env(),
                                         cwd=REPO, start_new_session=True)
        try:
            wait_until(lambda: self.proc.poll() is not None or len(list(self.ready_dir.glob("rank*[0-9]"))) == self.nproc,
                       timeout=timeout, what=f"every one of the {self.nproc} ranks' ready markers")
            assert self.proc.poll() is None, "torchrun ended before every rank was ready"
        except AssertionError as exc:
            self.stop()
            raise AssertionError(f"slow job not in place: {exc}\n{self.log.read_text()[-4000:]}") from None
        return self

    def slow(self, rank: int, factor: float, how: str | None = None) -> None:
        """Make `rank` `factor` times slower (-1 or 1.0: none), from its next iteration on."""
        self.control.write_text(json.dumps({"rank": rank, "factor": factor, "how": how or self.how}))
        before = self.iterations()
        wait_until(lambda: self.iterations() >= before + 3, timeout=30, what="three iterations on the new setting")

    def iterations(self) -> int:
        try:
            return self.times.read_text().count("\n")
        except OSError:
            return 0
