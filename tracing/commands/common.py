"""Helpers shared by the verbs: the traces or an error, warnings on stderr, a rich console (imported when used)."""

from __future__ import annotations

import sys

from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, EXIT_NOT_FOUND, CommandError


def traces_or_error(path: str, *, tail: int | None = None):
    """The trace files under `path` (tracedir.load_traces), or one `Error:` line and exit 3 when none can be read."""
    from tracing.tracedir import TraceInputError, load_traces
    try:
        return load_traces(path, tail=tail)
    except TraceInputError as e:
        raise CommandError(str(e), hint=e.hint, exit_code=EXIT_NOT_FOUND) from None


def print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"Warning: {warning}", file=sys.stderr)


def console():
    try:
        from rich.console import Console
    except ImportError:
        raise CommandError("the human-readable view needs the 'rich' package", exit_code=EXIT_ENVIRONMENT,
                           hint="pip install rich, or use --json") from None
    return Console(highlight=False)
