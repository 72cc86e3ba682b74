"""`experiment`'s flags that name the user's own job (--program, --sbatch-script, --iteration-regex), checked
before anything runs: every mistake is one CommandError line (exit 2) with a hint."""

from __future__ import annotations

import argparse
import re

from hangdoctor.clicore.errors import EXIT_USAGE, CommandError
from hangdoctor.experiments.matrix import Matrix
from hangdoctor.experiments.user_program import UserProgram, check_placeholders, parse_program

SCRIPT_REFUSES = (("gpus_per_node", "--gpus-per-node"), ("nodelist", "--nodelist"), ("master_port", "--master-port"))


def iteration_pattern(text: str | None) -> re.Pattern | None:
    """--iteration-regex compiled as `hangdoctor watch` compiles it, and holding the iteration and its time."""
    if text is None:
        return None
    from hangdoctor.throughput.progress import compile_iteration_regex
    from hangdoctor.throughput.regex_log import EXAMPLE, check_timed

    try:
        pattern = compile_iteration_regex(text)
        check_timed(pattern)
    except ValueError as exc:
        raise CommandError(str(exc), hint=f"e.g. --iteration-regex {EXAMPLE}", exit_code=EXIT_USAGE) from None
    return pattern


def user_job(args: argparse.Namespace) -> UserProgram | None:
    """The --program to run (None: the reference trainer, or --sbatch-script's own job)."""
    if args.program is not None and args.sbatch_script is not None:
        raise CommandError("--program and --sbatch-script are two ways to run your job: give one",
                           hint="--sbatch-script runs your batch script as it is (its srun line is its program)",
                           exit_code=EXIT_USAGE)
    if args.sbatch_script is not None:
        if args.launcher == "torchrun":
            raise CommandError("--sbatch-script submits a batch job: it takes no --launcher torchrun",
                               hint="use --program \"CMD\" --launcher torchrun to run locally", exit_code=EXIT_USAGE)
        given = [flag for name, flag in SCRIPT_REFUSES if getattr(args, name) is not None]
        if given:
            raise CommandError(f"{given[0]} shapes the batch script hangdoctor writes, not yours (--sbatch-script)",
                               hint="put it in your script's #SBATCH lines", exit_code=EXIT_USAGE)
        if not args.sbatch_script.is_file():
            what = "is not a file" if args.sbatch_script.exists() else "does not exist"
            raise CommandError(f"--sbatch-script {args.sbatch_script} {what}", hint="give your job's batch script",
                               exit_code=EXIT_USAGE)
        return None
    if args.program is None:
        return None
    try:
        return parse_program(args.program)
    except ValueError as exc:
        raise CommandError(str(exc), hint='e.g. --program "python train.py --tp {tp} --save {run_dir}"',
                           exit_code=EXIT_USAGE) from None


def check_config_words(matrix: Matrix) -> None:
    """A configuration's words follow the user's command: their placeholders must be known ones too."""
    try:
        for config in matrix.configs:
            check_placeholders(config.trainer_args, f"configuration {config.name!r}")
    except ValueError as exc:
        raise CommandError(str(exc), hint="see `hangdoctor experiment --help`", exit_code=EXIT_USAGE) from None


def recorded_job(args: argparse.Namespace) -> dict[str, str]:
    """What matrix.json records of the job besides the matrix (--resume refuses another)."""
    job = {"program": args.program, "sbatch_script": str(args.sbatch_script.resolve()) if args.sbatch_script else None,
           "iteration_regex": args.iteration_regex}
    return {key: value for key, value in job.items() if value is not None}
