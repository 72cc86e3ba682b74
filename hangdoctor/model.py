"""What flows between hangdoctor's parts: ranks with their identity, samples of their stacks, a collection.

A rank's identity (global rank, host, pid, local rank, coordinates) is attached once, when a collection is
built from collector output (`formats.load`), and carried by every record after that. Analysis never
re-derives it from file names or PIDs.

Stacks are tuples of frames, innermost first, as py-spy prints them. Frames are interned by the readers, so
16,384 ranks that sit in the same place share one tuple of frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.topology import ParallelDims, RankCoords

# Sample statuses. Only OK means the rank answered; every other one is "did not respond".
OK = "ok"
TIMEOUT = "timeout"  # py-spy did not finish within the per-process timeout
PTRACE_DENIED = "ptrace-denied"  # the kernel refused to let py-spy read the process
NOT_PYTHON = "not-python"  # py-spy found no Python interpreter in the process
GONE = "gone"  # the process exited (or became a zombie) during collection
D_STATE = "d-state"  # uninterruptible sleep: the kernel holds it (filesystem, driver); read without pausing it
STOPPED = "stopped"  # state T/t: SIGSTOPped or held by a debugger; it cannot progress
ERROR = "error"  # py-spy failed for another reason (its message is kept)
MISSING = "missing"  # an expected rank that no collector found (dead node, exited before collection)
NO_FR_DUMP = "no-flight-recorder-dump"  # Flight Recorder dumps alone: a rank none of whose dump was read
STATUSES = (OK, TIMEOUT, PTRACE_DENIED, NOT_PYTHON, GONE, D_STATE, STOPPED, ERROR, MISSING)


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame as py-spy names it: function (qualified name), short file name and line."""

    name: str
    file: str  # py-spy's short_filename: relative to site-packages or the script's directory, e.g. torch/distributed/distributed_c10d.py
    line: int = 0  # 0 for native frames
    native: bool = False  # a C/C++ frame (from --native), e.g. "c10d::Work::wait (libtorch_cpu.so)"
    _hash: int = field(init=False, repr=False, compare=False)  # computed once: frames are dict keys by the million

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.name, self.file, self.line, self.native)))

    def __hash__(self) -> int:
        return self._hash

    def label(self) -> str:
        if not self.file:  # a marker, not a code location: e.g. the thread a stack belongs to (--all-threads)
            return self.name
        return f"{self.name} ({self.file}:{self.line})" if self.line else f"{self.name} ({self.file})"


Stack = tuple[Frame, ...]  # innermost frame first


Locals = dict[str, str]  # py-spy --locals: argument or local name -> its repr, e.g. {"src": "6"}


@dataclass(slots=True)
class ThreadStack:
    thread_id: int  # the OS thread id (equal to the pid for the main thread)
    name: str  # e.g. "MainThread"
    frames: Stack
    active: bool | None = None  # py-spy's active/idle; None when unknown
    owns_gil: bool | None = None
    locals: tuple[Locals | None, ...] | None = None  # per frame, aligned with frames (py-spy --locals); else None
    truncated: bool = False  # the dump was cut off inside this thread: its outermost frames are lost


THREAD_STARTS = ("_bootstrap", "_bootstrap_inner")  # the outermost frames of a thread `threading` started


@dataclass(slots=True)
class Sample:
    """One look at one rank: what py-spy said, and what /proc said about the process at that moment."""

    index: int  # 0..samples-1
    time: float  # seconds since the epoch, when the dump started
    status: str  # one of STATUSES
    threads: tuple[ThreadStack, ...] = ()
    state: str = ""  # /proc/PID/stat state letter: R, S, D, T, t, Z, ...
    cpu_percent: float | None = None  # CPU use of the whole process around this sample
    wchan: str = ""  # kernel function it sleeps in, e.g. futex_do_wait
    error: str = ""  # py-spy's error line, or why no dump was taken
    seconds: float = 0.0  # how long the dump took
    nonblocking: bool = False  # read without pausing the process
    source: str = ""  # where this sample was read from (a file), when not from a live collector
    reader: str = ""  # the tool that read its stack live: "py-spy", "pystack", "torch debug server"; "" for a file

    @property
    def responded(self) -> bool:
        return self.status == OK

    def main_thread(self, pid: int) -> ThreadStack | None:
        """The thread the rank's training loop runs in: the one whose OS id is the pid, else "MainThread"."""
        for thread in self.threads:
            if pid and thread.thread_id == pid:  # pid 0: a text that named no process (its thread ids counted)
                return thread
        for thread in self.threads:
            if thread.name == "MainThread":
                return thread
        # nothing names it (py-spy's unnamed `Thread 0x..`, a paste): the thread whose stack starts the program
        # (<module>), else the first that `threading` did not start
        started = [t for t in self.threads if t.frames]
        return next((t for t in started if t.frames[-1].name == "<module>"),
                    next((t for t in started if t.frames[-1].name.rsplit(".", 1)[-1] not in THREAD_STARTS),
                         self.threads[0] if self.threads else None))


