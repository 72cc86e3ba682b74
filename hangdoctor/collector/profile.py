"""A time profile of every rank of a node at once, without pausing them: `py-spy record --nonblocking`.

For `attach --profile SECONDS` (a slow job, not a hung one): one `py-spy record` per rank, all started together,
each sampling its rank `rate` times a second for `seconds`, idle threads included (a rank waiting in a
collective sleeps in the kernel: without --idle its waits would not be counted), each thread's stacks told apart
(--threads), in py-spy's raw format ("collapsed" stacks: `thread (TID): NAME;outer;...;inner COUNT`). The rank's
child processes are sampled by the same py-spy (--subprocesses, given only to a rank that has children when the
profile starts: its DataLoader workers, whose speed tells a slow loader from one that is only last in phase; their
lines start `process PID:"CMD";`), kept apart as `children`.
--nonblocking reads the rank's memory while it runs: the rank is never stopped, and what it costs the job is the
CPU py-spy itself takes on the node: measured in the samplers' first second, and where it is over the budget
(`--profile-cost`: the job 2% slower) the samplers start again at a rate that fits (sampling_cost.py;
bench/stragglers.py measures the job's iteration time with and without). Over the same window each rank's main
thread's time on a core and waiting for one, and all its threads' time on a core, are read from the kernel's
per-thread schedstat (exact, not sampled: analysis/stragglers.py tells a rank that computes more by it).

Every wait is bounded: py-spy ends by itself after `seconds`; one that has not ended `GRACE` seconds later (or by
the collection's deadline) is killed with its process group, and that rank's profile says so. Stdlib only.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time

from hangdoctor.clicore import children
from hangdoctor.collector import dump, procs, sampling_cost

GRACE = 10.0  # seconds after `seconds` for py-spy to start, write its file and exit
SETTLE, WINDOW = 0.5, 1.0  # seconds: the samplers' start-up, then the window their cost is measured over
MAX_RAW = 64 << 20  # bytes of one rank's raw profile read back: distinct stacks, not samples, make it grow


def record_all(pyspy: str, pids: list[int], *, seconds: float, rate: int, deadline: float | None = None,
               cost_budget: float | None = None) -> dict:
    """{pid: profile}: every pid recorded at once. A profile is {"status", "error", "rate", "seconds", "samples",
    "stacks": [[thread_id, thread_name, [frame, ... outermost first], count], ...], "rate_note", "cpu"} with frames
    as py-spy prints them ("name (file:line)"), and "cpu" what the kernel counted of each rank's time on a core over
    the same window (`_cpu_window`; absent where /proc has no schedstat). `deadline` is time.monotonic()'s. With
    `cost_budget` (how much slower the job may run: 0.02), the samplers' cost is measured over their first second
    (sampling_cost.py); where it is over the budget they are ended and started again, for the whole `seconds`, at
    the rate that fits."""
    with tempfile.TemporaryDirectory(prefix="hangdoctor-profile-") as folder:
        results, running = _start(pyspy, pids, seconds, rate, folder)
        note = ""
        if cost_budget is not None and running:
            chosen, note = _fit_rate(pids, running, rate, cost_budget, deadline)
            if chosen != rate:
                for _, proc, *_ in running:
                    children.end(proc)
                results, running = _start(pyspy, pids, seconds, chosen, folder)
        end_by = time.monotonic() + seconds + GRACE
        if deadline is not None:
            end_by = min(end_by, deadline)
        cpu_from, cpu_since, since = _cpu_times(pids), time.monotonic(), time.time()
        while any(proc.poll() is None for _, proc, *_ in running) and time.monotonic() < end_by:
            time.sleep(0.1)
        cpu = _cpu_window(cpu_from, _cpu_times(pids), time.monotonic() - cpu_since, since)
        for pid, proc, started, out, err in running:
            timed_out = proc.poll() is None
            returncode = children.end(proc)
            result = results[pid]
            result["seconds"] = round(min(time.monotonic() - started, seconds), 3)
            stacks, samples, kids = read_raw(out, pid)
            if stacks:
                result.update(status=dump.OK, stacks=stacks, samples=samples, children=kids)
                if timed_out:  # what it wrote before it was ended is still a profile, of less time
                    result["error"] = f"py-spy had not ended {GRACE:g}s after its time: ended"
            elif timed_out:
                result.update(status=dump.TIMEOUT, error=f"py-spy record did not end within {seconds + GRACE:g}s")
            else:
                said = _last_line(err)
                result.update(status=dump.outcome(pid, returncode or 1, b"", said.encode(), json_out=False)["status"]
                              if said else dump.ERROR,
                              error=said or f"py-spy record exited with {returncode} and wrote no profile")
        for pid, result in results.items():
            result["rate_note"] = note
            if pid in cpu:
                result["cpu"] = cpu[pid]
    return results


def _cpu_times(pids: list[int]) -> dict[int, tuple[int, int, int]]:
    """{pid: (ns its main thread ran on a core, ns it waited for one, ns all its threads ran)} now."""
    found = {}
    for pid in pids:
        every, _, main, waited = sampling_cost.thread_times(pid)
        if every:
            found[pid] = (main, waited, every)
    return found


def _cpu_window(before: dict, after: dict, seconds: float, since: float) -> dict[int, dict]:
    """Per rank, over the profile's window, from the kernel's schedstat (exact, not sampled): {"since": when the
    window began (epoch seconds: the samplers at the rate they kept), "seconds",
    "on_core": seconds its main thread ran on a core, "waiting": seconds it waited for one, "all_on_core": every
    thread's}. A rank whose counters went backwards (a thread ended: its share is gone) or whose window is empty is
    left out: nothing is said of it rather than something wrong."""
    window = {}
    for pid, (main, waited, every) in after.items():
        if pid not in before or seconds <= 0:
            continue
        deltas = [now - then for now, then in zip((main, waited, every), before[pid])]
        if min(deltas) < 0:
            continue
        window[pid] = {"since": round(since, 3), "seconds": round(seconds, 3), "on_core": round(deltas[0] / 1e9, 4),
                       "waiting": round(deltas[1] / 1e9, 4), "all_on_core": round(deltas[2] / 1e9, 4)}
    return window


def _start(pyspy: str, pids: list[int], seconds: float, rate: int, folder: str) -> tuple[dict, list]:
    """One `py-spy record` per pid, all started now: (the results to fill, [(pid, proc, started, out, err)])."""
    results: dict[int, dict] = {}
    running = []
    parents = _with_children(pids)
    for pid in pids:
        out, err = os.path.join(folder, f"{pid}-{rate}.txt"), os.path.join(folder, f"{pid}-{rate}.err")
        # --subprocesses only where there are children to sample: py-spy then watches the process tree all along,
        # which cost the reference trainer (no children) 2 points of its iteration time at 9/s (docs/BENCHMARKS.md)
        argv = [pyspy, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
                "--rate", str(rate), "--nonblocking", "--idle", "--threads",
                *(["--subprocesses"] if pid in parents else []), "--format", "raw", "--output", out]
        results[pid] = {"status": dump.ERROR, "error": "", "rate": rate, "seconds": 0.0, "samples": 0,
                        "stacks": [], "children": []}
        try:
            with open(err, "wb") as err_file:
                proc = children.spawn(argv, stdout=subprocess.DEVNULL, stderr=err_file,
                                      stdin=subprocess.DEVNULL, env=dump.pyspy_env())
        except OSError as exc:
            results[pid]["error"] = f"cannot run {pyspy}: {exc.strerror or exc}"
            continue
        running.append((pid, proc, time.monotonic(), out, err))
    return results, running


def _with_children(pids: list[int]) -> set[int]:
    """Those of `pids` that have a child process now (a DataLoader's workers, ...): one pass over /proc."""
    try:
        return set(pids) & set(procs.parents().values())
    except OSError:
        return set(pids)  # cannot tell: sample children wherever there may be some


def _fit_rate(pids: list[int], running: list, rate: int, budget: float, deadline: float | None) -> tuple[int, str]:
    """(the rate to sample at, the report's line on it), from the samplers' CPU over a window of their first
    second (after their own start-up); the rate asked, with a line saying why, where nothing could be measured."""
    samplers = [proc.pid for _, proc, *_ in running]
    if deadline is not None and time.monotonic() + SETTLE + WINDOW > deadline:
        return rate, f"sampled at {rate}/s: no time left to measure what the samplers cost"
    time.sleep(SETTLE)
    job = [pid for pid in sampling_cost.with_descendants(pids) if pid not in samplers]  # workers count as the job
    before = sampling_cost.snapshot(samplers + job)
    time.sleep(WINDOW)
    after = sampling_cost.snapshot(samplers + job)
    found = None if before is None or after is None else \
        sampling_cost.measure(before, after, samplers, job, rate, ranks=len(pids))
    if found is None or any(proc.poll() is not None for _, proc, *_ in running):
        return rate, f"sampled at {rate}/s: what the samplers cost could not be measured (no /proc, or a sampler ended)"
    chosen = sampling_cost.bounded_rate(found, budget)
    return chosen, sampling_cost.explain(found, chosen, budget)


def read_raw(path: str, pid: int = 0) -> tuple[list, int, list]:
    """py-spy's raw profile file of process `pid` -> (its stacks, their samples, its children's profiles: [{"pid",
    "stacks"}]); ([], 0, []) when there is none."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_RAW)
    except OSError:
        return [], 0, []
    stacks, total, kids = [], 0, {}
    for line in data.decode("utf-8", "replace").splitlines():
        owner, line = _owner(line)
        parsed = parse_raw_line(line)
        if parsed is None:
            continue
        if owner in (0, pid) or not pid:
            stacks.append(parsed)
            total += parsed[3]
        else:
            kids.setdefault(owner, []).append(parsed)
    return stacks, total, [{"pid": child, "stacks": found} for child, found in sorted(kids.items())]


_PROCESS = re.compile(r'process (\d+):".*?";')


def _owner(line: str) -> tuple[int, str]:
    """--subprocesses prefixes each line with the process chain, outermost first (`process 1:"CMD";process 2:"CMD";`):
    the last is the process the stack is of. 0 where there is none."""
    owner, at = 0, 0
    while (found := _PROCESS.match(line, at)) is not None:
        owner, at = int(found.group(1)), found.end()
    return owner, line[at:]


def parse_raw_line(line: str) -> list | None:
    """`thread (TID): NAME;outer (f.py:1);inner (g.py:2) COUNT` -> [tid, name, [frames outermost first], count].
    A thread py-spy knows no name of (a process that never imported `threading`) is `thread (TID);outer;...`."""
    body, _, count = line.rstrip().rpartition(" ")
    if not body or not count.isdigit():
        return None
    tid = 0
    if body.startswith("thread ("):
        head, sep, rest = body.partition(")")
        number = head[len("thread ("):]
        try:
            tid = int(number, 16) if number.startswith("0x") else int(number)
        except ValueError:
            return None
        if rest.startswith(": "):
            body = rest[2:]
        elif rest.startswith(";"):
            body = rest  # no name: what follows the ";" is the frames
        else:
            return None
    name, _, frames = body.partition(";")
    return [tid, name, [f for f in frames.split(";") if f], int(count)]


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as file:
            text = file.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("py-spy> ")]
    return lines[-1][:500] if lines else ""
