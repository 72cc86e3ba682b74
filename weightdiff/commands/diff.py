"""Compare two dump sets (or checkpoints) rank by rank: weightdiff [diff] A/ B/

Pairs ranks by their (pp, tp, dp) coordinates, ignoring pids and iterations. By default A/'s last
after-dump is compared with B/'s first before-dump (the seed's "after iteration 805 vs before iteration 806,
across a restart"); --a-iteration/--b-iteration and --a-tag/--b-tag choose otherwise. A DeepSpeed checkpoint
folder (with `latest`, or a global_stepN/ folder) can stand on either side; it counts for every dp rank.
So can a whole model: a torch.save file, model.safetensors or its *.safetensors.index.json (or their
folder), a torch.distributed.checkpoint folder; it is paired with every rank of the other side by name
(--name-map renames prefixes where the two name the model apart). Buffers are compared like parameters.
When A and B are the same folder (a resumed run that dumps into the folder of the first), the default is the
latest restart in it: the last after-dump written by the old processes vs the first before-dump of the new
ones. Every element is compared, bitwise unless --atol/--rtol are given; --round compares a wider float type
with a narrower one after rounding it (an fp32 master or zero_to_fp32 output against bf16 weights).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.errors import EXIT_USAGE, CommandError
from weightdiff.commands.common import (add_common, add_iteration, exit_code, refuse_png_over_inputs, report_problems,
                                        tolerance, write_picture)
from weightdiff.errors import BadInput


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, help="folder with the earlier dumps (or a DeepSpeed checkpoint)")
    parser.add_argument("b", type=Path, help="folder with the later dumps (or a DeepSpeed checkpoint)")
    add_iteration(parser, "--a-iteration", help="iteration of A to use (default: the last)")
    add_iteration(parser, "--b-iteration", help="iteration of B to use (default: the first)")
    parser.add_argument("--a-tag", help="dump tag of A to use (default: after, when present)")
    parser.add_argument("--b-tag", help="dump tag of B to use (default: before, when present)")
    parser.add_argument("--name-map", metavar="FILE", type=Path,
                        help='JSON {"old prefix": "new prefix"} applied to the names of both sides before pairing '
                             "(a DeepSpeed checkpoint against its HF export)")
    parser.add_argument("--round", action="store_true",
                        help="where the two sides hold a tensor in different float types, round the wider to the "
                             "narrower (as .to() does) and compare exactly: an fp32 master or zero_to_fp32 output "
                             "against bf16 weights")
    parser.add_argument("--trust-fingerprints", action="store_true",
                        help="treat tensors whose SHA-256 in the sidecars are equal as equal without reading them")
    add_common(parser)


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # missing, a symlink loop...: reported when the folder is read
        return False


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from weightdiff.analysis.diff_report import build_diff_report
    from weightdiff.read.name_map import apply_name_map, load_name_map
    from weightdiff.read.sources import restart_boundary, scan, select

    refuse_png_over_inputs(args.png, args.a, args.b)
    tol = replace(tolerance(args), rounded=args.round)
    if _same_folder(args.a, args.b) and args.a_iteration is None and args.b_iteration is None \
            and args.a.is_dir() and scan(args.a).names:
        boundary = restart_boundary(args.a)
        if boundary is None:
            raise CommandError(f"{args.a}: A and B are the same folder and it holds no restart (no iteration "
                               "after which every rank's pid changes)",
                               hint="choose the moments with --a-iteration N --b-iteration M", exit_code=EXIT_USAGE)
        args.a_iteration, args.b_iteration = boundary
    try:
        a = select(args.a, iteration=args.a_iteration, tag=args.a_tag, which="last", prefer_tag="after",
                   jobs=args.jobs)
        b = select(args.b, iteration=args.b_iteration, tag=args.b_tag, which="first", prefer_tag="before",
                   jobs=args.jobs)
        if args.name_map is not None:
            mapping = load_name_map(args.name_map)
            a, b = apply_name_map(a, mapping), apply_name_map(b, mapping)
    except BadInput as e:
        raise CommandError(str(e), hint="give two folders of weightdiff dumps or DeepSpeed checkpoints, or model "
                                        "files (torch.save, safetensors, DCP)", exit_code=EXIT_USAGE) from None
    report = build_diff_report(a, b, tol, jobs=args.jobs, trust_fingerprints=args.trust_fingerprints)
    if args.json:
        from weightdiff.render.jsonout import to_json

        out.file.write(to_json("weightdiff-diff/1", report) + "\n")
    else:
        from weightdiff.render.text import render_diff

        render_diff(report, out, limit=args.limit)
    from weightdiff.render.plots import diff_heatmap

    errors = report.errors + write_picture(lambda path: diff_heatmap(report, path), args.png)
    report_problems(err, errors, report.warnings)
    return exit_code(report.has_differences, errors)
