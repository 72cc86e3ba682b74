"""Test harness helpers shared by every suite: bounded subprocesses that explain themselves when they hang.

Every test that starts processes goes through `run_bounded` or `Bounded`: on timeout the children first get
SIGABRT, which makes Python's faulthandler (enabled with PYTHONFAULTHANDLER=1) print every thread's stack to
stderr, and only then SIGKILL. The captured output, stacks included, is in the raised error.
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


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


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
        _kill_group(proc, signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            out, err = proc.communicate()
        _kill_group(proc, signal.SIGKILL)
        raise HungProcess(
            f"{' '.join(map(str, cmd))} did not finish within {timeout:.0f}s; stacks and output:\n"
            f"--- stdout ---\n{out[-8000:]}\n--- stderr ---\n{err[-12000:]}"
        ) from None
    return Finished(proc.returncode, out, err, time.monotonic() - start)