@dataclass(frozen=True, slots=True)
class RankIdentity:
    """Who a process is in the job. Attached once, at collection."""

    rank: int  # global rank
    host: str  # node name (SLURMD_NODENAME under SLURM, else the host name)
    pid: int
    local_rank: int | None = None
    world_size: int | None = None
    coords: RankCoords | None = None  # (dp, pp, tp), when the topology is known
    rank_source: str = "env"  # "env" (RANK/SLURM_PROCID in its environment), "local_rank", "order" (assumed)
    cmdline: tuple[str, ...] = ()
    ppid: int | None = None
    gpu: bool | None = None  # a GPU runtime is loaded in it (libcuda in /proc/PID/maps); None: unknown (a paste)
    endpoint: str | None = None  # the rendezvous store it was told to reach, "MASTER_ADDR:MASTER_PORT"; None: unknown

    def coords_label(self) -> str:
        c = self.coords
        return f"dp={c.dp} pp={c.pp} tp={c.tp}" if c else ""


@dataclass(slots=True)
class ProfiledStack:
    """One distinct stack of one thread in a rank's time profile, and how many samples found it there."""

    thread_id: int
    thread_name: str
    frames: Stack  # innermost first
    count: int


@dataclass(slots=True)
class ChildProfile:
    """A child process of a rank (a DataLoader worker, ...), sampled by the rank's own profiler."""

    pid: int
    stacks: tuple[ProfiledStack, ...] = ()


@dataclass(slots=True, frozen=True)
class CpuTime:
    """What the kernel counted of a rank over its profile's window (each thread's schedstat: exact, not sampled)."""

    seconds: float  # the window's wall time
    on_core: float  # seconds its main thread ran on a core
    waiting: float  # seconds its main thread was ready to run and waited for a core
    all_on_core: float  # seconds all its threads ran on a core


@dataclass(slots=True)
class RankProfile:
    """A rank sampled for some seconds without pausing it (`attach --profile`: py-spy record --nonblocking)."""

    status: str  # OK, or why there is no profile (TIMEOUT, PTRACE_DENIED, ERROR, ...)
    error: str = ""
    rate: int = 0  # samples a second asked of py-spy
    seconds: float = 0.0
    samples: int = 0  # samples taken (each counts every thread once)
    stacks: tuple[ProfiledStack, ...] = ()
    children: tuple[ChildProfile, ...] = ()
    rate_note: str = ""  # what the samplers cost on the rank's node, and why the rate is what it is
    cpu: CpuTime | None = None  # its time on a core over the same window; None from collectors before it, or no /proc


@dataclass(slots=True)
class RankRecord:
    identity: RankIdentity
    samples: list[Sample] = field(default_factory=list)
    profile: RankProfile | None = None

    @property
    def rank(self) -> int:
        return self.identity.rank

    def last(self) -> Sample | None:
        return self.samples[-1] if self.samples else None

    def ok_samples(self) -> list[Sample]:
        return [s for s in self.samples if s.status == OK]


@dataclass(slots=True)
class NodeReport:
    """What one node's collector did: found how many ranks, or why it failed."""

    name: str
    ok: bool = True
    error: str = ""
    ranks_found: int = 0
    skipped: list[str] = field(default_factory=list)  # e.g. "pid 12 (bash): launcher"
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class SetAside:
    """A process found beside the ranks that is not one: a launcher or a rank's helper (DataLoader worker)."""

    host: str
    pid: int
    role: str  # "launcher" or "worker"
    why: str  # e.g. "torchrun agent (its stack)", "parent of ranks 0-3"
    cmdline: tuple[str, ...] = ()
    ppid: int | None = None
    where: str = ""  # its innermost Python frames, e.g. "load (torch/serialization.py) <- __getitem__ (data.py)"
    idle: bool = True  # it waits for work (a worker's queue, a launcher's poll), rather than doing it


@dataclass(slots=True)
class Collection:
    """Everything analysis needs: the ranks, the topology, the expected world size, what went wrong."""

    records: list[RankRecord]
    dims: ParallelDims | None = None
    dims_source: str = ""  # e.g. "flags", "argv of rank 0", "" when unknown
    world_size: int | None = None  # expected number of ranks, when known
    nodes: list[NodeReport] = field(default_factory=list)
    source: str = ""  # e.g. "SLURM job 12", "torchrun run 3f2a...", "3 files"
    samples: int = 1  # samples requested per rank
    interval: float = 0.0  # seconds between samples
    warnings: list[str] = field(default_factory=list)
    whole_job: bool = True  # False when `--pid` picked some of a launcher's ranks: absent ranks are not "missing"
    set_aside: list[SetAside] = field(default_factory=list)  # launchers and workers, never counted as ranks
    source_lines: dict[tuple[str, int], str] = field(default_factory=dict)  # (file, line) -> text, read on the node
    source_blocks: dict[tuple[str, int], dict] = field(default_factory=dict)  # (file, line) -> loops, conditions
    native: bool = False  # native frames were asked for (--native) or are in the dumps
    partial: list[str] = field(default_factory=list)  # why the input is incomplete (a dump cut off, ...)
    flight_recorder: list = field(default_factory=list)  # formats.flight_recorder.FrDump, one per rank that had one
    flight_recorder_unread: list[int] = field(default_factory=list)  # ranks whose dump exists, unreadable
    errors: list[str] = field(default_factory=list)  # input files that could not be read (the rest was analysed)
