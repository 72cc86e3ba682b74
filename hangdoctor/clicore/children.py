"""Every child process our tools start is owned, so that nothing we start outlives us to go on sampling a job.

A child runs in its own process group (`spawn`), so that ending it ends what it started too: the py-spy behind
a `--py-spy` wrapper, pdsh and its collectors, srun and its step, the attach that `watch` runs. The group is
registered while the child runs and ended (`end`) when the child's bound runs out or it is done. `owned()` is
around every verb (clicore/app.py) and every node collector: when the verb ends, by any path, Ctrl-C or SIGTERM
included (SIGTERM is turned into KeyboardInterrupt, so that every `finally` runs), each group still registered
gets SIGTERM, a short grace to end its own children (an attach ends its py-spys), then SIGKILL.

Standard library only: the node collector imports it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time

GRACE = 2.0  # seconds a child gets after SIGTERM to end its own children

_groups: dict[int, subprocess.Popen] = {}  # process group id (the child's pid) -> the child
_lock = threading.Lock()


def spawn(argv, **popen_kwargs) -> subprocess.Popen:
    """subprocess.Popen in a new session (its own process group), registered until `end` (or `release`)."""
    proc = subprocess.Popen(argv, start_new_session=True, **popen_kwargs)
    with _lock:
        _groups[proc.pid] = proc
    return proc


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end(proc: subprocess.Popen, *, grace: float = 0.0, wait: float = 2.0) -> int | None:
    """End the child's whole group (SIGTERM first when `grace` > 0, then SIGKILL) and reap the child within
    `wait` seconds; returns its exit status (None: it could not be reaped, abandoned). The group is signalled
    before the child is reaped, so its pid cannot have been reused."""
    if grace > 0 and proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    _signal_group(proc.pid, signal.SIGKILL)  # also whatever it left behind in its group
    try:
        code = proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        code = None  # stuck in the kernel: abandoned rather than waited for
    release(proc)
    return code


def release(proc: subprocess.Popen) -> None:
    with _lock:
        _groups.pop(proc.pid, None)


_adopting = False  # this process is a child subreaper: what our children leave behind becomes ours to end


def become_subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (Linux's PR_SET_CHILD_SUBREAPER): a daemon that a
    `--py-spy` wrapper or an `--on-hang` command starts in a session of its own (`setsid cmd &`) escapes every
    process group, but becomes our child when its parent exits, and `end_all` ends it. Only for a tool run as a
    program: the flag stays with the process, so a test runner that calls a tool in-process never sets it."""
    global _adopting
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        _adopting = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        _adopting = False


def _adopted() -> list[int]:
    """Live children of this process that no registered Popen owns: orphans of our descendants (subreaper)."""
    mine, known = os.getpid(), set(_groups)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in known:
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == mine:
            found.append(int(entry))
    return found


def end_all(grace: float = GRACE) -> None:
    """End every registered group: SIGTERM to all at once, up to `grace` seconds, then SIGKILL; then, as a
    subreaper, every orphan our descendants left us (and reap it)."""
    with _lock:
        procs = list(_groups.values())
    for proc in procs:
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        end(proc, wait=0.5)
    if _adopting:
        for pid in _adopted():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)


def _terminated(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


@contextlib.contextmanager
def owned(*, sigterm: bool = True):
    """Run the body with SIGTERM raising KeyboardInterrupt (in the main thread; `sigterm=False` leaves SIGTERM to
    a user's program the verb runs in this process, as `tracing run` does), and end every child still registered
    when it ends, however it ends."""
    main = threading.current_thread() is threading.main_thread()
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _terminated)} if main and sigterm else {}
    try:
        yield
    finally:
        if main and sigterm:  # a second Ctrl-C or SIGTERM must not cut the cleanup short (bounded: about GRACE s)
            previous.setdefault(signal.SIGINT, signal.signal(signal.SIGINT, signal.SIG_IGN))
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            end_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
