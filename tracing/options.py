"""The tracing flags shared by `run` and `env`, defined once, and their translation into a TraceConfig."""

from __future__ import annotations

import argparse
import os

from tracing.backends import BACKENDS
from tracing.config import DEFAULT_RING, TraceConfig

# Flags of `run` that take a value: `run` needs them to find where the program's own arguments begin.
VALUE_FLAGS = ("--include", "--exclude", "--out", "--ring", "--start-at", "--backend")


def add_trace_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include", action="append", default=[], metavar="PATTERNS",
                        help="code to trace: comma-separated module prefixes, globs, module:Qualname globs or paths; "
                             "__main__ is the program's script (repeatable)")
    parser.add_argument("--exclude", action="append", default=[], metavar="PATTERNS",
                        help="code to leave out even when included (same forms; repeatable)")
    parser.add_argument("--out", default="traces", metavar="DIR",
                        help="folder for the per-rank files trace-{host}-{local_rank}-{pid}.ring/.txt (default: traces)")
    parser.add_argument("--ring", type=int, default=DEFAULT_RING, metavar="N",
                        help=f"call-ring size in events, 32 bytes each; 0 = no ring file (default: {DEFAULT_RING})")
    parser.add_argument("--stream", action="store_true",
                        help="also write every event as a line of trace-*.txt (use with --ring 0 for stream only)")
    parser.add_argument("--start-at", metavar="FUNC",
                        help="begin when FUNC is first entered: train_step, Class.method or pkg.module:Class.method")
    parser.add_argument("--c-calls", action="store_true", help="also record C functions called from traced code")
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="auto: the C hook (c) where it builds, else sys.monitoring on 3.12+ and settrace before; "
                             "setprofile with --c-calls before 3.12")
    parser.add_argument("--tee", action="store_true",
                        help="copy stdout and stderr into stdout-{host}-{local_rank}-{pid}.txt in --out")


def config_from_args(args: argparse.Namespace, absolute_out: bool = False) -> TraceConfig:
    """Raises ValueError with a one-line message on bad settings."""
    return TraceConfig(
        include=tuple(args.include), exclude=tuple(args.exclude),
        out=os.path.abspath(args.out) if absolute_out else args.out, ring=args.ring, stream=args.stream,
        start_at=args.start_at, c_calls=args.c_calls, backend=args.backend, tee=args.tee,
    )
