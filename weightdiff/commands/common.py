"""Flags and output plumbing shared by the verbs, with the two guards every verb's options go through:

- `number(...)`: the argparse type of every numeric option: finite, and within its range;
- `output_file`: the argparse type of every output path (--png): checked before any work is done.

A value either guard refuses becomes one `Error: argument --x: ...` line (see `weightdiff.cli.Parser`).
"""

from __future__ import annotations

import argparse
import math
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.outputs import refuse_overwrite
from weightdiff.analysis.compare import Tolerance
from weightdiff.read.files import why

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_JOBS = 256


def number(kind: type = float, *, low: float, high: float | None = None) -> Callable[[str], float]:
    """The argparse type of a numeric option: a `kind` (float or int) that is finite and in [low, high]."""
    what = "a number" if kind is float else "a whole number"
    allowed = f">= {low:g}" if high is None else f"from {low:g} to {high:g}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number (allowed: {allowed})")
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text} is out of range (allowed: {allowed})")
        return value

    return parse


def _refuse(path: Path, reason: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"cannot write {path}: {reason}")


def output_file(text: str) -> Path:
    """The argparse type of an output file. Checked when the command line is parsed, before any work: the
    folder it goes in exists and accepts a new file (tried with a temporary file), it is not a folder, and an
    existing file is replaced only when it is a PNG image, so that no dump or other data is ever overwritten."""
    path = Path(text)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _refuse(path, why(e)) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise _refuse(path, f"it is a folder; give a file in it, such as {path / 'weightdiff.png'}")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "it exists and is not a regular file")
    if st is not None and not _is_png(path):
        raise _refuse(path, "it exists and is not a PNG image; refusing to overwrite it")
    folder = path.parent
    if not folder.is_dir():
        raise _refuse(path, f"{folder} is not a folder" if os.path.lexists(folder) else
                      f"folder {folder} does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", suffix=".probe"):
            pass
    except OSError as e:
        raise _refuse(path, f"folder {folder} does not accept new files ({why(e)})") from None
    return path


def _is_png(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(PNG_MAGIC)) == PNG_MAGIC
    except OSError:
        return False


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--atol", type=number(float, low=0), default=0.0,
                        help="absolute tolerance (default 0: exact, bitwise)")
    parser.add_argument("--rtol", type=number(float, low=0), default=0.0,
                        help="relative tolerance (default 0: exact, bitwise)")
    add_jobs(parser, default=min(8, os.cpu_count() or 1),
             help="threads: rank pairs compared in parallel, and with fewer pairs than jobs, the tensors of a "
                  "pair (default: the CPU count, at most 8)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (the same data) instead")
    add_png(parser, help="also write a heat map of differences by (pp, tp)")
    parser.add_argument("--limit", type=number(int, low=0), default=40,
                        help="parameters shown in the terminal view (default 40)")


def add_jobs(parser: argparse.ArgumentParser, *, default: int, help: str) -> None:
    parser.add_argument("--jobs", "-j", type=number(int, low=1, high=MAX_JOBS), default=default, help=help)


def add_png(parser: argparse.ArgumentParser, *, help: str) -> None:
    parser.add_argument("--png", metavar="PATH", type=output_file, help=help)


def add_iteration(parser: argparse.ArgumentParser, flag: str, *, help: str) -> None:
    parser.add_argument(flag, type=number(int, low=0), help=help)


def tolerance(args: argparse.Namespace) -> Tolerance:
    return Tolerance(atol=args.atol, rtol=args.rtol)


def refuse_png_over_inputs(png: Path | None, *inputs: Path) -> None:
    """--png may not replace a file it reads nor one inside a folder it reads (checked before any work)."""
    if png is not None:
        refuse_overwrite(Path(png), inputs, "--png")


def write_picture(draw: Callable[[Path], object], path: Path | None) -> list[str]:
    """Run `draw(path)` (a renderer that writes a PNG) when a path was given. A write that fails after all
    (the disk filled up since the check) is returned as one error line, reported with the input problems."""
    if path is None:
        return []
    try:
        draw(path)
    except OSError as e:
        return [f"cannot write {path}: {why(e)}"]
    return []


def report_problems(err: Console, errors: list[str], warnings: list[str]) -> None:
    for w in warnings:
        err.print(f"Warning: {w}", highlight=False, soft_wrap=True, markup=False)
    for e in errors:
        err.print(f"Error: {e}", highlight=False, soft_wrap=True, markup=False)


def exit_code(found: bool, errors: list[str]) -> int:
    return (1 if found else 0) | (2 if errors else 0)
