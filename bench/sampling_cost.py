"""What attach --profile's samplers cost a CPU-bound job, measured against what the collector estimates.

A job of N CPU-bound processes (default: twice this machine's cores, so they wait for cores as an oversubscribed
job does) counts loop passes in shared memory. Phases alternate, one after the other in each round (this machine is
shared: drift falls on both alike): nobody sampling; the collector's samplers at the full rate (`record_all` with a
budget it never exceeds: measured, never lowered); nobody; the collector with the default 2% budget (measured, then
started again at the rate that fits). A phase's throughput is the passes per second after its first 2.5 s (the
samplers' cost check and restart); the slowdown is against the mean of the unsampled phases on either side. The
collector's own estimate at the full rate comes from its note.

    .venv/bin/python bench/sampling_cost.py --rounds 5 --seconds 8
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from hangdoctor.collector import profile  # noqa: E402

SETTLED = 2.5  # seconds into a sampled phase when the samplers run at the rate they keep


def burn(counter, index: int) -> None:
    while True:
        for _ in range(2000):
            pass
        with counter.get_lock():
            counter[index] += 1


def passes(counter) -> int:
    with counter.get_lock():
        return sum(counter[:])


def throughput(counter, seconds: float) -> float:
    start, t0 = passes(counter), time.monotonic()
    time.sleep(seconds)
    return (passes(counter) - start) / (time.monotonic() - t0)


def sampled(counter, pids: list[int], pyspy: str, seconds: float, budget: float) -> tuple[float, int, str]:
    """(throughput after the settle time, the rate the samplers kept, the collector's note)."""
    found: dict = {}
    thread = threading.Thread(target=lambda: found.update(profile.record_all(
        pyspy, pids, seconds=seconds, rate=50, cost_budget=budget)))
    thread.start()
    time.sleep(SETTLED)
    speed = throughput(counter, seconds - SETTLED - 0.5)
    thread.join()
    first = next(iter(found.values()))
    return speed, first["rate"], first.get("rate_note", "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=2 * len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--py-spy", dest="pyspy", default=str(REPO / ".venv" / "bin" / "py-spy"))
    args = parser.parse_args()
    counter = mp.Array("q", args.procs)
    procs = [mp.Process(target=burn, args=(counter, i), daemon=True) for i in range(args.procs)]
    for proc in procs:
        proc.start()
    pids = [proc.pid for proc in procs]
    rows = {"full": [], "bounded": []}
    try:
        time.sleep(1.0)
        for round_ in range(args.rounds):
            base_before = throughput(counter, args.seconds - SETTLED - 0.5)
            full = sampled(counter, pids, args.pyspy, args.seconds, 1.0)
            base_mid = throughput(counter, args.seconds - SETTLED - 0.5)
            bounded = sampled(counter, pids, args.pyspy, args.seconds, 0.02)
            base_after = throughput(counter, args.seconds - SETTLED - 0.5)
            for name, (speed, rate, note), (a, b) in (("full", full, (base_before, base_mid)),
                                                      ("bounded", bounded, (base_mid, base_after))):
                estimate = re.search(r"about ([0-9.]+)% slower", note)
                rows[name].append((1 - speed / ((a + b) / 2), rate, float(estimate.group(1)) / 100 if estimate
                                   else None))
            print(f"round {round_}: full {rows['full'][-1]}, bounded {rows['bounded'][-1]}", flush=True)
    finally:
        for proc in procs:
            proc.kill()
    print(f"\n{args.procs} CPU-bound processes on {len(os.sched_getaffinity(0))} cores, {args.rounds} rounds of "
          f"{args.seconds:g} s phases")
    print("| samplers | rate kept /s (median) | collector's estimate at 50/s (median) | measured slowdown (median; "
          "range) |")
    print("|---|---:|---:|---:|")
    for name, found in rows.items():
        slow = [s for s, _, _ in found]
        estimates = [e for _, _, e in found if e is not None]
        print(f"| {name} | {statistics.median(r for _, r, _ in found):g} | "
              f"{statistics.median(estimates):.1%} | " if estimates else f"| {name} | - | - | ", end="")
        print(f"{statistics.median(slow):.1%} ({min(slow):.1%} to {max(slow):.1%}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
