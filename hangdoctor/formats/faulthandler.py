"""Python's own traceback dump (faulthandler's format), as torch's debug worker server returns it from
`/handler/dump_traceback`, -> ThreadStacks. The collector asks for it when py-spy could not read a rank (ptrace
denied in a container without SYS_PTRACE, py-spy failing or timing out): the rank's own server thread answers.

    Current thread 0x00007f3e859106c0 (most recent call first):
      <no Python frame>

    Thread 0x00007f3ea71c1b80 (most recent call first):
      File ".../torch/distributed/distributed_c10d.py", line 5356 in barrier
      File "/tmp/job.py", line 11 in <module>

Threads carry pthread ids, not names: the one whose outermost frame is `<module>` (else the last listed, the
oldest) is called MainThread; the "current" thread is the server's own and is left out. Files are shortened as
py-spy shortens them (relative to site-packages).
"""

from __future__ import annotations

import re

from hangdoctor.formats import frames as interned
from hangdoctor.model import ThreadStack

# a thread's id, or one a person elided ("Thread 0x… (most recent call first):"): then it tells no thread apart
# (Python 3.14 and later name the thread too: "Thread 0x7f9c2effd6c0 [gc-collector] (most recent call first):")
_THREAD = re.compile(r"^\s*(Current thread|Thread) (0x[0-9a-fA-F]*(?:…|\.\.\.)|0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])? "
                     r"\(most recent call first\):\s*$")
_FRAME = re.compile(r'^\s*File "(.*)", line (\d+) in (.+?)\s*$')  # indented, unless a paste lost it
_SITE = re.compile(r"^.*?/(?:site-packages|dist-packages)/")


def looks_like(text: str) -> bool:
    return bool(re.search(r"^(Current thread|Thread) 0x(?:[0-9a-fA-F]+|[0-9a-fA-F]*(?:…|\.\.\.))(?: \[[^\]]*\])? "
                          r"\(most recent call first\):", text, re.M))


_OTHER_HEAD = re.compile(r"^(Fatal Python error|Timeout \(\d+:\d\d:\d\d\)!|Stack \(most recent call first\))")


def split_processes(text: str) -> list[str]:
    """One text per process, for several processes' dumps in one file (ranks sharing a stderr). CPython writes a
    blank line between the threads of one dump and none after its last, so a thread header right after a frame
    line starts the next process (where the text kept blank lines at all); so do a thread id seen again, a second
    current thread, and a new dump's own header line (faulthandler's "Timeout (0:05:00)!", "Fatal Python error")
    after threads."""
    blocks: list[list[str]] = [[]]
    seen: set[str] = set()
    current, after_frame = False, False
    lines = text.splitlines()
    # a log that dropped every blank line (some CI logs do) keeps no sign of where a dump ends: then only the
    # other signs count
    blank_kept = any(not lines[i - 1].strip() for i, line in enumerate(lines) if i and _THREAD.match(line))
    for line in lines:
        head = _THREAD.match(line)
        if head:
            tid, is_current = head.group(2).lower(), head.group(1) == "Current thread"
            if seen and ((after_frame and blank_kept) or (tid in seen and not _elided(tid)) or (is_current and current)):
                blocks.append([])
                seen, current = set(), False
            seen.add(tid)
            current = current or is_current
        elif _OTHER_HEAD.match(line) and seen:
            blocks.append([])
            seen, current = set(), False
        after_frame = bool(_FRAME.match(line)) or line.strip() == "<no Python frame>"
        blocks[-1].append(line)
    return ["\n".join(block) for block in blocks if any(_THREAD.match(line) for line in block)]


def parse(text: str, pid: int, *, server: bool = True) -> tuple[ThreadStack, ...]:
    """The threads of one dump, innermost frame first. `server`: the dump is a torch debug server's reply, whose
    current thread is the server's own and is left out; a dump the process wrote itself (a signal handler runs
    in the main thread) keeps it."""
    threads: list[tuple[int, bool, list]] = []
    for line in text.splitlines():
        head = _THREAD.match(line)
        if head:
            raw = head.group(2)
            threads.append((len(threads) + 1 if _elided(raw) else int(raw, 16), head.group(1) == "Current thread", []))
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            file, number, name = frame.groups()
            threads[-1][2].append(interned.frame(name, _SITE.sub("", file.replace("\\", "/")), int(number), False))
    kept = [(tid, frames) for tid, current, frames in threads if not (current and server) and frames]
    main = next((i for i, (_, frames) in enumerate(kept) if frames[-1].name == "<module>"), len(kept) - 1)
    return tuple(ThreadStack(thread_id=pid if i == main else tid, name="MainThread" if i == main else f"thread {tid:#x}",
                             frames=interned.stack(frames)) for i, (tid, frames) in enumerate(kept))


