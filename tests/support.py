"""Test harness helpers shared by every suite: bounded subprocesses that explain themselves when they hang.

Every test that starts processes goes through `run_bounded` (or kills what it started with `kill_tree`): on
timeout every process of the tree first gets SIGABRT, which makes Python's faulthandler (enabled with
PYTHONFAULTHANDLER=1) print every thread's stack to stderr, and only then SIGKILL, process by process (torchrun
puts each worker in a session of its own, out of reach of a process-group signal). The captured output,
stacks included, is in the raised error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONFAULTHANDLER="1", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class HungProcess(AssertionError):
    pass


def descendants(pid: int) -> list[int]:
    """Every process below pid. torchrun starts each worker in a session of its own, so a process-group
    signal to torchrun never reaches the ranks: whole trees are signalled process by process."""
    import psutil

    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def signal_tree(pid: int, sig: int, *, include_root: bool = True) -> None:
    for target in descendants(pid) + ([pid] if include_root else []):
        try:
            os.kill(target, sig)
        except ProcessLookupError:
            pass


def kill_tree(pid: int) -> None:
    """SIGKILL pid and everything below it (SIGKILL also ends a SIGSTOPped rank)."""
    signal_tree(pid, signal.SIGKILL)


def run_bounded(cmd: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: str | Path | None = None,
                input: str | None = None) -> Finished:
    """Run cmd in its own process group; on timeout dump stacks (SIGABRT), then kill, then raise HungProcess."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or child_env(), cwd=cwd,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL, start_new_session=True,
    )
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = descendants(proc.pid)
        signal_tree(proc.pid, signal.SIGABRT, include_root=False)  # the ranks print their stacks first
        time.sleep(2)
        for pid in [*tree, proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, err = proc.communicate()
        raise HungProcess(
            f"{' '.join(map(str, cmd))} did not finish within {timeout:.0f}s; stacks and output:\n"
            f"--- stdout ---\n{out[-8000:]}\n--- stderr ---\n{err[-12000:]}"
        ) from None
    return Finished(proc.returncode, out, err, time.monotonic() - start)
