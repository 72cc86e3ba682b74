"""Collect from a running SLURM job: look it up, then ONE extra step with one collector per node.

Everything SLURM goes through the `slurm` package: `lookup_running_job` (exists, RUNNING, ours) and
`run_step_on_each_node`, which runs `srun --jobid N --overlap --gres=gpu:0 --ntasks-per-node=1 ...` under a
hard bound (without --overlap srun would wait silently for the job's own step). Each node's collector
matches SLURM_JOB_ID=N in /proc/PID/environ and keeps only its own node's ranks (SLURMD_NODENAME), so
several slurmd on one host do not count ranks twice. A node that does not answer is reported, not waited for.

Each collector prints its node document on its stdout; `slurm.stepwrap` brings it back through srun's output
in short numbered frames (srun cuts `--label`led lines at 1,024 bytes). Nothing is written on the nodes: the
caller keeps the documents wherever it likes, and needs no file system shared with the nodes.
"""

from __future__ import annotations

import json
import sys

from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, EXIT_NOT_FOUND, CommandError
from hangdoctor.model import NodeReport
from hangdoctor.sources import CollectOptions, Gathered
from hangdoctor.sources.remote import collector_argv
from slurm.errors import JobNotFound, JobNotRunning, SlurmError
from slurm.jobs import lookup_running_job
from slurm.steps import NodeResult, command_time_limit, run_step_on_each_node

# Of the time each node's command gets (slurm.steps.command_time_limit), the collector leaves this much for its
# Python start and for printing its document before stepwrap's bound would kill it.
COLLECTOR_MARGIN = 1.0


def collector_time_limit(timeout: float) -> float:
    """The collector's own --time-limit within a step bounded by `timeout` seconds."""
    return max(0.5, command_time_limit(timeout) - COLLECTOR_MARGIN)


def collect_slurm_job(options: CollectOptions, job_id: str, *, python: str | None = None) -> Gathered:
    python = python or sys.executable
    try:
        job = lookup_running_job(job_id, timeout=min(10.0, options.timeout))
    except (JobNotFound, JobNotRunning) as exc:
        raise CommandError(exc.message, hint=exc.hint, exit_code=EXIT_NOT_FOUND) from None
    except SlurmError as exc:
        raise CommandError(exc.message, hint=exc.hint or "check that squeue and scontrol work from here",
                           exit_code=EXIT_ENVIRONMENT) from None
    nodes = job.nodes
    if not nodes:
        raise CommandError(f"job {job.job_id} has no nodes", hint="check it with `scontrol show job`",
                           exit_code=EXIT_NOT_FOUND)
    command = collector_argv(options, python=python, match={"SLURM_JOB_ID": job.job_id},
                             time_limit=collector_time_limit(options.timeout))
    try:
        run = run_step_on_each_node(job.job_id, nodes, command, timeout=options.timeout, python=python)
    except SlurmError as exc:
        raise CommandError(exc.message,
                           hint=exc.hint or "check that `srun --jobid ... --overlap` works from here",
                           exit_code=EXIT_ENVIRONMENT) from None
    docs, failed, warnings = [], [], []
    for node, result in run.results.items():
        doc, problem = node_document(result)
        if doc is None:
            failed.append(NodeReport(name=node, ok=False, seconds=result.seconds or 0.0, error=problem))
            continue
        docs.append(doc)
        if result.status != "ok" and not doc.get("fatal"):
            warnings.append(f"node {node}: collector {result.status} (exit {result.returncode})")
    if not docs:
        reason = failed[0].error if failed else "no output"
        said = (run.srun_stderr.strip().splitlines() or ["nothing"])[-1][:200]
        raise CommandError(f"no node of job {job.job_id} answered the srun step ({reason})", exit_code=EXIT_ENVIRONMENT,
                           hint=f"check `srun --jobid ID --overlap --gres=gpu:0 hostname` from here; srun said: {said}")
    source = f"SLURM job {job.job_id} {job.name!r} ({len(nodes)} node{'s' if len(nodes) != 1 else ''})"
    return Gathered(source=source, docs=docs, failed=failed, warnings=warnings)


def node_document(result: NodeResult) -> tuple[dict | None, str]:
    """The document a node's collector printed on its stdout, or why there is none."""
    text = result.stdout.strip()
    if text:
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("node"):
            return doc, ""
    said = result.stderr.strip().splitlines()
    why = result.status + (f" (exit {result.returncode})" if result.returncode not in (None, 0) else "")
    if result.status == "ok" or text:
        why += ": its collector printed no readable report"
    return None, why + (f": {said[-1][:300]}" if said else "")
