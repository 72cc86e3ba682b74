"""A rank's trace once read back from a ring or stream file: code locations, events, threads, open frames.

Both file formats decode into these records; analysis (`last`, `diverge`) and export work on them only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracing.identity import RankIdentity

# Event kinds, as stored in the ring (one byte) and written in the stream (a word).
CALL = 1  # a Python function was entered (or a generator resumed)
RETURN = 2  # it returned (or yielded)
UNWIND = 3  # it was left by an exception
C_CALL = 4  # a C function was called from selected code (only with c_calls)
C_RETURN = 5  # that C function returned or raised
OPEN = 6  # the frame was already open when tracing started (a snapshot of the stack, not a call)
GAP = 7  # tracing was interrupted on this thread and resumed: events are missing; OPEN events re-read the stack

KIND_WORDS = {CALL: "call", RETURN: "ret", UNWIND: "exc", C_CALL: "ccall", C_RETURN: "cret", OPEN: "open", GAP: "gap"}
WORD_KINDS = {word: kind for kind, word in KIND_WORDS.items()}
ENTERS = frozenset({CALL, C_CALL, OPEN})  # kinds that push a frame; the others pop one

# Life of a traced process, as its trace file records it.
RUNNING, STOPPED, EXITED = 1, 2, 3
STATE_WORDS = {RUNNING: "running", STOPPED: "stopped", EXITED: "exited"}


@dataclass(frozen=True)
class CodeLocation:
    module: str  # dotted module name, "" when unknown
    qualname: str
    filename: str
    lineno: int
    is_c: bool = False

    @property
    def name(self) -> str:
        """module:qualname, the name used to compare calls across ranks."""
        return f"{self.module}:{self.qualname}" if self.module else self.qualname

    @property
    def short_file(self) -> str:
        """The file relative to its import root, e.g. deepspeed/runtime/pipe/engine.py, as py-spy shows it."""
        return short_path(self.filename, self.module)

    @property
    def where(self) -> str:
        return "[C]" if self.is_c else f"{self.short_file}:{self.lineno}"


# Where the line of an open frame comes from (OpenFrame.line_source).
EXECUTING = "executing"  # an outer frame: the line of the call that leads to the frame inside it
LAST_CALL = "last call"  # the innermost frame: the line of its last call of traced code; it may have moved on since
DEF = "def"  # no line recorded (a stream file, a version 1 ring, no call yet): the function's first line


@dataclass(frozen=True)
class OpenFrame:
    """A frame still open, and the line it is at as far as the trace knows (see the line sources above)."""

    loc: CodeLocation
    line: int
    line_source: str

    @property
    def qualname(self) -> str:
        return self.loc.qualname

    @property
    def name(self) -> str:
        return self.loc.name

    @property
    def is_c(self) -> bool:
        return self.loc.is_c

    @property
    def where(self) -> str:
        """file:line with the line it is at, as py-spy prints a frame."""
        return "[C]" if self.is_c else f"{self.loc.short_file}:{self.line}"


def open_frames(locations: list[CodeLocation], lines: list[int]) -> list[OpenFrame]:
    """Outermost first; lines[i] is the recorded line of locations[i] (0 or missing: none recorded)."""
    frames = []
    for i, loc in enumerate(locations):
        line = lines[i] if i < len(lines) else 0
        if line and not loc.is_c:
            frames.append(OpenFrame(loc, line, EXECUTING if i < len(locations) - 1 else LAST_CALL))
        else:
            frames.append(OpenFrame(loc, loc.lineno, DEF))
    return frames


UNKNOWN = CodeLocation("", "<unknown>", "", 0)
GAP_LOCATION = CodeLocation("", "<tracing interrupted>", "", 0)  # what a GAP event names
GAP_TEXT = ("tracing was interrupted here (CPython dropped the trace hook, e.g. at a RecursionError): events are "
            "missing and frames open before it may have returned; the frames open when it resumed follow")
GAP_WARNING = ("tracing was interrupted on some thread (CPython dropped the trace hook, e.g. at a RecursionError): "
               "events are missing at each 'gap' event, and the frames open when it resumed were recorded again")


def short_path(filename: str, module: str) -> str:
    if not module or module == "__main__" or not filename:
        return filename.rsplit("/", 1)[-1] if module == "__main__" else filename
    parts = module.split(".")
    pieces = filename.replace("\\", "/").split("/")
    # deepspeed.runtime.pipe.engine -> keep the last len(parts) path pieces (one more for a package __init__).
    keep = len(parts) + (1 if pieces[-1].startswith("__init__.") else 0)
    return "/".join(pieces[-keep:])


@dataclass(frozen=True)
class Event:
    seq: int  # position in the process's event sequence (all threads)
    thread: int  # thread slot index in this trace
    thread_seq: int  # position in this thread's event sequence
    wall_ns: int  # wall-clock time, ns since the epoch
    kind: int
    depth: int  # stack level of the frame entered or left (0 = outermost selected frame)
    loc: CodeLocation

    @property
    def word(self) -> str:
        return KIND_WORDS.get(self.kind, "?")


@dataclass
class ThreadTrace:
    index: int
    name: str
    ident: int = 0
    native_id: int = 0
    is_main: bool = False
    open_frames: list[CodeLocation] = field(default_factory=list)  # outermost first
    open_lines: list[int] = field(default_factory=list)  # the line each open frame is at (0: not recorded)
    frames_truncated: bool = False  # the stack was deeper than the file records
    events: list[Event] = field(default_factory=list)  # this thread's events still in the file, oldest first

    @property
    def frames(self) -> list[OpenFrame]:
        """The open frames with the lines they are at."""
        return open_frames(self.open_frames, self.open_lines)


@dataclass
class RankTrace:
    identity: RankIdentity
    path: str
    source: str  # "ring" or "stream"
    state: int
    start_wall_ns: int
    state_wall_ns: int | None = None  # when it stopped or exited
    exit_code: int | None = None
    threads: list[ThreadTrace] = field(default_factory=list)
    total_events: int = 0  # events written since the start
    dropped_events: int = 0  # of those, overwritten in the ring (or skipped when reading)
    in_file: int | None = None  # of those, still in the file (a ring keeps its capacity); None: not known
    config: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def state_word(self) -> str:
        return STATE_WORDS.get(self.state, "unknown")

    @property
    def main_thread(self) -> ThreadTrace | None:
        for thread in self.threads:
            if thread.is_main:
                return thread
        return self.threads[0] if self.threads else None

    @property
    def events(self) -> list[Event]:
        merged = [e for t in self.threads for e in t.events]
        merged.sort(key=lambda e: e.seq)
        return merged

    @property
    def last_event_wall_ns(self) -> int | None:
        times = [t.events[-1].wall_ns for t in self.threads if t.events]
        return max(times) if times else None
