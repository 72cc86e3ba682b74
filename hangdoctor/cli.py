"""`hangdoctor VERB ...`: the command line. `main(argv) -> int` maps every outcome to an exit code here: the one
`CommandError`, argparse's own exits (bad usage, --help) and Ctrl-C. Each verb's --help lists its exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from rich.console import Console

from hangdoctor import __version__
from hangdoctor.bulk import paused_gc
from hangdoctor.commands import COMMANDS
from hangdoctor.errors import EXIT_INTERRUPTED, EXIT_USAGE, CommandError, exit_codes_help


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit code 2, as everywhere else
        self.exit(EXIT_USAGE, f"Error: {message}\nHint: see `{self.prog} --help`\n")


MAIN_EPILOG = """exit codes: each verb lists its own in `hangdoctor VERB --help`; for every verb 0 is success,
2 a bad command line and 130 an interruption."""


def chosen_verb(argv: list[str]) -> str | None:
    """The verb on the command line (the first word that is not an option), if it is one of ours."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """Every verb is listed; only `verb`'s module is imported and its options added (the others are not needed)."""
    parser = _Parser(prog="hangdoctor", description="Collect every rank's stack from a hung distributed job and "
                     "say who is stuck where.", epilog=MAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hangdoctor {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name, (module_name, summary) in COMMANDS.items():
        if name != verb:
            verbs.add_parser(name, help=summary, add_help=False)
            continue
        module = importlib.import_module(module_name)
        sub = verbs.add_parser(name, help=summary, description=(module.__doc__ or summary).strip(),
                               epilog=exit_codes_help(module.EXIT_CODES),
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        module.prepare_parser(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None, *, out: Console | None = None, err: Console | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(chosen_verb(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its help, version or one-line usage error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not getattr(args, "verb", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    # Piped into a file, rich would wrap at 80 columns and mangle saved logs: a pipe gets 160 unless COLUMNS says
    piped = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    out = out or Console(highlight=False, soft_wrap=False, emoji=False, width=piped)
    err = err or Console(stderr=True, highlight=False, emoji=False)
    try:
        if args.verb in ("analyze", "attach"):  # a million small objects at 100k ranks
            with paused_gc():
                return args._module.run(args, out, err)
        return args._module.run(args, out, err)
    except CommandError as exc:
        err.print(f"Error: {exc.message}", markup=False, highlight=False, soft_wrap=True)
        if exc.hint:
            err.print(f"Hint: {exc.hint}", markup=False, highlight=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("Error: interrupted", markup=False)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
