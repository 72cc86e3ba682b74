"""The command-line core shared by `hangdoctor`, `weightdiff` and `tracing` (standard library only).

One error type, one set of exit codes, one `main(argv) -> int` that owns every exit, `--version`, per-verb exit
codes in `--help`, and the `format` key of every `--json` document. Each tool keeps its own verbs, one module
each (`prepare_parser(parser)`, `run(...)`, `EXIT_CODES`, its docstring as its help); only the verb being run is
imported, so `--help` and a verb's start pay for nothing else.

    clicore.errors    CommandError(message, *, hint, exit_code) and the exit codes
    clicore.app       Tool (name, verbs, epilog) and main(tool, argv, call=..., report=...)
    clicore.jsondoc   document(kind, payload): {"format": "<kind>/<n>", "version": ..., ...}
    clicore.children  spawn/end/owned: every child in its own process group, ended with the verb (or signal)
    clicore.outputs   refuse_overwrite/hold_folder: no output over an input or collected evidence

It imports neither torch nor rich: `tracing` runs under whatever Python a job uses, with nothing installed.
"""

__version__ = "0.1.0"  # the distribution's version (pyproject.toml reads it from here)
