"""Collect from the actors of a Ray cluster: Ray's state API finds them, a Ray task pinned to each of their nodes
runs the collector there. Ray is the engine that reaches the nodes: no ssh, no second scheduler.

    1. connect (`ray.init(ADDRESS)`) after a bounded probe that the GCS answers as a gRPC server: ray.init
       itself retries a dead or wrong address for minutes;
    2. `ray.util.state.list_actors` (state ALIVE): each actor's pid, node id, class, name and job, filtered by
       `RayTarget` (job id or submission id, class name, name regex);
    3. without a filter, one small pinned task per node reads the candidates' /proc/PID/environ: the actors with
       RANK are the job's ranks, else every actor is;
    4. one pinned task per node (NodeAffinitySchedulingStrategy, soft=False: run there or fail) calls the
       collector's `node.collect` with `Selection(pids=...)` and returns the node document. Every `ray.get` is
       bounded by what is left of --timeout; a node whose task fails or does not answer is a failed node.

Why the collector runs in the task's own process, not as `python -S .../collector/__main__.py`: the task's
worker is already a running Python on the node (no second start-up), the document comes back as the task's
return value (no framing of a child's stdout), and no path to the collector file has to be valid on the node.
What it needs there is hangdoctor importable by the cluster's workers (installed, or on PYTHONPATH) and py-spy,
as for every other source. The tasks ask for no CPU (num_cpus=0): a hung job's actors may hold them all.

Ranks come from the actors' start-up environment (RANK, WORLD_SIZE, LOCAL_RANK, as `runtime_env={"env_vars":
...}` sets them), which the collector reads; else from a number in the actor's name (`rank-3`, `worker_3`).
Ray Train sets RANK in os.environ after its workers start, which /proc/PID/environ does not show: such ranks
are numbered in reading order, with a warning. hangdoctor imports ray only here, inside `collect_ray`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace

from hangdoctor.clicore.extras import needs_error
from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from hangdoctor.model import NodeReport
from hangdoctor.sources import CollectOptions, Gathered, Selection
from hangdoctor.sources.pyspy import pyspy_version

CONNECT_TIMEOUT = 10.0  # seconds to reach the cluster's GCS, at most
RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_: ]?(\d+)|(\d+)$", re.IGNORECASE)
RAY_HINT = "the same Ray version as the cluster's (`ray --version` on the head)"


@dataclass(frozen=True)
class RayTarget:
    """Which actors of which cluster; a filter left None keeps everything."""

    address: str = "auto"  # host:port of the GCS, ray://host:port, or auto (RAY_ADDRESS, else this machine's)
    job: str | None = None  # a Ray job id (e.g. 02000000) or a job submission id (raysubmit_...)
    actor_class: str | None = None  # the actor's class name, exactly
    actor_name: str | None = None  # a regular expression searched in the actor's name

    @property
    def filtered(self) -> bool:
        return bool(self.job or self.actor_class or self.actor_name)


@dataclass(frozen=True)
class Actor:
    pid: int
    node_id: str
    job_id: str
    class_name: str
    name: str


def collect_ray(options: CollectOptions, target: RayTarget) -> Gathered:
    start = time.monotonic()
    ray = import_ray()
    address = connect(ray, target.address, timeout=min(CONNECT_TIMEOUT, options.timeout))
    try:
        actors = find_actors(target, timeout=max(1.0, options.timeout - (time.monotonic() - start)))
        names = node_names(actors)
        options = replace(options, pyspy_version=options.pyspy_version or pyspy_version(options.pyspy))
        left = options.timeout - (time.monotonic() - start)
        if not target.filtered:
            actors = keep_ranked(ray, actors, names, timeout=min(left / 2, 15.0))
            names = {a.node_id: names[a.node_id] for a in actors}  # the nodes that run a rank
        left = options.timeout - (time.monotonic() - start)
        got, lost = run_on_nodes(ray, collect_task, actors, names, timeout=left, options=options)
        docs = [doc for doc in got.values() if doc]
    finally:
        ray.shutdown()
    warnings = ranks_from_names(docs, actors, names)
    jobs = sorted({a.job_id for a in actors})
    source = f"Ray cluster {address}, job {', '.join(jobs)} ({len(names)} node{'s' if len(names) != 1 else ''})"
    if not docs and lost:
        raise CommandError(f"no node of {source} answered: {lost[0].name}: {lost[0].error}",
                           hint="check that hangdoctor and py-spy are installed where the cluster's workers run",
                           exit_code=EXIT_ENVIRONMENT)
    return Gathered(source=source, docs=docs, failed=lost, warnings=warnings)


def import_ray():
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: F401
        from ray.util.state import list_actors  # noqa: F401
    except ImportError:  # exit 4, not the light install's 2: this machine cannot collect from the cluster
        said = needs_error("attach --ray", ["ray"])
        raise CommandError(said.message, hint=RAY_HINT, exit_code=EXIT_ENVIRONMENT) from None
    return ray


def gcs_address(address: str) -> str | None:
    """host:port to probe for `address`; None when Ray should find it (auto and nothing said where)."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "") or read_current_cluster()
        if not address or address == "auto":
            return None
    return address.split("://", 1)[-1]


