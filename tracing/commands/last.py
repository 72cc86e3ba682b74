"""Show where every rank is: its frames still open and its last events, with ranks grouped across the job.

    python -m tracing last traces/            # works while the job hangs, and after its ranks were killed
    python -m tracing last traces/ --json

Ranks whose main thread has the same open frames and condition form one group, e.g. "ranks 0-5 · running ·
silent for 41 s: inside train > all_reduce". A rank is "dead" when its trace never recorded an exit and its
process is gone (checked on this host only; "unknown" elsewhere), "suspended" when it is stopped (SIGSTOP).
"""

from __future__ import annotations

import argparse
import sys
import time

from hangdoctor.clicore.argtypes import non_negative_int
from tracing.analysis.last import last_report
from tracing.commands.common import console, print_warnings, traces_or_error
from tracing.liveness import process_status
from tracing.render.jsonout import dumps


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR", help="folder of trace files (or one trace file)")
    parser.add_argument("--events", type=non_negative_int, default=8, metavar="N",
                        help="last events to show per rank (default 8)")
    parser.add_argument("--all-threads", action="store_true", help="also show the open frames of other threads")
    parser.add_argument("--json", action="store_true", help="print the same data as JSON")


def run(args: argparse.Namespace) -> int:
    # The newest thousand events suffice: open frames come from the ring's stack slots, not from events.
    loaded = traces_or_error(args.path, tail=max(1024, 64 * args.events))
    statuses = {
        t.identity.rank: process_status(t.identity.host, t.identity.pid, t.identity.argv[0] if t.identity.argv else None)
        for t in loaded.traces
    }
    report = last_report(args.path, loaded.traces, statuses, time.time_ns(), events=args.events,
                         warnings=loaded.warnings)
    print_warnings(report.warnings)
    if args.json:
        print(dumps("tracing-last/1", report))
        return 0
    view = console()  # first: it says so when rich is missing
    from tracing.render.last import render_last
    render_last(report, view, all_threads=args.all_threads)
    sys.stdout.flush()
    return 0
