"""`hangdoctor attach --profile`: is the slow rank named, how often is a healthy job accused, what does it cost.

One running gloo job per kind of slowness (tests/hangdoctor/fixtures/slow_job.py under torchrun, 4 ranks, each
step `--work` seconds of work then an all_reduce), its slow rank and factor changed through its control file
between trials, so every trial is a fresh draw without a fresh job:
- for each factor (1.05 = 5% slower, ...) and each trial: a slow rank drawn at random, three iterations to settle,
  then `hangdoctor attach --local --profile SECONDS --json`; right when the first straggler is exactly that rank;
- healthy trials (no rank slower): a false alarm is any straggler named;
- time to the verdict: attach's wall time (the profile's seconds included);
- the job's cost: rank 0 logs each iteration's end; the median iteration time while py-spy samples against the
  median in the seconds before each healthy trial's attach, in the same run (a ratio).
Kinds: `sleep` (a rank held up outside Python's work: I/O, a lock), `compute` (Python arithmetic: on this
2-core machine the 4 ranks share the cores, so compute-bound ranks also slow each other) and `loader` (a slow
DataLoader worker).

    .venv/bin/python bench/stragglers.py --how sleep compute --trials 10 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.hangdoctor.livejobs import SlowJob  # noqa: E402


def attach(job: SlowJob, seconds: float, rate: int, out: Path) -> tuple[dict, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "hangdoctor", "attach", "--local", "--run-id", job.run_id,
                           "--profile", str(seconds), "--profile-rate", str(rate), "--json", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=seconds + 120)
    wall = time.monotonic() - started
    try:
        return json.loads(done.stdout), wall
    except ValueError:
        return {"error": done.stderr[-500:]}, wall


def iteration_times(job: SlowJob, start: float, end: float) -> list[float]:
    stamps = [float(line.rsplit(" ", 1)[1]) for line in job.times.read_text().splitlines() if " at " in line]
    inside = [t for t in stamps if start <= t <= end]
    return [b - a for a, b in zip(inside, inside[1:])]


def run_kind(how: str, factors: list[float], trials: int, seconds: float, rate: int, nproc: int, work: float,
             tmp: Path, rng: random.Random) -> dict:
    (tmp / how).mkdir(parents=True, exist_ok=True)
    job = SlowJob(tmp / how, nproc=nproc, how=how, work=work, lifetime=3600).start()
    results: dict = {"how": how, "settings": []}
    try:
        time.sleep(2)
        for factor in [1.0, *factors]:
            right = alarms = 0
            walls, gaps, noise = [], [], []
            for trial in range(trials):
                rank = rng.randrange(nproc) if factor != 1.0 else -1
                job.slow(rank, factor)
                before = time.time()
                time.sleep(2.0)
                report, wall = attach(job, seconds, rate, tmp / f"{how}-{factor}-{trial}")
                walls.append(wall)
                stragglers = report.get("stragglers", [])
                if factor == 1.0:
                    alarms += bool(stragglers)
                    quiet = iteration_times(job, before, before + 2.0)
                    sampled = iteration_times(job, before + 2.0 + 1.0, before + 2.0 + seconds)
                    if quiet and sampled:
                        noise.append(statistics.median(sampled) / statistics.median(quiet))
                else:
                    right += bool(stragglers) and stragglers[0]["ranks"] == [rank]
                if stragglers:
                    gaps.append(stragglers[0]["waited_for"])
            setting = {"factor": factor, "trials": trials, "wall_s": statistics.median(walls)}
            if factor == 1.0:
                setting.update(false_alarms=alarms, iteration_ratio=statistics.median(noise) if noise else None)
            else:
                setting.update(right=right, median_gap=statistics.median(gaps) if gaps else None)
            results["settings"].append(setting)
            print(json.dumps({"how": how, **setting}), flush=True)
    finally:
        job.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--how", nargs="+", default=["sleep", "compute"], choices=("sleep", "compute", "loader"))
    parser.add_argument("--factors", type=float, nargs="+", default=[1.05, 1.1, 1.2, 1.5])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=50)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--work", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="stragglers-") as folder:
        every = [run_kind(how, args.factors, args.trials, args.seconds, args.rate, args.nproc, args.work,
                          Path(folder), rng) for how in args.how]
    print()
    print(f"{args.nproc} ranks, {args.work * 1000:g} ms of work a step, profile {args.seconds:g}s at {args.rate}/s, "
          f"{args.trials} trials per setting")
    print("| kind | slower by | named first | false alarms (healthy) | attach wall s (median) | median gap |")
    print("|---|---:|---:|---:|---:|---:|")
    for result in every:
        for s in result["settings"]:
            if s["factor"] == 1.0:
                ratio = s["iteration_ratio"]
                print(f"| {result['how']} | healthy | - | {s['false_alarms']}/{s['trials']} | {s['wall_s']:.1f} | "
                      f"- (iteration time sampled / not: {ratio:.3f}) |" if ratio else
                      f"| {result['how']} | healthy | - | {s['false_alarms']}/{s['trials']} | {s['wall_s']:.1f} | - |")
            else:
                gap = f"{s['median_gap']:.0%}" if s["median_gap"] is not None else "-"
                print(f"| {result['how']} | {s['factor'] - 1:.0%} | {s['right']}/{s['trials']} | - | "
                      f"{s['wall_s']:.1f} | {gap} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
