"""py-spy's text output, as printed or as people paste it, -> process dumps.

Recognised (py-spy 0.1 to 0.4.3):

    Process 8218: /usr/bin/python -u train.py --tp 2          <- starts a process (cmdline as printed)
    Python v3.11.7 (/usr/bin/python3.11)
    Thread 8218 (idle): "MainThread"                          <- also "Thread 0x7F2A... (active)"
        broadcast (torch/distributed/distributed_c10d.py:3151) <- a Python frame, innermost first
            Arguments: / Locals:                               <- (--locals) kept per frame: "src: 6"
        pthread_cond_wait (libc.so.6)                          <- a native frame (--native)
    Error: Failed to get stack traces                          <- this process did not answer
    Caused by: / 0: Failed to suspend process / Stack backtrace: ...

and what pastes do to it: log prefixes and interleaved ranks (paste.py), headers indented or not, frames
indented by any amount (locals are whatever sits deeper than the frames, under `Arguments:`/`Locals:`),
frames with no `Thread` line at all (each block of frames, blank-line separated, is one process's main
thread), several processes per file, the same process dumped twice (two samples, merged by the loader).
Frames before the first header of a file that has headers belong to a dump that the paste cut off at the
top: they are left out, with a note. A dump cut off at the end (its last line half a frame, or its last main
thread short of `<module>`) is marked truncated: a partial report, never a complete one.

Without "Process" headers, every "MainThread" starts a new process whose pid is the thread id (py-spy prints
the OS thread id, which is the pid for the main thread).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from hangdoctor.collector.dump import classify_failure, error_line
from hangdoctor.formats import frames as interned
from hangdoctor.formats.paste import Source, split_sources
from hangdoctor.model import ERROR, OK, Frame, ThreadStack

_PROCESS = re.compile(r"^Process (\d+): ?(.*)$")
# a thread id, or a placeholder a person put in its place ("Thread <pid> (active):" in a post that hid its ids)
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+|<\w+>)(?: \(([^)]*)\))?:?(?: "(.*)")?\s*$')
_FRAME = re.compile(r"^(?P<name>\S.*?) \((?P<loc>[^()]*)\)$")
_THREAD_NO_ID = re.compile(r'^Thread \(([^()]*)\):? "(.*)"\s*$')
_GDB_THREAD = re.compile(r'^Thread (\d+) \(Thread 0x[0-9A-Fa-f]+ \(LWP (\d+)\)(?: "(.*)")?\):?\s*$')
# gdb's `bt` frame: `#5  0x5ae8c2 in cfunction_call () from lib`, `#3  0x7f.. in cray_fence at pmix.c:575`, and
# `#0  0x7f.. in _pmi_barrier` (no argument list: a frame gdb has no debug information for; then the address is
# what says it is a frame)
GDB_FRAME = re.compile(r"^#\d+\s+(?:(?:0x[0-9A-Fa-f]+\s+in\s+)?(?P<name>[^\s(]+(?:\(.*?\))?[^\s(]*)\s*\(.*?\)"
                        r"|0x[0-9A-Fa-f]+\s+in\s+(?P<bare>[A-Za-z_][\w:.@<>~]*))"
                        r"(?:\s+from\s+(?P<lib>\S+)|\s+at\s+(?P<file>\S+?):(?P<line>\d+))?\s*$")
# a row of gdb's `info threads`: `* 1    Thread 0x7fc7.. (LWP 52422) "python" select_poll_poll () at f.c:219`, the
# thread's top frame only
GDB_INFO_THREAD = re.compile(r'^\*?\s*(\d+)\s+Thread 0x[0-9A-Fa-f]+ \(LWP (\d+)\)(?: "([^"]*)")?\s+(\S.*)$')
_LOCALS_HEADER = ("Arguments:", "Locals:")
# the shell command a paste shows before py-spy's answer: "$ sudo py-spy dump --pid 51740" names the process that a
# bare "Permission Denied" (no Process header) is about
_COMMAND_PID = re.compile(r"\bpy-spy\s+dump\b.*?(?:--pid[ =]\s*|-p\s*)(\d+)\b")
_ELIDED = ("...", "…", "?", "N")  # a line number a person left out
# Where stacks begin: a main thread that does not reach one of these was cut off (py-spy prints whole stacks).
_ROOTS = frozenset({"<module>", "_run_module_as_main", "_run_code", "run_module", "run_path", "_bootstrap",
                    "Thread._bootstrap", "_bootstrap_inner", "Thread._bootstrap_inner", "spawn_main", "_main",
                    "_start", "__libc_start_main", "__libc_start_call_main", "clone", "clone3", "start_thread",
                    "Py_RunMain", "Py_BytesMain", "main"})


@dataclass
class TextProcess:
    pid: int  # 0 when py-spy failed before naming the process, or a paste gave no header
    cmdline: str = ""
    threads: list[ThreadStack] = field(default_factory=list)
    status: str = OK
    error: str = ""
    rank: int | None = None  # from a `[rank3]:` or srun `3:` prefix
    host: str | None = None  # from a pdsh `node1:` prefix
    truncated: bool = False  # the dump was cut off inside this process
    later: list[tuple[float, list[ThreadStack]]] = field(default_factory=list)  # later rounds of the same dump
    # (seconds after the first, threads): a dump that repeats is samples of one process (formats/text.py)


@dataclass
class _Thread:
    tid: int
    name: str
    active: bool | None
    owns_gil: bool | None
    frames: list[Frame] = field(default_factory=list)
    locals: list[dict | None] = field(default_factory=list)
    indent: int | None = None  # the frames' indentation, from the first frame


def parse_frame(text: str) -> Frame | None:
    gdb = GDB_FRAME.match(text)
    if gdb:  # gdb's `bt`: a C frame ("#5  0x5ae8c2 in cfunction_call () from /lib/libpython3.10.so")
        return interned.frame(gdb["name"] or gdb["bare"], gdb["lib"] or gdb["file"] or "?", int(gdb["line"] or 0),
                              True)
    match = _FRAME.match(text)
    if not match:
        return None
    loc, name = match["loc"], match["name"].strip()
    file, sep, line = loc.rpartition(":")
    if sep and (line.isdigit() or line in _ELIDED):
        if file.endswith(".py") and " " in name:  # a Python function's name is one word
            label, _, name = name.rpartition(" ")
            if not label.rstrip().endswith(":"):
                return None  # words before it: a log line that ends with a file and line, no frame
            # (a person's group label before it, "DP0,3,5,7:  broadcast", goes)
        python = name.startswith("<") and name.endswith(">")  # <module>, <lambda>: a console script has no .py
        return interned.frame(name, file, int(line) if line.isdigit() else 0,
                              not python and interned.looks_native(file))
    if not loc.strip():  # "train_step ()": a Python frame whose code names no file (compiled, or lost)
        return interned.frame(name, "?", 0, False)
    return interned.frame(name, loc, 0, True)


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


class _Parser:
    """One source's lines (one file, or one rank's lines of an interleaved file) -> processes."""

    def __init__(self) -> None:
        self.processes: list[TextProcess] = []
        self.current: TextProcess | None = None
        self.thread: _Thread | None = None
        self.error_lines: list[str] | None = None
        self.locals_indent: int | None = None  # inside an Arguments:/Locals: block, deeper than this
        self.headers = 0  # Process/Thread headers seen
        self.before_headers = 0  # processes made of headerless frames before the first header
        self.orphans = 0  # frames that belong to no process we know (before the first header of a source)
        self.blank_before = False
        self.grouped: list[tuple[TextProcess, _Thread]] = []  # main-thread headers waiting for the stack below
        self.shared = 0  # processes that took a stack from a group of headers over it
        self.command_pid = 0  # the pid the last `py-spy dump --pid N` command line named, until an answer used it

    def close_thread(self) -> None:
        thread, self.thread, self.locals_indent = self.thread, None, None
        if thread is None or self.current is None:
            return
        locals_ = tuple(thread.locals) if any(thread.locals) else None
        stack = interned.stack(thread.frames)
        self.current.threads.append(ThreadStack(thread.tid, thread.name, stack, thread.active, thread.owns_gil,
                                                locals_))
        for proc, waiting in self.grouped:  # several headers over one stack: each is a process with that stack
            proc.threads.append(ThreadStack(waiting.tid, waiting.name, stack if thread.frames else (),
                                            waiting.active, waiting.owns_gil))
            self.shared += bool(thread.frames)
        self.grouped = []

    def close_error(self) -> None:
        if self.error_lines is None:
            return
        block = "\n".join(self.error_lines)
        target = self.current if self.current is not None and not self.current.threads else None
        if target is None:
            target = TextProcess(pid=self.command_pid)
            self.processes.append(target)
        self.command_pid = 0
        target.status = classify_failure(block, target.pid, live=False)
        target.error = error_line(block)
        if target.status == ERROR and "failed to suspend" in block.lower():
            target.error += ("; a process py-spy cannot stop is often in uninterruptible sleep (D state: a read or "
                             "write that never returns, a hung filesystem or driver)")
        self.error_lines = None
        self.current = None  # whatever follows belongs to another process

    def start_process(self, pid: int, cmdline: str = "") -> None:
        self.close_thread()
        self.close_error()
        self.current = TextProcess(pid=pid, cmdline=cmdline)
        self.processes.append(self.current)

    def header_seen(self) -> None:
        if not self.headers:
            self.close_thread()
            self.before_headers = len(self.processes)
            self.current = None
        self.headers += 1

    def feed(self, raw: str) -> None:
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            self.blank_before = True
            return
        blank, self.blank_before = self.blank_before, False
        indent = _indent(line)
        if self.locals_indent is not None and indent > self.locals_indent:
            name, sep, value = stripped.partition(": ")
            if sep and self.thread is not None and self.thread.locals and self.thread.locals[-1] is not None:
                self.thread.locals[-1][name] = value[:200]
            return
        self.locals_indent = None
        if m := _PROCESS.match(stripped):
            self.header_seen()
            self.start_process(int(m[1]), m[2])
            self.command_pid = 0
            return
        if command := _COMMAND_PID.search(stripped):
            self.command_pid = int(command[1])
            return
        if stripped.startswith(("Error:", "Permission Denied")):
            self.close_thread()
            self.close_error()
            self.error_lines = [stripped]
            return
        if stripped == "(More stack frames follow...)":  # gdb's `bt N` cut the thread short: its next one follows
            return
        if row := GDB_INFO_THREAD.match(stripped):  # a thread and its top frame, as two lines of `thread apply`
            self.feed(f'Thread {row[1]} (Thread 0x0 (LWP {row[2]}) "{row[3] or ""}"):')
            self.feed(f"#0  {row[4]}")
            return
        if gdb := _GDB_THREAD.match(stripped):  # gdb's `thread apply all bt`: its thread 1 is the main thread,
            stripped = f'Thread 0x{int(gdb[2]):x}: "{"MainThread" if gdb[1] == "1" else gdb[3] or ""}"'  # not its pid
        if anonymous := _THREAD_NO_ID.match(stripped):  # a paste that dropped the id: `Thread (idle): "MainThread"`
            stripped = f'Thread <anonymous> ({anonymous[1]}): "{anonymous[2]}"'
        thread_match = _THREAD.match(stripped)
        if self.error_lines is not None and not thread_match:
            self.error_lines.append(stripped)
            return
        if thread_match:
            self.header_seen()
            self.close_error()
            raw_id = thread_match[1]
            placeholder = raw_id.startswith("<")
            tid = 0 if placeholder else int(raw_id, 16) if raw_id.startswith("0x") else int(raw_id)
            flags = (thread_match[2] or "").lower()
            name = thread_match[3] or ""
            waiting = self.thread if self.thread is not None and not self.thread.frames and name == "MainThread" \
                and self.thread.name == "MainThread" and self.current is not None else None
            if waiting is not None:  # a main thread's header right after another's: both share what follows
                self.grouped.append((self.current, waiting))
                self.thread, self.current = None, None
            else:
                self.close_thread()
            if self.current is None or (name == "MainThread" and any(t.name == "MainThread" for t in self.current.threads)):
                self.current = TextProcess(pid=tid if not raw_id.startswith(("0x", "<")) else 0)
                self.processes.append(self.current)
            self.thread = _Thread(tid, name, ("active" in flags) if flags else None, ("gil" in flags) if flags else None)
            return
        if stripped.startswith("Python v"):
            return
        if stripped in _LOCALS_HEADER:
            self.locals_indent = indent
            if self.thread is not None and self.thread.locals:
                self.thread.locals[-1] = self.thread.locals[-1] or {}
            return
        frame = parse_frame(stripped)
        if frame is None:
            if indent == 0 and self.headers and self.current is not None and self.current.threads:
                self.close_thread()  # a line of its own between dumps (`ray stack`'s "Stack dump for ..."): the
                self.current = None  # threads after it are another process's
            return
        if self.thread is not None and self.thread.indent is not None and indent < self.thread.indent and \
                self.headers:
            return  # less indented than the thread's frames: a log line printed between dumps, not a frame
        if frame.native and not self.headers and not GDB_FRAME.match(stripped):
            return  # py-spy prints native frames under its headers only: without them, a log line's "(...)"
        if self.thread is None or (blank and self.headers == 0):
            if self.headers:  # frames after a process header but before any thread line
                if self.current is None:
                    self.orphans += 1
                    return
            elif self.processes and self.thread is not None:
                self.close_thread()  # a new block of headerless frames: another process
                self.current = None
            if self.current is None:
                self.current = TextProcess(pid=0)
                self.processes.append(self.current)
            self.thread = _Thread(self.current.pid, "MainThread", None, None)
        if self.thread.indent is None:
            self.thread.indent = indent
        self.thread.frames.append(frame)
        self.thread.locals.append(None)

    def finish(self, last_line: str) -> list[TextProcess]:
        open_thread, in_locals = self.thread, self.locals_indent is not None
        self.close_thread()
        self.close_error()
        if self.headers and self.before_headers:  # the paste starts inside a dump we do not have
            cut, self.processes = self.processes[:self.before_headers], self.processes[self.before_headers:]
            self.orphans += sum(len(t.frames) for p in cut for t in p.threads)
        if self.processes:
            last = self.processes[-1]
            cut_line = bool(last_line.strip()) and open_thread is not None and not in_locals \
                and parse_frame(last_line.strip()) is None and not _THREAD.match(last_line.strip())
            main = next((t for t in last.threads if t.thread_id == last.pid or t.name == "MainThread"), None)
            short = open_thread is not None and main is not None and main is last.threads[-1] and main.frames \
                and not any(f.name in _ROOTS or f.name.rsplit(".", 1)[-1] in _ROOTS
                            for f in [f for f in main.frames if not f.native][-2:])  # --native ends in libc's clone
            header_only = last.status == OK and not last.threads and last.pid != 0
            if cut_line or short or header_only:
                last.truncated = True
                if last.threads:
                    last.threads[-1].truncated = True
        return self.processes


def parse_source(source: Source) -> list[TextProcess]:
    """One source's py-spy dumps (paste.py split the text and undid its prefixes)."""
    parser = _Parser()
    for line in source.lines:
        parser.feed(line)
    last_line = next((line for line in reversed(source.lines) if line.strip()), "")
    found = parser.finish(last_line)
    if parser.orphans and parser.headers:
        found.insert(0, TextProcess(pid=0, status="fragment",
                                    error=f"{parser.orphans} frames before the first header (the paste starts "
                                          f"inside another dump): not assigned to any rank"))
    return found


