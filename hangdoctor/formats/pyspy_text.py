"""py-spy's text output, one process or many concatenated (the seed's `trace-%N.out`), -> process dumps.

Recognised (py-spy 0.1 to 0.4.3):

    Process 8218: /usr/bin/python -u train.py --tp 2          <- starts a process (cmdline as printed)
    Python v3.11.7 (/usr/bin/python3.11)
    Thread 8218 (idle): "MainThread"                          <- also "Thread 0x7F2A... (active)"
        broadcast (torch/distributed/distributed_c10d.py:3151) <- a Python frame, innermost first
            Arguments: / Locals:                               <- (--locals) deeper indentation, skipped
        pthread_cond_wait (libc.so.6)                          <- a native frame (--native)
    Error: Failed to get stack traces                          <- this process did not answer
    Caused by: / 0: Failed to suspend process / Stack backtrace: ...

Without "Process" headers (hand-copied excerpts), every "MainThread" starts a new process whose pid is
the thread id (py-spy prints the OS thread id, which is the pid for the main thread).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoctor.collector.dump import classify_failure, error_line
from hangdoctor.formats import frames as interned
from hangdoctor.model import OK, Frame, ThreadStack

_PROCESS = re.compile(r"^Process (\d+): ?(.*)$")
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+)(?: \(([^)]*)\))?:?(?: "(.*)")?\s*$')
_FRAME = re.compile(r"^(?P<name>.+) \((?P<loc>[^()]*)\)$")


@dataclass
class TextProcess:
    pid: int  # 0 when py-spy failed before naming the process
    cmdline: str = ""
    threads: list[ThreadStack] = field(default_factory=list)
    status: str = OK
    error: str = ""


@dataclass
class _Thread:
    tid: int
    name: str
    active: bool | None
    owns_gil: bool | None
    frames: list[Frame] = field(default_factory=list)


def parse_frame(text: str) -> Frame | None:
    match = _FRAME.match(text)
    if not match:
        return None
    loc = match["loc"]
    file, sep, line = loc.rpartition(":")
    if sep and line.isdigit():
        return interned.frame(match["name"], file, int(line), interned.looks_native(file))
    return interned.frame(match["name"], loc, 0, True)


def parse_text(text: str) -> list[TextProcess]:
    processes: list[TextProcess] = []
    current: TextProcess | None = None
    thread: _Thread | None = None
    error_lines: list[str] | None = None  # collecting an "Error:" block

    def close_thread() -> None:
        nonlocal thread
        if thread is not None and current is not None:
            current.threads.append(ThreadStack(thread.tid, thread.name, interned.stack(thread.frames),
                                               thread.active, thread.owns_gil))
        thread = None

    def close_error() -> None:
        nonlocal error_lines, current
        if error_lines is None:
            return
        block = "\n".join(error_lines)
        target = current if current is not None and not current.threads else None
        if target is None:
            target = TextProcess(pid=0)
            processes.append(target)
        target.status = classify_failure(block, target.pid, live=False)
        target.error = error_line(block)
        error_lines = None
        current = None  # whatever follows belongs to another process

    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if (m := _PROCESS.match(stripped)) and not line.startswith(" "):
            close_thread()
            close_error()
            current = TextProcess(pid=int(m[1]), cmdline=m[2])
            processes.append(current)
            continue
        if stripped.startswith(("Error:", "Permission Denied")) and not line.startswith(" "):
            close_thread()
            close_error()
            error_lines = [stripped]
            continue
        if error_lines is not None and not (m := _THREAD.match(stripped)):
            error_lines.append(stripped)
            continue
        if (m := _THREAD.match(stripped)) and not line.startswith(" "):
            close_error()
            close_thread()
            tid = int(m[1], 16) if m[1].startswith("0x") else int(m[1])
            flags = (m[2] or "").lower()
            name = m[3] or ""
            if current is None or (name == "MainThread" and any(t.name == "MainThread" for t in current.threads)):
                current = TextProcess(pid=tid if not m[1].startswith("0x") else 0)
                processes.append(current)
            thread = _Thread(tid, name, ("active" in flags) if flags else None, ("gil" in flags) if flags else None)
            continue
        if stripped.startswith("Python v") or thread is None:
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= 8 or stripped.endswith(":") and stripped in ("Arguments:", "Locals:"):
            continue  # --locals blocks
        parsed = parse_frame(stripped)
        if parsed is not None:
            thread.frames.append(parsed)
    close_thread()
    close_error()
    return processes


def looks_like_text_dump(text: str) -> bool:
    head = text[:4000]
    return bool(re.search(r"^(Process \d+:|Thread (0x[0-9A-Fa-f]+|\d+))", head, re.MULTILINE))
