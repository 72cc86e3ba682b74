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
(default demo-out/) keeps every run, dump, trace and report for a second look. Each command is shown exactly as
it runs (from the repository's root); the demo says nothing the tools did not print, and stops with an error
when a tool fails or does not find what the step injected. The hang is asked about once, after py-spy itself (not
hangdoctor) saw every rank's stack unchanged across two looks.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
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


def shown(argv: list[str]) -> str:
    """The command as it runs, with paths under the repository relative to its root (where the demo runs)."""
    def short(arg: str) -> str:
        if arg.startswith(str(REPO) + os.sep):
            return os.path.relpath(arg, REPO)
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg.partition("=")
            return f"{key}={short(value)}"
        return arg
    return shlex.join(short(str(a)) for a in argv)


def say(argv: list[str]) -> None:
    print(f"\033[2m$ {shown(argv)}\033[0m", flush=True)


def kill_tree(pid: int) -> None:
    """SIGKILL pid and every process below it (torchrun starts each worker in a session of its own)."""
    try:
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in tree:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def torchrun(nproc: int, program: list[str]) -> list[str]:
    return [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *program]


def trainer(run_dir: Path, *args: str) -> list[str]:
    return ["-m", "trainer", "--run-dir", str(run_dir), *MODEL, *args]


def train(run_dir: Path, *args: str, nproc: int = 4, timeout: float = 300) -> None:
    """Run the trainer to completion, echoing its log lines; exit the demo if it fails."""
    argv = torchrun(nproc, trainer(run_dir, *args))
    say(argv)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(), cwd=REPO,
                            start_new_session=True)
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


def tool(*argv: str, expect: tuple[int, ...] = (0,), finds: tuple[str, ...] = (), timeout: float = 120) -> str:
    """Run one of our CLIs, show its output, and stop the demo unless it exits as expected and prints each of
    `finds` (what the step injected)."""
    command = [PYTHON, "-m", *argv]
    say(command)
    try:
        result = subprocess.run(command, env=env(), cwd=REPO, timeout=timeout, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"Error: {argv[0]} {argv[1]} did not finish within {timeout:.0f}s") from None
    print(result.stdout, end="", flush=True)
    print(result.stderr, end="", file=sys.stderr, flush=True)
    if result.returncode not in expect:
        raise SystemExit(f"Error: {argv[0]} {argv[1]} exited {result.returncode} (expected {' or '.join(map(str, expect))})")
    missing = [text for text in finds if text not in result.stdout]
    if missing:
        raise SystemExit(f"Error: {argv[0]} {argv[1]} did not find what this step injected (no {missing[0]!r} in its "
                         f"output)")
    return result.stdout


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


def rank_pids(marker: str) -> list[int]:
    """The ranks of the demo's hung run: processes whose environment has DEMO_RUN=<marker> and a RANK."""
    pids = []
    for proc in psutil.process_iter():
        try:
            environ = proc.environ()
        except (psutil.Error, OSError):
            continue
        if environ.get("DEMO_RUN") == marker and "RANK" in environ and "TORCHELASTIC_RUN_ID" in environ:
            pids.append(proc.pid)
    return sorted(pids)


def main_stack(pid: int) -> str:
    """py-spy's own text dump of the rank's main thread (not hangdoctor's reading of it)."""
    pyspy = shutil.which("py-spy", path=str(Path(PYTHON).parent)) or "py-spy"
    try:
        out = subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30).stdout
    except subprocess.TimeoutExpired:
        return ""
    return out.split('"MainThread"', 1)[-1].split("\nThread ", 1)[0]


