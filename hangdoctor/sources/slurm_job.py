"""Collect from a running SLURM job: look it up, then ONE extra step with one collector per node.

Everything SLURM goes through the `slurm` package: `lookup_running_job` (exists, RUNNING, ours) and
`run_step_on_each_node`, which runs `srun --jobid N --overlap --gres=gpu:0 --ntasks-per-node=1 ...` under a
hard bound (without --overlap srun would wait silently for the job's own step). Each node's collector
matches SLURM_JOB_ID=N in /proc/PID/environ and keeps only its own node's ranks (SLURMD_NODENAME), so
several slurmd on one host do not count ranks twice. A node that does not answer is reported, not waited for.

Each collector writes its document to `<out>/nodes/<node>.json` and prints a one-line summary: srun's
--label output cuts lines at 1,024 bytes, too short for a node's stacks, so `out` must be on a file system
the nodes share with this machine (as the seed's `srun --output=trace-%N.out` assumed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hangdoctor.errors import EXIT_ENVIRONMENT, EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from hangdoctor.model import NodeReport
from hangdoctor.sources import CollectOptions, Gathered
from hangdoctor.sources.remote import collector_argv
from slurm.errors import JobNotFound, JobNotRunning, SlurmError
from slurm.jobs import lookup_running_job
from slurm.steps import STOP_ALLOWANCE, run_step_on_each_node


def collector_time_limit(timeout: float) -> float:
    """Leave the collectors time to print what they have before the step's own bound kills them.

    Mirrors run_step_on_each_node's split of the bound: srun gets timeout - STOP_ALLOWANCE, each node's command
    that minus a launch margin of 30% (1 to 10 s); a further second covers the collector's Python start.
    """
    budget = max(0.5, timeout - STOP_ALLOWANCE)
    payload = budget - min(10.0, max(1.0, budget * 0.3))
    return max(0.5, payload - 1.0)


def collect_slurm_job(options: CollectOptions, job_id: str, *, out_dir: Path, python: str | None = None) -> Gathered:
    """out_dir: where the nodes write their documents (created here; must be shared with the nodes)."""
    python = python or sys.executable
    out_dir = out_dir.resolve()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create {out_dir}: {exc.strerror or exc}", "pass --out to a writable folder on a "
                           "shared file system", EXIT_USAGE) from None
    try:
        job = lookup_running_job(job_id, timeout=min(10.0, options.timeout))
    except (JobNotFound, JobNotRunning) as exc:
        raise CommandError(exc.message, exc.hint, EXIT_NOT_FOUND) from None
    except SlurmError as exc:
        raise CommandError(exc.message, exc.hint or "check that squeue and scontrol work from here",
                           EXIT_ENVIRONMENT) from None
    nodes = job.nodes
    if not nodes:
        raise CommandError(f"job {job.job_id} has no nodes", "check it with `scontrol show job`", EXIT_NOT_FOUND)
    command = collector_argv(options, python=python, match={"SLURM_JOB_ID": job.job_id},
                             time_limit=collector_time_limit(options.timeout), out_dir=out_dir)
    try:
        run = run_step_on_each_node(job.job_id, nodes, command, timeout=options.timeout, python=python)
    except SlurmError as exc:
        raise CommandError(exc.message, exc.hint or "check that `srun --jobid ... --overlap` works from here",
                           EXIT_ENVIRONMENT) from None
    docs, failed, warnings = [], [], []
    for node, result in run.results.items():
        doc, problem = _node_document(out_dir, node)
        if doc is not None:
            docs.append(doc)
            if result.status != "ok" and not doc.get("fatal"):
                warnings.append(f"node {node}: collector {result.status} (exit {result.returncode})")
            continue
        said = (result.stderr or "").strip().splitlines()
        error = result.status + (f": {said[-1][:300]}" if said else "")
        if result.status == "ok" and problem:
            error = problem
        failed.append(NodeReport(name=node, ok=False, seconds=result.seconds or 0.0, error=error))
    if not docs:
        reason = failed[0].error if failed else "no output"
        raise CommandError(f"no node of job {job.job_id} answered the srun step ({reason})",
                           "check `srun --jobid ID --overlap --gres=gpu:0 hostname` from here; srun said: "
                           + (run.srun_stderr.strip().splitlines() or ["nothing"])[-1][:200], EXIT_ENVIRONMENT)
    source = f"SLURM job {job.job_id} {job.name!r} ({len(nodes)} node{'s' if len(nodes) != 1 else ''})"
    return Gathered(source=source, docs=docs, failed=failed, warnings=warnings)


def _node_document(out_dir: Path, node: str) -> tuple[dict | None, str]:
    """The document the node's collector wrote, or why there is none."""
    path = out_dir / f"{node}.json"
    try:
        return json.loads(path.read_text()), ""
    except FileNotFoundError:
        return None, (f"its collector ran but {path} is not visible here: put --out on a file system the nodes "
                      f"share with this machine")
    except (OSError, ValueError) as exc:
        return None, f"unreadable {path}: {exc}"
