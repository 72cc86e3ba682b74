"""Check one moment of one run for internal consistency: weightdiff check DIR

- tied copies (e.g. the input and output embedding on the first and last stage) equal, for every tp and dp;
- data-parallel replicas equal for the same (pp, tp);
- tensor-parallel duplicates (norms, row-parallel biases, non-*Parallel* layers) equal across tp;
- param groups: norm weights, biases and the embedding norm must not be weight-decayed. Norms are found by
  the module's MRO, the parameter's dimension and its name, so an alias or a subclass cannot hide one.
- master copy (on a DeepSpeed or Megatron-LM checkpoint): every module weight equals the optimizer's fp32
  master rounded to its dtype; a difference (per parameter and (pp, tp, dp), with the first index and the
  count) means a resume undoes an edit of the weights or keeps a corrupted master. What could not be read is
  listed as not checked.
By default the last after-dump is checked; --iteration/--tag choose another. DIR may be a DeepSpeed or
Megatron-LM checkpoint (then nothing per dp rank applies: one copy per (pp, tp)).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.errors import EXIT_USAGE, CommandError
from weightdiff.commands.common import (add_common, add_iteration, exit_code, refuse_png_over_inputs, report_problems,
                                        tolerance, write_picture)
from weightdiff.errors import BadInput


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path,
                        help="folder with one run's dumps (or a DeepSpeed or Megatron-LM checkpoint)")
    add_iteration(parser, "--iteration", help="iteration to check (default: the last)")
    parser.add_argument("--tag", help="dump tag to check (default: after, when present)")
    add_common(parser)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from weightdiff.analysis.check_report import build_check_report
    from weightdiff.read.sources import select

    refuse_png_over_inputs(args.png, args.dir)
    tol = tolerance(args)
    try:
        sel = select(args.dir, iteration=args.iteration, tag=args.tag, which="last", prefer_tag="after",
                     jobs=args.jobs)
    except BadInput as e:
        raise CommandError(str(e), hint="give a folder of weightdiff dumps or a DeepSpeed or Megatron-LM "
                                        "checkpoint", exit_code=EXIT_USAGE) from None
    report = build_check_report(sel, tol, jobs=args.jobs)
    if args.json:
        from weightdiff.render.jsonout import to_json

        out.file.write(to_json("weightdiff-check/1", report) + "\n")
    else:
        from weightdiff.render.text import render_check

        render_check(report, out, limit=args.limit)
    from weightdiff.render.plots import check_heatmap

    errors = report.errors + write_picture(lambda path: check_heatmap(report, path), args.png)
    report_problems(err, errors, report.warnings)
    return exit_code(bool(report.findings), errors)
