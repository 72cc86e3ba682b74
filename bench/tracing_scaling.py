"""The scaling guard for `tracing last` and `tracing diverge`: each stage at N and 4N in one run, and the ratios.

Two axes, each a table: ranks (R and 4R, E events per rank) and events per rank (E and 4E, R ranks). The rings are
written by the tracer's own writer (RingWriter and Recorder.make_emit, as `tracing run --ring 16384` writes them),
one per rank in a temporary folder, each of a pipeline-like step: rounds of PipelineEngine.train_batch (the
--start-at anchor) > forward > layers, all_reduce, _aggregate_total_loss > broadcast, optimizer step. One rank
parts from the others: it skips the broadcast of the middle round, and at the end it waits in a barrier where
the others wait in all_reduce, so that `diverge` has a departure to find (round by round and event by event) and
`last` two groups. Stages: load (every event, as diverge reads the rings; the newest only, as last does), the last
report and its terminal and JSON views, the diverge report and its terminal and JSON views, and `tracing last
--json` and `tracing diverge` end to end as processes. The in-process stages run with the cyclic GC paused
(clicore/bulk.py): this process holds both inputs, and CPython's full collections, which walk all of it, fall on
whichever timing crosses their threshold. A stage whose time grows more than LIMIT (6) times for 4x the input
fails the guard (exit 1); CI runs it with the defaults (.ci/run). Ratios only, measured side by side in one run
(bench/scaling.py); no absolute time is asserted.

    .venv/bin/python bench/tracing_scaling.py [--ranks 64] [--events 512] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from scaling import Ratio, ratio, table, verdict_line  # noqa: E402

LAYERS = 8  # layer calls per forward
ROUND_EVENTS = 12 + 2 * LAYERS  # events of one train_batch call
ENGINE, C10D = "deepspeed.runtime.pipe.engine", "torch.distributed.distributed_c10d"
FUNCTIONS = (  # (module, qualname, first line) of what each rank calls
    ("trainer.train", "train", 10), (ENGINE, "PipelineEngine.train_batch", 300),
    (ENGINE, "PipelineEngine._exec_forward_pass", 600), ("trainer.model", "Layer.forward", 40),
    (ENGINE, "PipelineEngine._aggregate_total_loss", 500), (ENGINE, "PipelineEngine._take_step", 700),
    (C10D, "all_reduce", 2000), (C10D, "broadcast", 1800), (C10D, "barrier", 3000),
)
RING = 16384  # ring capacity in events (the default, 65,536: 4x the slots to scan per rank, whatever its events)
LAST_TAIL = 1024  # what `tracing last` reads of each ring (its default: max(1024, 64 x --events 8))


def write_rings(folder: Path, ranks: int, events: int) -> Path:
    """One ring per rank in `folder`, each of about `events` events; the last rank is the odd one out."""
    from tracing.config import TraceConfig
    from tracing.identity import RankIdentity
    from tracing.recorder import Recorder, describe_meta
    from tracing.records import CALL, RETURN, CodeLocation
    from tracing.ringwriter import RingWriter

    folder.mkdir(parents=True)
    config = TraceConfig(include=("trainer", "deepspeed.runtime.pipe", C10D), out=str(folder), ring=RING,
                         start_at="train_batch")
    rounds = max(3, events // ROUND_EVENTS)
    odd = ranks - 1
    for rank in range(ranks):
        identity = RankIdentity(rank=rank, local_rank=rank % 8, world_size=ranks, host=f"bench-node{rank // 8}",
                                pid=100_000 + rank, rank_source="RANK", argv=("python", "-m", "trainer"))
        t0_mono, t0_wall = time.perf_counter_ns(), time.time_ns()
        meta = describe_meta(identity.to_dict(), config.to_dict(), "python", t0_wall, t0_mono)
        ring = RingWriter(str(folder / identity.file_name("trace", "ring")), config.ring, meta,
                          t0_mono_ns=t0_mono, t0_wall_ns=t0_wall)
        recorder = Recorder(ring, None, t0_mono_ns=t0_mono)
        emit = recorder.make_emit()

        train, step, forward, layer, loss, optimizer, all_reduce, broadcast, barrier = (
            recorder.define(CodeLocation(module, qualname, f"/src/{module.replace('.', '/')}.py", line))
            for module, qualname, line in FUNCTIONS)

        def call(code_id: int) -> None:
            emit(CALL, code_id)
            emit(RETURN, code_id)

        emit(CALL, train)
        for i in range(rounds):
            emit(CALL, step)
            emit(CALL, forward)
            for _ in range(LAYERS):
                call(layer)
            emit(RETURN, forward)
            if i == rounds - 1:  # the hang: everyone waits in a collective; the odd rank in a barrier of its own
                emit(CALL, barrier if rank == odd else all_reduce)
                break
            call(all_reduce)
            emit(CALL, loss)
            if not (rank == odd and i == rounds // 2):
                call(broadcast)
            emit(RETURN, loss)
            call(optimizer)
            emit(RETURN, step)
        ring.close()
    return folder


def stages(folder: Path) -> dict:
    """Each stage as a function of nothing, on the rings in `folder`; the later stages' inputs prepared once."""
    from rich.console import Console

    from tracing.analysis.diverge import diverge_report
    from tracing.analysis.last import last_report
    from hangdoctor.clicore.bulk import paused_gc
    from tracing.liveness import process_status
    from tracing.render.diverge import render_diverge
    from tracing.render.jsonout import dumps
    from tracing.render.last import render_last
    from tracing.tracedir import load_traces

    path = str(folder)
    whole, tail = load_traces(path), load_traces(path, tail=LAST_TAIL)

    def last():
        statuses = {t.identity.rank: process_status(t.identity.host, t.identity.pid, t.identity.argv[0])
                    for t in tail.traces}
        return last_report(path, tail.traces, statuses, time.time_ns(), warnings=tail.warnings)

    def diverge():
        return diverge_report(path, whole.traces, warnings=whole.warnings)

    last_done, diverge_done = last(), diverge()
    assert len(last_done.groups) == 2, [g.summary for g in last_done.groups]
    assert diverge_done.communication and not diverge_done.identical, diverge_done.first

    def process(verb: str, *flags: str, code: int) -> None:
        done = subprocess.run([sys.executable, "-m", "tracing", verb, path, *flags], capture_output=True, cwd=REPO,
                              timeout=600)
        if done.returncode != code:
            raise SystemExit(f"tracing {verb} failed ({done.returncode}): {done.stderr.decode()[-300:]}")

    in_process = {
        "load, every event (diverge)": lambda: load_traces(path),
        f"load, newest {LAST_TAIL:,} events (last)": lambda: load_traces(path, tail=LAST_TAIL),
        "last report": last,
        "last, terminal report": lambda: render_last(last_done, Console(file=io.StringIO(), width=120)),
        "last, JSON report": lambda: dumps("tracing-last/1", last_done),
        "diverge report": diverge,
        "diverge, terminal report": lambda: render_diverge(diverge_done, Console(file=io.StringIO(), width=120)),
        "diverge, JSON report": lambda: dumps("tracing-diverge/1", diverge_done),
    }
    return {**{name: paused_gc()(stage) for name, stage in in_process.items()},
            "tracing last --json, a process": lambda: process("last", "--json", code=0),
            "tracing diverge, a process": lambda: process("diverge", code=1)}


