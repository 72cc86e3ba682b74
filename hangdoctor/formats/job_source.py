"""The source lines of the frames in dumps read here, from the job's code on this machine (`analyze --source`).

py-spy's dumps name a frame's file and line, never the line's text. `attach` reads the text on the node (the
collector's source.py), but a dump taken by hand (`srun py-spy dump`, a paste, py-spy's JSON) has none, and a
rank blocked in a C call (`time.sleep`, `with lock:`, `store.wait`, `loss.item()`: no Python frame of its own)
then shows only its caller's line, which says nothing of the wait. Where the job's code is on the machine that
analyses (a shared filesystem, a checkout), the text is one read away: this module finds each frame's file
under the directories given with `--source`, or under the directories of the script each rank's command line
names (an absolute path), and reads the line, the loops, branches and `with` statements around it.

A file read here may not be the one that ran (edited since, another checkout): a line is taken only where the
file's own function around it has the frame's name (`<module>`: no function around it); a file whose functions
disagree is not read, and a warning counts it. Lines the dumps carry (attach's) are never replaced.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from hangdoctor.collector.source import blocks_at, ranges_of
from hangdoctor.model import Collection

_LIBRARIES = ("site-packages", "dist-packages")
MAX_FILE_BYTES = 8 << 20  # a source file larger than this is not read (a generated file, not code)
MAX_LINES = 20000  # frames' lines taken at most, over every rank
PARSE_BUDGET_S = 2.0  # seconds spent reading and parsing files, at most


@dataclass
class SourceRead:
    """What reading the job's code found: the counts the report states."""

    lines: int = 0  # frame lines taken
    files: int = 0  # files read that matched what ran
    mismatched: list[str] = field(default_factory=list)  # files found whose functions differ from the frames'
    out_of_time: bool = False


def read_job_source(collection: Collection, dirs: list[Path]) -> SourceRead:
    """Fill the collection's source lines and blocks for every Python frame that has none, from `dirs` and the
    directories of the ranks' scripts; the collection is changed in place. A file is read whole or not at all:
    every frame of it must stand in a function of its own name."""
    found = SourceRead()
    roots = [str(d) for d in dirs] + _script_roots(collection)
    if not roots:
        return found
    by_file: dict[str, list] = {}
    for frame in _python_frames(collection):
        if (frame.file, frame.line) not in collection.source_lines:
            by_file.setdefault(frame.file, []).append(frame)
    started = time.monotonic()
    for file, frames in by_file.items():
        if found.lines >= MAX_LINES or time.monotonic() - started > PARSE_BUDGET_S:
            found.out_of_time = True
            break
        opened = _open(file, roots)
        if opened is None:
            continue
        path, ranges, lines = opened
        if not all(0 < f.line <= len(lines) and _same_function(ranges, f) for f in frames):
            found.mismatched.append(path)
            continue
        found.files += 1
        for frame in frames:
            key = (frame.file, frame.line)
            text = lines[frame.line - 1].strip()
            if text:
                collection.source_lines[key] = text[:200]
                found.lines += 1
            collection.source_blocks.setdefault(key, blocks_at(ranges, frame.line))
    return found


def _python_frames(collection: Collection):
    """Each distinct Python frame of every thread of every sample, main threads first (where ranks part). Stacks
    are shared between ranks (the readers intern them): each is walked once."""
    seen, stacks = set(), set()
    for record in collection.records:
        for sample in record.samples:
            main = sample.main_thread(record.identity.pid)
            for thread in ([main] if main is not None else []) + [t for t in sample.threads if t is not main]:
                if id(thread.frames) in stacks:
                    continue
                stacks.add(id(thread.frames))
                for frame in thread.frames:
                    if frame.native or frame.line <= 0 or not frame.file.endswith(".py") or frame in seen:
                        continue
                    seen.add(frame)
                    yield frame


def _script_roots(collection: Collection) -> list[str]:
    """The directories above each rank's script where its command line names it by an absolute path: a frame's
    short file ("tests/train.py") is found under one of them ("/home/me/proj")."""
    roots: dict[str, None] = {}
    for record in collection.records:
        script = next((a for a in record.identity.cmdline if a.endswith(".py") and a.startswith("/")), None)
        if script is None or any(f"/{d}/" in script for d in _LIBRARIES):
            continue  # a launcher's module (torch/distributed/run.py): the libraries' code is not the job's
        parent = os.path.dirname(script)
        while parent and parent != "/":
            roots.setdefault(parent, None)
            parent = os.path.dirname(parent)
    return list(roots)


def _open(file: str, roots: list[str]) -> tuple[str, list, list[str]] | None:
    """A frame's file (py-spy's short name) under the first root that has it, or where it says when absolute:
    (path, its loops, branches and functions, its lines). An absolute name is also looked for by its tails of
    two parts or more under each root (the job's checkout at another place here)."""
    candidates = [file] if file.startswith("/") else []
    relative = file.lstrip("/")
    parts = relative.split("/")
    tails = [relative] + (["/".join(parts[i:]) for i in range(1, len(parts) - 1)] if file.startswith("/") else [])
    candidates += [os.path.join(root, tail) for tail in tails for root in roots]
    for path in candidates:
        try:
            if not os.path.isfile(path) or os.path.getsize(path) > MAX_FILE_BYTES:
                continue
            with open(path, "rb") as handle:
                source = handle.read()
        except OSError:
            continue
        ranges = ranges_of(source)
        if ranges is None:
            continue
        return path, ranges, source.decode("utf-8", "replace").splitlines()
    return None


def _same_function(ranges: list, frame) -> bool:
    """The innermost function around the frame's line has the frame's name (its last dotted part); a frame of
    the module's own code has none around it; comprehensions and lambdas (`<listcomp>`) are not checked."""
    around = [(first, name) for kind, first, last, *rest in ranges if kind == "defs" and first <= frame.line <= last
              for name in rest]
    name = frame.name.rsplit(".", 1)[-1]
    if name == "<module>":
        return not around
    if name.startswith("<"):
        return True
    return bool(around) and max(around)[1] == name


def note(found: SourceRead, dirs: list[Path]) -> list[str]:
    """The report's warnings about the job's code read here."""
    notes = []
    if dirs and not found.files and not found.mismatched:
        notes.append(f"--source: no file of the frames found under {', '.join(map(str, dirs))}: no line read")
    if found.lines:
        notes.append(f"read {found.lines} source line{'s' if found.lines != 1 else ''} of the frames from "
                     f"{found.files} file{'s' if found.files != 1 else ''} on this machine (the dumps carry none)")
    if found.mismatched:
        shown = ", ".join(found.mismatched[:3]) + (" ..." if len(found.mismatched) > 3 else "")
        notes.append(f"{len(found.mismatched)} file{'s' if len(found.mismatched) != 1 else ''} found here differ "
                     f"from the code that ran (a frame's function is not at its line): not read ({shown})")
    if found.out_of_time:
        notes.append(f"stopped reading source files after {PARSE_BUDGET_S:g} s: some frames' lines not read")
    return notes