def wait_until_still(marker: str, ranks: int, timeout: float = 90) -> None:
    """Evidence that the hang has settled, read with py-spy directly: every rank's main stack is the same in two
    dumps a second apart."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = rank_pids(marker)
        if len(pids) == ranks:
            first = [main_stack(pid) for pid in pids]
            time.sleep(1.0)
            if all(first) and first == [main_stack(pid) for pid in pids]:
                return
        time.sleep(1.0)
    raise SystemExit(f"Error: the ranks' stacks were still changing after {timeout:.0f}s")


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
    argv = torchrun(4, program)
    say(argv)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(DEMO_RUN="hang"),
                            cwd=REPO, start_new_session=True)
    try:
        wait_for_iteration(run_dir, 2, proc, timeout=180)
        print(f"{shown([str(run_dir / 'metrics.jsonl')])} has iteration 2; waiting until py-spy sees every rank's stack "
              "unchanged over a second", flush=True)
        wait_until_still("hang", 4)
        tool("hangdoctor", "attach", "--local", "--match", "DEMO_RUN=hang", "--samples", "2", "--interval", "1",
             "--out", str(run_dir / "hangdoctor"), finds=("HUNG:", "_aggregate_total_loss", "recv"))
        tool("tracing", "last", str(traces), "--events", "3", finds=("_aggregate_total_loss",))
        print(f"(STAT-style picture of the merged stacks: {run_dir / 'hangdoctor' / 'report.html'})")
        print("Waiting for the run's 40 s process-group timeout (--pg-timeout 40; the trainer's --flight-recorder "
              "then writes each rank's dump):", flush=True)
        try:
            proc.wait(timeout=150)
        except subprocess.TimeoutExpired:
            raise SystemExit("Error: the hung run did not end at its --pg-timeout") from None
        dumps = sorted(p.name for p in (run_dir / "fr").glob("*") if p.is_file()) if (run_dir / "fr").is_dir() else []
        print(f"the run ended (exit {proc.returncode}); {len(dumps)} files in {shown([str(run_dir / 'fr')])}", flush=True)
        tool("hangdoctor", "analyze", str(run_dir / "hangdoctor"), str(run_dir / "fr"), "--pp", "2", expect=(0, 1),
             finds=("never issued broadcast #2",))
    finally:
        kill_tree(proc.pid)
        proc.wait(timeout=30)


def step_gpu_hang() -> None:
    banner("2b. A GPU hang, offline: BigScience's 200B hang (TP=8 PP=10 DP=4, NCCL) from hangdoctor's corpus")
    case = REPO / "tests" / "hangdoctor" / "corpus" / "bloom_200b"
    print("Two py-spy dumps a second apart of 2 of its 40 nodes, recorded from our stand-in of the seed's stacks "
          f"({case.relative_to(REPO)}/case.json says where they come from):", flush=True)
    tool("hangdoctor", "analyze", str(case / "text" / "s1"), str(case / "text" / "s2"), "--world-size", "320",
         expect=(0, 1), finds=("HUNG:",))


def step_embed_norm(out: Path) -> None:
    banner("3. A resume whose last stage gets its embedding LayerNorm back at the defaults (embed-norm-not-saved)")
    resumed = out / "resumed"
    shutil.copytree(out / "healthy" / "checkpoints", resumed / "checkpoints")
    train(resumed, "--pp", "2", "--embed-layernorm", "--train-iters", "6", "--resume", "--dump-weights",
          "before,after", "--fault", "embed-norm-not-saved")
    tool("weightdiff", str(out / "healthy" / "weights"), str(resumed / "weights"), "--a-iteration", "4",
         "--png", str(out / "resumed" / "weightdiff.png"), expect=(1,), finds=("tied_modules.embed.norm.weight",))
    print("The same comparison, against the checkpoint files the resume loaded:")
    tool("weightdiff", str(out / "healthy" / "checkpoints"), str(resumed / "weights"), expect=(1,),
         finds=("tied_modules.embed.norm.weight",))


def step_tied(out: Path) -> None:
    banner("4. Tied embeddings not reduced, embedding norm weight-decayed (no-tied-grad-reduce + layernorm-alias)")
    train(out / "tied", "--pp", "2", "--embed-layernorm", "--train-iters", "4", "--dump-weights", "after",
          "--fault", "no-tied-grad-reduce", "--fault", "layernorm-alias", nproc=2)
    tool("weightdiff", "check", str(out / "tied" / "weights"), expect=(1,),
         finds=("[tied copies] tied_modules.embed.word_embeddings.weight", "[param groups] tied_modules.embed.norm"))


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
