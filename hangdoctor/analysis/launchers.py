"""Set aside what is not a rank: launchers (torchrun's agent, a spawn parent, the deepspeed and accelerate
launchers, any parent of ranks) and a rank's helper processes (DataLoader workers). They are listed apart and
never counted, blamed or numbered as ranks.

Found by, in this order: the stack (a "process" row of the wait table anywhere in the main thread: a torchrun
agent sits in `SimpleElasticAgent._invoke_run`, a worker in `_worker_loop`); the command line (`torchrun`,
`-m torch.distributed.run`, `deepspeed`, `accelerate launch`); the process tree, where known (the collector
records each process's parent): a process whose children are ranks is their launcher.
"""

from __future__ import annotations

from hangdoctor.analysis.programs import forked_helpers, outsiders, spawned
from hangdoctor.analysis.waits import WaitTable
from hangdoctor.formats.nodefile import Found
from hangdoctor.model import SetAside
from hangdoctor.topology.launcher import launcher_in_command, workers_started

# process titles (setproctitle's, the command line's first word) of a framework's own processes that are not ranks:
# an actor idle in Ray's task loop shows nothing else of what it is
_HELPER_TITLES = (("ForkPoolWorker-", "worker", "a multiprocessing pool worker"),  # multiprocessing's own names
                  ("SpawnPoolWorker-", "worker", "a multiprocessing pool worker"),
                  ("ForkServerPoolWorker-", "worker", "a multiprocessing pool worker"),
                  ("ray::TrainController", "launcher", "Ray Train's controller"),
                  ("ray::BackendExecutor", "launcher", "Ray Train's backend executor (its controller before 2.0)"),
                  ("ray::SynchronizationActor", "worker", "Ray Train's synchronization actor"),
                  ("ray::_TrainingWorkerGroup", "launcher", "Ray Train's worker group"))
_TITLE_PREFIXES = tuple(prefix for prefix, _, _ in _HELPER_TITLES)


def helper_by_title(cmdline: tuple[str, ...]) -> tuple[str, str] | None:
    """(role, what) for a process whose title names a framework's non-rank process, or None."""
    title = cmdline[0] if cmdline else ""
    if not title.startswith(_TITLE_PREFIXES):
        return None
    return next(((role, what) for prefix, role, what in _HELPER_TITLES if title.startswith(prefix)), None)


def _main_stacks(found: Found):
    for sample in found.samples:
        thread = sample.main_thread(found.pid)
        if thread is not None and thread.frames:
            yield thread.frames


def _describe(found: Found, table: WaitTable) -> tuple[str, bool]:
    """(its innermost Python frames, whether it sits in a wait for work rather than in work)."""
    stacks = list(_main_stacks(found))
    if not stacks:
        return "", True
    stack = stacks[-1]
    python = [f for f in stack if not f.native]
    wait = table.classify(stack)
    # waiting for work: a wait its own loop sits in (a DataLoader worker's index queue), not one deeper in the work
    # it was given (a future, a lock inside the Dataset's __getitem__: that worker is stuck in work)
    idle = (wait is not None and (wait.idle or wait.caller is None or table.process_role((wait.caller,)) is not None)) \
        or bool(python) and table.process_role(python[:1]) is not None
    where = " <- ".join(f.label() for f in python[:3])
    if wait is not None and not idle and wait.caller is not None:  # stuck in its work: in what (a pipe's write)
        where += f", waiting in {wait.op} ({wait.says})" if wait.says else f", waiting in {wait.op}"
    return where, idle


def _communicates(found: Found, table: WaitTable) -> bool:
    """Its main thread waits in communication that is not itself what makes it a launcher (a Ray driver's
    ray.get is both a wait and the mark of a driver)."""
    stacks = list(_main_stacks(found))
    wait = table.classify(stacks[-1]) if stacks else None
    if wait is None or not (wait.communicates or wait.kind == "device-sync"):
        return False
    return table.process_role((wait.call,)) is None


def _any_thread_communicates(found: Found, table: WaitTable, *, but_main: bool = False) -> bool:
    """Some thread of it (`but_main`: other than its main thread) waits in a collective, a p2p call or on the GPU:
    rank work, whatever its main thread does."""
    for sample in found.samples:
        main = sample.main_thread(found.pid) if but_main else None
        for thread in sample.threads:
            if thread is main:
                continue
            wait = table.classify(thread.frames) if thread.frames else None
            if wait is not None and (wait.communicates or wait.kind == "device-sync"):
                return True
    return False


def _started_before_launchers(found: Found, first_launcher: dict[str, int]) -> bool:
    """A process with no rank and no parent pid whose pid is below every launcher's on its host (pids grow: a
    launcher's ranks come after it). Only real pids count: a process read from a dump that named it and its
    command line."""
    first = first_launcher.get(found.host)
    return bool(first and found.rank is None and found.ppid is None and found.cmdline and 0 < found.pid < first)


