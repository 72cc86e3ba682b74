"""Collect one node: find the ranks, take K samples of every rank in parallel, return one JSON-able document.

Stdlib only. Every wait is bounded: each py-spy by `dump_timeout`, the whole node by `deadline` (seconds
since the epoch). A rank in state D (uninterruptible) or T (stopped) is read with py-spy's --nonblocking,
which needs no ptrace-stop: a blocking dump of a D-state process could wait forever, and a stopped one
cannot be paused. The document keeps py-spy's output per rank and per sample: text as printed, JSON with identical frames
stored once per node and each distinct thread once per node: the node's merged summary (compact.py;
`compact.expand` gives py-spy's JSON back exactly).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict

from hangdoctor.clicore import children
from hangdoctor.collector import compact, dump, flight, fr_summary, procs, profile, pystack, source
from hangdoctor.collector.document import DEADLINE, NodeDocument
from hangdoctor.collector.options import CollectOptions, Selection

D_STATE, STOPPED = "d-state", "stopped"


def node_name() -> str:
    """SLURMD_NODENAME inside a SLURM step (several slurmd may share one host), else the short host name."""
    return os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]


def held_reason(state: str) -> str:
    return "uninterruptible sleep (state D)" if state == "D" else "stopped (state T: SIGSTOP or a debugger)"


def take_sample(pyspy: str, pids: list, index: int, *, native: bool, nonblocking: bool, json_out: bool,
                timeout: float, on_done=None, deadline: float | None = None, local_vars: bool = False,
                second: str = "") -> dict:
    """One sample of every pid, all dumped at once: {pid: sample dict}. `pyspy` "" means py-spy is missing here;
    `second`, pystack's path (or ""), reads the ranks py-spy could not (pystack.py)."""
    samples, requests = {}, []
    for pid in pids:
        stat = procs.read_stat(pid)
        sample = {"index": index, "time": time.time(), "state": "", "wchan": "", "cpu_percent": None}
        samples[pid] = sample
        if stat is None or stat["state"] in ("Z", "X", "x"):
            sample.update(status=dump.GONE, error="the process exited" if stat is None else "zombie: the process exited",
                          seconds=0.0, nonblocking=False)
            if on_done is not None:
                on_done(pid)
            continue
        sample.update(state=stat["state"], wchan=procs.read_text(f"/proc/{pid}/wchan"))
        # D: a blocking dump would wait for the kernel forever; T: a stopped process cannot be paused.
        requests.append((pid, nonblocking or stat["state"] in ("D", "T", "t")))
    done_later = bool(second) or not pyspy  # with a second reader, a rank is done once both had their try
    if pyspy:
        results = dump.dump_many(pyspy, requests, timeout=timeout, json_out=json_out, native=native,
                                 on_done=None if done_later else on_done, deadline=deadline, local_vars=local_vars)
    else:
        results = {pid: {"status": dump.ERROR, "error": "py-spy not found on this node", "seconds": 0.0,
                         "nonblocking": blocked, "native": False} for pid, blocked in requests}
    if second:
        _second_reader(second, results, requests, timeout=timeout, native=native, deadline=deadline,
                       local_vars=local_vars)
    if done_later and on_done is not None:
        for pid, _ in requests:
            on_done(pid)
    for pid, result in results.items():
        sample = samples[pid]
        sample.update(result)
        if sample["state"] in ("D", "T", "t"):
            # The rank is not running, whatever py-spy managed to read: it did not respond.
            read = "its stack was read without pausing it" if result["status"] == dump.OK else result["error"]
            sample["status"] = D_STATE if sample["state"] == "D" else STOPPED
            sample["error"] = f"{held_reason(sample['state'])}; {read}"
    return samples


RETRIED = (dump.PTRACE_DENIED, dump.ERROR, dump.TIMEOUT, dump.NOT_PYTHON)  # py-spy's failures pystack may not share


