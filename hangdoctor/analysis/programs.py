"""Which program a process runs, read from its stack: the ranks of a job all run one.

A process's program is its outermost frame of its own (its entry), once the frames every Python process starts
with are passed: runpy's (`python -m`), multiprocessing's spawn and fork start-up down to the target a `Process`
runs, torch's spawn wrapper, threading's bootstrap. So torchrun's ranks share `<module> (train.py)`, vLLM's
workers `WorkerProc.worker_main`, Ray's actors Ray's worker loop; the CLI that spawned SGLang's schedulers runs
`<module> (sglang/.../cli/main.py)`, vLLM's engine core `EngineCoreProc.run_engine_core`.

`outsiders` finds, among processes that no launcher variable names a rank of, the ones that run a program of
their own (one such process per node: a job's or a node's driver, SGLang's data-parallel controller on each node)
beside a family of processes that share one (the ranks: at least two, more than half of them, and some frame of
theirs a communication call or a GPU wait: processes alike that never communicate are no job's ranks), do
not wait in a call any of that family waits in, and do not wait on a GPU (rank work). Such a process, when it waits (for the ranks' answers, on a
pipe, idle), is the job's driver, never a rank (one that runs may be doing a rank's work: launchers.py keeps it): numbered as one it shifts every rank after it and,
being the one process unlike the others, is blamed. One that waits in the family's own call or on its GPU (vLLM's
Ray driver, TP rank 0 of the collective the workers are in) stays a rank, and so does one in any collective,
barrier or point-to-point call of torch.distributed: only a process group's members wait there (a rank whose
atexit handler waits in a barrier: its stack starts at the handler, not at the ranks' `<module>`).
"""

from __future__ import annotations

from collections import Counter

from hangdoctor.analysis.wait_rule import COMM_KINDS
from hangdoctor.analysis.waits import WaitTable
from hangdoctor.formats.nodefile import Found

_START_FILES = ("<frozen runpy>", "runpy.py", "<string>", "multiprocessing/spawn.py", "multiprocessing/process.py",
                "multiprocessing/popen_fork.py", "multiprocessing/forkserver.py", "torch/multiprocessing/spawn.py",
                "threading.py")


def program_of(found: Found) -> tuple[str, str] | None:
    """(file, function) of its entry: the outermost frame of its main thread's last stack that is not Python's
    or multiprocessing's start-up; None with no Python stack."""
    for sample in reversed(found.samples):
        thread = sample.main_thread(found.pid)
        if thread is None or not thread.frames:
            continue
        frames = thread.frames
        boot = next((i for i, f in enumerate(frames) if f.file.endswith("multiprocessing/process.py")
                     and f.name.endswith("_bootstrap")), None)
        if boot is not None:  # a forked child still holds its parent's frames below its start-up: its own are above
            frames = frames[:boot]
        python = [f for f in frames if not f.native and f.file]
        if python and python[-1].file.endswith("threading.py") and python[-1].name.rsplit(".", 1)[-1] == "_shutdown":
            return None  # at interpreter exit (joining its threads, their exit hooks): no entry says its program
        for frame in reversed(frames):
            if frame.native or not frame.file:
                continue
            if not frame.file.endswith(_START_FILES):
                return frame.file, frame.name
        return None
    return None


def spawned(found: Found) -> bool:
    """Started by multiprocessing (its main thread begins in spawn's or fork's start-up): a process a framework
    started, not the command a user ran."""
    for sample in reversed(found.samples):
        thread = sample.main_thread(found.pid)
        if thread is not None and thread.frames:
            return any(f.file.endswith(("multiprocessing/spawn.py", "multiprocessing/process.py",
                                        "multiprocessing/popen_fork.py", "multiprocessing/forkserver.py"))
                       for f in thread.frames if f.file)
    return False


def outsiders(found: list[Found], table: WaitTable) -> dict[int, tuple[str, str]]:
    """{index in `found`: its program} for the processes without a launcher's rank that run a program of their
    own beside the ranks' (see the module docstring)."""
    if all(f.rank is not None for f in found):  # every process has its launcher's rank: nothing to tell apart
        return {}
    programs = [program_of(f) for f in found]
    counts = Counter(p for p in programs if p is not None)
    if not counts:
        return {}
    family, size = counts.most_common(1)[0]
    if size < 2 or size * 2 <= len(found):
        return {}
    per_host = Counter((f.host, p) for f, p in zip(found, programs) if p is not None)
    most_on_a_host = Counter()
    for (host, program), n in per_host.items():
        most_on_a_host[program] = max(most_on_a_host[program], n)
    # the ranks' own command line (torchrun's workers share one): a process started by it is one of them, even
    # where its stack stands elsewhere (a rank at interpreter shutdown, joining a thread it never stopped)
    commands = {f.cmdline for f, p in zip(found, programs) if p == family and f.cmdline}
    alone = [i for i, (f, p) in enumerate(zip(found, programs))  # one such process per node: a node's driver
             if f.rank is None and p is not None and p != family and most_on_a_host[p] == 1 and counts[p] < size
             and not (f.cmdline and f.cmdline in commands and not spawned(f))]
    if not alone:
        return {}
    if not any(_speaks(f, table) for f, p in zip(found, programs) if p == family):
        return {}  # processes alike that never communicate are not a job's ranks (a server's forked workers)
    memo: dict = {}
    family_ops = {wait.op for f, p in zip(found, programs) if p == family for wait in _waits(f, table, memo)}
    return {i: programs[i] for i in alone if not any(_member(w) or w.communicates and w.op in family_ops
                                                     for w in _waits(found[i], table, memo))}


