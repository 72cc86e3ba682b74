"""Run a Python program under the tracer, without editing it.

    python -m tracing run --include deepspeed,megatron [options] -- pretrain_gpt.py ARGS...
    python -m tracing run --include trainer [options] -m trainer ARGS...

The program runs as __main__ in this process, as `python script.py` or `python -m module` would run it. Under
torchrun, put the wrapper where the script goes:
    torchrun --nproc-per-node 8 -m tracing run --include deepspeed -- pretrain_gpt.py ...
Under srun: srun python -m tracing run --include deepspeed -- pretrain_gpt.py ...
Each rank writes trace-{host}-{local_rank}-{pid}.ring (and .txt with --stream) into --out; its rank comes from
RANK / SLURM_PROCID and its local rank from LOCAL_RANK / SLURM_LOCALID. Returns the program's exit code.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
import traceback

from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, CommandError
from tracing.identity import current_identity
from tracing.options import VALUE_FLAGS, add_trace_options, config_from_args
from tracing.records import EXITED
from tracing.tee import tee_std_streams
from tracing.tracer import Tracer

RUNS_USER_PROGRAM = True  # its signals are the program's own (clicore.app leaves SIGTERM alone)
EXIT_CODES = {
    0: "the traced program's own exit code is returned (0 when it succeeded)",
    2: "usage error: bad flags or settings, no program, a script that does not exist",
    4: "tracing could not start (e.g. its ring file cannot be created); the program did not run",
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_options(parser)
    parser.add_argument("program_help", nargs="?", metavar="-- script.py ARGS | -m module ARGS",
                        help="the program to run and its arguments")


def split_program(argv: list[str]) -> tuple[list[str], list[str]]:
    """["run", "--include", "x", "--", "a.py", "-v"] -> (["run", "--include", "x"], ["a.py", "-v"])."""
    i = 1
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return argv[:i], argv[i + 1:]
        if token == "-m":
            return argv[:i], argv[i:]
        if token.startswith("-"):
            if token in VALUE_FLAGS:
                i += 1  # skip its value
            i += 1
            continue
        return argv[:i], argv[i:]
    return argv, []


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    program = args.program
    if not program or program == ["-m"]:
        raise CommandError("no program to run", exit_code=2,
                           hint="put it after the options: tracing run --include pkg -- script.py ARGS, or -m module ARGS")
    try:
        config = config_from_args(args)
        tracer = Tracer(config, current_identity())
    except ValueError as e:
        raise CommandError(str(e), exit_code=2) from None
    module = program[1] if program[0] == "-m" else None
    rest = program[2:] if module else program[1:]
    if module is None:
        script = program[0]
        if not os.path.isfile(script):
            raise CommandError(f"{script}: no such file", exit_code=2)
        sys.argv = [script, *rest]
        sys.path[0] = os.path.dirname(os.path.abspath(script))  # what `python script.py` puts first
    else:
        if sys.path[0] != os.getcwd():
            sys.path.insert(0, os.getcwd())  # what `python -m module` puts first
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise CommandError(f"no module named {module!r}", exit_code=2)
        sys.argv = [module, *rest]  # runpy replaces argv[0] with the module's file
    if config.tee:
        tee_std_streams(config.out, tracer.identity)
    try:
        tracer.start()
    except (OSError, RuntimeError) as e:
        raise CommandError(f"cannot start tracing: {e}", exit_code=EXIT_ENVIRONMENT) from None
    code = 0
    try:
        if module is None:
            runpy.run_path(program[0], run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = _exit_code(e)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:  # noqa: BLE001 - the program's own error: print it as python would
        traceback.print_exc()
        code = 1
    finally:
        tracer.close(exit_code=code, state=EXITED)
    return code
