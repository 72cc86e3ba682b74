"""Cost of tracing, measured side by side in one run: stdlib `trace` (the seed's method), our stream mode and our
ring mode, as CPU-time ratios to the same workload untraced, with the bytes each writes.

    python bench/bench_tracing.py [--repeats 5] [--workloads call_heavy,selective] [--backends] [--floors]
    PYENV_VERSION=3.12.1 pyenv exec python bench/bench_tracing.py      # any Python 3.10+, stdlib only

--backends adds the ring written by each backend this Python has (the C hook, and the Python ones beside it);
--floors adds each kind of CPython hook installed and doing nothing (bench/tracing_hooks/floors.py), the cost a
backend built on it cannot go below; the µs/event column is the added CPU time per event written.

Every measurement runs in a fresh interpreter (a tracer cannot be fully removed from a process, and each one
must start cold); repeats are interleaved (rep 1 of every mode, then rep 2, ...) so that the machine's noise hits
all modes alike; the table shows medians and the ratio of medians. Inside the child: set up, start the tracer,
run one untimed warm-up step, then time `steps` steps with time.process_time().

Workloads live in WORKLOADS (bench/tracing_workloads/): call_heavy and selective (stdlib only, any Python), and
trainer_step (the reference trainer's train_batch; needs torch and deepspeed, so the project's .venv Python):
    .venv/bin/python bench/bench_tracing.py --workloads call_heavy,selective,trainer_step
To add one, register a Workload whose `module` has a step() function and whose `include` selects the code a user
would trace; nothing else changes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


@dataclass(frozen=True)
class Workload:
    name: str
    module: str  # has step(); imported in the child
    include: str  # what our tracer follows
    steps: int
    about: str


WORKLOADS = {
    w.name: w for w in (
        Workload("call_heavy", "bench.tracing_workloads.callheavy", "bench.tracing_workloads.callheavy", 100,
                 "fib(20) per step, every call selected (21,891 calls a step)"),
        Workload("selective", "bench.tracing_workloads.selected", "bench.tracing_workloads.selected", 400,
                 "2 selected calls a step around an unselected library doing fib(18) (8,361 calls a step)"),
        Workload("trainer_step", "bench.tracing_workloads.trainer_step", "trainer,deepspeed.runtime.pipe", 30,
                 "one train_batch of the reference trainer (4 micro-batches, DeepSpeed engine, world 1; "
                 "needs torch + deepspeed: the project's Python only), tracing trainer + DeepSpeed's pipeline"),
        Workload("trainer_step_all_deepspeed", "bench.tracing_workloads.trainer_step", "trainer,deepspeed", 30,
                 "the same step, tracing trainer + all of deepspeed (timers, comm wrappers, logging included)"),
    )
}
DEFAULT_WORKLOADS = ("call_heavy", "selective")  # stdlib-only; add trainer_step on the project's Python
MODES = ("untraced", "stdlib-trace", "stream", "ring")


def backend_modes() -> tuple[str, ...]:
    """The ring with each backend this Python has, to compare them: the C hook where it builds, and the old
    Python backends beside it."""
    from tracing import native
    names = (["c"] if native.load() is not None else []) + ["settrace", "setprofile"] + (
        ["monitoring"] if sys.version_info >= (3, 12) else [])
    return tuple(f"ring:{name}" for name in names)


# -- the child: one measurement ------------------------------------------------------------------------------
def measure(mode: str, workload: Workload, workdir: str) -> dict:
    module = importlib.import_module(workload.module)
    step = module.step
    files: list[str] = []

    def timed() -> float:
        step()  # warm-up: classification of code objects, first-time imports
        start = time.process_time()
        for _ in range(workload.steps):
            step()
        return time.process_time() - start

    wall = time.perf_counter()
    if mode == "untraced":
        cpu = timed()
    elif mode.startswith("floor:"):
        from bench.tracing_hooks import floors
        floors.install(mode)
        cpu = timed()
    elif mode == "stdlib-trace":
        import trace

        from tracing.tee import Tee
        path = os.path.join(workdir, "seed-trace.txt")
        files.append(path)
        tracer = trace.Trace(ignoredirs=[sys.prefix, sys.exec_prefix], trace=1, count=1)
        saved, sys.stdout = sys.stdout, Tee(path)
        try:
            cpu = tracer.runfunc(timed)
        finally:
            sys.stdout.close()
            sys.stdout = saved
    else:
        import tracing
        kind, _, backend = mode.partition(":")
        options = {"ring": 0, "stream": True} if kind == "stream" else {}
        tracer = tracing.trace(include=workload.include, out=workdir, backend=backend or "auto", **options)
        with tracer:
            cpu = timed()
        files.extend(tracer.paths)
        events = _events_written(tracer)
    wall = time.perf_counter() - wall
    result = {"cpu": cpu, "wall": wall, "bytes": sum(os.path.getsize(f) for f in files), "steps": workload.steps}
    if mode.startswith(("stream", "ring")):
        result["events"] = events
        result["backend"] = tracer.backend_name
        if tracer.ring_path:
            result["ring_file_bytes"] = os.path.getsize(tracer.ring_path)
            result["ring_bytes_written"] = 32 * events
    return result


def _events_written(tracer) -> int:
    from tracing.tracedir import read_trace_file
    return read_trace_file(tracer.paths[0], tail=0).total_events


# -- the parent: interleaved repeats ------------------------------------------------------------------------
def run_child(mode: str, workload: str, python: str, scale: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as workdir:
        result_path = os.path.join(workdir, "result.json")
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
        subprocess.run([python, os.path.abspath(__file__), "--scale", str(scale), "--child", mode, workload, workdir,
                        result_path],
                       check=True, env=env, stdout=subprocess.DEVNULL, timeout=1800)
        with open(result_path) as f:
            return json.load(f)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def summarize(samples: dict[tuple[str, str], list[dict]], modes, workloads) -> list[dict]:
    rows = []
    for w in workloads:
        base = statistics.median(r["cpu"] for r in samples[("untraced", w)])
        for mode in modes:
            runs = samples[(mode, w)]
            cpu = statistics.median(r["cpu"] for r in runs)
            paired = sorted(r["cpu"] / b["cpu"] for r, b in zip(runs, samples[("untraced", w)]))
            first = runs[0]
            steps = first["steps"]
            written = first.get("ring_bytes_written", first["bytes"]) if mode.startswith("ring") else first["bytes"]
            rows.append({
                "workload": w, "mode": mode, "backend": first.get("backend", ""), "cpu_s": cpu, "ratio": cpu / base,
                "ratio_range": [paired[0], paired[-1]], "bytes_written": written, "bytes_per_step": written / steps,
                "file_bytes": first["bytes"], "events_per_step": first.get("events", 0) / steps,
                # the added CPU time per event of the timed steps (the run wrote one untimed warm-up step more):
                # what one selected event costs, the unselected calls around it included
                "us_per_event": (cpu - base) / (first["events"] * steps / (steps + 1)) * 1e6
                if first.get("events") else None,
            })
    return rows


def print_table(rows: list[dict], repeats: int) -> None:
    print(f"\nPython {sys.version.split()[0]}, {repeats} interleaved repeats, CPU time, ratio = median / median untraced")
    print("| workload | mode | backend | median CPU s | ratio | paired range | written per rank | per step "
          "| events/step | µs/event |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        writes = r["mode"] != "untraced" and not r["mode"].startswith("floor:")
        written = human_bytes(r["bytes_written"]) if writes else "–"
        per_step = human_bytes(r["bytes_per_step"]) if writes else "–"
        events = f"{r['events_per_step']:.0f}" if r["events_per_step"] else "–"
        per_event = f"{r['us_per_event']:.2f}" if r["us_per_event"] is not None else "–"
        print(f"| {r['workload']} | {r['mode']} | {r['backend'] or '–'} | {r['cpu_s']:.3f} | {r['ratio']:.2f}x | "
              f"{r['ratio_range'][0]:.2f}-{r['ratio_range'][1]:.2f} | {written} | {per_step} | {events} "
              f"| {per_event} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    parser.add_argument("--backends", action="store_true", help="also time the ring with every backend available")
    parser.add_argument("--floors", action="store_true",
                        help="also time each kind of hook doing nothing (bench/tracing_hooks/floors.py)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every workload's steps (longer runs, less noise)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    scaled = {name: replace(w, steps=max(1, round(w.steps * args.scale))) for name, w in WORKLOADS.items()}
    if args.child:
        mode, workload, workdir, result_path = args.child
        result = measure(mode, scaled[workload], workdir)
        with open(result_path, "w") as f:
            json.dump(result, f)
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    if "untraced" not in modes:
        modes.insert(0, "untraced")
    if args.backends:
        modes += [m for m in backend_modes() if m not in modes]
    if args.floors:
        from bench.tracing_hooks import floors
        modes += [m for m in floors.available() if m not in modes]
    if any(m.startswith("floor:") for m in modes):  # --floors, or single ones in --modes
        from bench.tracing_hooks import floors
        floors.build(tempfile.mkdtemp(prefix="bench-floors-"))
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    print(f"$ {os.path.basename(sys.executable)} {' '.join(sys.argv)}")
    for w in workloads:
        print(f"  {w}: {WORKLOADS[w].about}, {scaled[w].steps} steps")
    samples: dict[tuple[str, str], list[dict]] = {(m, w): [] for m in modes for w in workloads}
    for rep in range(args.repeats):
        for w in workloads:
            for mode in modes:
                samples[(mode, w)].append(run_child(mode, w, sys.executable, args.scale))
        print(f"  repeat {rep + 1}/{args.repeats} done", file=sys.stderr)
    rows = summarize(samples, modes, workloads)
    print_table(rows, args.repeats)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.version.split()[0], "repeats": args.repeats, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