def place(found: list[TextProcess], source: Source) -> list[TextProcess]:
    """What a source's prefix says of its processes: their rank, host or pid; one stack under a prefix that names
    several ranks is that many ranks'."""
    ranks = [p for p in found if p.status != "fragment"]
    if source.ranks and len(found) == 1 and len(ranks) == 1:
        found = [replace(ranks[0], rank=rank, threads=list(ranks[0].threads)) for rank in source.ranks]
        ranks = []
    for proc in found:
        proc.rank = source.rank if proc.rank is None else proc.rank
        proc.host = source.host
        if source.pid is not None and not proc.pid and len(ranks) == 1:
            proc.pid = source.pid
        if source.task is not None:  # one process: the task is its rank; several: the task is their node
            if len(ranks) == 1:
                proc.rank = source.task
            else:
                proc.host = f"task{source.task}"
    return found


def parse_text(text: str) -> list[TextProcess]:
    """Every py-spy dump in a text."""
    return [proc for source in split_sources(text) for proc in place(parse_source(source), source)]


def looks_like_text_dump(text: str) -> bool:
    head = text[:20000]
    if re.search(r"^\W{0,40}(?:\S+\s+){0,6}?(Process \d+:|Thread (0x[0-9A-Fa-f]+|\d+))", head, re.MULTILINE):
        return True
    frames = [line for line in head.splitlines() if _FRAME.search(line.strip())]
    return sum(1 for line in frames if re.search(r"\((?:[^()]*\.py:\d+|<[^>]+>:\d+)\)\s*$", line)) >= 2
