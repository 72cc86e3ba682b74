"""pystack (Bloomberg's `pystack remote PID`) as the collector's second stack reader. Stdlib only.

The collector asks pystack for a rank's stack where py-spy is missing, refused, or fails on that process
(node.take_sample). pystack prints text only (no JSON), one block per OS thread, outermost frame first:

    Traceback for thread 812 (python) [Has the GIL] (most recent call last):
        (C) File "Modules/main.c", line 734, in Py_BytesMain (/usr/lib/libpython3.12.so.1.0)   <- --native
        (Python) File "/w/train.py", line 50, in main
            dist.barrier()                                            <- the source line, skipped
          Arguments:                                                  <- --locals
            x: 3
          Locals:
            ev: <Event at 0x7f..>

`parse_text` turns that into the list py-spy's `dump --json` prints (threads, frames innermost first, the same
keys), so that everything after the dump (compact.py's factoring, source.py, the front end's reader) reads a
pystack stack exactly as a py-spy one. What pystack does not say stays unknown: `active` is None (py-spy's
idle/active guess), `thread_name` is "MainThread" for the thread whose id is the pid and None otherwise (pystack
names the OS thread, not Python's). A sample read this way carries `reader: "pystack"`.
"""

from __future__ import annotations

import os
import re

from hangdoctor.collector import dump

READER = "pystack"
_HEAD = re.compile(r"^Traceback for thread (\d+) \((.*?)\) \[(.*?)\] \(most recent call last\):\s*$")
_FRAME = re.compile(r'^\s+\((Python|C)\) File "(.*)", line (-?\d+), in (\S+)(?: \(inlined\))?(?: \((.*)\))?\s*$')
_SECTION = re.compile(r"^\s+(Arguments|Locals):\s*$")
_LOCAL = re.compile(r"^\s+([A-Za-z_]\w*): (.*)$")
_short_names: dict[str, str] = {}


def command(pystack: str, pid: int, *, native: bool, nonblocking: bool, local_vars: bool) -> list:
    cmd = [pystack, "remote", "--no-color", str(pid)]
    if local_vars:
        cmd.append("--locals")
    if native and not nonblocking:  # pystack refuses --native with --no-block, as py-spy does
        cmd.append("--native")
    if nonblocking:
        cmd.append("--no-block")
    return cmd


def short_name(path: str, pid: int) -> str:
    """The file as py-spy's short_filename names it: from the outermost folder of its package on (the folders
    above the file that hold an __init__.py), so torch/distributed/distributed_c10d.py, threading.py. The file
    is looked at through /proc/PID/root: the process may run in a container."""
    known = _short_names.get(path)
    if known is None:
        if not path.startswith("/"):
            known = path  # "<frozen ...>", a native frame's "???" or relative source path
        else:
            root, top = f"/proc/{pid}/root", os.path.dirname(path)
            while top not in ("", "/") and os.path.exists(f"{root}{top}/__init__.py"):
                top = os.path.dirname(top)
            known = path[len(top):].lstrip("/") if top not in ("", "/") else path
        _short_names[path] = known
    return known


def parse_text(text: str, pid: int) -> list:
    """pystack's text -> py-spy's JSON thread list (innermost frame first). ValueError when no thread is in it."""
    threads: list[dict] = []
    frames: list[dict] = []
    section = None
    for line in text.splitlines():
        head = _HEAD.match(line)
        if head:
            frames, section = [], None
            tid = int(head.group(1))
            threads.append({"pid": pid, "thread_id": tid, "os_thread_id": tid,
                            "thread_name": "MainThread" if tid == pid else None, "active": None,
                            "owns_gil": "Has the GIL" in head.group(3), "frames": frames})
            continue
        if not threads:
            continue
        frame = _FRAME.match(line)
        if frame:
            kind, path, number, name, library = frame.groups()
            native = kind == "C"
            frames.append({"name": name, "filename": path, "module": library if native else None,
                           "short_filename": short_name(path, pid), "line": max(0, int(number)), "locals": None})
            section = None
            continue
        marker = _SECTION.match(line)
        if marker and frames:
            section = marker.group(1)
            continue
        local = _LOCAL.match(line) if section and frames else None
        if local:
            frames[-1]["locals"] = (frames[-1]["locals"] or []) + [
                {"name": local.group(1), "repr": local.group(2), "arg": section == "Arguments"}]
    if not threads:
        raise ValueError("no thread in pystack's output")
    for thread in threads:
        thread["frames"].reverse()  # pystack prints the outermost frame first; py-spy the innermost
    return threads


def outcome(pid: int, returncode: int, out: bytes, err: bytes) -> dict:
    """The result of one finished pystack, in the shape of dump.outcome's (JSON mode), with `reader`."""
    text_out, text_err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if returncode != 0:
        both = text_err + "\n" + text_out
        lines = [line.strip(" \U0001f480") for line in both.splitlines() if "error" in line.lower()]
        error = (lines[0] if lines else dump.error_line(both)) or f"pystack exited with {returncode}"
        return {"status": dump.classify_failure(both, pid), "error": f"pystack: {error}"[:500]}
    try:
        threads = parse_text(text_out, pid)
    except ValueError as exc:
        return {"status": dump.ERROR, "error": f"pystack: {exc} ({len(out):,} bytes)"}
    return {"status": dump.OK, "error": "", "pyspy_json": threads, "reader": READER}


def read_many(pystack: str, requests: list, *, timeout: float, native: bool = False, local_vars: bool = False,
              deadline: float | None = None) -> dict:
    """dump.dump_many with pystack as the reader: {pid: result}, every pystack bounded by `timeout` and
    `deadline` (time.monotonic()) and killed past them."""
    def argv(pid: int, nonblocking: bool) -> list:
        return command(pystack, pid, native=native, nonblocking=nonblocking, local_vars=local_vars)

    return dump.dump_many(pystack, requests, timeout=timeout, native=native, deadline=deadline,
                          command=argv, outcome=outcome, name="pystack")