def _idle(found: Found, table: WaitTable) -> bool:
    """In a wait the table knows, or idle by py-spy in every sample (a C call below its last Python frame)."""
    if _describe(found, table)[1]:
        return True
    threads = [s.main_thread(found.pid) for s in found.samples]
    return bool(threads) and all(t is not None and t.active is False for t in threads)


def _waits_for_children(found: Found, table: WaitTable) -> bool:
    """A parent that only waits (on a child, a pipe, a sleep, or idle outside any known call) is a launcher; one
    that communicates, waits on the GPU or runs is a rank that happens to have started others (Lightning's rank
    0, vLLM's driver)."""
    stacks = list(_main_stacks(found))
    if not stacks:
        return False
    wait = table.classify(stacks[-1])
    if wait is not None:
        return wait.kind in ("io", "sleep", "lock", "launcher")
    threads = [s.main_thread(found.pid) for s in found.samples]
    return all(t is not None and t.active is False for t in threads)


def _waits_on_lock(stack, table: WaitTable, waits: dict) -> bool:
    """The stack waits on a join, an event or a lock; memoised per interned stack (100k ranks share a handful)."""
    known = waits.get(id(stack))
    if known is None:
        wait = table.classify(stack)
        known = waits[id(stack)] = (stack, wait is not None and (wait.kind == "lock" or _event_loop_idle(stack, wait)))
    return known[1]  # the stack kept alive by the memo


def _event_loop_idle(stack, wait) -> bool:
    """An asyncio loop idle in its selector: it awaits what its tasks await, an executor thread's result among
    them (`run_in_executor`): the async form of a future's wait."""
    return wait.kind == "io" and any(f.file.endswith("asyncio/base_events.py") for f in stack if not f.native)


def _role_of_awaited_thread(found: Found, table: WaitTable):
    """The launcher role of a thread that the main thread waits for (a join, an event, a future, an asyncio loop's
    executor): a Ray driver whose main thread joins the threads that sit in ray.get (RLinf's
    WorkerGroupFuncResult), a server whose event loop awaits ray.get in its executor (TuFT's). None when any thread
    communicates as a rank does (a collective, a p2p call), or the main thread waits on something else."""
    sample = found.samples[-1] if found.samples else None
    main = sample.main_thread(found.pid) if sample is not None else None
    if main is None or not main.frames:
        return None
    wait = table.classify(main.frames)
    # an idle event loop is evidence only with a driver's wait on another thread (below): ranks idle there too
    if wait is None or not (wait.kind == "lock" or _event_loop_idle(main.frames, wait)):
        return None
    role = None
    for thread in sample.threads:
        if thread is main or not thread.frames:
            continue
        found_role = table.process_role(thread.frames)
        if found_role is not None and found_role.kind == "launcher":
            role = role or found_role
            continue
        other = table.classify(thread.frames)
        if other is not None and (other.communicates or other.kind == "device-sync"):
            return None
    return role


