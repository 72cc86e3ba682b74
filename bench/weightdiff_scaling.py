"""The scaling guard for weightdiff: `weightdiff a b` stage by stage at N and 4N in one run, and the ratios.

Two axes, each a table: the number of tensors (T and 4T per rank, of 4,096 elements each) and the tensor size (S
and 4S elements, 8 tensors per rank). The weight sets are real dumps (`weightdiff.dump`, 2 ranks, pp=2, bf16
matrices of 1,024 columns) written in a temporary folder; b equals a except one element in every 8th tensor, so
that the report grows with the tensors. Stages: read and select both sides (the sidecars of the chosen moment),
compare (pair the ranks, every element of every tensor), the diff report (compare + verdict), the terminal report,
the JSON report, and `weightdiff a b` end to end as a process. Everything runs with one job (--jobs 1), so that
threads on a shared machine do not move the ratios, and the in-process stages with the cyclic GC paused
(clicore/bulk.py): this process holds both inputs, and CPython's full collections, which walk all of it, fall on
whichever timing crosses their threshold (the JSON report once read 7.3x, with no code changed). A stage whose time
grows more than LIMIT (6) times for 4x the input fails the guard (exit 1); CI runs it with the defaults (.ci/run).
Ratios only, measured side by side in one run (bench/scaling.py); no absolute time is asserted.

    .venv/bin/python bench/weightdiff_scaling.py [--tensors 1024] [--elements 262144] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from scaling import Ratio, ratio, table, verdict_line  # noqa: E402

COLUMNS = 1024  # every tensor is (S / COLUMNS, COLUMNS)
CHANGED_EVERY = 8  # one element differs in every 8th tensor of every rank
TENSOR_AXIS_ELEMENTS = 4 * COLUMNS  # elements per tensor on the tensor axis
SIZE_AXIS_TENSORS = 8  # tensors per rank on the size axis
PROCESS = "weightdiff a b, a process"


def write_pair(folder: Path, tensors: int, elements: int) -> tuple[Path, Path]:
    """Dump sets a/ and b/ under `folder`: 2 ranks (pp=2) of `tensors` bf16 tensors of `elements` elements."""
    import torch
    from torch import nn

    import weightdiff
    from hangdoctor.topology import ParallelDims

    rows = max(1, elements // COLUMNS)
    a, b = folder / "a", folder / "b"
    for coords in ParallelDims(pp=2).all_coords():
        g = torch.Generator().manual_seed(coords.rank)
        model = nn.Module()
        model.layers = nn.ModuleList()
        for _ in range(tensors):
            layer = nn.Module()
            layer.weight = nn.Parameter(torch.randn(rows, COLUMNS, generator=g).to(torch.bfloat16))
            model.layers.append(layer)
        weightdiff.dump(model, iteration=10, tag="after", out=a, coords=coords)
        with torch.no_grad():
            for layer in model.layers[::CHANGED_EVERY]:
                layer.weight[rows // 2, COLUMNS // 2] += 1.0
        weightdiff.dump(model, iteration=11, tag="before", out=b, coords=coords)
    return a, b


def stages(a: Path, b: Path) -> dict:
    """Each stage as a function of nothing, on the dump sets a and b; the later stages' inputs prepared once."""
    from rich.console import Console

    from weightdiff.analysis.compare import Tolerance
    from weightdiff.analysis.diff import compare_selections
    from weightdiff.analysis.diff_report import build_diff_report
    from hangdoctor.clicore.bulk import paused_gc
    from weightdiff.read.sources import select
    from weightdiff.render.jsonout import to_json
    from weightdiff.render.text import render_diff

    tol = Tolerance()

    def read():
        return (select(a, which="last", prefer_tag="after", jobs=1),
                select(b, which="first", prefer_tag="before", jobs=1))

    sa, sb = read()
    report = build_diff_report(sa, sb, tol, jobs=1)
    assert report.verdict == "different", report.headline

    def process():
        done = subprocess.run([sys.executable, "-m", "weightdiff", str(a), str(b), "--jobs", "1"],
                              capture_output=True, cwd=REPO, timeout=600)
        if done.returncode != 1:
            raise SystemExit(f"weightdiff failed ({done.returncode}): {done.stderr.decode()[-300:]}")

    in_process = {
        "read + select (both sides)": read,
        "compare (pairs, every element)": lambda: compare_selections(sa, sb, tol, jobs=1),
        "diff report (compare + verdict)": lambda: build_diff_report(sa, sb, tol, jobs=1),
        "terminal report": lambda: render_diff(report, Console(file=io.StringIO(), width=120)),
        "JSON report": lambda: to_json("weightdiff-diff/1", report),
    }
    return {**{name: paused_gc()(stage) for name, stage in in_process.items()}, PROCESS: process}


def measure(small: dict, large: dict, repeats: int) -> list[Ratio]:
    return [ratio(name, small[name], large[name], repeats=3 if name == PROCESS else repeats) for name in small]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=1024,
                        help="T: tensors per rank (the tensor axis compares T and 4T, of 4,096 elements each)")
    parser.add_argument("--elements", type=int, default=262144,
                        help="S: elements per tensor (the size axis compares S and 4S, 8 tensors per rank); "
                             f"a multiple of {COLUMNS}")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.elements % COLUMNS or args.tensors < CHANGED_EVERY:
        parser.error(f"--elements must be a multiple of {COLUMNS}, --tensors at least {CHANGED_EVERY}")
    t, s, few, small_size = args.tensors, args.elements, SIZE_AXIS_TENSORS, TENSOR_AXIS_ELEMENTS
    tables, every = [], []
    with tempfile.TemporaryDirectory(prefix="wd-scaling-") as tmp:
        axes = (
            (f"weightdiff, {t:,} and {4 * t:,} tensors per rank ({small_size:,} elements each, 2 ranks)",
             (f"{t:,} tensors", f"{4 * t:,} tensors"), (t, small_size), (4 * t, small_size)),
            (f"weightdiff, {s:,} and {4 * s:,} elements per tensor ({few} tensors per rank, 2 ranks)",
             (f"{s:,} elements", f"{4 * s:,} elements"), (few, s), (few, 4 * s)),
        )
        for i, (title, sizes, at_small, at_large) in enumerate(axes):
            small = write_pair(Path(tmp) / f"{i}-small", *at_small)
            large = write_pair(Path(tmp) / f"{i}-large", *at_large)
            ratios = measure(stages(*small), stages(*large), args.repeats)
            tables.append(table(title, sizes, ratios))
            every += ratios
    print("\n\n".join(tables))
    code, line = verdict_line(every)
    print(line)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
