"""`python -m hangdoctor.collector`: collect this node's ranks and print (or write) one JSON document.

Runs inside a job's extra step (srun --overlap), over pdsh, or locally. Stdlib only. Exit status: 0 when a
document was written (its "errors" say what went wrong on this node), 2 on bad arguments, 4 when neither py-spy
nor pystack (--pystack, the second reader) can be run here (the document is still written, with the reason).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import stat
import sys
import threading
import time

if __package__ in (None, ""):  # started by file path on a node: make `hangdoctor` and `slurm` importable from here
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from hangdoctor.clicore import children  # noqa: E402
from hangdoctor.collector import node  # noqa: E402
from hangdoctor.collector.document import PYSPY_MISSING, NodeDocument  # noqa: E402
from hangdoctor.collector.options import add_arguments, from_namespace  # noqa: E402
from slurm import frames  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hangdoctor.collector", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)  # what to sample and which processes: collector/options.py, the one contract
    parser.add_argument("--time-limit", type=float, default=None, help="seconds this collector may take in all")
    parser.add_argument("--out", default="-", help="output file (written atomically), or - for stdout")
    parser.add_argument("--chunked", action="store_true",
                        help="print the document as short numbered frame lines (slurm/frames.py: pdsh and srun "
                             "cut and prefix long lines)")
    parser.add_argument("--progress", action="store_true", help="print 'hangdoctor-progress NODE DONE/TOTAL' on stderr")
    return parser


def write_chunked(doc: dict) -> None:
    sys.stdout.write("".join(line + "\n" for line in frames.encode(doc, str(doc.get("node") or "node"))))
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


def end_when_reader_leaves(fd: int) -> None:
    """pdsh (-R exec, or ssh) starts this collector in a session of its own: when pdsh is killed, no signal
    reaches us, only our stdout's reader is gone. A daemon thread sees that (POLLERR/POLLHUP on the pipe or
    socket) and sends this process SIGTERM, which children.owned() turns into ending our py-spys and ourselves."""
    try:
        if not (stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode)):
            return
        poller = select.poll()
        poller.register(fd, 0)  # errors and hang-ups are always reported
    except (OSError, AttributeError):
        return

    def watch() -> None:
        while not poller.poll(500):
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="hangdoctor-reader-watch", daemon=True).start()


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        options, selection = from_namespace(args)
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    options.pyspy = shutil.which(options.pyspy) or options.pyspy
    options.pystack = options.pystack and (shutil.which(options.pystack) or options.pystack)
    selection.node = selection.node or node.node_name()
    name = selection.node
    if not node.runnable(options.pyspy) and not node.runnable(options.pystack):
        emit(NodeDocument(node=name, finished=time.time(), fatal=PYSPY_MISSING,
                          errors=[f"py-spy not found or not executable at {args.pyspy!r} on {name}"]).to_wire(), args)
        return 4
    deadline = time.time() + args.time_limit if args.time_limit else None

    def progress(done: int, total: int) -> None:
        print(f"hangdoctor-progress {name} {done}/{total}", file=sys.stderr, flush=True)

    if args.chunked or args.out == "-":
        end_when_reader_leaves(sys.stdout.fileno())
    try:
        with children.owned():  # srun cancelled, pdsh killed, Ctrl-C: our py-spys end with us
            doc = node.collect(options, selection, deadline=deadline, progress=progress if args.progress else None)
    except KeyboardInterrupt:
        print(f"Error: collector on {name} interrupted", file=sys.stderr)
        return 130
    emit(doc, args)
    return 0


if __name__ == "__main__":
    children.become_subreaper()  # a wrapper's daemon (setsid) becomes ours, and ends with us
    sys.exit(main())