def _second_reader(path: str, results: dict, requests: list, *, timeout: float, native: bool,
                   deadline: float | None, local_vars: bool) -> None:
    """pystack on every rank py-spy could not read (in place): its stack where pystack reads it, marked
    `reader: "pystack"`, with py-spy's error kept; else py-spy's result with pystack's error added."""
    again = [(pid, blocked) for pid, blocked in requests if results[pid]["status"] in RETRIED]
    if not again or (deadline is not None and time.monotonic() >= deadline - 0.1):
        return
    read = pystack.read_many(path, again, timeout=timeout, native=native, local_vars=local_vars, deadline=deadline)
    for pid, _ in again:
        first, result = results[pid], read[pid]
        if result["status"] == dump.OK:
            said = first.get("error") or first["status"]
            said = said if said.startswith("py-spy") else f"py-spy: {said}"
            result["error"] = f"{said}; stack read by pystack instead"
            result["seconds"] = round(first.get("seconds", 0.0) + result.get("seconds", 0.0), 4)
            results[pid] = result
        else:
            first["error"] = f"{first.get('error') or first['status']}; {result.get('error') or 'pystack failed'}"


def collect(options: CollectOptions, selection: Selection, *, deadline: float | None = None, progress=None,
            cpu_window: float = 0.05) -> dict:
    """Run a whole node collection: the processes `selection` names, sampled as `options` say, all of it by
    `deadline` (seconds since the epoch, or None). `progress(done, total)` is called after every dump."""
    name = selection.node or node_name()
    doc = NodeDocument(
        node=name, pyspy={"path": options.pyspy, "version": ""},
        options={**{k: v for k, v in asdict(options).items() if k not in ("pyspy", "pyspy_version", "timeout")},
                 "match": selection.match, "pids": selection.pids})
    if selection.pids:
        infos = []
        for pid in selection.pids:
            info = procs.describe_process(pid)
            if info is None:
                doc.errors.append(f"pid {pid}: no such process")
            else:
                infos.append(info)
    else:
        infos, doc.skipped = procs.find_ranks(selection.match, None if selection.all_nodes else name,
                                              among=selection.among)
    for info in infos:
        info["samples"] = []
        info["gpu"] = procs.gpu_loaded(info["pid"])
    doc.processes = infos
    if not infos:
        doc.finished = time.time()
        return doc.to_wire()

    samples = max(1, options.samples)
    interval = max(0.0, options.interval)
    total, done = samples * len(infos), 0
    pids = [info["pid"] for info in infos]
    ticks = {pid: _ticks(pid) for pid in pids}
    tick_time = first = time.monotonic()
    pyspy = options.pyspy if runnable(options.pyspy) else ""
    second = options.pystack if runnable(options.pystack) else ""
    if options.pystack and not second:
        doc.errors.append(f"pystack not found or not executable at {options.pystack!r}: no second stack reader")
    version = options.pyspy_version or (_start_version(pyspy) if pyspy else "")  # alongside the first dumps

    def one_done(pid: int) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    for index in range(samples):
        if index:
            wait = first + index * interval - time.monotonic()
            if deadline is not None:
                wait = min(wait, deadline - time.time())
            if wait > 0:
                time.sleep(wait)
        remaining = None if deadline is None else deadline - time.time()
        if remaining is not None and remaining <= 0.2:
            doc.errors.append(f"{DEADLINE}: {index} of {samples} samples taken")
            break
        timeout = options.dump_timeout
        if remaining is not None:
            timeout = max(0.1, min(timeout, remaining - 0.2))
        stop_by = None if remaining is None else time.monotonic() + remaining - 0.2
        taken = take_sample(pyspy, pids, index, native=options.native, nonblocking=options.nonblocking,
                            json_out=not options.text, timeout=timeout, on_done=one_done, deadline=stop_by,
                            local_vars=options.locals, second=second)
        for info in infos:
            info["samples"].append(taken[info["pid"]])
        # CPU use of each process since the previous reading, at least cpu_window seconds apart.
        pause = tick_time + cpu_window - time.monotonic()
        if deadline is not None:
            pause = min(pause, deadline - time.time())
        if pause > 0:
            time.sleep(pause)
        now = time.monotonic()
        for info in infos:
            current, before = _ticks(info["pid"]), ticks.get(info["pid"])
            if current is not None and before is not None and now > tick_time:
                info["samples"][-1]["cpu_percent"] = round(
                    100.0 * (current - before) / procs.CLOCK_TICKS / (now - tick_time), 1)
            ticks[info["pid"]] = current
        tick_time = now
    doc.pyspy["version"] = _finish_version(version)
    if options.profile > 0:
        _profile(doc, infos, options, deadline, pyspy)
    if options.flight_recorder:  # torch's debug worker servers, where the ranks run them
        _stacks_from_servers(infos, deadline)
        for pid, fetched in flight.fetch_all(infos, deadline=deadline).items():
            next(info for info in infos if info["pid"] == pid)["flight_recorder"] = fetched
    if options.fr_dir:  # dump files the ranks wrote on this node (TORCH_FR_DUMP_TEMP_FILE's folder)
        _read_fr_dir(doc, infos, options.fr_dir, deadline)
    doc.source_lines = source.frame_lines(infos)
    doc.source_blocks = source.frame_blocks(infos)
    doc.finished = time.time()
    wire = doc.to_wire()
    return compact.merge(compact.factor(compact.drop_addresses(wire) if options.locals else wire))


