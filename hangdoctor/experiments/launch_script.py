"""The user's own batch script, submitted as it is once per run (`--sbatch-script FILE`).

    sbatch --parsable --export=ALL,CUDA_LAUNCH_BLOCKING=1,HANGDOCTOR_TP=2,... FILE [CONFIG WORDS] [FLAG TOGGLES]

The script is never rewritten: its #SBATCH lines (nodes, tasks, partition, --output) decide the job. The run's
environment toggles and its configuration (HANGDOCTOR_TP, HANGDOCTOR_PP, HANGDOCTOR_DP, HANGDOCTOR_GPUS,
HANGDOCTOR_RUN_DIR) are exported to it; a configuration's other words and the flag toggles are its arguments
("$@"). `--sbatch-option`, `--exclude` and `--time-limit` go on sbatch's command line, where they override the
script's line of the same name. It is submitted from the folder `hangdoctor experiment` runs in, as the user
would submit it, so its relative paths hold. Its output file is the job's StdOut as `scontrol show job` gives it;
RUN/train.log links to it. State, attach (`--jobid`) and stop are the sbatch launcher's.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from hangdoctor.experiments.launch import LOG_NAME, Launched, LaunchError
from hangdoctor.experiments.launch_sbatch import SbatchLauncher
from hangdoctor.experiments.matrix import RunSpec
from hangdoctor.experiments.user_program import extra_words
from slurm.errors import SlurmCommandMissing, SlurmError
from slurm.jobs import show_job
from slurm.sbatch import submit_file

PREFIX = "HANGDOCTOR_"


class ScriptLauncher(SbatchLauncher):
    name = "sbatch-script"

    def __init__(self, *, script: Path, sbatch_options: dict[str, str] | None = None, time_limit: str | None = None,
                 env: dict[str, str] | None = None):
        super().__init__(python="", sbatch_options=sbatch_options, time_limit=time_limit, env=env)
        self.script = script.resolve()

    def exports(self, spec: RunSpec, run_dir: Path) -> dict[str, str]:
        dims = spec.config.dims
        values = {**spec.env, f"{PREFIX}TP": str(dims.tp), f"{PREFIX}PP": str(dims.pp), f"{PREFIX}DP": str(dims.dp),
                  f"{PREFIX}GPUS": str(dims.world_size), f"{PREFIX}RUN_DIR": str(run_dir)}
        for name, value in values.items():
            if "," in value:  # sbatch --export splits on commas
                raise ValueError(f"{name}={value!r}: a value exported to a batch script cannot hold a comma")
        return values

    def argv(self, spec: RunSpec, run_dir: Path) -> list[str]:
        """sbatch's command line for this run."""
        options = [f"--{key}={value}" for key, value in self.sbatch_options.items()]
        if self.time_limit:
            options.append(f"--time={self.time_limit}")
        export = ",".join(["ALL", *(f"{k}={v}" for k, v in self.exports(spec, run_dir).items())])
        return ["sbatch", "--parsable", f"--export={export}", *options,
                str(self.script), *extra_words(spec, run_dir)]

    def describe(self, spec: RunSpec, run_dir: Path) -> str:
        return " ".join(shlex.quote(word) for word in self.argv(spec, run_dir))

    def start(self, spec: RunSpec, run_dir: Path) -> Launched:
        argv = self.argv(spec, run_dir)
        (run_dir / "command.txt").write_text(self.describe(spec, run_dir) + "\n")
        script_at = argv.index(str(self.script))
        try:
            job_id = submit_file(self.script, extra_args=argv[2:script_at], script_args=argv[script_at + 1:],
                                 env=self.env)
        except SlurmCommandMissing as exc:
            raise LaunchError(exc.message, exc.hint, fatal=True) from None
        except SlurmError as exc:
            raise LaunchError(exc.message, exc.hint or f"submit it by hand: {self.describe(spec, run_dir)}") from None
        try:
            log = Path(output_path(show_job(job_id, env=self.env, timeout=10.0).stdout_path, job_id))
        except SlurmError as exc:  # submitted but not to be watched: not left running either
            stopped = self.stop(Launched(ident=f"job {job_id}", job_id=job_id))
            raise LaunchError(f"job {job_id}: {exc.message} (its output file is unknown; {stopped})",
                              exc.hint) from None
        link = run_dir / LOG_NAME
        if log != link:
            link.symlink_to(log)
        return Launched(ident=f"job {job_id}", job_id=job_id, log_path=log, attach_args=["--jobid", job_id])


def output_path(stdout: str, job_id: str) -> str:
    """The job's StdOut with the patterns a single file can carry filled in (%j, %A: the job id; %%)."""
    if not stdout:
        return str(Path.cwd() / f"slurm-{job_id}.out")  # sbatch's default
    return stdout.replace("%%", "\0").replace("%j", job_id).replace("%A", job_id).replace("\0", "%")
