"""Follow one parameter over iterations: weightdiff drift DIR NAME

At each dumped iteration, the copies of NAME that should be equal (the same tp rank on every stage and dp
rank that holds it: tied copies, replicas) are compared: how many distinct values there are, the largest
element difference from the lowest rank's copy, and each copy's norm. --png draws both over iterations.
Exit 1 when the copies differ at some iteration.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.errors import EXIT_USAGE, CommandError
from weightdiff.commands.common import (add_jobs, add_png, exit_code, refuse_png_over_inputs, report_problems,
                                        write_picture)
from weightdiff.errors import BadInput


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="folder with one run's dumps")
    parser.add_argument("name", help="parameter name, e.g. tied_modules.embed.word_embeddings.weight")
    parser.add_argument("--tag", help="dump tag to follow (default: after, when present)")
    add_jobs(parser, default=2, help="sidecars read in parallel")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (the same data) instead")
    add_png(parser, help="also write a plot of the drift over iterations")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from weightdiff.analysis.drift import build_drift_report

    refuse_png_over_inputs(args.png, args.dir)
    try:
        report = build_drift_report(args.dir, args.name, tag=args.tag, jobs=args.jobs)
    except BadInput as e:
        raise CommandError(str(e), hint="weightdiff check DIR --json lists the parameter names",
                           exit_code=EXIT_USAGE) from None
    if args.json:
        from weightdiff.render.jsonout import to_json

        out.file.write(to_json("weightdiff-drift/1", report) + "\n")
    else:
        from weightdiff.render.text import render_drift

        render_drift(report, out)
    from weightdiff.render.plots import drift_plot

    errors = report.errors + write_picture(lambda path: drift_plot(report, path), args.png)
    report_problems(err, errors, [])
    return exit_code(report.drifted, errors)