def _profile(doc: NodeDocument, infos: list, options: CollectOptions, deadline: float | None, pyspy: str) -> None:
    """Every rank's time profile, recorded at once; frames stored once for the node (formats/profile.py).
    Only py-spy records (pystack reads single stacks); without it every rank's profile says so."""
    stop_by = None if deadline is None else time.monotonic() + deadline - time.time() - 0.5
    pids = [info["pid"] for info in infos]
    if pyspy:
        recorded = profile.record_all(pyspy, pids, seconds=options.profile, rate=options.profile_rate,
                                      deadline=stop_by, cost_budget=options.profile_cost / 100)
    else:
        recorded = {pid: {"status": dump.ERROR, "error": "py-spy not found on this node: no profile", "rate":
                          options.profile_rate, "seconds": 0.0, "samples": 0, "stacks": []} for pid in pids}
    index: dict[str, int] = {}
    for info in infos:
        found = recorded[info["pid"]]
        for stack in found["stacks"] + [s for child in found.get("children", ()) for s in child["stacks"]]:
            stack[2] = [index.setdefault(frame, len(index)) for frame in stack[2]]
        info["profile"] = found
    doc.profile_frames = list(index)


UNREAD = (dump.PTRACE_DENIED, dump.ERROR, dump.TIMEOUT)  # py-spy could not read it; its own server thread may


def _stacks_from_servers(infos: list, deadline: float | None) -> None:
    """Where py-spy could not read a rank's last sample, its stacks from the rank's torch debug worker server."""
    for info in infos:
        last = info["samples"][-1] if info["samples"] else None
        if last is None or last.get("status") not in UNREAD:
            continue
        text = flight.fetch_traceback(info["pid"], info.get("env") or {}, deadline=deadline)
        if text is not None:
            last.update(status=dump.OK, faulthandler_text=text, source="torch debug server (dump_traceback)",
                        error=f"py-spy: {last.get('error') or last['status']}; stacks read by the rank's own "
                              f"debug server instead")


def _read_fr_dir(doc: NodeDocument, infos: list, folder: str, deadline: float | None = None) -> None:
    by_rank = {info["rank"]: info for info in infos if isinstance(info.get("rank"), int)}
    try:
        found = fr_summary.summaries_in(folder, set(by_rank), deadline)
    except OSError as exc:
        doc.errors.append(f"Flight Recorder folder {folder}: cannot list ({exc.strerror or exc})")
        return
    for rank, read in found.items():
        if "summary" in read or "summary" not in (by_rank[rank].get("flight_recorder") or {}):
            by_rank[rank]["flight_recorder"] = read  # a file the rank wrote beats a failed live fetch


def runnable(path: str) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def _start_version(pyspy: str):
    try:
        return children.spawn([pyspy, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, env=dump.pyspy_env())
    except OSError:
        return None


def _finish_version(proc) -> str:
    if proc is None or isinstance(proc, str):
        return proc or ""
    return dump.version_answer(proc, timeout=5)


def _ticks(pid: int):
    stat = procs.read_stat(pid)
    return None if stat is None else stat["ticks"]
