"""Test helpers for tracing: other Pythons from pyenv, and bounded background processes that hang on purpose."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded, signal_tree

FIXTURES = Path(__file__).parent / "fixtures"


def pyenv_python(version: str) -> str:
    """Path of pyenv's python `version`, or skip the test when this machine has none."""
    pyenv = shutil.which("pyenv") or os.path.expanduser("~/.pyenv/bin/pyenv")
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    if os.path.exists(pyenv):
        try:
            root = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30).stdout.strip() or root
        except (OSError, subprocess.TimeoutExpired):
            pass
    path = os.path.join(root, "versions", version, "bin", "python")
    if not os.path.exists(path):
        if os.environ.get("CI") == "true":  # CI must not pass by skipping what the README claims for 3.10-3.13
            pytest.fail(f"pyenv has no Python {version} here, and CI=true: the test cannot be skipped")
        pytest.skip(f"pyenv has no Python {version} here")
    return path


def tracing_cli(*args: str, python: str = PYTHON, timeout: float = 120, **env: str):
    return run_bounded([python, "-m", "tracing", *args], timeout=timeout, env=child_env(**env), cwd=REPO)


def last_json(path: str | Path, python: str = PYTHON) -> dict:
    done = tracing_cli("last", str(path), "--json", python=python)
    assert done.returncode == 0, done.output
    return json.loads(done.stdout)


class Background:
    """Processes that are meant to hang. Every wait is bounded; on failure their stacks are dumped (SIGABRT
    with PYTHONFAULTHANDLER) into the error, and on exit the whole process groups are SIGKILLed."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.pids: set[int] = set()  # grandchildren in sessions of their own (torchrun's workers), killed by pid

    def start(self, cmd: list[str], env: dict[str, str], cwd: str | Path = REPO) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def wait_for(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.1)
        raise AssertionError(f"{what} did not happen within {timeout:.0f}s;\n{self.dump()}")

    def dump(self) -> str:
        parts = []
        for proc in self.procs:
            if proc.poll() is None:
                signal_tree(proc.pid, signal.SIGABRT)  # the whole tree: torchrun's workers have sessions of their own
        for proc in self.procs:
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            parts.append(f"--- pid {proc.pid} rc={proc.returncode}\n{out[-3000:]}\n{err[-6000:]}")
        return "\n".join(parts)

    def kill(self, proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            proc.wait(timeout=30)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            kill_tree(proc.pid)
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            try:
                proc.communicate(timeout=30)
            except (subprocess.TimeoutExpired, ValueError):
                pass
