"""Print shell exports that turn tracing on for every Python process started from this shell, unmodified.

    eval "$(python -m tracing env --include deepspeed,megatron --out /scratch/traces)"
    srun python pretrain_gpt.py ...        # or torchrun ..., sbatch ... (the variables are inherited)

It sets HANGDOCTOR_TRACE to the settings and puts tracing/sitedir first on PYTHONPATH: the sitecustomize.py
there starts the tracer in every interpreter that sees HANGDOCTOR_TRACE (and then runs any other sitecustomize
that was on the path). Launchers (torchrun, python -m tracing) are not traced, nor children that inherit the
same rank from an already traced process (e.g. multiprocessing spawn workers). `ranks=` in the variable limits
tracing to some ranks. Undo with: unset HANGDOCTOR_TRACE.
"""

from __future__ import annotations

import argparse
import os
import shlex

from hangdoctor.clicore.errors import CommandError
from tracing.config import ENV_VAR, TraceConfig
from tracing.options import add_trace_options, config_from_args
from tracing.tracer import check_config

SITE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sitedir")

EXIT_CODES = {0: "the exports were printed", 2: "usage error: bad flags or settings, --out not a folder"}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_options(parser)
    parser.add_argument("--ranks", metavar="RANKS", help="only these ranks trace, e.g. 0-3,8")


def run(args: argparse.Namespace) -> int:
    """Refuses what the tracer would refuse: its own checks run on the settings as they come back from the
    variable, so that nothing is printed that leaves tracing silently off."""
    try:
        config = config_from_args(args, absolute_out=True)
        if args.ranks:
            from dataclasses import replace
            config = replace(config, ranks=args.ranks)
        text = config.to_env()
        check_config(TraceConfig.from_env(text))
    except ValueError as e:
        raise CommandError(str(e), exit_code=2) from None
    if os.path.exists(config.out) and not os.path.isdir(config.out):
        raise CommandError(f"out={config.out!r} exists and is not a folder", exit_code=2)
    print(f'export PYTHONPATH={shlex.quote(SITE_DIR)}"${{PYTHONPATH:+:$PYTHONPATH}}"')
    print(f"export {ENV_VAR}={shlex.quote(text)}")
    return 0
