"""Flags and steps that `attach` and `analyze` share: topology, output formats, showing a verdict."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from hangdoctor.clicore.argtypes import MAX_RANKS, positive_int, rank_count
from hangdoctor.clicore.errors import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, CommandError
from hangdoctor.clicore.outputs import refuse_overwrite
from hangdoctor.topology import DEFAULT_ORDER, parse_order

if TYPE_CHECKING:  # imported where used: `attach` needs them only once the stacks are in
    from hangdoctor.analysis.verdict import Verdict
    from hangdoctor.identity import TopologyFlags


def add_topology_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("topology (default: from the ranks' argv and WORLD_SIZE)")
    group.add_argument("--tp", type=rank_count, help="tensor-parallel size")
    group.add_argument("--pp", type=rank_count, help="pipeline-parallel size")
    group.add_argument("--dp", type=rank_count, help="data-parallel size (default: world / (tp x pp))")
    group.add_argument("--order", default=DEFAULT_ORDER,
                       help=f"rank order, fastest-varying axis first (default {DEFAULT_ORDER}, Megatron's)")
    group.add_argument("--world-size", type=rank_count, help="number of ranks expected (default: WORLD_SIZE)")


def check_order(args: argparse.Namespace) -> None:
    try:
        parse_order(args.order)
    except ValueError as exc:
        raise CommandError(str(exc), hint="e.g. --order tp-dp-pp", exit_code=EXIT_USAGE) from None


def topology_flags(args: argparse.Namespace) -> TopologyFlags:
    from hangdoctor.identity import TopologyFlags

    check_order(args)
    sizes = [size for size in (args.tp, args.pp, args.dp) if size is not None]
    if math.prod(sizes) > MAX_RANKS or (args.world_size or 0) > MAX_RANKS:
        raise CommandError(f"--tp x --pp x --dp is {math.prod(sizes):,} ranks, more than {MAX_RANKS:,}",
                           hint="give the job's real sizes", exit_code=EXIT_USAGE)
    return TopologyFlags(tp=args.tp, pp=args.pp, dp=args.dp, order=args.order, world_size=args.world_size)


def add_rules_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait-rules", type=Path, action="append", default=[], metavar="FILE",
                        help="extra rows for the table of wait kinds (JSON; see docs/wait-rules.md), before the "
                             "built-in ones; also $HANGDOCTOR_WAIT_RULES")


def wait_table(args: argparse.Namespace):
    """The wait rules: the user's files, $HANGDOCTOR_WAIT_RULES, then the built-in rows."""
    from hangdoctor.analysis.wait_rules import active_call_rows, active_rules
    from hangdoctor.analysis.waits import WaitTable

    try:
        return WaitTable(active_rules(args.wait_rules), active_call_rows(args.wait_rules))
    except ValueError as exc:
        raise CommandError(str(exc), hint="see docs/wait-rules.md for the fields of a row",
                           exit_code=EXIT_USAGE) from None


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("--json", action="store_true", help="print the verdict as JSON (the same data as the report)")
    group.add_argument("--html", type=Path, metavar="FILE", help="also write the report with the merged tree as "
                       "a self-contained HTML page")
    group.add_argument("--svg", type=Path, metavar="FILE", help="also write the merged tree as an SVG picture")
    group.add_argument("--max-classes", type=positive_int, default=8, help="classes shown in detail (default 8)")
    group.add_argument("--all-threads", action="store_true",
                       help="merge every thread of each rank into the tree, one `thread NAME` branch per thread name "
                            "(default: the main thread only; the verdict is always the main threads')")


def show(verdict: Verdict, args: argparse.Namespace, out: Console, err: Console, *, inputs: list[Path],
         report: dict | None = None) -> int:
    """Print the verdict (report or JSON; `report` is verdict_to_dict(verdict) when already made) on stdout,
    warnings on stderr, then write the pictures asked for (never over `inputs` nor a file inside them); return
    the exit code."""
    for flag, path in (("--html", args.html), ("--svg", args.svg)):
        if path is not None:
            refuse_overwrite(path, inputs, flag)
    for error in verdict.errors:
        err.print(f"Error: {error}", markup=False, highlight=False, soft_wrap=True)
    for warning in verdict.warnings:
        err.print(f"Warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if args.json:
        from hangdoctor.render.jsonout import verdict_to_dict

        out.file.write(json.dumps(report or verdict_to_dict(verdict), indent=1) + "\n")  # raw: never wrapped
    else:
        from hangdoctor.render.terminal import render_verdict

        render_verdict(verdict, out, max_classes=args.max_classes)
    out.file.flush()
    if args.html is not None or args.svg is not None:
        from hangdoctor.render.html import render_html, render_svg

        for path, render in ((args.html, render_html), (args.svg, render_svg)):
            if path is not None:
                write_text(path, render(verdict))
                err.print(f"Wrote {path}", markup=False, highlight=False)
    return exit_code(verdict)


def exit_code(verdict: Verdict) -> int:
    complete = not verdict.missing and not verdict.unresponsive and len(verdict.responded) >= verdict.expected \
        and not verdict.partial and not verdict.errors
    return EXIT_OK if complete else EXIT_PARTIAL


def write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}", hint="choose another path",
                           exit_code=EXIT_USAGE) from None
