"""`make demo`: a real local 3D-parallel run, then injected faults of the trainer diagnosed by our tools.

1. a healthy PP=2 x DP=2 run (ZeRO-1, tied embeddings), with a checkpoint and weight dumps;
2. the seed's hang (`skip-loss-broadcast`), run under the tracer: `hangdoctor attach` says who is stuck where,
   `tracing last` shows every rank's open frames; when the process-group timeout ends it, the ranks' Flight
   Recorder dumps, joined with the stacks, say which collective the last stage never issued;
   then a GPU hang, offline: BigScience's 200B hang as recorded in hangdoctor's corpus (2 of its 40 nodes, NCCL:
   6 of 8 ranks per node show no communication frame), which hangdoctor does not blame alone;
3. a resume that brings the last stage's embedding LayerNorm back at its defaults (`embed-norm-not-saved`):
   `weightdiff A/ B/` finds it across the save/load;
4. a run whose tied embedding is no longer reduced and whose embedding norm is weight-decayed
   (`no-tied-grad-reduce` + `layernorm-alias`): `weightdiff check` finds both.

Every step is a real process tree (torchrun, DeepSpeed, gloo) with a bound on its time; the output folder
(default demo-out/) keeps every run, dump, trace and report for a second look.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import kill_tree  # noqa: E402  (the same tree kill the tests use)

PYTHON = sys.executable
MODEL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
         "--vocab-size", "128", "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "3e-3"]
SHOWN = (" iteration", "Error:", "trainer:")


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", **extra)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), e.get("PYTHONPATH", "")) if p)
    e.setdefault("COLUMNS", "120")
    return e


def banner(text: str) -> None:
    print(f"\n\033[1;36m=== {text} ===\033[0m", flush=True)


def say(text: str) -> None:
    print(f"\033[2m$ {text}\033[0m", flush=True)


def torchrun(nproc: int, program: list[str]) -> list[str]:
    return [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *program]


def trainer(run_dir: Path, *args: str) -> list[str]:
    return ["-m", "trainer", "--run-dir", str(run_dir), *MODEL, *args]


def train(run_dir: Path, *args: str, nproc: int = 4, timeout: float = 300) -> None:
    """Run the trainer to completion, echoing its log lines; exit the demo if it fails."""
    say(f"torchrun --nproc-per-node {nproc} -m trainer {' '.join(args)}")
    proc = subprocess.Popen(torchrun(nproc, trainer(run_dir, *args)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env(), start_new_session=True)
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith(SHOWN):
                print(_short(line), flush=True)
            if time.monotonic() > deadline:
                raise SystemExit(f"Error: the run in {run_dir} ran past {timeout:.0f}s")
        if proc.wait() != 0:
            raise SystemExit(f"Error: the run in {run_dir} failed (exit {proc.returncode})")
    finally:
        kill_tree(proc.pid)


def _short(line: str) -> str:
    """Megatron's line is long: keep the fields a reader needs here."""
    if not line.startswith(" iteration"):
        return line.rstrip()
    keep = ("iteration", "elapsed time", "lm loss", "grad norm", "samples per second")
    return " |".join(f for f in line.rstrip().split(" |") if f.strip().startswith(keep)) + " | ..."


