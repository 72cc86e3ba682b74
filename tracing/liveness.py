"""Is a traced process still there? Only answerable on its own host, from /proc."""

from __future__ import annotations

import os
import socket

# /proc/<pid>/stat state letters -> our words
_STATES = {"R": "alive", "S": "alive", "D": "alive", "I": "alive", "T": "suspended", "t": "suspended",
           "Z": "zombie", "X": "gone"}


def process_status(host: str, pid: int, argv0: str | None = None) -> str | None:
    """"alive", "suspended" (SIGSTOP), "zombie", "gone", or None when the process lives on another host."""
    if host != socket.gethostname():
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "gone"
    except OSError:
        return None
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
    if argv0 and _cmdline_differs(pid, argv0):
        return "gone"  # the pid was reused by another program
    return _STATES.get(state, "alive")


def _cmdline_differs(pid: int, argv0: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            first = f.read().split(b"\0", 1)[0].decode("utf-8", "replace")
    except OSError:
        return False
    return bool(first) and os.path.basename(first) != os.path.basename(argv0)
