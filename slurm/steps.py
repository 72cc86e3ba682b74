"""Run one command on every node of a running job, as ONE extra job step, with a hard bound.

    run = run_step_on_each_node("2180718", ["n1", "n2"], ["py-spy", "dump", "--pid", "1234"], timeout=20)
    run.results["n2"].status        # "ok", "failed", "timeout", "not started" or "no answer"

The step is `srun --jobid J --overlap --gres=gpu:0 --nodes=K --nodelist=... --ntasks-per-node=1 ...`:
- `--overlap` lets it share the CPUs that the job's own steps hold; without it srun waits silently forever
  (with --immediate it says "Requested nodes are busy").
- `--gres=gpu:0` keeps it from waiting for GPUs that the training step holds.
- each task is `python -S .../slurm/stepwrap.py` (by path, without site: stdlib only, quick to start), which runs
  the command under its own bound and prints its record in
  short numbered frame lines tagged with SLURMD_NODENAME (srun cuts labelled lines at 1,024 bytes); `--label`
  keeps srun from mixing two tasks' output within a line.
A node that never answers (dead, hung slurmd, stopped) has no frames: it is reported as "no answer" (with the
reason in `stderr` when only some of its frames arrived) and the other nodes' results are kept. srun itself is stopped at the overall bound. The argv is a list, never a shell
string, and nothing is ever sent to the job's own processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from hangdoctor.clicore import children
from slurm.errors import JobNotFound, NotJobOwner, SlurmCommandFailed, SlurmCommandMissing
from slurm.jobs import check_job_id
from slurm.nodelist import compress_nodelist
from slurm.process import MISSING_HINT, kill_group
from slurm import frames, stepwrap

NO_ANSWER = "no answer"
STOP_ALLOWANCE = 1.5  # seconds kept, within the bound, to stop srun
STEPWRAP = os.path.abspath(stepwrap.__file__)  # started by path on the nodes: the same path must exist there


@dataclass(frozen=True)
class NodeResult:
    node: str
    status: str  # ok | failed | timeout | not started | no answer
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float | None

    @property
    def answered(self) -> bool:
        return self.status != NO_ANSWER


@dataclass(frozen=True)
class StepRun:
    job_id: str
    srun_argv: tuple[str, ...]
    results: dict[str, NodeResult]  # one per requested node, in the requested order
    srun_returncode: int | None  # None when srun was stopped at the bound
    srun_stderr: str
    seconds: float

    @property
    def missing(self) -> list[str]:
        return [node for node, r in self.results.items() if not r.answered]


def command_time_limit(timeout: float) -> float:
    """Seconds each node's command gets within a step bounded by `timeout`: srun's share (timeout minus
    STOP_ALLOWANCE) less 30% of it, between 1 and 10 s, for srun's launch and a cold Python start on the node.
    A command with its own time limit should stay under this one to report before it is killed."""
    srun_budget = max(0.5, timeout - STOP_ALLOWANCE)
    return max(0.1, srun_budget - min(10.0, max(1.0, srun_budget * 0.3)))


def step_argv(job_id: str, nodes: list[str], command: list[str], *, payload_timeout: float,
              python: str = sys.executable) -> list[str]:
    """The srun argv for one overlapping step with one task per node, each running `command` under stepwrap."""
    return [
        "srun", f"--jobid={check_job_id(job_id)}", "--overlap", "--gres=gpu:0",
        f"--nodes={len(nodes)}", f"--nodelist={compress_nodelist(nodes)}",
        f"--ntasks={len(nodes)}", "--ntasks-per-node=1", "--kill-on-bad-exit=0", "--input=none", "--label",
        "--quit-on-interrupt", "--job-name=hangdoctor-step",
        python, "-S", STEPWRAP, f"--timeout={payload_timeout:g}", "--", *command,
    ]


def parse_step_output(stdout: str) -> tuple[dict[str, NodeResult], dict[str, str]]:
    """The nodes' records in srun's labelled stdout, and {node: why} for those whose frames did not all arrive."""
    records, incomplete = frames.decode(stdout.splitlines())  # srun's label before each frame tells tasks apart
    results = {}
    for sender, r in records:
        node = str(r.get("node") or sender)
        try:
            results[node] = NodeResult(node=node, status=r["status"], returncode=r["returncode"], stdout=r["stdout"],
                                       stderr=r["stderr"], seconds=r["seconds"])
        except KeyError as missing:  # not a step wrapper's record (another version of it on that node?)
            incomplete[node] = f"its report lacks {missing}"
    return results, incomplete


def _raise_for_step_failure(job_id: str, stderr: str) -> None:
    """srun could not create the step at all: say why in one line."""
    if "Invalid job id" in stderr:
        raise JobNotFound(f"job {job_id} not found (srun could not add a step to it)", "check the id with squeue")
    if "Access/permission denied" in stderr:
        raise NotJobOwner(f"srun was refused a step in job {job_id}: Access/permission denied",
                          "run as the job's owner: SLURM refuses to add a step to another user's job, even for root")
    line = next((l.strip() for l in stderr.splitlines() if "error" in l.lower()), stderr.strip()[:200])
    raise SlurmCommandFailed(f"srun could not run a step in job {job_id}: {line or 'no output'}",
                             "check the job with `scontrol show job` and that srun works from here",
                             stderr=stderr)


def run_step_on_each_node(job_id: str | int, nodes: list[str], command: list[str], timeout: float, *,
                          env: dict[str, str] | None = None, python: str = sys.executable) -> StepRun:
    """Run `command` once on each of `nodes` inside running job `job_id`; never longer than `timeout` seconds.

    The command gets most of the bound (it is killed on its node after that, and its partial output kept); the
    rest is left for srun to launch the tasks and return their lines. Raises only when srun could not create the
    step at all (no node answered and srun said why); otherwise every node has a NodeResult.
    """
    job_id = check_job_id(job_id)
    nodes = list(dict.fromkeys(nodes))  # one task per node, whatever the caller repeated
    if not nodes:
        raise ValueError("no nodes to run on")
    if not command:
        raise ValueError("no command to run")
    # Within the bound: srun gets all but STOP_ALLOWANCE s (then SIGINT, then SIGKILL); each node's command gets
    # less again, so that its own timeout fires and its partial output still reaches us through srun.
    srun_budget = max(0.5, timeout - STOP_ALLOWANCE)
    argv = step_argv(job_id, nodes, list(command), payload_timeout=command_time_limit(timeout), python=python)
    start = time.monotonic()
    try:
        proc = children.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              text=True, errors="replace", env=env)
    except FileNotFoundError:
        raise SlurmCommandMissing("srun not found on PATH", MISSING_HINT) from None
    try:
        out, err = proc.communicate(timeout=srun_budget)
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        out, err = _stop_srun(proc)
        returncode = None
    except BaseException:  # Ctrl-C or SIGTERM: the step is cancelled on the nodes before we go
        _stop_srun(proc)
        children.end(proc)
        raise
    children.end(proc)
    answered, incomplete = parse_step_output(out)
    if not answered and not incomplete and returncode not in (None, 0):
        _raise_for_step_failure(job_id, err)
    results = {
        node: answered.get(node) or NodeResult(node, NO_ANSWER, None, "", incomplete.get(node, ""), None)
        for node in nodes
    }
    return StepRun(job_id, tuple(argv), results, returncode, err, time.monotonic() - start)


def _stop_srun(proc: subprocess.Popen) -> tuple[str, str]:
    """SIGINT (with --quit-on-interrupt srun cancels the step and exits), then SIGKILL; keep what it printed."""
    kill_group(proc.pid, signal.SIGINT)
    try:
        return proc.communicate(timeout=0.5)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGKILL)
        try:
            return proc.communicate(timeout=0.8)
        except subprocess.TimeoutExpired:  # something outside the group holds srun's pipes
            return "", ""
