"""Find the first points where ranks' call sequences depart from their peers'.

    python -m tracing diverge traces/ [--thread NAME] [--max N] [--json]

Communication first: ranks are compared round by round (a round is one call of the training step: the trace's
--start-at function, else the function around the most communication calls), and a collective or p2p call that
some ranks stopped making (or made once more) while the others went on as before is named first, e.g. "in round
2 of PipelineEngine.train_batch, ranks 2-3 skipped PipelineEngine._aggregate_total_loss > broadcast ...; ranks
0-1 went on as before". Communication calls: functions whose names say broadcast, all_reduce, all_gather,
reduce_scatter, all_to_all, barrier, send or recv (torch.distributed, deepspeed.comm, a framework's wrappers).

Then events are compared by position in each rank's thread (the n-th event since tracing started), from the
first position every rank still has. All ranks start as one group; at the first position where they disagree
the group splits, and each branch is followed further; splits at a communication call come first. Ranks that
stopped (no more events, e.g. blocked in a collective) form their own branch. Pipeline stages differ by design:
look at the splits inside them. Works best when every rank started tracing at the same point (--start-at).
"""

from __future__ import annotations

import argparse

from hangdoctor.clicore.argtypes import non_negative_int
from tracing.analysis.diverge import diverge_report
from tracing.commands.common import console, print_warnings, traces_or_error
from tracing.render.jsonout import dumps

EXIT_CODES = {
    0: "the ranks made the same calls (or fewer than two ranks have events)",
    1: "the ranks diverged (the report says where)",
    2: "usage error: bad flags",
    3: "nothing to read: no trace files, an empty or corrupt file (one Error: line)",
    4: "the human-readable view needs the 'rich' package (--json does not)",
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR", help="folder of trace files")
    parser.add_argument("--thread", metavar="NAME", help="compare this thread (default: the main thread)")
    parser.add_argument("--max", type=non_negative_int, default=20, metavar="N",
                        help="report at most N splits (default 20)")
    parser.add_argument("--json", action="store_true", help="print the same data as JSON")


def run(args: argparse.Namespace) -> int:
    loaded = traces_or_error(args.path)
    report = diverge_report(args.path, loaded.traces, thread=args.thread, limit=args.max, warnings=loaded.warnings)
    print_warnings(report.warnings)
    code = 0 if report.identical else 1
    if args.json:
        print(dumps("tracing-diverge/1", report))
        return code
    view = console()  # first: it says so when rich is missing
    from tracing.render.diverge import render_diverge
    render_diverge(report, view)
    return code
