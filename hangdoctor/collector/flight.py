"""Fetch each rank's Flight Recorder trace live from torch's debug worker server. Stdlib only.

A job that calls `torch.distributed.debug.start_debug_server()` runs, in every rank, an HTTP worker server on an
ephemeral port bound to every address ("::"), and registers its URL in the job's TCPStore. We read no store:
the rank's own listening sockets are in /proc (its socket inodes in /proc/PID/fd, the listeners in
/proc/PID/net/tcp and tcp6). A listener bound to every address, other than MASTER_PORT (the store rank 0 may
host), is a candidate; each gets `POST /handler/fr_trace_json` and `/handler/dump_nccl_trace_json` (what torch's
own frontend sends for the CPU and the NCCL recorder), answered within `timeout` or given up. A reply that is not
a Flight Recorder trace is ignored. Nothing else is sent to the job, and no signal: gloo's and NCCL's own
listeners are bound to one address and never probed.
"""

from __future__ import annotations

import http.client
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from hangdoctor.collector.fr_summary import summarize

ENDPOINT = "/handler/fr_trace_json"
NCCL_ENDPOINT = "/handler/dump_nccl_trace_json"
_LISTEN = "0A"
_ANY = {"00000000", "00000000000000000000000000000000"}  # 0.0.0.0 and :: as /proc/net writes them


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def candidate_ports(pid: int, env: dict) -> list[int]:
    """Ports the process listens on at every address, MASTER_PORT excepted, lowest first."""
    inodes = _socket_inodes(pid)
    master = str(env.get("MASTER_PORT", ""))
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as handle:
                lines = handle.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN or fields[9] not in inodes:
                continue
            address, _, port_hex = fields[1].partition(":")
            port = int(port_hex, 16)
            if address in _ANY and str(port) != master:
                ports.add(port)
    return sorted(ports)


def _post(port: int, endpoint: str, timeout: float, limit: int = 256 << 20) -> bytes | None:
    """One POST to the rank's own port; None when it does not answer 200 in time."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", endpoint, body=b"", headers={"Content-Length": "0"})
        response = connection.getresponse()
        if response.status != 200:
            return None
        return response.read(limit)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()


TRACEBACK = "/handler/dump_traceback"
_FAULTHANDLER = b"(most recent call first):"


def fetch_traceback(pid: int, env: dict, *, timeout: float = 1.5, deadline: float | None = None) -> str | None:
    """The rank's Python threads as its torch debug worker server dumps them (faulthandler's format), or None:
    the stacks of a rank py-spy could not read (ptrace denied, py-spy failing), from inside the rank."""
    for port in candidate_ports(pid, env):
        left = timeout if deadline is None else min(timeout, deadline - time.time())
        if left <= 0.05:
            return None
        body = _post(port, TRACEBACK, left, limit=16 << 20)
        if body is not None and _FAULTHANDLER in body:
            return body.decode("utf-8", "replace")
    return None


def fetch_one(port: int, timeout: float) -> dict | None:
    """The trace from one port, or None when it is not a worker server (or too slow). NCCL keeps a recorder of
    its own (with the kernels' times when TORCH_NCCL_ENABLE_TIMING=1), served at NCCL_ENDPOINT; the other
    backends' is at ENDPOINT (a torch without it answers 404 there). Both are asked, within `timeout` in all,
    and their entries joined: a job may run gloo groups beside NCCL ones."""
    started = time.monotonic()
    trace = _trace(port, ENDPOINT, timeout)
    left = timeout - (time.monotonic() - started)
    nccl = _trace(port, NCCL_ENDPOINT, left) if left > 0.05 else None
    if trace is None or nccl is None:
        return trace or nccl
    joined = dict(trace)
    joined["entries"] = trace["entries"] + nccl["entries"]
    for key in ("pg_config", "pg_status"):
        if isinstance(trace.get(key), dict) and isinstance(nccl.get(key), dict):
            joined[key] = {**trace[key], **nccl[key]}
    return joined


def _trace(port: int, endpoint: str, timeout: float) -> dict | None:
    body = _post(port, endpoint, timeout)
    if body is None:
        return None
    try:
        trace = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return trace if isinstance(trace, dict) and isinstance(trace.get("entries"), list) else None


def fetch_all(infos: list, *, timeout: float = 1.5, deadline: float | None = None) -> dict:
    """{pid: {"port": p, "summary": {...}} or {"error": why}} for the processes that have a candidate port; each
    port answers within `timeout`, and everything ends by `deadline` (time.time()). Each trace is reduced here,
    on its node (fr_summary.py): the front end joins summaries."""
    jobs = {info["pid"]: candidate_ports(info["pid"], info.get("env") or {}) for info in infos}
    jobs = {pid: ports for pid, ports in jobs.items() if ports}
    if not jobs:
        return {}

    def one(pid: int) -> dict:
        for port in jobs[pid]:
            left = timeout if deadline is None else min(timeout, deadline - time.time())
            if left <= 0.05:
                return {"error": "not fetched: the collection's time bound was reached"}
            trace = fetch_one(port, left)
            if trace is not None:
                try:
                    return {"port": port, "summary": summarize(trace)}
                except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                    return {"port": port, "error": f"a damaged Flight Recorder trace ({type(exc).__name__}: {exc})"}
        return {"error": f"no Flight Recorder trace from port{'s' if len(jobs[pid]) > 1 else ''} "
                         f"{', '.join(map(str, jobs[pid]))}"}

    with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
        return dict(zip(jobs, pool.map(one, jobs)))