def read_current_cluster() -> str:
    """The address `ray start` wrote for this machine's cluster (Ray's own bootstrap file), or ""."""
    try:
        with open(os.path.join(os.environ.get("RAY_TMPDIR", "/tmp/ray"), "ray_current_cluster")) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def connect(ray, address: str, *, timeout: float) -> str:
    """ray.init as a driver of its own job; the GCS is probed first, within `timeout` seconds. Returns the address."""
    probe = gcs_address(address)
    if probe is not None:
        host, _, port = probe.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--ray {address}: expected HOST:PORT, ray://HOST:PORT or auto",
                               hint="e.g. --ray 10.0.0.1:6379 (the head's GCS port)", exit_code=EXIT_USAGE)
        problem = speaks_grpc(host, int(port), timeout=timeout)
        if problem:
            raise CommandError(f"no Ray cluster at {probe}: {problem}", exit_code=EXIT_ENVIRONMENT,
                               hint="pass the head's GCS address (port 6379 unless `ray start --port` said "
                                    "otherwise; `ray status` on the head), not the dashboard's")
    try:
        ray.init(address=address if probe is None else (address if "://" in address else probe),
                 logging_level="ERROR", log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        said = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise CommandError(f"cannot connect to the Ray cluster at {address}: {said}", exit_code=EXIT_ENVIRONMENT,
                           hint="start one with `ray start --head`, or pass --ray HOST:PORT or set RAY_ADDRESS") \
            from None
    return probe or ray.get_runtime_context().gcs_address


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + an empty SETTINGS


def speaks_grpc(host: str, port: int, *, timeout: float) -> str:
    """"" when host:port answers HTTP/2's preface with a SETTINGS frame, as Ray's GCS (gRPC) does; else why not.
    ray.init retries an address that accepts connections but is no GCS (a dashboard port) for minutes."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(H2_PREFACE)
            head = conn.recv(9)
    except socket.timeout:
        return f"it did not answer within {timeout:g}s"
    except OSError as exc:
        return exc.strerror or str(exc)
    if len(head) == 9 and head[3] == 4:
        return ""
    return "it does not speak gRPC" + (f" (it said {head[:8]!r})" if head else " (it closed the connection)")


def find_actors(target: RayTarget, *, timeout: float) -> list[Actor]:
    from ray.util.state import list_actors, list_jobs

    try:
        found = list_actors(filters=[("state", "=", "ALIVE")], detail=True, limit=10_000, timeout=int(timeout),
                            raise_on_missing_output=False)
        job = target.job
        if job and not re.fullmatch(r"[0-9a-fA-F]+", job):  # a submission id: its Ray job id
            ids = [j.job_id for j in list_jobs(timeout=int(timeout), raise_on_missing_output=False)
                   if j.submission_id == job and j.job_id]
            job = ids[0] if ids else None
            if job is None:
                raise CommandError(f"no Ray job with submission id {target.job}", exit_code=EXIT_NOT_FOUND,
                                   hint="list them with `ray job list`")
    except CommandError:
        raise
    except Exception as exc:  # the state API raises its own types (and requests'); all mean the same here
        said = str(exc).splitlines()[0][:300] if str(exc) else repr(exc)
        raise CommandError(f"Ray's state API did not answer: {said}", exit_code=EXIT_ENVIRONMENT,
                           hint="check `ray list actors` from here (the head's dashboard, ray[default], serves it)")
    name_re = re.compile(target.actor_name) if target.actor_name else None
    actors = [Actor(pid=int(a.pid), node_id=a.node_id, job_id=a.job_id, class_name=a.class_name or "",
                    name=a.name or "")
              for a in found if a.pid and a.node_id
              and (job is None or a.job_id == job)
              and (target.actor_class is None or a.class_name == target.actor_class)
              and (name_re is None or name_re.search(a.name or ""))]
    if not actors:
        said = ", ".join(f"{k} {v}" for k, v in (("job", target.job), ("class", target.actor_class),
                                                   ("name", target.actor_name)) if v)
        raise CommandError(f"no live actor in the Ray cluster{' with ' + said if said else ''} "
                           f"({len(found)} live actors in all)", exit_code=EXIT_NOT_FOUND,
                           hint="list them with `ray list actors`; filter with --ray-job, --ray-actor-class or "
                                "--ray-actor-name")
    return actors


def node_names(actors: list[Actor]) -> dict[str, str]:
    """node id -> the name its document carries: host name, with the node id's start when hosts are shared."""
    from ray.util.state import list_nodes

    try:
        hosts = {n.node_id: n.node_name or n.node_ip for n in list_nodes(timeout=10, raise_on_missing_output=False)}
    except Exception:  # names only: the ids still tell the nodes apart
        hosts = {}
    ids = sorted({a.node_id for a in actors})
    shared = len({hosts.get(i) for i in ids}) < len(ids)
    return {i: f"{hosts[i]}-{i[:8]}" if i in hosts and shared else hosts.get(i) or f"ray-{i[:8]}" for i in ids}


def run_on_nodes(ray, task, actors: list[Actor], names: dict[str, str], *, timeout: float, **kwargs):
    """`task(pids, node, budget, **kwargs)` on each node of `actors`, pinned there; ({node id: result},
    [failed NodeReport]) within `timeout` seconds. A task that fails or is late is a failed node, and is cancelled."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(task)
    by_node = defaultdict(list)
    for actor in actors:
        by_node[actor.node_id].append(actor.pid)
    started = time.monotonic()
    refs = {remote.options(num_cpus=0, max_retries=0,
                           scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote(
        sorted(pids), names[node_id], max(0.5, timeout - 1.0), **kwargs): node_id for node_id, pids in by_node.items()}
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=max(0.1, timeout))
    results, failed = {}, []
    for ref in ready:
        node_id = refs[ref]
        try:
            results[node_id] = ray.get(ref, timeout=1.0)
        except Exception as exc:  # the task raised, its worker died, or the node went away
            why = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
            failed.append(NodeReport(name=names[node_id], ok=False, error=f"Ray task failed: {why}"))
    for ref in late:
        ray.cancel(ref, force=True)
        failed.append(NodeReport(name=names[refs[ref]], ok=False, seconds=time.monotonic() - started,
                                 error=f"Ray task did not answer within {timeout:.0f}s (node busy, or no worker "
                                       f"could start there)"))
    return results, failed


def keep_ranked(ray, actors: list[Actor], names: dict[str, str], *, timeout: float):
    """The actors whose start-up environment has RANK, when any has; else all of them. A node that did not
    answer keeps all its actors: the collection that follows reports it. (Pids repeat across nodes.)"""
    found, _ = run_on_nodes(ray, rank_probe_task, actors, names, timeout=timeout)
    ranked = {(node_id, pid) for node_id, pids in found.items() for pid in pids}
    return [a for a in actors if (a.node_id, a.pid) in ranked or a.node_id not in found] if ranked else actors


def rank_probe_task(pids: list[int], node: str, budget: float) -> list[int]:
    """On a node: the pids whose environment at start has RANK."""
    from hangdoctor.collector import procs

    return [pid for pid in pids if "RANK" in (procs.read_environ(pid) or {})]


def collect_task(pids: list[int], node: str, budget: float, *, options: CollectOptions) -> dict:
    """On a node: its node document for these pids, within `budget` seconds (from now: clocks differ)."""
    from hangdoctor.collector import node as collector

    options = replace(options, pyspy=local_program(options.pyspy), pystack=local_program(options.pystack))
    return collector.collect(options, Selection(pids=pids, node=node), deadline=time.time() + budget)


def local_program(path: str) -> str:
    """The front end's py-spy or pystack path where it exists on this node, else the same name on PATH or next to
    the workers' Python."""
    if not path or (os.path.isfile(path) and os.access(path, os.X_OK)):
        return path
    name = os.path.basename(path)
    here = os.path.join(os.path.dirname(sys.executable), name)
    return shutil.which(name) or (here if os.path.isfile(here) else path)


def ranks_from_names(docs: list[dict], actors: list[Actor], names: dict[str, str]) -> list[str]:
    """Ranks from the actors' names for the processes without one in their environment (in place); warnings.
    `names`: node id -> the name of its document."""
    by_place = {(names[a.node_id], a.pid): a for a in actors}
    unnamed = []
    for doc in docs:
        for proc in doc.get("processes", []):
            actor = by_place.get((doc.get("node"), proc.get("pid")))
            if proc.get("rank") is not None or actor is None:
                continue
            found = RANK_IN_NAME.search(actor.name)
            if found:
                proc["rank"], proc["rank_key"] = int(found.group(1) or found.group(2)), "Ray actor name"
            else:
                unnamed.append(f"{actor.class_name} pid {actor.pid}")
    if not unnamed:
        return []
    return [f"{len(unnamed)} Ray actors carry no rank in their start-up environment nor in their name "
            f"({', '.join(unnamed[:4])}{', ...' if len(unnamed) > 4 else ''}): ranked in reading order "
            "(Ray Train sets RANK only after its workers start)"]
