"""weightdiff's costs, measured side by side in one run (these machines are shared and noisy):

1. diff: `weightdiff a/ b/` wall time against the raw read time of the same files (every byte of both sides'
   safetensors files read into memory), alternating the two, median of --repeat runs; reported as a ratio.
   Two cases: b equals a except one element per tensor (a restart), and b differs everywhere (one step later),
   each at --jobs 1 and 2.
   Memory: the peak of the diff in a fresh process, above what the process held before it started: resident
   (VmHWM, memory-mapped file pages included) and anonymous (RssAnon, sampled every 2 ms), for the whole set
   and for a quarter of its ranks (the same tensors): bounded by the largest tensor, not by the checkpoint.
   One pair (--one-pair-mb N: one rank of N MiB a side, every element differs): `--jobs 2` against `--jobs 1`,
   and both against floors that do not flip with noise, each over the same bytes, alternating: numpy on one core
   (bits compared, the count and first index of the differences, the largest and mean |a - b|: the statistics
   weightdiff reports), and `cmp` of a file with its identical copy (the bytes read and compared, nothing more).
2. dump: `weightdiff.dump` in full and fingerprint modes against one training step of the reference trainer
   (built in this process, world size 1: DeepSpeed pipeline engine, ZeRO-1, torch AdamW), alternating,
   median of --repeat; reported as a fraction of the step.

    .venv/bin/python bench/bench_weightdiff.py [--ranks 8] [--mb-per-rank 64] [--repeat 5] [--skip-dump]
        [--skip-diff] [--skip-memory] [--one-pair-mb 512]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from torch import nn  # noqa: E402

import weightdiff  # noqa: E402
from hangdoctor.topology import ParallelDims  # noqa: E402


class Shard(nn.Module):
    """One rank's share of a large model: bf16 matrices and fp32 norms, about `mb` MB."""

    def __init__(self, mb: int, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        rows = 2048
        n = max(1, (mb << 20) // (rows * 4096 * 2))
        self.mats = nn.ParameterList(
            nn.Parameter(torch.randn(rows, 4096, generator=g).to(torch.bfloat16)) for _ in range(n))
        self.norm = nn.LayerNorm(4096)


def make_sets(root: Path, ranks: int, mb: int) -> tuple[Path, Path, Path]:
    dims = ParallelDims(tp=2, pp=ranks // 2, dp=1) if ranks % 2 == 0 else ParallelDims(pp=ranks)
    a, b_restart, b_step = root / "a", root / "b_restart", root / "b_step"
    for coords in dims.all_coords():
        model = Shard(mb, seed=coords.rank)
        weightdiff.dump(model, iteration=10, tag="after", out=a, coords=coords)
        with torch.no_grad():
            for p in model.mats:
                p[p.shape[0] // 2, p.shape[1] // 2] += 1.0
        weightdiff.dump(model, iteration=11, tag="before", out=b_restart, coords=coords)
        with torch.no_grad():
            for p in model.mats:
                p.add_(torch.randn_like(p) * 1e-3)
        weightdiff.dump(model, iteration=11, tag="before", out=b_step, coords=coords)
    return a, b_restart, b_step


def raw_read(folders: list[Path]) -> int:
    total = 0
    for folder in folders:
        for path in sorted(folder.glob("*.safetensors")):
            with open(path, "rb", buffering=0) as f:
                while chunk := f.read(16 << 20):
                    total += len(chunk)
    return total


def run_diff(a: Path, b: Path, jobs: int) -> int:
    from weightdiff.cli import main

    return main([str(a), str(b), "--jobs", str(jobs)], out=Console(file=io.StringIO()),
                err=Console(file=io.StringIO()))


def bench_diff(root: Path, repeat: int) -> None:
    a, b_restart, b_step = root / "a", root / "b_restart", root / "b_step"
    size = sum(p.stat().st_size for p in a.glob("*.safetensors"))
    ranks = len(list(a.glob("*.safetensors")))
    print(f"diff: {ranks} ranks x {size / ranks / 2**20:.0f} MiB per side ({2 * size / 2**20:.0f} MiB read per "
          f"diff), bf16, page cache warm, median of {repeat}")
    raw_read([a, b_restart, b_step])  # warm the page cache
    for label, b in (("restart (1 element per tensor differs)", b_restart), ("one step later (all differ)", b_step)):
        for jobs in (1, 2):
            reads, diffs, ratios = [], [], []
            for _ in range(repeat):
                t = time.perf_counter()
                raw_read([a, b])
                reads.append(time.perf_counter() - t)
                t = time.perf_counter()
                assert run_diff(a, b, jobs) == 1
                diffs.append(time.perf_counter() - t)
                ratios.append(diffs[-1] / reads[-1])
            r, d = statistics.median(reads), statistics.median(diffs)
            print(f"  {label:<40} jobs={jobs}: raw read {r:6.3f} s ({2 * size / r / 2**30:5.2f} GiB/s), "
                  f"diff {d:6.3f} s ({2 * size / d / 2**30:5.2f} GiB/s), diff/read = {statistics.median(ratios):5.2f}x")


def numpy_floor(a: Path, b: Path) -> int:
    """The statistics weightdiff reports, computed by numpy on one core over the same bytes: per tensor, bits
    compared, the count and first index of differences, the largest and the mean |a - b| (as float32)."""
    import numpy as np

    from weightdiff.read.values import locate

    differing = 0
    for path_a, path_b in zip(sorted(a.glob("*.safetensors")), sorted(b.glob("*.safetensors"))):
        located_a, located_b = locate(path_a)[0], locate(path_b)[0]
        data_a, data_b = np.memmap(path_a, dtype=np.uint8, mode="r"), np.memmap(path_b, dtype=np.uint8, mode="r")
        for name, la in located_a.items():
            lb = located_b[name]
            if la.dtype != "bfloat16":
                continue  # the norms: a few KiB
            size = 2 * int(np.prod(la.shape))
            x = data_a[la.offset:la.offset + size].view(np.uint16)
            y = data_b[lb.offset:lb.offset + size].view(np.uint16)
            mask = x != y
            n = int(np.count_nonzero(mask))
            if n:
                int(np.argmax(mask))
                gap = np.abs(np.left_shift(x, 16, dtype=np.uint32).view(np.float32)
                             - np.left_shift(y, 16, dtype=np.uint32).view(np.float32))
                float(gap.max())
                float(gap.sum(dtype=np.float64))
            differing += n
    return differing


def bench_one_pair(mb: int, repeat: int) -> None:
    """One rank pair: --jobs 2 against --jobs 1, and the floors (numpy on one core, cmp of identical files)."""
    with tempfile.TemporaryDirectory(prefix="bench-weightdiff-pair-") as tmp:
        root = Path(tmp)
        a, _, b = make_sets(root, 1, mb)
        copy = root / "a_copy"
        shutil.copytree(a, copy)
        size = sum(p.stat().st_size for p in a.glob("*.safetensors"))
        raw_read([a, b, copy])
        times: dict[str, list[float]] = {"weightdiff --jobs 1": [], "weightdiff --jobs 2": [],
                                         "numpy, one core": [], "cmp of identical files": []}
        files = [(p, copy / p.name) for p in sorted(a.glob("*.safetensors"))]
        for _ in range(repeat):
            for label in times:
                t = time.perf_counter()
                if label.startswith("weightdiff"):
                    assert run_diff(a, b, int(label[-1])) == 1
                elif label.startswith("numpy"):
                    assert numpy_floor(a, b) > 0
                else:
                    for x, y in files:
                        subprocess.run(["cmp", str(x), str(y)], check=True)
                times[label].append(time.perf_counter() - t)
        base = statistics.median(times["weightdiff --jobs 1"])
        print(f"one pair: 1 rank x {size / 2**20:.0f} MiB a side, bf16, every element differs, page cache warm, "
              f"{os.cpu_count()} cores, median of {repeat}, alternating")
        for label, values in times.items():
            m = statistics.median(values)
            print(f"  {label:<24} {m:6.3f} s ({2 * size / m / 2**30:5.2f} GiB/s)  {m / base:5.2f}x of --jobs 1")


MEMORY_CHILD = """
import io, json, sys, threading, time
from rich.console import Console

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

from weightdiff.cli import main
import weightdiff.analysis.diff, weightdiff.read.sources  # imported before the baseline
peak, done = [0], threading.Event()
def watch():
    while not done.is_set():
        peak[0] = max(peak[0], status("RssAnon"))
        time.sleep(0.002)
before_rss, before_anon = status("VmRSS"), status("RssAnon")
threading.Thread(target=watch, daemon=True).start()
code = main(sys.argv[1:], out=Console(file=io.StringIO()), err=Console(file=io.StringIO()))
done.set()
anon = max(peak[0], status("RssAnon")) - before_anon
print(json.dumps({"code": code, "hwm": status("VmHWM") - before_rss, "anon": anon}))
"""


def peak_memory(a: Path, b: Path, jobs: int) -> dict:
    done = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(a), str(b), "--jobs", str(jobs)], text=True,
                          capture_output=True, check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_memory(root: Path) -> None:
    a, b = root / "a", root / "b_step"
    part = root / "quarter"
    for side in ("a", "b_step"):
        (part / side).mkdir(parents=True, exist_ok=True)
        files = sorted((root / side).glob("debug-*"))
        for f in files[: max(2, len(files) // 4)]:
            shutil.copy(f, part / side / f.name)
    print("memory: peak of the diff above the process's own (every element differs), fresh process each")
    for label, (x, y) in (("whole set", (a, b)), ("a quarter of its ranks", (part / "a", part / "b_step"))):
        size = sum(p.stat().st_size for p in x.glob("*.safetensors"))
        tensor = max_tensor_bytes(x)
        for jobs in (1, 2):
            m = peak_memory(x, y, jobs)
            print(f"  {label:<24} {2 * size / 2**20:6.0f} MiB read, largest tensor {tensor / 2**20:4.0f} MiB, "
                  f"jobs={jobs}: resident +{m['hwm'] / 1024:5.0f} MiB, anonymous +{m['anon'] / 1024:5.0f} MiB")


def max_tensor_bytes(folder: Path) -> int:
    import math

    from weightdiff.read.dtypes import storage_dtype
    from weightdiff.read.values import locate

    return max(math.prod(loc.shape) * storage_dtype(loc.dtype).itemsize
               for p in folder.glob("*.safetensors") for loc in locate(p)[0].values())


def bench_dump(repeat: int, hidden: int, layers: int) -> None:
    os.environ.setdefault("MASTER_PORT", "29633")
    from trainer.config import parse_config
    from trainer.data import replica_micro_batches
    from trainer.distributed import identify_process, init_distributed, prepare_deepspeed_import
    from trainer.engine import build_engine
    from trainer.train import _quiet_deepspeed, prepare

    cfg = parse_config(["--num-layers", str(layers), "--hidden-size", str(hidden), "--num-attention-heads", "8",
                        "--seq-length", "128", "--vocab-size", "8192", "--micro-batch-size", "4",
                        "--global-batch-size", "8", "--train-iters", "1000", "--embed-layernorm"])
    ctx = prepare(cfg, identify_process())
    prepare_deepspeed_import()
    _quiet_deepspeed()
    init_distributed(60.0, 0)
    built = build_engine(cfg, ctx.dims, ctx.coords, ctx.faults)
    engine, model = built.engine, built.engine.module
    engine.set_dataiterator(replica_micro_batches(
        start_iteration=0, dp_rank=0, dp_size=1, micro_batch_size=cfg.micro_batch_size,
        grad_accum_steps=cfg.gradient_accumulation_steps(ctx.dims), seed=1, seq_length=cfg.seq_length,
        vocab_size=cfg.vocab_size))
    params = sum(p.numel() for p in model.parameters())
    engine.train_batch()  # warm up
    steps, full, light = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-dump-") as tmp:
        for i in range(repeat):
            t = time.perf_counter()
            engine.train_batch()
            steps.append(time.perf_counter() - t)
            for mode, times in (("full", full), ("fingerprint", light)):
                t = time.perf_counter()
                weightdiff.dump(model, iteration=i, tag="after", out=Path(tmp) / mode, coords=ctx.coords,
                                param_groups=built.param_groups_by_name, mode=mode)
                times.append(time.perf_counter() - t)
    s, f, g = statistics.median(steps), statistics.median(full), statistics.median(light)
    print(f"dump: reference trainer, 1 process, {layers} layers x hidden {hidden}, {params / 1e6:.1f} M fp32 "
          f"parameters ({params * 4 / 2**20:.0f} MiB), GBS 8 x seq 128, median of {repeat}")
    print(f"  training step {s:6.3f} s | full dump {f:6.3f} s = {f / s:6.1%} of a step | "
          f"fingerprint dump {g:6.3f} s = {g / s:6.1%} of a step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mb-per-rank", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--skip-dump", action="store_true")
    parser.add_argument("--skip-diff", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--one-pair-mb", type=int, default=0, help="also measure one rank pair of this size")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    if not (args.skip_diff and args.skip_memory):
        with tempfile.TemporaryDirectory(prefix="bench-weightdiff-") as tmp:
            make_sets(Path(tmp), args.ranks, args.mb_per_rank)
            if not args.skip_diff:
                bench_diff(Path(tmp), args.repeat)
            if not args.skip_memory:
                bench_memory(Path(tmp))
    if args.one_pair_mb:
        bench_one_pair(args.one_pair_mb, args.repeat)
    if not args.skip_dump:
        bench_dump(args.repeat, args.hidden, args.layers)


if __name__ == "__main__":
    main()
