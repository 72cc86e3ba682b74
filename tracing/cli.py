"""`python -m tracing <verb>` (also the `tracing` console script): trace a program, then read its traces.

Verbs: run, env, last, diverge, export, show. Each lives in tracing/commands/<verb>.py; its docstring is its help.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from hangdoctor import __version__  # one distribution (pyproject.toml's "hangdoctor"), one version string

VERBS = ("run", "env", "last", "diverge", "export", "show")

EXIT_CODES = """exit codes:
  0  success (for run: the traced program's own exit code is returned)
  1  unreadable input: no trace files, an empty or corrupt file
  2  usage error: bad flags or settings"""


class CommandError(Exception):
    """A user-facing failure: one line on stderr, optionally a hint, and an exit code."""

    def __init__(self, message: str, exit_code: int = 1, hint: str | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.hint = hint


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one Error line (and a hint) with exit code 2, not argparse's usage block
        self.exit(2, f"Error: {message}\nHint: see `{self.prog} --help`\n")


def non_negative(text: str) -> int:
    """argparse type of counts such as --tail N."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tracing", description=__doc__.split("\n\n")[0], epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tracing {__version__}")
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for verb in VERBS:
        module = importlib.import_module(f"tracing.commands.{verb}")
        doc = module.__doc__ or ""
        sub = subparsers.add_parser(verb, help=doc.split("\n", 1)[0], description=doc,
                                    epilog=getattr(module, "EXIT_CODES", EXIT_CODES),
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.prepare_parser(sub)
        sub.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    program: list[str] = []
    if argv and argv[0] == "run":
        from tracing.commands.run import split_program
        argv, program = split_program(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse printed --help or --version, or one usage Error line
        return e.code if isinstance(e.code, int) else 2
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    args.program = program
    try:
        return args.handler(args)
    except CommandError as e:
        print(f"Error: {e}", file=sys.stderr)
        if e.hint:
            print(f"Hint: {e.hint}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # `tracing last DIR | head`
        return 0
