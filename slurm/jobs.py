"""Job lookup: `scontrol show job` and `squeue` as dataclasses, and the checks a debugger needs before it attaches.

    job = lookup_running_job("2180718")     # raises JobNotFound / JobNotRunning / NotJobOwner, one line + hint
    job.nodes                                # ["jean-zay-iam01", ...] (expanded NodeList)
    list_jobs(user="stas")                   # squeue rows

Parsers are pure functions over the commands' text (tested on output captured from the local cluster, in
tests/slurm/data/); the lookups run the commands with a hard bound.
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass, field

from slurm.errors import JobNotFound, JobNotRunning, NotJobOwner, SlurmCommandFailed, SlurmCommandMissing, SlurmError
from slurm.nodelist import expand_nodelist
from slurm.process import run_command

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")
_JOB_ID = re.compile(r"^\d+(_\d+)?$")
SQUEUE_FIELDS = ("%i", "%u", "%T", "%D", "%N", "%M", "%l", "%P", "%j")  # job name last: it may contain the separator
SEP = "|"


@dataclass(frozen=True)
class Job:
    """One job as `scontrol show job` describes it; `fields` keeps every key, known or not."""

    job_id: str
    name: str
    user: str
    uid: int | None
    state: str  # RUNNING, PENDING, COMPLETED, CANCELLED, FAILED, TIMEOUT, ...
    reason: str
    nodelist: str  # compressed, e.g. "n[1-4]"; "" while pending
    num_nodes: int | None
    num_tasks: int | None
    batch_host: str
    work_dir: str
    stdout_path: str
    fields: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def nodes(self) -> list[str]:
        return expand_nodelist(self.nodelist) if self.nodelist and self.nodelist != "(null)" else []

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


@dataclass(frozen=True)
class QueueEntry:
    """One row of squeue."""

    job_id: str
    user: str
    state: str
    num_nodes: int
    nodelist: str  # "" while pending
    time_used: str
    time_limit: str
    partition: str
    name: str


def parse_key_values(text: str) -> dict[str, str]:
    """"JobId=1 JobName=a b UserId=root(0)" -> {"JobId": "1", "JobName": "a b", "UserId": "root(0)"}.

    Values run until the next " Key=": that keeps values with spaces (job names, paths) whole.
    """
    matches = list(_KEY.finditer(text))
    result = {}
    for this, following in zip(matches, matches[1:] + [None]):
        end = following.start() if following else len(text)
        result[this.group(1)] = text[this.end():end].strip()
    return result


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    match = re.match(r"\d+", value)  # "4-4" (min-max nodes) -> 4
    return int(match.group()) if match else None


def _user(value: str) -> tuple[str, int | None]:
    match = re.match(r"^(.*?)\((\d+)\)$", value)  # "root(0)"
    return (match.group(1), int(match.group(2))) if match else (value, None)


def parse_show_job(text: str) -> list[Job]:
    """Parse `scontrol show job` output, one-line (-o) or multi-line; several jobs are split at each JobId=."""
    flat = " ".join(line.strip() for line in text.splitlines() if line.strip())
    chunks = [c for c in re.split(r"(?=(?:^|\s)JobId=)", flat) if c.strip()]
    jobs = []
    for chunk in chunks:
        fields = parse_key_values(chunk)
        if "JobId" not in fields:
            continue
        user, uid = _user(fields.get("UserId", ""))
        jobs.append(Job(
            job_id=fields["JobId"], name=fields.get("JobName", ""), user=user, uid=uid,
            state=fields.get("JobState", ""), reason=fields.get("Reason", ""),
            nodelist="" if fields.get("NodeList", "") == "(null)" else fields.get("NodeList", ""),
            num_nodes=_int_or_none(fields.get("NumNodes")), num_tasks=_int_or_none(fields.get("NumTasks")),
            batch_host=fields.get("BatchHost", ""), work_dir=fields.get("WorkDir", ""),
            stdout_path=fields.get("StdOut", ""), fields=fields,
        ))
    return jobs


def parse_squeue(text: str) -> list[QueueEntry]:
    """Parse `squeue --noheader --format=<SQUEUE_FIELDS joined by |>` output."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SEP, len(SQUEUE_FIELDS) - 1)
        if len(parts) != len(SQUEUE_FIELDS):
            raise ValueError(f"unexpected squeue line {line!r}")
        job_id, user, state, nodes, nodelist, used, limit, partition, name = (p.strip() for p in parts)
        rows.append(QueueEntry(job_id, user, state, int(nodes), nodelist, used, limit, partition, name))
    return rows


