"""Convert traces to Chrome trace-event JSON for Perfetto (ui.perfetto.dev) or chrome://tracing.

    python -m tracing export traces/ -o trace.json [--ranks 0-7]

All ranks go into one file with pid = rank and tid = thread; frames still open at the end show as slices that
did not end.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hangdoctor.clicore.errors import EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from hangdoctor.clicore.outputs import refuse_overwrite
from tracing.chrome import write_chrome_trace
from tracing.commands.common import print_warnings, traces_or_error

EXIT_CODES = {
    0: "the JSON was written",
    2: "usage error: bad flags, or the output file cannot be written",
    3: "nothing to read: no trace files, an empty or corrupt file, or none of --ranks among them (one Error: line)",
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR", help="folder of trace files (or one trace file)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the JSON ('-' = stdout)")
    parser.add_argument("--ranks", metavar="RANKS", help="only these ranks, e.g. 0-3,8")


def run(args: argparse.Namespace) -> int:
    loaded = traces_or_error(args.path)
    traces = loaded.traces
    if args.ranks:
        from hangdoctor.topology import parse_ranks
        try:
            wanted = set(parse_ranks(args.ranks))
        except ValueError as e:
            raise CommandError(str(e), exit_code=2) from None
        traces = [t for t in traces if t.identity.rank in wanted]
        if not traces:
            raise CommandError(f"none of ranks {args.ranks} is in {args.path}", exit_code=EXIT_NOT_FOUND)
    print_warnings(loaded.warnings)
    if args.output == "-":
        count = write_chrome_trace(traces, sys.stdout)
    else:
        refuse_overwrite(Path(args.output), [Path(args.path)], "-o")  # never over a ring it reads
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                count = write_chrome_trace(traces, out)
        except OSError as e:
            raise CommandError(f"{args.output}: {e.strerror or e}", exit_code=EXIT_USAGE) from None
        print(f"wrote {count} trace events of {len(traces)} rank(s) to {args.output}")
    return 0
