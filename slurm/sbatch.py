"""sbatch scripts for a distributed program, one task per rank; submission and a bounded wait.

    job = BatchJob(program=["python", "train.py", "--layers", "4"], tasks=8, tasks_per_node=4,
                   env={"CUDA_LAUNCH_BLOCKING": "1"})
    script = render_sbatch(job)          # nodes = tasks / tasks_per_node; MASTER_ADDR from the node list
    job_id = submit(script, env=cluster.env())
    final = wait_until_done(job_id, timeout=120, env=cluster.env())

The script runs `srun PROGRAM...`, one task per GPU; the program reads SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS
(topology.launcher) and MASTER_ADDR/MASTER_PORT. MASTER_ADDR is the address SLURM has for the first node of the
allocation (its NodeAddr, which is its host name on a usual cluster and 127.0.0.1 on the local test cluster).
Every value is shell-quoted. What the program is (e.g. the trainer with its topology flags) is the caller's:
experiments/trainer_job.py builds the trainer's.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from slurm.errors import SlurmCommandFailed
from slurm.jobs import Job, show_job
from slurm.process import run_command

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OPTION = re.compile(r"^[a-z][a-z0-9-]*$")
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                   "BOOT_FAIL", "DEADLINE"}


@dataclass(frozen=True)
class BatchJob:
    program: tuple[str, ...] | list[str]  # what every task runs, e.g. ("python", "-m", "trainer", "--pp", "2")
    tasks: int  # ranks in all
    tasks_per_node: int  # ranks per node: the GPUs of a node
    env: dict[str, str] = field(default_factory=dict)  # toggles exported before srun, e.g. CUDA_LAUNCH_BLOCKING=1
    job_name: str = "hangdoctor-job"
    output: str = "%x-%j.out"  # sbatch's --output pattern
    gpus_per_node: int = 0  # >0 adds --gres=gpu:N
    time_limit: str | None = None  # e.g. "01:00:00"
    master_port: int = 6000
    kill_on_bad_exit: bool = True  # one dead rank ends the step (srun --kill-on-bad-exit)
    sbatch_options: dict[str, str] = field(default_factory=dict)  # e.g. {"partition": "gpu_p5", "account": "six"}
    description: str = ""  # said in the script's first comment, e.g. "TP=2 PP=2 DP=2 (8 ranks, ...)"

    @property
    def nodes(self) -> int:
        return self.tasks // self.tasks_per_node

    def check(self) -> None:
        if not self.program:
            raise ValueError("the job has no program to run")
        if self.tasks < 1 or self.tasks_per_node < 1 or self.tasks % self.tasks_per_node:
            what = f" ({self.description})" if self.description else ""
            raise ValueError(f"{self.tasks} ranks{what} do not fill nodes of {self.tasks_per_node} tasks evenly")
        for name, value in self.env.items():
            if not _ENV_NAME.match(name):
                raise ValueError(f"bad environment variable name {name!r}: use letters, digits and _")
            if "\n" in str(value):
                raise ValueError(f"environment value for {name} contains a newline")
        for option, value in self.sbatch_options.items():
            if not _OPTION.match(option) or "\n" in str(value):
                raise ValueError(f"bad sbatch option {option}={value!r}")
        if not 0 < self.master_port < 65536:
            raise ValueError(f"master port {self.master_port} is not a TCP port")


def render_sbatch(job: BatchJob) -> str:
    job.check()
    q = shlex.quote
    header = [
        f"--job-name={job.job_name}",
        f"--nodes={job.nodes}",
        f"--ntasks-per-node={job.tasks_per_node}",
        f"--output={job.output}",
    ]
    if job.gpus_per_node:
        header.append(f"--gres=gpu:{job.gpus_per_node}")
    if job.time_limit:
        header.append(f"--time={job.time_limit}")
    header += [f"--{option}={value}" for option, value in job.sbatch_options.items()]
    srun = ["srun", f"--kill-on-bad-exit={int(job.kill_on_bad_exit)}", *job.program]
    lines = [
        "#!/bin/bash",
        f"# Rendered by slurm/sbatch.py: {job.description or f'{job.tasks} ranks'} on {job.nodes} node(s) x "
        f"{job.tasks_per_node} tasks.",
        *(f"#SBATCH {q(h)}" for h in header),
        "set -euo pipefail",
        "",
        "# Rendezvous on the first node of the allocation, at the address SLURM has for it (NodeAddr).",
        'first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)',
        'MASTER_ADDR=$(scontrol show node "$first_node" | grep -o "NodeAddr=[^ ]*" | cut -d= -f2 || true)',
        'export MASTER_ADDR=${MASTER_ADDR:-$first_node}',
        f"export MASTER_PORT={job.master_port}",
    ]
    if job.env:
        lines += ["", "# Toggles of this run"]
        lines += [f"export {name}={q(str(value))}" for name, value in job.env.items()]
    lines += ["", " ".join(q(a) for a in srun), ""]
    return "\n".join(lines)


def submit(script: str, *, env: dict[str, str] | None = None, cwd: str | Path | None = None,
           timeout: float = 30.0, extra_args: list[str] | None = None) -> str:
    """sbatch the script text (through stdin); return the job id."""
    result = run_command(["sbatch", "--parsable", *(extra_args or [])], timeout=timeout, env=env, cwd=cwd,
                         input=script)
    return _job_id(result)


def submit_file(path: str | Path, *, extra_args: list[str] | None = None, script_args: list[str] | None = None,
                env: dict[str, str] | None = None, cwd: str | Path | None = None, timeout: float = 30.0) -> str:
    """sbatch a script file as it is (its #SBATCH lines; `extra_args` before it override them); return the job id."""
    result = run_command(["sbatch", "--parsable", *(extra_args or []), str(path), *(script_args or [])],
                         timeout=timeout, env=env, cwd=cwd)
    return _job_id(result)


def _job_id(result) -> str:
    if not result.ok:
        raise SlurmCommandFailed(f"sbatch failed: {result.first_error_line()}", stderr=result.stderr,
                                 returncode=result.returncode)
    job_id = result.stdout.strip().split(";")[0]  # "123" or "123;cluster"
    if not job_id.isdigit():
        raise SlurmCommandFailed(f"sbatch printed no job id: {result.stdout.strip()!r}")
    return job_id


def wait_for_state(job_id: str, states: set[str], *, timeout: float, env: dict[str, str] | None = None,
                   interval: float = 0.2) -> Job:
    """Poll `scontrol show job` until the job is in one of `states`; SlurmCommandFailed at the bound."""
    deadline = time.monotonic() + timeout
    while True:
        job = show_job(job_id, env=env)
        if job.state in states:
            return job
        if time.monotonic() >= deadline:
            raise SlurmCommandFailed(
                f"job {job_id} still {job.state} after {timeout:.0f}s (waited for {', '.join(sorted(states))})"
            )
        time.sleep(interval)


def wait_until_done(job_id: str, *, timeout: float, env: dict[str, str] | None = None) -> Job:
    return wait_for_state(job_id, TERMINAL_STATES, timeout=timeout, env=env)
