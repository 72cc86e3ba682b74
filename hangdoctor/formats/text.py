"""Any text that holds stacks -> processes. paste.py undoes what logs and trackers did to it and splits it into
sources (one per rank, process or host prefix); each source is read by the shape of its frames: py-spy's
(`name (file:line)`), faulthandler's (`File "f", line N in name`), a traceback's or pystack's
(`File "f", line N, in name`), gdb's py-bt (`#4 Frame 0x.., for file f, line N, in name`). A file that holds
frames is never refused: what is read is used, and what is not is said."""

from __future__ import annotations

import json
import re

from hangdoctor.formats import faulthandler, tracebacks
from hangdoctor.formats.paste import Source, ranks_from_names, split_sources
from hangdoctor.formats.pyspy_json import parse_threads, pid_of
from hangdoctor.formats.pyspy_text import GDB_FRAME, GDB_INFO_THREAD, TextProcess, parse_frame, parse_source, place
from hangdoctor.model import ERROR

_PYSPY_HEADER = re.compile(r"^\s*(?:Process \d+:|Thread (?:0x[0-9A-Fa-f]+|\d+)\b|Error: |Permission Denied)")
_FAULTHANDLER_FRAME = re.compile(r'^\s*File ".*", line (?:\d+|\.\.\.) in \S')


def _shape(lines: list[str]) -> str:
    """Which reader a source needs: the format most of its frame lines have."""
    counts = {
        "faulthandler": sum(1 for line in lines if _FAULTHANDLER_FRAME.match(line)),
        "traceback": tracebacks.frame_count(lines),
        "py-spy": sum(1 for line in lines if line.strip() and parse_frame(line.strip()) is not None
                      and ".py:" in line),
    }
    best = max(counts, key=lambda kind: counts[kind])
    if counts[best]:
        return best
    # no Python frame: py-spy's headers still make it a dump (a process py-spy could not read, native frames), and
    # so do a gdb backtrace (frames #k, #k+1...) and gdb's `info threads`; without them it is a log (a C++
    # exception's `frame #0: ...` lines are no stack of a process)
    if any(_PYSPY_HEADER.match(line) or GDB_INFO_THREAD.match(line.strip()) for line in lines):
        return "py-spy"
    numbers = [int(line.strip()[1:].split(None, 1)[0]) for line in lines
               if line.strip().startswith("#") and GDB_FRAME.match(line.strip())]
    return "py-spy" if any(b == a + 1 for a, b in zip(numbers, numbers[1:])) else "none"


def _read_source(source: Source) -> tuple[list[TextProcess], str]:
    shape = _shape(source.lines)
    if shape == "faulthandler":
        blocks = faulthandler.split_processes("\n".join(source.lines))
        torn, kept_torn = faulthandler.torn_blocks(blocks)
        dumps = [(threads, faulthandler.round_key(block)) for i, block in enumerate(blocks)
                 if i not in torn and (threads := faulthandler.parse(block, 0, server=False))]
        if not dumps:  # frames without faulthandler's thread header: one thread of one process
            dumps = [(faulthandler.parse("Thread 0x0 (most recent call first):\n" + "\n".join(source.lines), 0,
                                         server=False), None)]
        found = fold_rounds([TextProcess(pid=0, threads=list(threads)) for threads, _ in dumps],
                            [key for _, key in dumps], stated_interval=True)
        found = [proc for proc in found if proc.threads]
        if len(found) > 1:
            shape = (f"{len(found)} processes' Python dumps in one file, read as {len(found)} ranks in the order "
                     "they appear (faulthandler names no pid nor rank)")
        if torn:
            shape += (f"; {len(torn)} round{'s' if len(torn) > 1 else ''} torn by another process's writes (lines "
                      "interleaved) set aside, their processes' whole rounds read")
        if kept_torn:
            shape += (f"; {len(kept_torn)} round{'s' if len(kept_torn) > 1 else ''} torn by another process's writes "
                      "(lines interleaved) read as they are, the only look at some thread: their processes and "
                      "frames may be mixed")
        return found, shape
    if shape == "none":
        return [], shape
    if shape == "traceback":
        parsed = tracebacks.parse(source.lines)
        found = [TextProcess(pid=pid, threads=threads, rank=rank, cmdline=name,
                             **({} if threads else {"status": ERROR, "error": "its traceback is not in the text"}))
                 for threads, rank, pid, name, _ in parsed]
        return fold_rounds(found, [key for *_, key in parsed], stated_interval=False), shape
    return parse_source(source), shape


