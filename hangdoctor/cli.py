"""`hangdoctor VERB ...`: the command line, on the shared core (clicore.app: one error type, every exit mapped in
one place, only the chosen verb imported). Here: the verbs' consoles, and the GC paused for the big analyses."""

from __future__ import annotations

import os
import sys

from rich.console import Console

from hangdoctor.clicore.app import Tool, build_parser as _build_parser, ensure_streams, main as run_tool
from hangdoctor.clicore.bulk import paused_gc
from hangdoctor.commands import COMMANDS

TOOL = Tool(
    name="hangdoctor",
    description="Collect every rank's stack from a hung distributed job and say who is stuck where.",
    verbs=COMMANDS,
    epilog="exit codes: each verb lists its own in `hangdoctor VERB --help`; for every verb 0 is success,\n"
           "2 a bad command line and 130 an interruption.",
)


def build_parser(verb: str | None = None):
    return _build_parser(TOOL, verb)


def main(argv: list[str] | None = None, *, out: Console | None = None, err: Console | None = None) -> int:
    ensure_streams()
    if argv is None:  # run as a program (not called in-process): orphans of our children become ours to end
        from hangdoctor.clicore.children import become_subreaper
        become_subreaper()
    argv = sys.argv[1:] if argv is None else list(argv)
    # Piped into a file, rich would wrap at 80 columns and mangle saved logs: a pipe gets 160 unless COLUMNS says
    piped = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    out = out or Console(highlight=False, soft_wrap=False, emoji=False, width=piped)
    err = err or Console(stderr=True, highlight=False, emoji=False)

    def call(module, args) -> int:
        if args.verb in ("analyze", "attach"):  # a million small objects at 100k ranks
            with paused_gc(freeze=True):
                return module.run(args, out, err)
        return module.run(args, out, err)

    return run_tool(TOOL, argv, call=call,
                    report=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))


if __name__ == "__main__":
    sys.exit(main())
