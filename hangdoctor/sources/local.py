"""Collect on this machine, in this process: given PIDs, a torchrun job, or any processes matching an env var.

A torchrun job is found by its workers' environment (TORCHELASTIC_RUN_ID and RANK, as torchrun sets them),
never by `grep python`. When several torchrun jobs run here, the user picks one with --run-id.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace

from hangdoctor.clicore.errors import EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from hangdoctor.collector import node, procs
from hangdoctor.sources.pyspy import pyspy_version
from hangdoctor.sources import CollectOptions, Gathered, Selection

RUN_KEY = "TORCHELASTIC_RUN_ID"


def torchrun_jobs() -> dict[str, list[int]]:
    """run id -> worker PIDs of every torchrun job on this machine."""
    jobs: dict[str, list[int]] = defaultdict(list)
    for pid in procs.all_pids():
        env = procs.read_environ(pid)
        if env and env.get(RUN_KEY) and "RANK" in env:
            jobs[env[RUN_KEY]].append(pid)
    return dict(jobs)


def pick_torchrun_job(run_id: str | None) -> tuple[str, list[int]]:
    """(run id, its worker pids)."""
    jobs = torchrun_jobs()
    if run_id is not None:
        if run_id not in jobs:
            known = ", ".join(jobs) or "none"
            raise CommandError(f"no torchrun job with run id {run_id} on this machine (running: {known})",
                               hint="list them with `hangdoctor attach --local` and no --run-id",
                               exit_code=EXIT_NOT_FOUND)
        return run_id, jobs[run_id]
    if not jobs:
        raise CommandError("no torchrun job on this machine: no process has TORCHELASTIC_RUN_ID and RANK in its "
                           "environment", hint="for other launchers use --pid PID... or --match KEY=VALUE",
                           exit_code=EXIT_NOT_FOUND)
    if len(jobs) > 1:
        listing = "; ".join(f"{rid} ({len(pids)} ranks, pids {','.join(map(str, sorted(pids)[:4]))}"
                            f"{',…' if len(pids) > 4 else ''})" for rid, pids in jobs.items())
        raise CommandError(f"{len(jobs)} torchrun jobs run on this machine: {listing}",
                           hint="pick one with --run-id ID", exit_code=EXIT_USAGE)
    return next(iter(jobs.items()))


def collect_here(options: CollectOptions, *, match: dict | None = None, pids: list[int] | None = None,
                 source: str, progress=None, among: list[int] | None = None) -> Gathered:
    """One node document for this machine, within options.timeout."""
    options = replace(options, pyspy_version=options.pyspy_version or pyspy_version(options.pyspy))
    # all_nodes: one machine, every matching process is ours, whatever slurmd started it
    selection = Selection(match=match or {}, pids=pids or [], all_nodes=True, among=among)
    doc = node.collect(options, selection, deadline=time.time() + options.timeout, progress=progress)
    return Gathered(source=source, docs=[doc])


def collect_torchrun(options: CollectOptions, run_id: str | None, progress=None) -> Gathered:
    chosen, pids = pick_torchrun_job(run_id)
    return collect_here(options, match={RUN_KEY: chosen, "RANK": None}, source=f"torchrun job {chosen}",
                        progress=progress, among=pids)


def collect_pids(options: CollectOptions, pids: list[int], progress=None) -> Gathered:
    missing = [pid for pid in pids if procs.read_stat(pid) is None]
    if len(missing) == len(pids):
        raise CommandError(f"no such process: {', '.join(map(str, missing))}",
                           hint="check the PIDs with ps", exit_code=EXIT_NOT_FOUND)
    gathered = collect_here(options, pids=pids, source=f"{len(pids)} PIDs", progress=progress)
    return gathered


def collect_matching(options: CollectOptions, match: dict, progress=None) -> Gathered:
    shown = ",".join(k if v is None else f"{k}={v}" for k, v in match.items())
    return collect_here(options, match=match, source=f"processes with {shown}", progress=progress)