def fold_rounds(found: list[TextProcess], keys: list, *, stated_interval: bool) -> list[TextProcess]:
    """A dump that repeats (faulthandler's dump_traceback_later(repeat=True), a periodic thread dump) shows one
    process several times: a block whose key (its thread ids, or its thread headers without their times) an
    earlier block of no other rank or pid had is that process again, a later sample of it. keys[i] is
    (identity, seconds): with `stated_interval` the seconds are the interval each round states, else the round's
    own clock time. A block without a key is a process of its own."""
    first: dict = {}  # identity -> (process, seconds of its first round)
    out = []
    for proc, key in zip(found, keys):
        earlier = first.get(key[0]) if key is not None and not proc.pid and proc.rank is None else None
        if earlier is None:
            out.append(proc)
            if key is not None:
                first.setdefault(key[0], (proc, key[1]))
            continue
        origin, seconds = earlier
        after = seconds * (len(origin.later) + 1) if stated_interval else max(0.0, key[1] - seconds)
        origin.later.append((after, proc.threads))
    return out


def embedded_json(text: str) -> tuple[list[TextProcess], str]:
    """py-spy's `--json` output pasted among other text (after the shell line that ran it, between sentences): each
    JSON list of threads standing on lines of its own is read as py-spy's JSON and taken out of the text."""
    lines, kept, found, i = text.splitlines(), [], [], 0
    while i < len(lines):
        if lines[i].strip() == "[":
            indent = len(lines[i]) - len(lines[i].lstrip())
            end = next((j for j in range(i + 1, len(lines))
                        if lines[j].strip() == "]" and len(lines[j]) - len(lines[j].lstrip()) == indent), None)
            threads, data = (), None
            if end is not None:
                try:
                    data = json.loads("\n".join(lines[i:end + 1]))
                    threads = parse_threads(data)
                except (ValueError, TypeError, RecursionError):
                    threads = ()
            if threads:
                found.append(TextProcess(pid=pid_of(data) or 0, threads=list(threads)))
                i = end + 1
                continue
        kept.append(lines[i])
        i += 1
    return found, "\n".join(kept) if found else text


def read_text(text: str) -> tuple[list[TextProcess], list[str]]:
    """Every process a text shows, in reading order, and notes on what was undone to read it."""
    processes, text = embedded_json(text) if "[" in text else ([], text)
    notes: list[str] = ["py-spy's JSON among other text"] if processes else []
    for source in split_sources(text):
        found, shape = _read_source(source)
        processes += place(found, source)
        for note in source.stripped:
            if note not in notes:
                notes.append(note)
        if shape not in ("py-spy", "none") and f"{shape} stacks" not in notes:
            notes.append(shape if " " in shape else f"{shape} stacks")
        repeated = [proc for proc in found if proc.later]
        if repeated:
            rounds = sum(len(proc.later) + 1 for proc in repeated)
            notes.append(f"a dump that repeats: {rounds} rounds read as samples of {len(repeated)} "
                         f"process{'es' if len(repeated) > 1 else ''}")
    unnumbered = [proc for proc in processes if proc.rank is None and proc.cmdline and proc.status != "fragment"]
    named = ranks_from_names([proc.cmdline for proc in unnumbered])
    if any(rank is not None for rank in named):
        for proc, rank in zip(unnumbered, named):
            proc.rank = rank
        notes.append("ranks from the processes' names (their tensor-parallel index)")
    return processes, notes
