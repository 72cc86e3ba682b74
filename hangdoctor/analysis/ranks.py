"""One view per rank: its final status, the stack it sits in, what it waits on, and the evidence for it.

Across repeated samples (`--samples K --interval S`) a rank whose main-thread stack never changes is
"stuck"; one whose stack changed is "progressing" (slow, not hung). With a single answered sample it is
"unknown". The stack shown for a rank is its last answered one (else the last one read at all).

A rank's activity is what its stack and the other evidence say it is doing: the kind of wait the table names
(collective, device-sync, lock, ...), "busy" (outside any wait and running: its stack changed, it used the
CPU, or py-spy saw it holding the GIL), or "unknown" (outside any wait we know, nothing says it runs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoctor.analysis.host_code import runs_on_host
from hangdoctor.analysis.wait_rule import LOCAL_KINDS
from hangdoctor.analysis.waits import Wait, WaitTable, innermost_python
from hangdoctor.model import ERROR, NOT_PYTHON, OK, TIMEOUT, Frame, RankIdentity, RankRecord, Sample, Stack, ThreadStack

STUCK, PROGRESSING, UNKNOWN = "stuck", "progressing", "unknown"
BUSY = "busy"
BUSY_CPU = 50.0  # percent of one core, averaged over the samples
# a gather's or a reduce's dst is its root, not the one rank its members wait for: the root waits for every
# member, and gather_object runs an all_gather of the whole group first
_GATHERS = frozenset({"gather", "gather_object", "reduce", "_reduce", "reduce_multigpu"})
_ROOT_KEYS = frozenset({"dst", "global_dst", "group_dst", "root"})
# DDP's buffer broadcast names its source `authoritative_rank`, a rank of DDP's process group
_PEER_KEYS = ("src", "dst", "global_src", "global_dst", "src_rank", "dst_rank", "peer", "root", "group_src",
              "group_dst", "src_stage", "dst_stage", "authoritative_rank")
_GLOBAL_KEYS = ("src", "dst", "global_src", "global_dst", "src_rank", "dst_rank", "peer", "root")
_NUMBERED_THREAD = re.compile(r"thread \d+|Thread-\d+(?: \(\w+\))?|Dummy-\d+")  # names Python or we gave by number
_GPU_LIBS = re.compile(r"libcuda|libcudart|libnccl|libtorch_cuda|libc10_cuda|libamdhip|librccl|libhsa")


@dataclass(slots=True)
class Peer:
    """The other side a wait names in its locals (py-spy --locals), e.g. the src of a broadcast."""

    name: str  # the local's name: src, dst, group_src, ...
    value: int
    frame: Frame  # the frame whose locals hold it
    tag: int | None = None  # a point-to-point call's `tag` in the same frame's locals, when it has one
    root: bool = False  # a gather's or reduce's dst: the rank that collects, not the only one this rank waits for
    seen: str = "locals"  # where it was read: "locals", or "source" (a whole number in the call's own line)

    @property
    def is_global(self) -> bool:
        """A global rank (torch's src/dst); group_src, src_stage and the like are positions in a group."""
        return self.name in _GLOBAL_KEYS


@dataclass(slots=True)
class RankView:
    identity: RankIdentity
    status: str  # the last sample's status
    stack: Stack  # main thread, innermost first; () when nothing could be read
    wait: Wait | None
    progress: str  # STUCK, PROGRESSING or UNKNOWN
    state: str = ""
    cpu_percent: float | None = None
    error: str = ""
    answered: int = 0  # samples that answered
    samples: int = 0
    active: bool | None = None  # py-spy saw the main thread running in every answered sample (False: idle in all)
    gil: bool | None = None  # ... and holding the GIL in every one
    peer: Peer | None = None
    gpu: bool | None = None  # a GPU is in use (collector's /proc maps, or CUDA/NCCL frames); None: unknown
    truncated: bool = False  # its dump was cut off
    awaited: tuple[str, str] | None = None  # (thread name, what it does, "waits in ..."): what its join may wait for
    helper: tuple[str, Wait] | None = None  # (thread name, wait) of another thread that communicates for the main
    # one: backward's autograd thread in a ZeRO/FSDP all-gather while the main thread sits in backward; a thread
    # in a collective while the main thread waits for it (a lock it holds, a future, a join)
    phase: str = ""  # the schedule's phase, where one function holds several (call_semantics.py): "fn:line"
    reader: str = ""  # the tool that read its last answered stack ("py-spy", "pystack", ...); "" for a file
    frame_locals: tuple | None = None  # py-spy --locals of `stack`'s frames (aligned with them), when read
    settled: Frame | None = None  # a rank whose stack changed between samples: the innermost function every sample
    # was in (the loop it runs: `generate`, not the layer the last sample caught), outside transparent layers

    @property
    def rank(self) -> int:
        return self.identity.rank

    @property
    def responded(self) -> bool:
        return self.status == OK

    @property
    def activity(self) -> str:
        """A wait kind, BUSY or UNKNOWN (for ranks that answered). A main thread in a local wait (a join, an idle
        task loop) for another thread that communicates: that thread's kind (the rank waits in its collective)."""
        if self.wait is not None:
            if self.helper is not None and self.wait.kind in LOCAL_KINDS:
                return self.helper[1].kind
            if self.wait.kind == "io" and self.wait.call.native and self.active:
                return BUSY  # caught inside a file system call while the OS runs it: served, not blocked in it
            return self.wait.kind
        if self.progress == PROGRESSING or self.runs:
            return BUSY
        return UNKNOWN

    @property
    def runs(self) -> bool:
        """Evidence that it executes, outside any wait: CPU use, or py-spy saw it holding the GIL (or running
        at all, in a job known to have no GPU to spin on, or in code that never waits on a GPU: host_code.py)."""
        if self.cpu_percent is not None and self.cpu_percent >= BUSY_CPU:
            return True
        return bool(self.active and (self.gil or self.gpu is False or runs_on_host(self.stack)))

    @property
    def position(self) -> str:
        """Where the rank is, coarsely enough that peers in the same call share it."""
        through = ""
        if self.helper is not None:  # a place of its own (thread ids differ from rank to rank: not part of it)
            name = self.helper[0]
            through = (", for another thread" if _NUMBERED_THREAD.fullmatch(name) else f", for its thread {name!r}") \
                + f" in {self.helper[1].label}"
        if self.wait is not None:
            return (f"{self.wait.label} in {self.phase}" if self.phase else self.wait.label) + through
        frame = self.settled or innermost_python(self.stack)
        return (f"outside any collective, in {frame.name} ({frame.file})" if frame else "no stack") + through

    @property
    def innermost(self) -> Frame | None:
        return innermost_python(self.stack)


def main_stack(sample: Sample, pid: int) -> Stack:
    thread = sample.main_thread(pid)
    return thread.frames if thread is not None else ()


def progress_of(stacks: list[Stack]) -> str:
    if len(stacks) < 2:
        return UNKNOWN
    first = stacks[0]
    return STUCK if all(s is first or s == first for s in stacks[1:]) else PROGRESSING


def _all(values: list[bool | None]) -> bool | None:
    known = [v for v in values if v is not None]
    if not known or len(known) < len(values):
        return None
    return True if all(known) else (False if not any(known) else None)


_gpu_stacks: dict[int, tuple[Stack, bool]] = {}  # id(stack) -> (stack, answer): interned stacks, asked per rank


def gpu_in_stack(stack: Stack) -> bool:
    known = _gpu_stacks.get(id(stack))
    if known is not None and known[0] is stack:
        return known[1]
    found = any((f.native and _GPU_LIBS.search(f.file)) or f.file.startswith("torch/cuda/") for f in stack)
    _gpu_stacks[id(stack)] = (stack, found)
    return found


def view_rank(record: RankRecord, table: WaitTable, memo: dict[int, Wait | None] | None = None,
              source: dict | None = None) -> RankView:
    """`memo` memoises the wait per interned stack (id -> Wait), shared across ranks. Plain loops: this runs
    once per rank of 100k-rank jobs."""
    pid = record.identity.pid
    samples = record.samples
    answered, threads, cpus, truncated = [], [], [], False
    for sample in samples:
        if sample.cpu_percent is not None:
            cpus.append(sample.cpu_percent)
        for thread in sample.threads:
            truncated = truncated or thread.truncated
        if sample.status == OK:
            answered.append(sample)
            thread = sample.main_thread(pid)
            if thread is not None:
                threads.append(thread)
    last = samples[-1] if samples else None
    if threads:
        thread = threads[-1]
    else:
        readable = [s for s in samples if s.threads]
        thread = readable[-1].main_thread(pid) if readable else None
    stack = thread.frames if thread is not None else ()
    wait = _wait(stack, table, memo, source)
    if wait is not None and wait.evidence == "source" and not _seen_in_most(wait, threads, table, memo, source):
        wait = None  # a moving rank caught once on a line like `.item()`: a guess from one line, not where it waits
    gpu = record.identity.gpu
    if gpu is None and stack and gpu_in_stack(stack):
        gpu = True
    status = last.status if last else "missing"
    if status in (TIMEOUT, ERROR, NOT_PYTHON) and answered:
        status = OK  # py-spy failed on one sample (it can, on a busy process): the others answered
    helper, awaited = None, None
    if threads and (wait is None or wait.kind == "ddp-reducer" or wait.kind in LOCAL_KINDS):
        helper = helper_wait(answered[-1], thread, table, memo)
    if threads and helper is None and wait is not None and wait.kind == "lock":
        awaited = awaited_thread(answered[-1], thread, table, memo, source, exiting=wait.op == EXITING)
    return RankView(
        identity=record.identity, status=status, stack=stack, helper=helper, awaited=awaited,
        wait=wait, progress=progress_of([t.frames for t in threads]),
        state=last.state if last else "", cpu_percent=round(sum(cpus) / len(cpus), 1) if cpus else None,
        error=last.error if last else "", answered=len(answered), samples=len(samples),
        active=_all([t.active for t in threads]), gil=_all([t.owns_gil for t in threads]),
        peer=(peer_of(thread, wait) or peer_in_source(wait, source)) if thread is not None and wait is not None
        else None, gpu=gpu,
        truncated=truncated, reader=answered[-1].reader if answered else "",
        frame_locals=thread.locals if thread is not None else None,
        settled=_settled_frame([t.frames for t in threads], table) if wait is None else None,
    )


def _settled_frame(stacks: list[Stack], table: WaitTable) -> Frame | None:
    """The innermost function that every one of these stacks (a rank's samples, innermost first) is in, past the
    wait table's transparent layers (a module's `_call_impl`); None where they do not differ or share nothing."""
    if len(stacks) < 2 or all(s == stacks[0] for s in stacks[1:]):
        return None
    outer = [[f for f in reversed(s) if not f.native] for s in stacks]
    shared = None
    for frames in zip(*outer):
        if any((f.name, f.file) != (frames[0].name, frames[0].file) for f in frames[1:]):
            break
        row = table.row(frames[-1])
        if row is None or row.role != "layer":
            shared = frames[-1]  # the last sample's frame: its line
        if any(f.line != frames[0].line for f in frames[1:]):
            break  # the samples are at different lines of this function: deeper frames are different calls
    innermost = innermost_python(stacks[-1])
    return shared if shared is not None and shared != innermost else None


def helper_wait(sample: Sample, main: ThreadStack, table: WaitTable,
                memo: dict[int, Wait | None] | None) -> tuple[str, Wait] | None:
    """Another thread of the same sample that waits in a communication call (autograd's device thread runs
    backward's hooks: ZeRO-3 and FSDP gather and reduce there)."""
    for other in sample.threads:
        if other is main or not other.frames:
            continue
        found = _wait(other.frames, table, memo, None)
        if found is not None and found.communicates and found.kind != "ddp-reducer":
            return other.name or f"thread {other.thread_id}", found
    return None


EXITING = "interpreter exit, joining its threads"  # the wait table's op for threading._shutdown


def awaited_thread(sample: Sample, main: ThreadStack, table: WaitTable, memo: dict[int, Wait | None] | None,
                   source: dict | None, exiting: bool = False) -> tuple[str, str] | None:
    """(thread name, what it does) of another thread that is neither idle on a lock nor in a queue, where the main
    thread waits on its own threads (a join, a future, an executor's shutdown): the thread it most likely waits
    for (a pool's worker stuck in a write), or None. Its wait, else its innermost Python frame. At the
    interpreter's exit (`exiting`: threading._shutdown joins every non-daemon thread) an idle thread is what holds
    it, and the dumps do not say which threads are daemons: ("", every other thread and what it does)."""
    said = []
    for other in sample.threads:
        if other is main or not other.frames:
            continue
        found = _wait(other.frames, table, memo, source)
        name = other.name or f"thread {other.thread_id}"
        if exiting:
            said.append(f"{name!r} {_doing(other, found)}")
            continue
        if found is not None and found.kind == "lock":
            continue  # idle on a lock, a queue or an event: a pool's idle worker, a timer
        what = _doing(other, found)
        if what:
            return name, what
    if said:
        return "", (f"the interpreter is exiting and waits for its non-daemon threads (a dump does not say which "
                    f"threads are daemons): {'; '.join(said)}")
    return None


def _doing(thread: ThreadStack, found: Wait | None) -> str:
    frame = innermost_python(thread.frames)
    return f"waits in {found.label}" if found is not None else (
        f"{'runs' if thread.active else 'is'} in {frame.name} ({frame.file}:{frame.line})" if frame else "")


def peer_of(thread: ThreadStack, wait: Wait) -> Peer | None:
    """The peer rank in the locals of the wait's frames (innermost first: torch's own src/dst is global)."""
    if not thread.locals or not wait.communicates:
        return None
    frames = thread.frames
    try:
        end = frames.index(wait.caller) if wait.caller is not None else len(frames)
    except ValueError:
        end = len(frames)
    # a global rank anywhere in the call first (torch's send holds dst=1 where the isend under it holds only
    # group_dst=1), then a position in a group
    for keys in (_GLOBAL_KEYS, _PEER_KEYS):
        for index in range(min(end, len(thread.locals))):
            found = thread.locals[index]
            if not found:
                continue
            gathers = frames[index].name.rsplit(".", 1)[-1] in _GATHERS
            for key in keys:
                value = found.get(key, "").strip()
                if value.lstrip("-").isdigit():
                    tag = found.get("tag", "").strip()
                    return Peer(key, int(value), frames[index], int(tag) if tag.lstrip("-").isdigit() else None,
                                root=gathers and key in _ROOT_KEYS)
    return None


_LITERAL_PEER = re.compile(r"\b(" + "|".join(_PEER_KEYS) + r")\s*=\s*(-?\d+)\s*[,)]")


def peer_in_source(wait: Wait, source: dict | None) -> Peer | None:
    """The peer a call names by a whole number in its own source line (`dist.recv(grad, src=1)`), where no
    locals were read: the line of the frame that makes the call (the wait's caller), read from the job's code."""
    if not source or not wait.communicates or wait.caller is None:
        return None
    text = source.get((wait.caller.file, wait.caller.line))
    found = _LITERAL_PEER.search(text) if text else None
    if found is None:
        return None
    gathers = wait.call.name.rsplit(".", 1)[-1] in _GATHERS
    return Peer(found.group(1), int(found.group(2)), wait.caller, root=gathers and found.group(1) in _ROOT_KEYS,
                seen="source")


def _seen_in_most(wait: Wait, threads: list[ThreadStack], table: WaitTable, memo: dict[int, Wait | None] | None,
                  source: dict | None) -> bool:
    """Whether most answered samples of a rank whose stack moved sit in a wait of this kind (one sample, or a
    stack that never moved, always counts: there is nothing to outvote it)."""
    stacks = [t.frames for t in threads]
    if progress_of(stacks) != PROGRESSING:
        return True
    same = sum(1 for frames in stacks if (w := _wait(frames, table, memo, source)) is not None and w.kind == wait.kind)
    return 2 * same > len(stacks)


def _wait(stack: Stack, table: WaitTable, memo: dict[int, Wait | None] | None, source: dict | None) -> Wait | None:
    if not stack:
        return None
    if memo is None:
        return table.classify(stack, source)
    key = id(stack)
    if key not in memo:
        memo[key] = table.classify(stack, source)
    return memo[key]