def _member(wait) -> bool:
    """A wait only a rank can be in: a GPU's (rank work), DDP's reducer, or torch.distributed's own collective,
    barrier or point-to-point call (only a process group's members wait there; a framework's own queues that the
    table also calls collectives, vLLM's broadcast queue, are waited on by its engine too)."""
    if wait.kind in ("device-sync", "ddp-reducer"):
        return True
    return wait.kind in ("collective", "p2p", "barrier") and "torch/distributed/" in wait.call.file


def forked_helpers(found: list[Found], table: WaitTable) -> dict[int, str]:
    """{index in `found`: why} for the processes a rank started for itself, beside ranks that communicate: a
    process multiprocessing forked from inside the ranks' program (the frames it was forked at, below
    `BaseProcess.start`, are in the ranks' entry file) that runs another program (a vector env's `env_worker`),
    or a `python -c` child (an inline program, nothing but `<string>`), when it communicates nowhere. A rank
    forked by a launcher script runs the ranks' own program, and one that communicates is a rank whatever it runs."""
    candidates = [i for i, f in enumerate(found) if f.rank is None and _forked_or_inline(_last_stack(f))]
    if not candidates:  # the common case, checked first: 100k ranks are not walked frame by frame
        return {}
    memo: dict = {}
    speaks = [_speaks(f, table, memo) for f in found]
    programs = Counter(p for f, said in zip(found, speaks) if said for p in [program_of(f)] if p is not None)
    if sum(speaks) < 2 or not programs:
        return {}
    family = programs.most_common(1)[0][0]
    out = {}
    for index in candidates:
        f = found[index]
        if speaks[index]:
            continue
        stack = _last_stack(f)
        program = program_of(f)
        if program is None and stack and all(fr.native or fr.file.endswith(_START_FILES) for fr in stack):
            if any(fr.file == "<string>" for fr in stack):
                out[index] = "an inline program (`python -c`) a rank started, beside the ranks' own"
            continue
        fork = _fork_point(stack)
        if program is not None and program != family and fork is not None and fork.file == family[0]:
            out[index] = (f"forked by a rank at {fork.name} ({fork.file}:{fork.line}) to run {program[1]} "
                          f"({program[0]}), which communicates nowhere")
    return out


def _forked_or_inline(stack) -> bool:
    return any(f.file == "<string>" or f.file.endswith("multiprocessing/process.py") for f in stack if not f.native)


def _last_stack(found: Found):
    for sample in reversed(found.samples):
        thread = sample.main_thread(found.pid)
        if thread is not None and thread.frames:
            return thread.frames
    return ()


def _fork_point(stack):
    """The innermost frame of the parent's code a forked child's stack still holds: the caller of
    multiprocessing's `BaseProcess.start` (fork copies the parent's stack below the child's start-up)."""
    frames = [f for f in stack if not f.native]
    for frame, caller in zip(frames, frames[1:]):
        if frame.file.endswith("multiprocessing/process.py") and frame.name.endswith("start") \
                and not caller.file.endswith(_START_FILES):
            return caller
    return None


def _speaks(found: Found, table: WaitTable, memo: dict | None = None) -> bool:
    """Some frame of some thread of it is a communication call or a wait on the GPU the table knows (a wait
    somewhere down the stack counts: the ranks may be anywhere in their step). `memo`: per interned stack."""
    for sample in found.samples:
        for thread in sample.threads:
            key = id(thread.frames)
            if memo is not None and key in memo:
                said = memo[key][1]
            else:
                said = any(row is not None and row.role == "wait" and (row.kind in COMM_KINDS
                                                                       or row.kind == "device-sync")
                           for row in map(table.row, thread.frames))
                if memo is not None:
                    memo[key] = (thread.frames, said)  # the stack kept alive: its id stays its own
            if said:
                return True
    return False


def _waits(found: Found, table: WaitTable, memo: dict):
    for sample in found.samples:
        for thread in sample.threads:
            if thread.frames:
                key = id(thread.frames)  # interned: ranks in one place share one stack object
                if key not in memo:
                    memo[key] = (thread.frames, table.classify(thread.frames))  # the stack kept alive
                wait = memo[key][1]
                if wait is not None:
                    yield wait
