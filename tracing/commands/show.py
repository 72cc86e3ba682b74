"""Print the events of one trace file as text lines, e.g. to read the ring of a rank that was killed.

    python -m tracing show traces/trace-node1-0-4242.ring [--tail N]

Each line: time, thread, kind, the function indented by depth, and its location; then each thread's open frames.
"""

from __future__ import annotations

import argparse

from hangdoctor.clicore.argtypes import non_negative_int
from hangdoctor.clicore.errors import EXIT_NOT_FOUND, CommandError
from tracing.commands.common import print_warnings
from tracing.render.text import clock, event_line
from tracing.tracedir import TraceInputError, read_trace_file


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a trace-*.ring or trace-*.txt file")
    parser.add_argument("--tail", type=non_negative_int, metavar="N", help="only the newest N events")


def run(args: argparse.Namespace) -> int:
    try:
        trace = read_trace_file(args.file, tail=args.tail)
    except TraceInputError as e:
        raise CommandError(str(e), hint=e.hint, exit_code=EXIT_NOT_FOUND) from None
    print_warnings(trace.warnings)
    ident = trace.identity
    print(f"# {ident.label}, {trace.source} file, {trace.state_word}"
          + (f" (exit code {trace.exit_code})" if trace.exit_code is not None else "")
          + f", started {clock(trace.start_wall_ns)}, {trace.total_events} events, " + _kept(trace, args.tail))
    names = {t.index: t.name for t in trace.threads}
    for e in trace.events:
        print(f"[{names.get(e.thread, e.thread)}] {event_line(e)}")
    for t in trace.threads:
        frames = " > ".join(f.qualname for f in t.open_frames) or "none"
        print(f"# open frames of {t.name}: {frames}")
    return 0


def _kept(trace, tail: int | None) -> str:
    """How many events the file still holds, and how many of those are shown: --tail leaves events out of the
    view, not out of the file."""
    shown = sum(len(t.events) for t in trace.threads)
    in_file = trace.in_file if trace.in_file is not None else shown + trace.dropped_events
    gone = f"{trace.total_events - in_file} no longer in the file"
    return gone + (f", the newest {shown} of the {in_file} in it shown (--tail {tail})" if tail is not None else "")