def tool(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run one of our CLIs with its output on this terminal."""
    say(" ".join(argv))
    return subprocess.run([PYTHON, "-m", *argv], env=env(), timeout=timeout)


def wait_for_iteration(run_dir: Path, iteration: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    metrics = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"Error: the hung run ended early (exit {proc.returncode}); see {run_dir}")
        if metrics.exists() and any(json.loads(l)["iteration"] >= iteration for l in metrics.read_text().splitlines()):
            return
        time.sleep(0.5)
    raise SystemExit(f"Error: iteration {iteration} never came within {timeout:.0f}s")


def attach_until_settled(out: Path, timeout: float = 90) -> None:
    """Just after iteration 2 the last stage may still be on its way to its recv: sample until two places hold."""
    deadline = time.monotonic() + timeout
    while True:
        shutil.rmtree(out, ignore_errors=True)  # attach never writes over a report: each attempt starts afresh
        result = subprocess.run([PYTHON, "-m", "hangdoctor", "attach", "--local", "--match", "DEMO_RUN=hang",
                                 "--samples", "2", "--interval", "1", "--json", "--out", str(out)],
                                env=env(), capture_output=True, text=True, timeout=120)
        places = json.loads(result.stdout)["places"] if result.stdout.startswith("{") else []
        if len(places) == 2 and all(p.get("wait") for p in places):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"Error: the hang never settled: {result.stderr.strip()[-500:]}")
        time.sleep(1)


def step_healthy(out: Path) -> None:
    banner("1. A healthy run: PP=2 x DP=2, ZeRO-1, tied embeddings, 4 local ranks (torchrun + DeepSpeed + gloo)")
    train(out / "healthy", "--pp", "2", "--embed-layernorm", "--train-iters", "6", "--save-interval", "4",
          "--dump-weights", "before,after")


def step_hang(out: Path) -> None:
    banner("2. The seed's hang: at iteration 2 the last stage skips the loss broadcast of _aggregate_total_loss")
    run_dir, traces = out / "hang", out / "hang" / "traces"
    program = ["-m", "tracing", "run", "--include", "trainer,deepspeed.runtime.pipe,torch.distributed.distributed_c10d",
               "--start-at", "train_batch", "--out", str(traces),
               *trainer(run_dir, "--pp", "2", "--train-iters", "6", "--pg-timeout", "40",
                        "--flight-recorder", str(run_dir / "fr"), "--fault", "skip-loss-broadcast:iteration=2")]
    say("torchrun --nproc-per-node 4 -m tracing run --include trainer,deepspeed.runtime.pipe,torch.distributed.distributed_c10d "
        f"--start-at train_batch -m trainer --pp 2 --pg-timeout 40 --flight-recorder {run_dir / 'fr'} "
        "--fault skip-loss-broadcast:iteration=2")
    proc = subprocess.Popen(torchrun(4, program), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env(DEMO_RUN="hang"), start_new_session=True)
    try:
        wait_for_iteration(run_dir, 2, proc, timeout=180)
        print("iteration 2 was logged; the run now hangs (its --pg-timeout is 40 s)", flush=True)
        attach_until_settled(run_dir / "hangdoctor")
        tool("hangdoctor", "analyze", str(run_dir / "hangdoctor"))
        tool("tracing", "last", str(traces), "--events", "3")
        print(f"(STAT-style picture of the merged stacks: {run_dir / 'hangdoctor' / 'report.html'})")
        print("When the 40 s process-group timeout ends the hang, every rank writes its Flight Recorder dump "
              "(--flight-recorder); the stacks and the collective sequence, joined:", flush=True)
        try:
            proc.wait(timeout=150)
        except subprocess.TimeoutExpired:
            raise SystemExit("Error: the hung run did not end at its --pg-timeout") from None
        tool("hangdoctor", "analyze", str(run_dir / "hangdoctor"), str(run_dir / "fr"), "--pp", "2")
    finally:
        kill_tree(proc.pid)
        proc.wait(timeout=30)


def step_gpu_hang() -> None:
    banner("2b. A GPU hang, offline: BigScience's 200B hang (TP=8 PP=10 DP=4, NCCL) from hangdoctor's corpus")
    case = REPO / "tests" / "hangdoctor" / "corpus" / "bloom_200b"
    print("Two py-spy dumps a second apart of 2 of its 40 nodes, recorded from our stand-in of the seed's stacks "
          f"({case.relative_to(REPO)}/case.json says where they come from):", flush=True)
    tool("hangdoctor", "analyze", str(case / "text" / "s1"), str(case / "text" / "s2"), "--world-size", "320")


def step_embed_norm(out: Path) -> None:
    banner("3. A resume whose last stage gets its embedding LayerNorm back at the defaults (embed-norm-not-saved)")
    resumed = out / "resumed"
    shutil.copytree(out / "healthy" / "checkpoints", resumed / "checkpoints")
    train(resumed, "--pp", "2", "--embed-layernorm", "--train-iters", "6", "--resume", "--dump-weights",
          "before,after", "--fault", "embed-norm-not-saved")
    tool("weightdiff", str(out / "healthy" / "weights"), str(resumed / "weights"), "--a-iteration", "4",
         "--png", str(out / "resumed" / "weightdiff.png"))
    print("The checkpoint alone tells the same story: the last stage's tied copy was not restored at load.")
    tool("weightdiff", str(out / "healthy" / "checkpoints"), str(resumed / "weights"))


def step_tied(out: Path) -> None:
    banner("4. Tied embeddings not reduced, embedding norm weight-decayed (no-tied-grad-reduce + layernorm-alias)")
    train(out / "tied", "--pp", "2", "--embed-layernorm", "--train-iters", "4", "--dump-weights", "after",
          "--fault", "no-tied-grad-reduce", "--fault", "layernorm-alias", nproc=2)
    tool("weightdiff", "check", str(out / "tied" / "weights"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "demo-out")
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    step_healthy(args.out)
    step_hang(args.out)
    step_gpu_hang()
    step_embed_norm(args.out)
    step_tied(args.out)
    banner(f"Done. Runs, dumps, traces and reports are in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