_TIMEOUT = re.compile(r"^Timeout \((\d+):(\d\d):(\d\d)\)!", re.M)


def round_key(block: str) -> tuple[frozenset, float] | None:
    """What makes a block one round of a dump that repeats (faulthandler.dump_traceback_later(repeat=True) writes the
    same threads every interval): its thread ids, and the interval its "Timeout (0:00:05)!" line states (else 0).
    None where the ids could be another process's too: one thread and no Timeout line (a forked child keeps its
    parent's thread id), or an id elided."""
    ids = [m.group(2).lower() for line in block.splitlines() if (m := _THREAD.match(line))]
    if not ids or any(_elided(tid) for tid in ids):
        return None
    timeout = _TIMEOUT.search(block)
    if len(set(ids)) < 2 and not timeout:
        return None
    seconds = int(timeout[1]) * 3600 + int(timeout[2]) * 60 + int(timeout[3]) if timeout else 0
    return frozenset(ids), float(seconds)


# faulthandler writes a line in pieces (`  File "`, the file, `", line `, the number, ` in `, the name): processes
# appending to one log at the same moment interleave those pieces
_PIECE = re.compile(r'File "|, line \d+ in |\(most recent call first\)|Thread 0x|Timeout \(\d')
_TRACEBACK_FRAME = re.compile(r'^\s*File ".*", line \d+, in \S')


def _torn_line(line: str) -> bool:
    """A line holding pieces of faulthandler's lines that is none of them whole."""
    if _THREAD.match(line) or _OTHER_HEAD.match(line.strip()) or _TRACEBACK_FRAME.match(line):
        return False
    frame = _FRAME.match(line)
    if frame:
        return bool(_PIECE.search(frame.group(3)) or '"' in frame.group(3))
    return bool(_PIECE.search(line))


def _torn(lines: list[str]) -> bool:
    """A torn line, or a thread header right after another: faulthandler writes a frame, or "<no Python frame>",
    under every thread, so a header without one is another process's, written in between."""
    heads = [i for i, line in enumerate(lines) if _THREAD.match(line)]
    return any(_torn_line(line) for line in lines) or any(b == a + 1 for a, b in zip(heads, heads[1:]))


def torn_blocks(blocks: list[str]) -> tuple[set[int], set[int]]:
    """Which blocks (split_processes's) are torn by another process's writes, and are rounds of processes whose
    other rounds are whole: processes that append a dump that repeats to one log interleave when two write at the
    same moment. A block is torn where a line of it is (pieces of two lines), where a thread of it shows no frame,
    or where its threads meet two processes whose whole rounds share no thread (a block of both). It is set aside
    only where every thread it names has a whole round elsewhere; else it is the only look at a process, and kept.
    Returns (set aside, kept torn)."""
    ids = [[m.group(2).lower() for line in block.splitlines() if (m := _THREAD.match(line))] for block in blocks]
    broken = {i for i, block in enumerate(blocks) if _torn(block.splitlines())}
    whole = {frozenset(tids) for i, tids in enumerate(ids) if i not in broken and tids}
    holding: dict[str, list[frozenset]] = {}
    for identity in whole:
        for tid in identity:
            holding.setdefault(tid, []).append(identity)
    for i, tids in enumerate(ids):
        met = list({identity for tid in tids for identity in holding.get(tid, ()) if identity != frozenset(tids)})
        if any(not a & b for j, a in enumerate(met) for b in met[j + 1:]):
            broken.add(i)
    aside = {i for i in broken if ids[i] and all(tid in holding for tid in ids[i])}
    return aside, broken - aside


def _elided(tid: str) -> bool:
    return tid.endswith(("…", "..."))