def set_aside(found: list[Found], table: WaitTable) -> tuple[list[Found], list[SetAside]]:
    """(ranks, set aside)."""
    ranks, aside, waits = [], [], {}
    plain: set = set()  # (main stacks, command line) of processes already found to be plain ranks
    for f in found:
        stacks = tuple(_main_stacks(f))
        key = (tuple(map(id, stacks)), f.cmdline)  # interned stacks: 100k ranks share a handful of keys
        if key in plain:
            ranks.append(f)
            continue
        role = next((r for r in map(table.process_role, stacks) if r is not None), None)
        if role is None and stacks and _waits_on_lock(stacks[-1], table, waits):
            role = _role_of_awaited_thread(f, table)
        if role is not None and role.kind == "launcher" and _communicates(f, table):
            role = None  # a rank that runs inside a launcher-looking frame (a driver in an engine process)
        elif role is not None and role.kind == "worker" and _any_thread_communicates(f, table, but_main=True):
            role = None  # a rank whose main thread serves a helper pool (inductor's compile workers' reader); a
            # worker whose own main thread communicates (a collective in a DataLoader's worker_init_fn) stays one
        program = "" if role is not None else launcher_in_command(f.cmdline)
        titled = helper_by_title(f.cmdline) if role is None and not program else None
        if role is None and not program and titled is None:
            ranks.append(f)
            if not (stacks and waits.get(id(stacks[-1]), (None, False))[1]):  # a lock wait depends on its threads
                plain.add(key)  # the stacks whose ids it holds stay alive in `f`
            continue
        where, idle = _describe(f, table)
        if titled is not None:
            kind, why = titled[0], f"{titled[1]} (its process title)"
        else:
            kind = role.kind if role is not None else "launcher"
            why = f"{role.op} (its stack)" if role is not None else f"{program} (its command line)"
        aside.append(SetAside(f.host, f.pid, kind, why, f.cmdline, f.ppid, where, idle))
    helpers = forked_helpers(ranks, table)
    # a process whose only children found are its own forked helpers (a data producer) is a rank that started
    # them, not their launcher: only the other processes' parents are parents here
    parents = {(f.host, f.ppid) for index, f in enumerate(ranks) if f.ppid and index not in helpers}
    launching = {(a.host, a.ppid) for a in aside if a.ppid and a.role == "launcher"}
    first_launcher: dict[str, int] = {}  # host -> the lowest pid of a launcher there (py-spy's own dumps)
    for a in aside:
        if a.role == "launcher" and a.pid and a.cmdline:
            first_launcher[a.host] = min(a.pid, first_launcher.get(a.host, a.pid))
    rank_of = {(f.host, f.pid): f.rank for f in ranks if f.rank is not None}
    apart = outsiders(ranks, table)
    kept = []
    for index, f in enumerate(ranks):
        if index in helpers:
            where, idle = _describe(f, table)
            aside.append(SetAside(f.host, f.pid, "worker", helpers[index], f.cmdline, f.ppid, where, idle))
        elif index in apart and _idle(f, table):  # a program of its own that waits beside the ranks': their driver
            where, idle = _describe(f, table)   # (one that runs may be doing a rank's work)
            name, file = apart[index][1], apart[index][0]
            role = "worker" if spawned(f) else "launcher"  # a process a framework started, or the user's command
            aside.append(SetAside(f.host, f.pid, role, f"runs a program of its own ({name} in {file}) beside "
                                  f"the ranks', and waits in no call of theirs", f.cmdline, f.ppid, where, idle))
        elif f.rank is not None and f.ppid and rank_of.get((f.host, f.ppid)) == f.rank:
            # a process the rank started (a data producer, a logger) inherits its RANK: a helper of that rank
            where, idle = _describe(f, table)
            aside.append(SetAside(f.host, f.pid, "worker", f"a child of rank {f.rank} (its RANK inherited)",
                                  f.cmdline, f.ppid, where, idle))
        elif f.rank is None and (f.host, f.pid) in launching:  # it started a launcher (a runner, a web UI, a script
            where, idle = _describe(f, table)                 # around torchrun): never a rank itself
            aside.append(SetAside(f.host, f.pid, "launcher", "parent of a launcher", f.cmdline, f.ppid, where, idle))
        elif _started_before_launchers(f, first_launcher) and not _any_thread_communicates(f, table):
            # no parent pid in the dump (py-spy's text): a launcher starts its ranks, so they come after it; a
            # process started before every launcher of its host is what runs around them (a web UI, a runner)
            where, idle = _describe(f, table)
            aside.append(SetAside(f.host, f.pid, "launcher", "started before the launcher on its host (a runner "
                                  "around it)", f.cmdline, f.ppid, where, idle))
        elif (f.host, f.pid) in parents and f.rank is None and _waits_for_children(f, table):
            children = sum(1 for g in ranks if g.host == f.host and g.ppid == f.pid)
            where, idle = _describe(f, table)
            aside.append(SetAside(f.host, f.pid, "launcher", f"parent of {children} other process"
                                  f"{'es' if children > 1 else ''} found", f.cmdline, f.ppid, where, idle))
        else:
            kept.append(f)
    if not kept and aside:
        kept, aside = _blocked_front_ends(found, aside, table)
    return kept, aside


def _blocked_front_ends(found: list[Found], aside: list[SetAside],
                        table: WaitTable) -> tuple[list[Found], list[SetAside]]:
    """Nothing but processes set aside: a front end (a server) whose main thread is held on a lock or join of its
    own, not idle in its serving loop nor waiting for its workers (ray.get, a child), is the program that hangs:
    analysed, not set aside (a lone uvicorn app blocked inside a request)."""
    by_key = {(f.host, f.pid): f for f in found}
    back = []
    for a in aside:
        f = by_key.get((a.host, a.pid))
        stacks = list(_main_stacks(f)) if f is not None else []
        wait = table.classify(stacks[-1]) if stacks else None
        if a.role == "launcher" and a.why.endswith("(its stack)") and wait is not None and wait.kind == "lock":
            back.append(f)
    kept = set(map(id, back))
    return back, [a for a in aside if id(by_key.get((a.host, a.pid))) not in kept]


def world_from_launchers(aside: list[SetAside]) -> tuple[int, str] | None:
    """The world size the launchers set aside say they started (`torchrun --nproc_per_node 4`), with a note that
    says so; None where none says, or they disagree. Without --nnodes, one node per host that has such a launcher.
    A rank that exited before the dumps is then counted as missing rather than as never there."""
    stated = [(a, started) for a in aside if a.role == "launcher" and (started := workers_started(a.cmdline))]
    if not stated or len({started for _, started in stated}) > 1:
        return None
    first, started = stated[0]
    if started.whole_job:
        world = started.per_node
    else:
        world = started.per_node * (started.nodes or len({a.host for a, _ in stated}))
    command = " ".join(first.cmdline)
    command = command if len(command) <= 100 else "…" + command[-99:]
    return world, f"world size {world} from the launcher's command line ({command}, pid {first.pid} on {first.host})"
