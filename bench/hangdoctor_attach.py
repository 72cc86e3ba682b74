"""hangdoctor attach vs the seed's method, end to end, on a local hung job, timed side by side in one run.

The seed's method (docs: seeds/002, "py-spying all processes") is a serial py-spy loop:

    ps aux | grep python | egrep -v "grep|srun" | grep `whoami` | awk '{print $2}' | xargs -I {} py-spy dump --native --pid {}

Here `grep <job marker>` replaces `grep whoami`, since other users' Python processes share this machine.
It prints concatenated stacks for a human to read; `hangdoctor attach --local` finds the ranks through their
environment, dumps them in parallel under timeouts, merges and analyses them and prints the verdict.

Jobs (both really hung, started by this script and killed at the end):
- `--job trainer`: the reference trainer, TP=2 PP=2 DP=2 (8 ranks) with --fault skip-loss-broadcast:iteration=2;
- `--job gloo`: the gloo fixture (tests/hangdoctor/fixtures/hung_gloo.py) with --ranks ranks, tp=2 pp=2.
Also timed: hangdoctor's per-node collector alone (what runs on each node; no analysis, no report).
Rounds alternate which method goes first, after a warm-up round that is not kept. Python runs with its bytecode
cached, as an installed tool does. Reported: median and min wall time of each, and the ratio of medians.

    .venv/bin/python bench/hangdoctor_attach.py --job gloo --ranks 16 --rounds 7
    .venv/bin/python bench/hangdoctor_attach.py --job trainer --rounds 7 [--native]
    .venv/bin/python bench/hangdoctor_attach.py --job gloo --ranks 16 --rounds 3 --dstate-rank 5 --bound 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hangdoctor.livejobs import GlooJob, kill_group, kill_torchrun_workers, torchrun_run_id  # noqa: E402
from tests.support import PYTHON, child_env  # noqa: E402
from tests.trainer_runs import MODEL, torchrun_command  # noqa: E402

PYSPY = str(Path(PYTHON).parent / "py-spy")


def start_trainer(tmp: Path) -> tuple[subprocess.Popen, str]:
    """The hung trainer and a text unique to its ranks' command lines (its run folder)."""
    run_dir = tmp / "trainer-run"
    args = ["--tp", "2", "--pp", "2", "--train-iters", "4", "--pg-timeout", "900", *MODEL,
            "--fault", "skip-loss-broadcast:iteration=2"]
    log = open(tmp / "trainer.log", "w")
    proc = subprocess.Popen(torchrun_command(8, run_dir, args), stdout=log, stderr=subprocess.STDOUT,
                            env=child_env(), cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 600
    metrics = run_dir / "metrics.jsonl"
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
        if proc.poll() is not None or time.monotonic() > deadline:
            kill_group(proc)
            raise SystemExit(f"the trainer did not reach iteration 2: {(tmp / 'trainer.log').read_text()[-3000:]}")
        time.sleep(1)
    time.sleep(5)  # the last stage goes on into iteration 3 and blocks in its recv
    return proc, str(run_dir)


def installed_env(pycache: Path) -> dict[str, str]:
    """Python as an installed tool runs it: bytecode cached. This sandbox sets PYTHONDONTWRITEBYTECODE=1, which
    makes every hangdoctor process compile its modules from source (about 60 ms here); the seed's loop has no
    Python to start."""
    env = child_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def timed(argv: list[str], bound: float, env: dict[str, str]) -> tuple[float, str]:
    """Wall time and stdout; a method still running after `bound` seconds is stopped (its group killed)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return float("inf"), ""
    return time.perf_counter() - start, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", choices=("trainer", "gloo"), default="gloo")
    parser.add_argument("--ranks", type=int, default=16, help="gloo job size (the trainer runs 8)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--native", action="store_true", help="both methods with py-spy --native (as the seed did)")
    parser.add_argument("--dstate-rank", type=int, help="gloo job: this rank blocks in the kernel (state D)")
    parser.add_argument("--bound", type=float, default=60, help="seconds after which a method is stopped")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hd-bench-attach-") as tmp_name:
        tmp = Path(tmp_name)
        if args.job == "gloo":
            extra = ["--tp", "2", "--pp", "2"] + (["--dstate-rank", str(args.dstate_rank)] if args.dstate_rank is not None else [])
            job = GlooJob(tmp, nproc=args.ranks, extra=extra, lifetime=1800).start(timeout=600)
            proc, marker, ranks = job.proc, str(job.ready_dir), args.ranks
        else:
            proc, marker = start_trainer(tmp)
            ranks = 8
        run_id = torchrun_run_id(marker)
        try:
            native = ["--native"] if args.native else []
            ours = [PYTHON, "-m", "hangdoctor", "attach", "--local", "--run-id", run_id, "--json", *native]
            collector = [PYTHON, "-m", "hangdoctor.collector", "--py-spy", PYSPY, "--match",
                         f"TORCHELASTIC_RUN_ID={run_id}", *native]
            seed = ["sh", "-c", f"ps aux | grep python | egrep -v 'grep|srun' | grep {marker} | awk '{{print $2}}' "
                                f"| xargs -I {{}} {PYSPY} dump {' '.join(native)} --pid {{}}"]
            times = {"hangdoctor": [], "seed": [], "collector": []}
            commands = {"hangdoctor": ours, "seed": seed, "collector": collector}
            env = installed_env(tmp / "pycache")
            for round_ in range(args.rounds + 1):  # round 0 fills the bytecode cache and is not kept
                order = ("hangdoctor", "seed", "collector") if round_ % 2 == 0 else ("collector", "seed", "hangdoctor")
                for name in order:
                    argv = commands[name] + (["--out", str(tmp / f"out{round_}")] if name == "hangdoctor" else [])
                    seconds, stdout = timed(argv, args.bound, env)
                    if round_:
                        times[name].append(seconds)
                    if name == "hangdoctor":
                        data = json.loads(stdout)
                        expected = ranks - (args.dstate_rank is not None)
                        assert data["responded"]["count"] == expected, data["headline"]
                        headline = data["headline"]
                    elif name == "seed":
                        dumped = stdout.count("\nThread ") + stdout.startswith("Thread")
                        processes = stdout.count("Process ")
            med = {k: statistics.median(v) for k, v in times.items()}
            dstate = f", rank {args.dstate_rank} in state D" if args.dstate_rank is not None else ""
            print(f"job: {args.job}, {ranks} ranks{dstate}{' (--native)' if args.native else ''}, {args.rounds} rounds")
            print(f"hangdoctor verdict: {headline}")
            if med["seed"] == float("inf"):
                print(f"seed's loop did not finish within {args.bound:g}s: a blocking py-spy waits forever on a D-state rank")
            else:
                print(f"seed's loop dumped {processes} processes (ranks and torchrun's agent), {dumped} threads, no analysis")
            labels = {"hangdoctor": "`hangdoctor attach --local` (find, dump, analyse, report)",
                      "seed": "seed's serial loop (dump only)", "collector": "hangdoctor's collector alone (find, dump)"}
            print("| method | median s | min s |")
            print("|---|---:|---:|")
            for name, values in times.items():
                shown = [f"{v:.2f}" if v != float("inf") else f"did not finish in {args.bound:g}" for v in (med[name], min(values))]
                print(f"| {labels[name]} | {shown[0]} | {shown[1]} |")
            if med["seed"] != float("inf"):
                print(f"ratio seed / hangdoctor attach (medians): {med['seed'] / med['hangdoctor']:.2f}x; "
                      f"seed / collector: {med['seed'] / med['collector']:.2f}x")
        finally:
            kill_group(proc)
            kill_torchrun_workers(run_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