def measure(small: dict, large: dict, repeats: int) -> list[Ratio]:
    """The fastest of `repeats` timings; of 3 for the loads and the processes, whose every call is long already."""
    return [ratio(name, small[name], large[name],
                  repeats=3 if name.startswith("load") or name.endswith("a process") else repeats) for name in small]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64, help="R: the rank axis compares R and 4R ranks")
    parser.add_argument("--events", type=int, default=512,
                        help=f"E: events per rank (the event axis compares E and 4E; 4E at most the ring's {RING:,})")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.ranks < 2 or not 3 * ROUND_EVENTS <= args.events <= RING // 4:
        parser.error(f"--ranks must be at least 2, --events from {3 * ROUND_EVENTS} to {RING // 4:,}")
    r, e = args.ranks, args.events
    tables, every = [], []
    with tempfile.TemporaryDirectory(prefix="tracing-scaling-") as tmp:
        axes = (
            (f"tracing, {r:,} and {4 * r:,} ranks ({e:,} events per rank)", (f"{r:,} ranks", f"{4 * r:,} ranks"),
             (r, e), (4 * r, e)),
            (f"tracing, {e:,} and {4 * e:,} events per rank ({r:,} ranks)",
             (f"{e:,} events", f"{4 * e:,} events"), (r, e), (r, 4 * e)),
        )
        for i, (title, sizes, at_small, at_large) in enumerate(axes):
            small = write_rings(Path(tmp) / f"{i}-small", *at_small)
            large = write_rings(Path(tmp) / f"{i}-large", *at_large)
            ratios = measure(stages(small), stages(large), args.repeats)
            tables.append(table(title, sizes, ratios))
            every += ratios
    print("\n\n".join(tables))
    code, line = verdict_line(every)
    print(line)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