def check_job_id(job_id: str | int) -> str:
    text = str(job_id).strip()
    if not _JOB_ID.match(text):
        raise SlurmError(f"{job_id!r} is not a SLURM job id", "a job id is a number such as 2180718 (see squeue)")
    return text


def show_job(job_id: str | int, *, env: dict[str, str] | None = None, timeout: float = 10.0) -> Job:
    job_id = check_job_id(job_id)
    result = run_command(["scontrol", "show", "job", "--oneliner", job_id], timeout=timeout, env=env)
    if result.timed_out:
        raise SlurmCommandFailed(f"scontrol show job {job_id} did not answer within {timeout:.0f}s",
                                 "is slurmctld up? try `scontrol ping`")
    if "Invalid job id" in result.stderr or (result.ok and not result.stdout.strip()):
        raise JobNotFound(f"job {job_id} not found",
                          "check the id with `squeue -u $USER`; finished jobs are forgotten after MinJobAge")
    if not result.ok:
        raise SlurmCommandFailed(f"scontrol show job {job_id} failed: {result.first_error_line()}",
                                 stderr=result.stderr, returncode=result.returncode)
    jobs = parse_show_job(result.stdout)
    if not jobs:
        raise SlurmCommandFailed(f"scontrol show job {job_id}: no job in its output", stderr=result.stdout)
    return jobs[0]


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def lookup_running_job(job_id: str | int, *, env: dict[str, str] | None = None, user: str | None = None,
                       timeout: float = 10.0) -> Job:
    """The job, checked: it exists, it runs, and it is `user`'s (default: ours), so a step can be added to it."""
    job = show_job(job_id, env=env, timeout=timeout)
    if not job.running:
        reason = f" ({job.reason})" if job.reason and job.reason != "None" else ""
        hint = {
            "PENDING": "it has no processes yet; wait until squeue shows it RUNNING",
            "SUSPENDED": "resume it first (scontrol resume)",
        }.get(job.state, "its processes are gone; look at its output file instead")
        raise JobNotRunning(f"job {job.job_id} is {job.state}{reason}, not RUNNING", hint)
    me = user or current_user()
    if job.user != me:
        raise NotJobOwner(
            f"job {job.job_id} belongs to {job.user}, not to {me}",
            f"run as {job.user}: SLURM refuses to add a step to another user's job, even for root",
        )
    return job


def list_jobs(*, user: str | None = None, job_ids: list[str] | None = None, env: dict[str, str] | None = None,
              timeout: float = 10.0) -> list[QueueEntry]:
    argv = ["squeue", "--noheader", f"--format={SEP.join(SQUEUE_FIELDS)}"]
    if user:
        argv.append(f"--user={user}")
    if job_ids:
        argv.append(f"--jobs={','.join(check_job_id(j) for j in job_ids)}")
    result = run_command(argv, timeout=timeout, env=env)
    if result.timed_out:
        raise SlurmCommandFailed(f"squeue did not answer within {timeout:.0f}s", "is slurmctld up? try `scontrol ping`")
    if not result.ok:
        if "Invalid job id" in result.stderr:
            return []
        raise SlurmCommandFailed(f"squeue failed: {result.first_error_line()}", stderr=result.stderr,
                                 returncode=result.returncode)
    return parse_squeue(result.stdout)


def hostnames(nodelist: str, *, env: dict[str, str] | None = None, timeout: float = 10.0) -> list[str]:
    """`scontrol show hostnames`, the authoritative expansion; the pure expander when scontrol is absent."""
    try:
        result = run_command(["scontrol", "show", "hostnames", nodelist], timeout=timeout, env=env)
    except SlurmCommandMissing:
        return expand_nodelist(nodelist)
    if not result.ok:
        raise SlurmCommandFailed(f"scontrol show hostnames {nodelist!r} failed: {result.first_error_line()}",
                                 stderr=result.stderr, returncode=result.returncode)
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]
