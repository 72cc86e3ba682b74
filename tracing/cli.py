"""`python -m tracing <verb>` (also the `tracing` console script): trace a program, then read its traces.

Verbs: run, env, last, diverge, export, show. Each lives in tracing/commands/<verb>.py; its docstring is its help,
its EXIT_CODES its --help epilog. The shared core (clicore.app) maps every outcome to an exit code.
"""

from __future__ import annotations

import sys

from hangdoctor.clicore.app import Tool, ensure_streams, main as run_tool

VERBS = {
    "run": ("tracing.commands.run", "Run a Python program under the tracer, without editing it."),
    "env": ("tracing.commands.env",
            "Print shell exports that turn tracing on for every Python process started from this shell, unmodified."),
    "last": ("tracing.commands.last",
             "Show where every rank is: its frames still open and its last events, with ranks grouped across the job."),
    "diverge": ("tracing.commands.diverge",
                "Find the first points where ranks' call sequences depart from their peers'."),
    "export": ("tracing.commands.export",
               "Convert traces to Chrome trace-event JSON for Perfetto (ui.perfetto.dev) or chrome://tracing."),
    "show": ("tracing.commands.show",
             "Print the events of one trace file as text lines, e.g. to read the ring of a rank that was killed."),
}
READING_EXIT_CODES = {  # every verb that reads traces, unless it lists its own
    0: "success",
    2: "usage error: bad flags or settings",
    3: "nothing to read: no trace files, an empty or corrupt file (one Error: line)",
    4: "the human-readable view needs the 'rich' package (--json does not)",
}
TOOL = Tool(name="tracing", description=__doc__.split("\n\n")[0], verbs=VERBS, exit_codes=READING_EXIT_CODES,
            epilog="exit codes: each verb lists its own in `tracing VERB --help`; 2 is always a bad command line.")


def main(argv: list[str] | None = None) -> int:
    ensure_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    program: list[str] = []
    if argv and argv[0] == "run":  # the traced program's own arguments are not ours to parse
        from tracing.commands.run import split_program
        argv, program = split_program(argv)

    def call(module, args) -> int:
        args.program = program
        return module.run(args)

    return run_tool(TOOL, argv, call=call)


if __name__ == "__main__":
    sys.exit(main())
