"""Bounded child processes and liveness checks that zombies cannot fool.

Every SLURM command we run goes through `run_command`: its own process group, a hard time bound, the whole group
killed on timeout, and a missing binary turned into `SlurmCommandMissing`. Liveness reads the state field of
/proc/PID/stat, because an exited daemon whose parent (PID 1 here) reaps lazily lingers as a zombie and `kill -0`
still succeeds on it. A recorded start time guards against a recycled PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hangdoctor.clicore import children
from slurm.errors import SlurmCommandMissing

MISSING_HINT = "run this on a SLURM login node (or load the SLURM module); Debian/Ubuntu: apt-get install slurm-client"


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int | None  # None when the command was killed at its time bound
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def first_error_line(self) -> str:
        """The most telling line of stderr (SLURM prefixes errors with "<cmd>: error:")."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        for line in lines:
            if "error" in line.lower():
                return line
        return lines[0] if lines else f"exit status {self.returncode}"


def run_command(
    argv: list[str] | tuple[str, ...],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    input: str | None = None,
    cwd: str | Path | None = None,
) -> CommandResult:
    """Run argv (never through a shell) for at most `timeout` seconds; kill its process group after that."""
    argv = tuple(str(a) for a in argv)
    start = time.monotonic()
    try:
        proc = children.spawn(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", env=env, cwd=cwd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise SlurmCommandMissing(f"{argv[0]} not found on PATH", MISSING_HINT) from None
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
        children.end(proc)  # what it left in its group goes with it
        return CommandResult(argv, proc.returncode, out, err, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild left the group and holds our pipes: stop reading
            out, err = "", ""
        children.end(proc)
        return CommandResult(argv, None, out or "", err or "", time.monotonic() - start)
    except BaseException:  # Ctrl-C or SIGTERM while it runs: it gets a moment to end its own children, then goes
        children.end(proc, grace=children.GRACE)
        raise


def kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return text[text.rindex(")") + 2:].split()


def process_state(pid: int) -> str | None:
    """The one-letter state of /proc/PID/stat (R, S, D, T, Z, ...), or None when there is no such process."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def start_time(pid: int) -> int | None:
    """Clock ticks since boot at which the process started (field 22): (pid, start time) names a process."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def parent_pid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def session_id(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[3]) if fields else None


def is_running(pid: int, started: int | None = None) -> bool:
    """True for a live process (not a zombie); with `started`, only if it is still the same process."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X", "x"):
        return False
    return started is None or int(fields[19]) == started


def wait_until_gone(pids: dict[int, int | None], timeout: float) -> dict[int, int | None]:
    """Poll until none of {pid: start_time} is running; return those still running at the bound."""
    deadline = time.monotonic() + timeout
    alive = dict(pids)
    while True:
        alive = {pid: st for pid, st in alive.items() if is_running(pid, st)}
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def terminate(pids: dict[int, int | None], *, grace: float, sig: int = signal.SIGTERM) -> dict[int, int | None]:
    """Send `sig` to each still-running process, wait `grace` s, then SIGKILL the rest; return survivors.

    A SIGSTOPped process also gets SIGCONT, so that it can act on `sig` within the grace period."""
    for pid, st in pids.items():
        if is_running(pid, st):
            try:
                os.kill(pid, sig)
                if sig != signal.SIGKILL:
                    os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    alive = wait_until_gone(pids, grace)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return wait_until_gone(alive, 5.0)


def environ_of(pid: int) -> dict[str, str]:
    """A process's initial environment from /proc/PID/environ ({} when unreadable or gone)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]
