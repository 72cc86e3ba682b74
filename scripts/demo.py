"""`make demo`: a real local 3D-parallel run, then injected faults diagnosed by our tools.

Every step is a real process tree (torchrun, DeepSpeed, gloo) with a bound on its time; the output folder
(default demo-out/) keeps every run, dump and report for a second look.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MODEL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
         "--vocab-size", "128", "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "3e-3"]


def env() -> dict[str, str]:
    e = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), e.get("PYTHONPATH", "")) if p)
    return e


def banner(text: str) -> None:
    print(f"\n\033[1;36m=== {text} ===\033[0m", flush=True)


def torchrun(nproc: int, run_dir: Path, args: list[str]) -> list[str]:
    return [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "trainer", "--run-dir", str(run_dir), *MODEL, *args]


def run_streaming(cmd: list[str], *, timeout: float, show=lambda line: line.startswith((" iteration", "Error:", "trainer:"))) -> int:
    """Run cmd, echo the lines worth seeing, kill the whole tree if it outlives `timeout`."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(),
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        if show(line):
            print(line.rstrip()[:400], flush=True)
        if time.monotonic() > deadline:
            os.killpg(proc.pid, 9)
            print(f"Error: {cmd[0]} ran past {timeout:.0f}s and was stopped", file=sys.stderr)
            break
    return proc.wait()


def step_train(out: Path) -> None:
    banner("1. A healthy run: PP=2 x DP=2, ZeRO-1, tied embeddings, 4 local ranks (torchrun + DeepSpeed + gloo)")
    rc = run_streaming(torchrun(4, out / "healthy", ["--pp", "2", "--embed-layernorm", "--train-iters", "6",
                                                     "--save-interval", "4", "--dump-weights", "before,after"]),
                       timeout=300)
    if rc != 0:
        sys.exit(f"Error: the healthy run failed with exit code {rc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "demo-out")
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    step_train(args.out)
    banner(f"Done. Runs, dumps and reports are in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
