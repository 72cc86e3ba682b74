"""Flags and output plumbing shared by the verbs."""

from __future__ import annotations

import argparse
import os

from rich.console import Console

from weightdiff.analysis.compare import Tolerance

EXIT_CODES = """exit codes:
  0  compared everything asked for; no differences (check: no findings)
  1  differences found (check: findings)
  2  bad usage or bad input (a missing folder, an unreadable or foreign file, ranks on one side only,
     mismatched shapes), and no differences among what could be compared
  3  both: differences found, and some input could not be compared"""


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0: exact, bitwise)")
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0: exact, bitwise)")
    parser.add_argument("--jobs", "-j", type=int, default=min(8, os.cpu_count() or 1),
                        help="rank pairs compared in parallel (default: the CPU count, at most 8)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (the same data) instead")
    parser.add_argument("--png", metavar="PATH", help="also write a heat map of differences by (pp, tp)")
    parser.add_argument("--limit", type=int, default=40, help="parameters shown in the terminal view (default 40)")


def tolerance(args: argparse.Namespace) -> Tolerance:
    from weightdiff.errors import CommandError

    if args.atol < 0 or args.rtol < 0:
        raise CommandError(f"--atol {args.atol} / --rtol {args.rtol}: tolerances must be >= 0")
    return Tolerance(atol=args.atol, rtol=args.rtol)


def report_problems(err: Console, errors: list[str], warnings: list[str]) -> None:
    for w in warnings:
        err.print(f"Warning: {w}", highlight=False, soft_wrap=True)
    for e in errors:
        err.print(f"Error: {e}", highlight=False, soft_wrap=True)


def exit_code(found: bool, errors: list[str]) -> int:
    return (1 if found else 0) | (2 if errors else 0)
