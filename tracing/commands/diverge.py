"""Find the first points where ranks' call sequences depart from their peers'.

    python -m tracing diverge traces/ [--thread NAME] [--max N] [--json]

Events are compared by position in each rank's thread (the n-th event since tracing started), from the first
position every rank still has. All ranks start as one group; at the first position where they disagree the
group splits, and each branch is followed further. Ranks that stopped (no more events, e.g. blocked in a
collective) form their own branch. Pipeline stages differ by design: look at the splits inside them. Works best
when every rank started tracing at the same point (--start-at).
"""

from __future__ import annotations

import argparse

from tracing.analysis.diverge import diverge_report
from tracing.cli import CommandError, non_negative
from tracing.commands.common import console, print_warnings
from tracing.render.jsonout import dumps
from tracing.tracedir import TraceInputError, load_traces


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR", help="folder of trace files")
    parser.add_argument("--thread", metavar="NAME", help="compare this thread (default: the main thread)")
    parser.add_argument("--max", type=non_negative, default=20, metavar="N",
                        help="report at most N splits (default 20)")
    parser.add_argument("--json", action="store_true", help="print the same data as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        loaded = load_traces(args.path)
    except TraceInputError as e:
        raise CommandError(str(e), hint=e.hint) from None
    report = diverge_report(args.path, loaded.traces, thread=args.thread, limit=args.max, warnings=loaded.warnings)
    print_warnings(report.warnings)
    if args.json:
        print(dumps(report))
        return 0
    view = console()  # first: it says so when rich is missing
    from tracing.render.diverge import render_diverge
    render_diverge(report, view)
    return 0
