"""`python -m hangdoctor.collector`: collect this node's ranks and print (or write) one JSON document.

Runs inside a job's extra step (srun --overlap), over pdsh, or locally. Stdlib only. Exit status: 0 when a
document was written (its "errors" say what went wrong on this node), 2 on bad arguments, 4 when py-spy
cannot be run here (the document is still written, with the reason).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

if __package__ in (None, ""):  # started by file path on a node: make `hangdoctor` importable from here
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from hangdoctor.collector import node  # noqa: E402


def parse_match(items: list) -> dict:
    match = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key:
            raise SystemExit(f"Error: --match {item!r}: expected KEY or KEY=VALUE")
        match[key] = value if sep else None
    return match


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hangdoctor.collector", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--py-spy", default="py-spy", help="py-spy executable (default: found on PATH)")
    parser.add_argument("--match", action="append", default=[], metavar="KEY[=VALUE]",
                        help="environment variable the job's processes carry, e.g. SLURM_JOB_ID=1234 (repeatable)")
    parser.add_argument("--pid", type=int, action="append", default=[], help="dump these PIDs instead of matching")
    parser.add_argument("--node", default=None, help="node name to report (default: SLURMD_NODENAME or host name)")
    parser.add_argument("--all-nodes", action="store_true",
                        help="keep processes whose SLURMD_NODENAME is another node's (default: this node's only)")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--native", action="store_true")
    parser.add_argument("--nonblocking", action="store_true")
    parser.add_argument("--locals", action="store_true", help="py-spy --locals: every frame's arguments and locals")
    parser.add_argument("--fr-dir", help="read the ranks' Flight Recorder dump files in this folder (on this node)")
    parser.add_argument("--flight-recorder", action="store_true",
                        help="fetch Flight Recorder traces from torch's debug worker servers (collector/flight.py)")
    parser.add_argument("--text", action="store_true", help="py-spy's text output instead of --json")
    parser.add_argument("--dump-timeout", type=float, default=10.0)
    parser.add_argument("--time-limit", type=float, default=None, help="seconds this collector may take in all")
    parser.add_argument("--out", default="-", help="output file (written atomically), or - for stdout")
    parser.add_argument("--chunked", action="store_true",
                        help=f"print the document as short '{CHUNK} NODE I N TEXT' lines (pdsh and srun cut long lines)")
    parser.add_argument("--progress", action="store_true", help="print 'hangdoctor-progress NODE DONE/TOTAL' on stderr")
    parser.add_argument("--pyspy-version", default="", help="py-spy's version when the caller knows it (else asked)")
    return parser


CHUNK = "hangdoctor-chunk"
CHUNK_SIZE = 800  # srun --label cuts lines at 1024 bytes, pdsh at 128 KiB


def write_chunked(doc: dict) -> None:
    text = json.dumps(doc, separators=(",", ":"))  # compact JSON has no newline
    pieces = [text[i:i + CHUNK_SIZE] for i in range(0, len(text), CHUNK_SIZE)] or [""]
    node_name = str(doc.get("node") or "node").replace(" ", "_")
    for index, piece in enumerate(pieces):
        sys.stdout.write(f"{CHUNK} {node_name} {index} {len(pieces)} {piece}\n")
    sys.stdout.flush()


def emit(doc: dict, args: argparse.Namespace) -> None:
    if args.chunked:
        write_chunked(doc)
    else:
        write(doc, args.out)


def write(doc: dict, out: str) -> None:
    text = json.dumps(doc, separators=(",", ":"))
    if out == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    if os.path.exists(out) and not os.path.isfile(out):  # /dev/null, a FIFO, a terminal: write into it, never
        with open(out, "w") as handle:                   # rename a file over it
            handle.write(text + "\n")
        return
    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "w") as handle:
        handle.write(text + "\n")
    os.replace(tmp, out)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.samples < 1 or args.interval < 0 or args.dump_timeout <= 0:
        print("Error: --samples must be >= 1, --interval >= 0 and --dump-timeout > 0", file=sys.stderr)
        return 2
    pyspy = shutil.which(args.py_spy) or args.py_spy
    name = args.node or node.node_name()
    if not (os.path.isfile(pyspy) and os.access(pyspy, os.X_OK)):
        emit({"format": node.FORMAT, "node": name, "processes": [], "skipped": [], "started": time.time(),
              "finished": time.time(), "fatal": "pyspy-missing",
              "errors": [f"py-spy not found or not executable at {args.py_spy!r} on {name}"]}, args)
        return 4
    deadline = time.time() + args.time_limit if args.time_limit else None

    def progress(done: int, total: int) -> None:
        print(f"hangdoctor-progress {name} {done}/{total}", file=sys.stderr, flush=True)

    doc = node.collect({
        "pyspy": pyspy, "match": parse_match(args.match), "pids": args.pid, "samples": args.samples,
        "interval": args.interval, "native": args.native, "nonblocking": args.nonblocking, "json": not args.text,
        "locals": args.locals, "flight_recorder": args.flight_recorder, "fr_dir": args.fr_dir,
        "dump_timeout": args.dump_timeout, "deadline": deadline, "node": name, "filter_node": not args.all_nodes,
        "pyspy_version": args.pyspy_version,
    }, progress if args.progress else None)
    emit(doc, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
