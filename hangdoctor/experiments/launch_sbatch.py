"""One batch job per run, through `slurm.sbatch`: render, submit, poll `scontrol show job`, `scancel`.

The script is slurm.sbatch's template running the trainer (trainer_job.py: `srun python -m trainer
--tensor-model-parallel-size TP ...`) or the user's own command (user_program.py: `srun CMD...`), with the
run's environment toggles exported before srun and every rank's output in RUN/train.log (sbatch --output).
The job runs in RUN/ (the user's command: in the folder `hangdoctor experiment` runs in, where its relative
paths point) with this process's environment (sbatch's default --export=ALL).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangdoctor.experiments.launch import LOG_NAME, JobState, Launched, LaunchError, free_port
from hangdoctor.experiments.matrix import RunSpec
from hangdoctor.experiments.trainer_job import trainer_batch_job
from hangdoctor.experiments.user_program import UserProgram
from slurm.jobstate import SlurmJobState
from slurm.errors import JobNotFound, SlurmCommandFailed, SlurmCommandMissing, SlurmError
from slurm.jobs import show_job
from slurm.nodelist import compress_nodelist
from slurm.process import run_command
from slurm.sbatch import TERMINAL_STATES, BatchJob, render_sbatch, submit, wait_until_done


class SbatchLauncher:
    name = "sbatch"

    def __init__(self, *, python: str, gpus_per_node: int | None = None, sbatch_options: dict[str, str] | None = None,
                 nodelist: list[str] | None = None, time_limit: str | None = None, master_port: int | None = None,
                 env: dict[str, str] | None = None, program: UserProgram | None = None):
        self.python = python
        self.program = program  # the user's per-rank command; None: the reference trainer
        self.nodelist = nodelist  # run on these nodes: a run of K nodes on the first K (sbatch wants them all used)
        self.gpus_per_node = gpus_per_node
        self.sbatch_options = dict(sbatch_options or {})
        self.time_limit = time_limit
        self.master_port = master_port
        self.env = env  # None: this process's environment (SLURM_CONF and all)
        self._states: dict[str, SlurmJobState] = {}  # job id -> its state reader (remembers scontrol failures)

    def job_for(self, spec: RunSpec, run_dir: Path) -> BatchJob:
        world = spec.config.gpus
        per_node = world if not self.gpus_per_node or world <= self.gpus_per_node else self.gpus_per_node
        options = dict(self.sbatch_options)
        nodes = world // per_node if world % per_node == 0 else 0
        if self.nodelist is not None:
            if nodes > len(self.nodelist):
                raise ValueError(f"configuration {spec.config.name!r} needs {nodes} nodes, --nodelist names "
                                 f"{len(self.nodelist)}")
            options["nodelist"] = compress_nodelist(self.nodelist[:nodes])
        batch = dict(env=spec.env, job_name=f"hdx-{spec.name}", output=str(run_dir / LOG_NAME),
                     time_limit=self.time_limit, master_port=self.master_port or 6000, sbatch_options=options)
        if self.program is not None:  # the user's own command, `srun CMD`
            job = BatchJob(program=tuple(self.program.command(spec, run_dir)), tasks=world, tasks_per_node=per_node,
                           description=spec.config.dims.describe(), **batch)
        else:
            job = trainer_batch_job(spec.config.dims, per_node, spec.trainer_args(run_dir),
                                    program=(self.python, "-m", "trainer"), **batch)
        try:
            job.check()
        except ValueError as exc:
            raise ValueError(f"configuration {spec.config.name!r}: {exc}") from None
        return job

    def describe(self, spec: RunSpec, run_dir: Path) -> str:
        return render_sbatch(self.job_for(spec, run_dir))

    def start(self, spec: RunSpec, run_dir: Path) -> Launched:
        job = self.job_for(spec, run_dir)
        if self.master_port is None:  # a fresh port per run: the previous run's may still be in TIME_WAIT
            job = replace(job, master_port=free_port())
        script = render_sbatch(job)
        (run_dir / "job.sbatch").write_text(script)
        try:
            job_id = submit(script, env=self.env, cwd=run_dir if self.program is None else None)
        except SlurmCommandMissing as exc:
            raise LaunchError(exc.message, exc.hint, fatal=True) from None
        except SlurmError as exc:
            raise LaunchError(exc.message, exc.hint or "run the script in the run's folder by hand: sbatch job.sbatch") from None
        return Launched(ident=f"job {job_id}", job_id=job_id, log_path=run_dir / LOG_NAME,
                        attach_args=["--jobid", job_id])

    def state(self, run: Launched) -> JobState:
        if run.job_id not in self._states:
            self._states[run.job_id] = SlurmJobState(run.job_id, self.env)
        return self._states[run.job_id]()

    def stop(self, run: Launched) -> str:
        """scancel unless the job is over, then wait (30 s at most) until SLURM says it is."""
        try:
            before = show_job(run.job_id, env=self.env, timeout=10.0).state
        except SlurmError:
            before = "UNKNOWN"
        if before in TERMINAL_STATES:
            return before
        result = run_command(["scancel", run.job_id], timeout=15.0, env=self.env)
        if not result.ok:
            return f"scancel failed: {result.first_error_line()}"
        try:
            return f"cancelled ({wait_until_done(run.job_id, timeout=30.0, env=self.env).state})"
        except JobNotFound:
            return "cancelled"
        except SlurmCommandFailed as exc:
            return f"cancelled, but {exc.message}"
