"""Collect one node: find the ranks, take K samples of every rank in parallel, return one JSON-able document.

Stdlib only. Every wait is bounded: each py-spy by `dump_timeout`, the whole node by `deadline` (seconds
since the epoch). A rank in state D (uninterruptible) or T (stopped) is read with py-spy's --nonblocking,
which needs no ptrace-stop: a blocking dump of a D-state process could wait forever, and a stopped one
cannot be paused. The document keeps py-spy's raw output verbatim, per rank and per sample.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from hangdoctor.collector import dump, procs

FORMAT = "hangdoctor-node/1"
D_STATE, STOPPED = "d-state", "stopped"


def node_name() -> str:
    """SLURMD_NODENAME inside a SLURM step (several slurmd may share one host), else the short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def sample_one(pyspy: str, pid: int, index: int, *, native: bool, nonblocking: bool, json_out: bool,
               timeout: float) -> dict:
    stat = procs.read_stat(pid)
    sample = {"index": index, "time": time.time(), "state": "", "wchan": "", "cpu_percent": None}
    if stat is None or stat["state"] in ("Z", "X", "x"):
        sample.update(status=dump.GONE, error="the process exited" if stat is None else "zombie: the process exited")
        return sample
    state = stat["state"]
    sample.update(state=state, wchan=procs.read_text(f"/proc/{pid}/wchan"))
    held = state in ("D", "T", "t")
    result = dump.dump_process(pyspy, pid, timeout=timeout, json_out=json_out, native=native,
                               nonblocking=nonblocking or held)
    sample.update(result)
    if held:
        # The rank is not running whatever py-spy managed to read: it did not respond.
        reason = "uninterruptible sleep (state D)" if state == "D" else "stopped (state T: SIGSTOP or a debugger)"
        read = "its stack was read without pausing it" if result["status"] == dump.OK else result["error"]
        sample["status"] = D_STATE if state == "D" else STOPPED
        sample["error"] = f"{reason}; {read}"
    return sample


def collect(options: dict, progress=None) -> dict:
    """Run a whole node collection. `options`: pyspy, match (dict), pids (list, instead of match), samples,
    interval, native, nonblocking, json (bool), dump_timeout, deadline (epoch seconds or None), node (name),
    cpu_window (seconds). `progress(done, total)` is called after every dump.
    """
    started = time.time()
    name = options.get("node") or node_name()
    doc = {
        "format": FORMAT, "node": name, "hostname": socket.gethostname(), "collector_pid": os.getpid(),
        "python": sys.version.split()[0], "started": started, "finished": None, "options": {
            key: options.get(key) for key in ("samples", "interval", "native", "nonblocking", "dump_timeout", "match", "pids")
        },
        "pyspy": {"path": options["pyspy"], "version": dump.pyspy_version(options["pyspy"])},
        "processes": [], "skipped": [], "errors": [],
    }
    if options.get("pids"):
        infos = []
        for pid in options["pids"]:
            info = procs.describe_process(pid)
            if info is None:
                doc["errors"].append(f"pid {pid}: no such process")
            else:
                infos.append(info)
    else:
        infos, doc["skipped"] = procs.find_ranks(options.get("match") or {}, name if options.get("filter_node", True) else None)
    for info in infos:
        info["samples"] = []
    doc["processes"] = infos
    if not infos:
        doc["finished"] = time.time()
        return doc

    samples = max(1, int(options.get("samples") or 1))
    interval = float(options.get("interval") or 0.0)
    deadline = options.get("deadline")
    total, done = samples * len(infos), 0
    ticks = {info["pid"]: _ticks(info["pid"]) for info in infos}
    tick_time = time.monotonic()
    first = time.monotonic()
    with ThreadPoolExecutor(max_workers=min(32, len(infos))) as pool:
        for index in range(samples):
            if index:
                wait = first + index * interval - time.monotonic()
                if deadline is not None:
                    wait = min(wait, deadline - time.time())
                if wait > 0:
                    time.sleep(wait)
            remaining = None if deadline is None else deadline - time.time()
            if remaining is not None and remaining <= 0.2:
                doc["errors"].append(f"deadline reached: {index} of {samples} samples taken")
                break
            timeout = float(options.get("dump_timeout") or 10.0)
            if remaining is not None:
                timeout = max(0.1, min(timeout, remaining - 0.2))
            futures = [
                pool.submit(sample_one, options["pyspy"], info["pid"], index, native=bool(options.get("native")),
                            nonblocking=bool(options.get("nonblocking")), json_out=options.get("json", True),
                            timeout=timeout)
                for info in infos
            ]
            for info, future in zip(infos, futures):
                info["samples"].append(future.result())
                done += 1
                if progress is not None:
                    progress(done, total)
            # CPU use of each process since the previous reading, at least cpu_window seconds apart.
            window = float(options.get("cpu_window", 0.1))
            pause = tick_time + window - time.monotonic()
            if deadline is not None:
                pause = min(pause, deadline - time.time())
            if pause > 0:
                time.sleep(pause)
            now = time.monotonic()
            for info in infos:
                current = _ticks(info["pid"])
                before = ticks.get(info["pid"])
                if current is not None and before is not None and now > tick_time:
                    info["samples"][-1]["cpu_percent"] = round(100.0 * (current - before) / procs.CLOCK_TICKS / (now - tick_time), 1)
                ticks[info["pid"]] = current
            tick_time = now
    doc["finished"] = time.time()
    return doc


def _ticks(pid: int):
    stat = procs.read_stat(pid)
    return None if stat is None else stat["ticks"]
