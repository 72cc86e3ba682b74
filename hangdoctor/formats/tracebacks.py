"""Stacks printed as Python prints tracebacks, and the tools that print them that way, -> threads.

    Traceback (most recent call last):                       <- traceback.print_stack / format_exc, pystack,
      File "/w/train.py", line 80, in <module>                  the "dump every thread" recipes built on
        main()                                                  sys._current_frames: outermost frame first,
      File "/w/train.py", line 50, in main                      each frame's source line under it (skipped)
    Traceback for thread 812 (python) [Has the GIL] (most recent call last):
        (Python) File "/w/train.py", line 50, in main        <- pystack; its (C) frames are native
    # Thread: MainThread(139872)                             <- a header of any words starts the next thread
    #4 Frame 0x7f.., for file /w/train.py, line 50, in main (x=1)   <- gdb's py-bt: innermost first
    #0 broadcast from /w/torch/distributed/distributed_c10d.py:2968 <- torch's watchdog, "Stack trace of the
                                                                       failed collective": innermost first
    /w/train.py:50 in main                                       <- rich's traceback panel (its box undone by
                                                                    paste.py): outermost first

A line number a person elided (`line ...`) reads as 0. A header that names a thread "MainThread" (or a thread id)
is kept as its name; a new MainThread header starts the next process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoctor.formats import frames as interned
from hangdoctor.model import THREAD_STARTS, Frame, ThreadStack

_TRACEBACK = re.compile(r'^\s*(?:\((?P<kind>Python|C)\)\s*)?File:? "(?P<file>.*?)", line (?P<line>\d+|\.\.\.|\?),'
                        r" in (?P<name>\S+)")
_GDB = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?Frame 0x[0-9a-fA-F]+, for file (?P<file>.+?), "
                  r"line (?P<line>\d+), in (?P<name>[^\s(]+)")
_IPYTHON = re.compile(r"^\s*File (?P<file>[^\s\"]+?):(?P<line>\d+), in (?P<name>[^\s(]+)")  # IPython 8
_CELL = re.compile(r"^\s*Cell (?P<file>In ?\[\d+\]), line (?P<line>\d+)(?P<name>)")  # a notebook cell: <module>
_RICH = re.compile(r"^\s*(?P<file>[^\s:]+\.py):(?P<line>\d+) in (?P<name>\S+)\s*$")  # rich's traceback panel
_FLIGHT = re.compile(r"^\s*#\d+\s+(?P<name>\S.*?) from (?P<file>\S*):(?P<line>\d+)\s*$")  # torch's watchdog
_BOX = re.compile(r"[─│╭╮╰╯┃━]")  # rich draws code and locals in boxes: such a line is no frame nor header
_OUTER_FIRST = (_TRACEBACK, _RICH, _IPYTHON, _CELL)
_INNER_FIRST = (_GDB, _FLIGHT)
_SITE = re.compile(r"^.*?/(?:site-packages|dist-packages)/")
_MAIN = re.compile(r"\bMainThread\b")
_THREAD_ID = re.compile(r"\b(?:thread|Thread|ThreadID|tid)[ =:]*(0x[0-9a-fA-F]+|\d+)|\((\d+)\)")
_PROCESS = re.compile(r"^Process [\w.:-]+:$")  # multiprocessing's line before a child's traceback
# a line that names the process whose threads follow, by its pid: "Dumping threads for process 1904" (pyspark's
# threaddump), "=== process 2010 ===", "Stacks of process 77:", "PID 2010"
_PROCESS_PID = re.compile(r"^\W*(?:[A-Z][a-z]+ (?:threads|stacks) (?:for|of) )?(?:process|pid|PID)(?: id)?[ :=#]*(\d+)\W*$",
                          re.IGNORECASE)
_SPAWNED = re.compile(r"^-- Process (\d+) terminated with the following error:")  # torch's mp.spawn
_REMOTE = re.compile(r"RayTaskError\b.*\bray::\S+.*\(pid=\d+")  # a Ray actor's error: its own traceback next
# gdb's py-bt numbers the C frames between Python ones it could not read, or that are builtins: a gap in the stack,
# not the header of another thread
_GDB_GAP = re.compile(r"^#\d+\s+(?:\(unable to read python frame information\)|<built-in (?:method|function) |"
                      r"Waiting for the GIL|Garbage-collecting|\(frame information optimized out\))")
_INNER_HEAD = re.compile(r"^\S*ack \(most recent call first\)")  # gdb's py-bt: "Traceback (most recent call first)"
_TRACEBACK_HEAD = re.compile(r"^\S*ack \(most recent call last\)")  # "Traceback", its first letters lost in a paste
# (pystack's "Traceback for thread N ... (most recent call last)" heads a thread of the same process: not matched)
_PROGRAM_STARTS = frozenset({"<module>", "_run_module_as_main"})  # a thread whose stack starts the program
# what ends a thread: a header (Traceback, Thread, Process, Stack...) or an exception's line ("ValueError: ...")
_HEADERISH = re.compile(r"Traceback|[Tt]hread|Process|[Ss]tack|Current|^#|^-- |^[\w.]+(?:Error|Exception|Interrupt|"
                        r"Exit|Failure|Timeout)\b|^[\w.]+: ")
# after a frame, what is not its source line: another header, or the exception the traceback ends with
_NOT_SOURCE = re.compile(r"Traceback \(|Thread 0x|Thread \d|Current thread|Process |Stack |-- |#\d|[\w.]+(?:Error|"
                         r"Exception|Interrupt|Exit|Failure|Timeout|Warning)\b|[\w.]+: |\^?C?Traceback")
_EXCEPTION = re.compile(r"^[\w.]+(?:Error|Exception)\b")
_OWN_RANK = re.compile(r"\[Rank (\d+)\]|\bon rank (\d+)\b")
_CHAINED = re.compile(r"During handling of the above exception|The above exception was the direct cause")


# a frame line a paste glued to the end of the line before it ("    self._run(model)  File "t.py", line 9, in _run")
_GLUED = re.compile(r'(?<=\S)\s+(?=File "[^"]+", line (?:\d+|\.\.\.), in \S)')


_KIND = re.compile(r"^\s*\((?:Python|C)\)$")  # pystack's "(C) File ..." is one frame


def _unglued(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        pieces = _GLUED.split(line) if 'File "' in line else [line]
        if len(pieces) > 1 and _KIND.match(pieces[0]):
            pieces = [line]
        out += pieces
    return out


def _match(line: str) -> re.Match | None:
    for pattern in (*_OUTER_FIRST, *_INNER_FIRST):
        if match := pattern.match(line):
            return match
    return None


def frame_count(lines: list[str]) -> int:
    """How many lines are frames in one of these formats: which reader a source needs."""
    return sum(1 for line in lines if _match(line))


@dataclass
class _Thread:
    header: str
    frames: list[Frame] = field(default_factory=list)
    new_process: bool = False  # the first thread of another process
    rank: int | None = None  # mp.spawn's "Process N terminated" names it
    pid: int = 0  # a line before it named the process by its pid
    named: str = ""  # multiprocessing's "Process NAME:" line named the child whose traceback follows


_C_SOURCE = re.compile(r"^(\?\?)?$|\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh|so(\.\d+)*)$")  # a C/C++ frame's file, or none


def _frame(match: re.Match) -> Frame:
    if match.re is _CELL:
        return interned.frame("<module>", match["file"], int(match["line"]), False)
    line = match["line"]
    native = match.groupdict().get("kind") == "C"
    if match.re is _FLIGHT and _C_SOURCE.search(match["file"]):
        native = True  # torch's symbolized stacks mix C++ and CPython's own frames (.cpp, .h, .c, ??) in
    file = _SITE.sub("", match["file"].replace("\\", "/"))  # a Windows path reads like any other
    return interned.frame(match["name"], file, int(line) if line.isdigit() else 0, native)


_CLOCK = re.compile(r"\b(\d{1,2}):(\d\d):(\d\d)(?:[.,]\d+)?\b")


def round_key(headers: list[str]) -> tuple[tuple[str, ...], float] | None:
    """What makes a process's threads one round of a dump that repeats (a periodic "thread stacks" dump of one
    process): its thread headers with their clock times taken out, and the time of the first (seconds into the
    day). None unless a header tells the time: headers alike without one could be two processes' (two ranks'
    print_stack output, one after the other)."""
    times = [m for header in headers if (m := _CLOCK.search(header))]
    if not times:
        return None
    first = times[0]
    return tuple(_CLOCK.sub("<time>", h) for h in headers), int(first[1]) * 3600 + int(first[2]) * 60 + int(first[3])


def parse(lines: list[str]) -> list[tuple[list[ThreadStack], int | None, int, str, tuple | None]]:
    """Each process's threads, innermost frame first, its rank where the text names it, and its pid where a line
    names the process by it ("Dumping threads for process 1904"; else 0), the name of a child that
    multiprocessing's "Process NAME:" line announced but whose traceback the text does not hold (its threads
    empty; else ""), and its round_key (or None). A new process starts
    at multiprocessing's "Process Name:" line, at mp.spawn's "-- Process N terminated with the following error:"
    (rank N), at Ray's `RayTaskError(...): ray::Actor.method() (pid=N, ...)` (the actor's traceback after the
    driver's), at a traceback that follows another one's end unless an exception chains them ("During handling of
    the above exception"), at a header naming a second MainThread, and, outermost first, at a frame `<module>`
    starting a second thread that starts the program (two ranks' print_stack output, one after the other)."""
    lines = _unglued(lines)
    threads: list[_Thread] = []
    header, innermost_first, chained = "", False, False
    started = False  # this process already has a thread that starts the program
    soft_break = False  # a line that is no header came since the last frame
    source_next = False  # the line before was a traceback's `File "...", line N, in f`: its source line may follow
    for line in lines:
        match = _match(line)
        after_frame, source_next = source_next, match is not None and match.re is _TRACEBACK
        if match is None:
            stripped = line.strip()
            if not stripped or line[:1].isspace() or _BOX.search(line) or stripped.startswith("❱"):
                continue  # code lines are indented or boxed
            if after_frame and not _NOT_SOURCE.match(stripped):
                continue  # ... or follow their frame unindented (a page that lost the indentation: `thread.join()`)
            if _GDB_GAP.match(stripped):
                continue
            seen = any(t.frames for t in threads)
            spawned = _SPAWNED.match(stripped)
            if _REMOTE.search(stripped) and seen:  # Ray: the remote actor's traceback follows the driver's
                threads.append(_Thread(stripped, new_process=True))
                header, chained = stripped, False
                continue
            named = _PROCESS_PID.match(stripped)
            if named:  # a new process, named by its pid
                threads.append(_Thread(stripped, new_process=True, pid=int(named[1])))
                header, chained = stripped, False
                continue
            if _PROCESS.match(stripped) or spawned:  # a new process: whatever came before was another one's
                threads.append(_Thread(stripped, new_process=True, rank=int(spawned[1]) if spawned else None,
                                       named="" if spawned else stripped[len("Process "):-1]))
                header, chained = stripped, False
                continue
            if _TRACEBACK_HEAD.match(stripped) and seen and not chained and not (threads and threads[-1].new_process
                                                                                and not threads[-1].frames):
                threads.append(_Thread(stripped, new_process=True))  # another process's exception
                header = stripped
                continue
            chained = chained or _CHAINED.search(stripped) is not None
            innermost_first = innermost_first or bool(_INNER_HEAD.match(stripped))  # gdb's py-bt
            own = _OWN_RANK.search(stripped) if _EXCEPTION.match(stripped) else None
            if own and threads and threads[-1].frames:  # the exception of this traceback names its own rank
                first = next((t for t in reversed(threads) if t.new_process), threads[0])
                first.rank = first.rank if first.rank is not None else int(own[1] or own[2])
            if not _HEADERISH.search(stripped):
                soft_break = True  # a log viewer's timestamp or pod line, a message: no header, the thread goes on
                continue
            header = stripped  # a header or an exception's message: it ends a thread
            if threads and threads[-1].frames:
                threads.append(_Thread(header))
            elif threads and not threads[-1].new_process:
                threads[-1].header = header
            continue
        innermost_first = innermost_first or match.re in _INNER_FIRST
        frame = _frame(match)
        if not threads:
            threads.append(_Thread(header))
        elif threads[-1].named and not threads[-1].frames and not innermost_first and frame.name in _PROGRAM_STARTS:
            # a child's traceback starts in multiprocessing's _bootstrap: one that starts the program is the parent's
            # (the children's own lines lost, interleaved on one terminal): the named child stays without a stack
            threads.append(_Thread(header, new_process=True))
        elif not threads[-1].frames and not innermost_first and frame.name in _PROGRAM_STARTS and started:
            threads[-1].new_process = True  # a second stack that starts a program: another process's (print_stack)
        elif soft_break and threads[-1].frames and not innermost_first and frame.name in _PROGRAM_STARTS:
            threads.append(_Thread(header, new_process=True))  # the same, after a line that is no header
        soft_break = False
        if threads[-1].frames == [] and _TRACEBACK_HEAD.match(threads[-1].header):
            chained = False
        if not threads[-1].frames:
            started = (started and not threads[-1].new_process) or frame.name in _PROGRAM_STARTS
        threads[-1].frames.append(frame)
    processes: list[list[ThreadStack]] = []
    ranks: list[int | None] = []
    pids: list[int] = []
    names: list[str] = []  # a named child with no stack: its name
    headers: list[list[str]] = []
    for i, thread in enumerate(t for t in threads if t.frames or t.named):
        frames = thread.frames if innermost_first else thread.frames[::-1]
        is_main = bool(_MAIN.search(thread.header))
        if not processes or thread.new_process or (is_main and any(t.name == "MainThread" for t in processes[-1])):
            processes.append([])
            ranks.append(thread.rank)
            pids.append(thread.pid)
            names.append(thread.named if not thread.frames else "")
            headers.append([])
        if not thread.frames:  # a named child whose traceback the text does not hold: a process, with no thread
            continue
        headers[-1].append(thread.header)
        ident = _THREAD_ID.search(thread.header)
        raw_id = next(g for g in ident.groups() if g) if ident else str(i)
        tid = int(raw_id, 16) if raw_id.startswith("0x") else int(raw_id)
        name = "MainThread" if is_main else f"thread {tid}"
        processes[-1].append(ThreadStack(thread_id=tid, name=name, frames=interned.stack(frames)))
    for threads_of in processes:  # no header named the main thread: the one that starts at <module>, else the
        if threads_of and not any(t.name == "MainThread" for t in threads_of):  # first that `threading` did not start
            main = next((i for i, t in enumerate(threads_of) if t.frames[-1].name == "<module>"),
                        next((i for i, t in enumerate(threads_of)
                              if t.frames[-1].name.rsplit(".", 1)[-1] not in THREAD_STARTS), 0))
            threads_of[main] = ThreadStack(threads_of[main].thread_id, "MainThread", threads_of[main].frames)
    return list(zip(processes, ranks, pids, names, [round_key(h) for h in headers]))
