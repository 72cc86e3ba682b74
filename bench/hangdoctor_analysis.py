"""hangdoctor's analysis alone, over simulated dump sets of 16,384 to 131,072 ranks: time and peak memory.

The dump sets are made from REAL dumps by rank substitution: the collector's node file recorded from the
reference trainer hung by skip-loss-broadcast (tests/hangdoctor/data/trainer_pp2dp2_skip_loss_broadcast.node.json,
2 samples per rank: pp=0 in broadcast, pp=1 in recv) gives every rank of every stage but the last the
broadcast stacks, and the last stage the recv stacks; the gloo fixture's recording
(gloo8_mixed.node.json) adds one SIGSTOPped rank and one straggler whose stack is 400 frames deep.
Ranks get new pids, RANK/LOCAL_RANK/WORLD_SIZE and argv (--tp 8 --pp 16), 8 per node file, in two forms:
"per-rank" node files (hangdoctor-node/1: frames stored once per node, each rank's threads in full) and
"node-merged" ones (hangdoctor-node/2, what the collector writes now: each distinct thread once per node, each
rank's sample naming its threads). Each size and form runs in a fresh process pinned to one core, with the
garbage collector paused as `analyze` and `attach` pause it (clicore/bulk.py):
- load: read and parse every node file (JSON, py-spy frames interned) into a Collection;
- verdict: diagnose() (tree, classes, waits, suspects, hints);
- report: the terminal report rendered into a string, the JSON report serialised, and the HTML report (with its
  SVG picture) rendered; each also on its own, and every stage per rank, so that growth from one size to the next
  shows in each stage (issue 25: less than 1.5x per rank from 16k to 131k ranks).
Peak memory is the process's maximum resident set (ru_maxrss) minus the same process's before loading.
With --flight-recorder files|nodes every rank also gets a Flight Recorder dump, derived from the trainer's
recorded PP2 x TP2 x DP2 dumps (tests/hangdoctor/data/fr/skip_loss_pp2tp2dp2: about 110 entries with their stacks
per rank), with its process groups renamed as the full job would have them (make_fr_set): torch's pickle files
read by the front end, or summaries reduced on the nodes and carried in the node files.

    .venv/bin/python bench/hangdoctor_analysis.py --sizes 16384 65536 131072 --repeat 3 [--flight-recorder nodes]
    .venv/bin/python bench/hangdoctor_analysis.py --sizes 131072 --forms node-merged --rev 95a2aa7

--rev REV measures the code of that git revision beside this checkout's, on the same dump sets, the two
alternating run by run (each child is that revision's own copy of this script, in a temporary worktree): a row
for each; the shared machine's drift then falls on both alike.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO / "tests" / "hangdoctor" / "data"
from hangdoctor.collector import compact  # noqa: E402
PER_NODE = 8


def make_dump_set(world: int, folder: Path, tp: int = 8, pp: int = 16, merged: bool = True) -> None:
    trainer = json.loads((DATA / "trainer_pp2dp2_skip_loss_broadcast.node.json").read_text())
    gloo = json.loads((DATA / "gloo8_mixed.node.json").read_text())
    by_rank = {p["rank"]: p for p in trainer["processes"]}
    gloo_rank = {p["rank"]: p for p in gloo["processes"]}
    source_doc = {id(p): doc for doc in (trainer, gloo) for p in doc["processes"]}
    per_stage = world // pp
    cmdline = ["python", "-m", "trainer", "--tensor-model-parallel-size", str(tp),
               "--pipeline-model-parallel-size", str(pp)]
    stopped, straggler = world // 3, world // 3 + 1
    folder.mkdir(parents=True, exist_ok=True)
    for first in range(0, world, PER_NODE):
        doc = copy.deepcopy({k: v for k, v in trainer.items() if k not in ("processes", "frame_table")})
        doc["node"] = f"node{first // PER_NODE:05d}"
        doc["processes"] = []
        for rank in range(first, min(world, first + PER_NODE)):
            last_stage = rank // per_stage == pp - 1
            source = by_rank[2 + rank % 2] if last_stage else by_rank[rank % 2]
            if rank == stopped:
                source = gloo_rank[2]
            elif rank == straggler:
                source = gloo_rank[7]
            pid = 100000 + rank
            proc = {
                "pid": pid, "ppid": 1, "uid": 0, "exe": "/usr/bin/python3", "cmdline": cmdline, "rank": rank,
                "rank_key": "RANK", "local_rank": rank % PER_NODE, "world_size": world,
                "env": {"RANK": str(rank), "LOCAL_RANK": str(rank % PER_NODE), "WORLD_SIZE": str(world)},
                "samples": [],
            }
            for sample in source["samples"][:2]:
                sample = dict(copy.deepcopy(sample), pyspy_json=compact.expand(source_doc[id(source)], sample))
                sample.pop("pyspy_threads", None)
                for thread in sample.get("pyspy_json") or []:
                    if thread["os_thread_id"] == source["pid"]:
                        thread["os_thread_id"] = pid
                    thread["pid"] = pid
                proc["samples"].append(sample)
            doc["processes"].append(proc)
        compact.factor(doc)  # identical frames stored once per node
        if merged:
            compact.merge(doc)  # as the collector writes it now: identical threads stored once per node
        (folder / f"{doc['node']}.json").write_text(json.dumps(doc, separators=(",", ":")))


FR = DATA / "fr" / "skip_loss_pp2tp2dp2"  # our trainer, PP2 x TP2 x DP2, one replica (dp=1) skipped the broadcast


def make_fr_set(world: int, folder: Path, tp: int = 8, pp: int = 16, where: str = "files") -> float:
    """A Flight Recorder dump per rank, derived from the trainer's recorded 8-rank dumps: each rank takes the
    entries of the recorded rank in its place (first stages from pp=0, the last stage from pp=1, the faulty replica
    dp=world/(tp*pp)//3 from the recorded faulty replica dp=1, tp parity), with every process group renamed after
    the axes it spans and the rank's fixed coordinates, as the full job would have named them.
    where="files": torch's pickle per rank, beside the node files (what `analyze DIR` of a dump folder reads);
    where="nodes": each rank's dump reduced as its node's collector reduces it (collector/fr_summary.py) and
    carried in the node file (what `attach --fr-dir` or a live fetch writes). Returns the seconds per rank that
    reducing took (on the nodes, in parallel, in a real job; here one after the other)."""
    import pickle

    from hangdoctor.collector.fr_summary import summarize

    from hangdoctor.analysis.sequence import join
    from hangdoctor.formats.flight_recorder import read_fr
    from hangdoctor.topology import ParallelDims

    small = ParallelDims(tp=2, pp=2, dp=2)
    recorded = sorted(p for p in FR.glob("fr_rank_?"))
    raws = {int(p.name[-1]): pickle.loads(p.read_bytes()) for p in recorded}  # our own recording: trusted
    axes = {g.group: g.axes for g in join([read_fr(p) for p in recorded], small)}
    dims = ParallelDims.from_world(world, tp=tp, pp=pp)
    faulty = dims.dp // 3
    folder.mkdir(parents=True, exist_ok=True)
    reducing, doc, doc_path = 0.0, None, None
    for rank in range(world):
        c = dims.coords(rank)
        source = small.rank(dp=1 if c.dp == faulty else 0, pp=1 if c.pp == pp - 1 else 0, tp=c.tp % 2)
        raw = dict(raws[source])
        names = {}
        for name, spanned in axes.items():
            fixed = ":".join(f"{a}{getattr(c, a)}" for a in ("tp", "pp", "dp") if a not in spanned)
            names[name] = "0" if len(spanned) == 3 else f"{'+'.join(spanned) or 'self'}:{fixed}:{name}"
        entries = []
        for entry in raw["entries"]:
            group = entry["process_group"]
            entries.append(dict(entry, process_group=[names.get(group[0], group[0]), group[1]]))
        raw["entries"], raw["pg_status"] = entries, {}
        data = pickle.dumps(raw, protocol=2)
        if where == "files":
            (folder / f"fr_rank_{rank}").write_bytes(data)
            continue
        start = time.perf_counter()
        summary = summarize(pickle.loads(data))  # as the collector does it: torch's bytes in, a summary out
        reducing += time.perf_counter() - start
        node = folder / f"node{rank // PER_NODE:05d}.json"
        if doc is None or doc["node"] != node.stem:
            if doc is not None:
                doc_path.write_text(json.dumps(doc, separators=(",", ":")))
            doc_path, doc = node, json.loads(node.read_text())
        proc = next(p for p in doc["processes"] if p["rank"] == rank)
        proc["flight_recorder"] = {"summary": summary, "file": f"/tmp/fr/fr_rank_{rank}"}
    if doc is not None:
        doc_path.write_text(json.dumps(doc, separators=(",", ":")))
    return reducing / world


def measure(folder: str) -> dict:
    """One size, in this (fresh, pinned) process."""
    from rich.console import Console

    from hangdoctor.analysis.verdict import diagnose
    from hangdoctor.clicore.bulk import paused_gc
    from hangdoctor.formats.load import load_paths
    from hangdoctor.identity import TopologyFlags

    try:
        from hangdoctor.formats import job_source
    except ImportError:  # a tree from before it (--against)
        job_source = None
    from hangdoctor.render.html import render_html
    from hangdoctor.render.jsonout import verdict_to_dict
    from hangdoctor.render.terminal import render_verdict

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with paused_gc(freeze=True):
        t0 = time.perf_counter()
        collection = load_paths([Path(folder)], TopologyFlags(tp=8, pp=16))
        if job_source is not None:  # what `analyze` reads beside the dumps (the job's code, where it is here)
            job_source.read_job_source(collection, [])
        t1 = time.perf_counter()
        verdict = diagnose(collection)
        t2 = time.perf_counter()
        render_verdict(verdict, Console(file=io.StringIO(), width=120))
        t_terminal = time.perf_counter()
        json.dumps(verdict_to_dict(verdict))
        t_json = time.perf_counter()
        render_html(verdict)
        t3 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"ranks": len(collection.records), "load_s": t1 - t0, "verdict_s": t2 - t1, "report_s": t3 - t2,
            "terminal_s": t_terminal - t2, "json_s": t_json - t_terminal, "html_s": t3 - t_json,
            "peak_mib": (peak - before) / 1024, "headline": verdict.headline, "fr": len(collection.flight_recorder),
            "first_hint": verdict.hints[0] if verdict.hints else "",
            "places": [(p.where, p.position) for p in verdict.places]}


def measure_size(args: argparse.Namespace, tmp: Path, size: int, form: str, trees: dict[str, Path]) -> None:
    folder = tmp / f"{size}-{form}"
    make_dump_set(size, folder, merged=form == "node-merged")
    reduce_s = make_fr_set(size, folder, where=args.flight_recorder) if args.flight_recorder else 0.0
    disk = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    runs: dict[str, list] = {name: [] for name in trees}
    for _ in range(args.repeat):
        for name, tree in trees.items():  # alternating: drift falls on every tree alike
            out = subprocess.run([sys.executable, str(tree / "bench" / "hangdoctor_analysis.py"), "--child",
                                  str(folder)], capture_output=True, text=True, check=True, timeout=600)
            runs[name].append(json.loads(out.stdout))
    for name, found in runs.items():
        best = lambda key: min(r[key] for r in found)  # noqa: E731  (least disturbed by the shared machine)
        whole = min(r["load_s"] + r["verdict_s"] + r["report_s"] for r in found)
        label = f"{form}" + (f" ({name})" if len(trees) > 1 else "")
        print(f"| {size:,} | {len(list(folder.iterdir())):,} | {label} | {disk:.0f} MiB | {best('load_s'):.2f} | "
              f"{best('verdict_s'):.2f} | {best('report_s'):.2f} | "
              f"{min(r['load_s'] + r['verdict_s'] for r in found):.2f} | {whole:.2f} | "
              + " / ".join(f"{best(k) / size * 1e6:.1f}" for k in ("load_s", "verdict_s", "terminal_s", "json_s",
                                                                     "html_s"))
              + f" / {whole / size * 1e6:.0f} | "
              f"{max(r['peak_mib'] for r in found):.0f} |", flush=True)
    if args.flight_recorder == "nodes":
        print(f"<!-- reducing each rank's Flight Recorder dump on its node took {reduce_s * 1e3:.2f} ms per "
              f"rank (not in the times above: the nodes do it in parallel) -->", flush=True)
    shutil.rmtree(folder)
    first = next(iter(runs.values()))[0]
    print(f"<!-- {size}: {first['headline']} | {first['places']} | {first['fr']} FR dumps: "
          f"{first['first_hint'][:300]} -->", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16384, 65536, 131072])
    parser.add_argument("--forms", nargs="+", choices=("per-rank", "node-merged"), default=["per-rank", "node-merged"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flight-recorder", choices=("files", "nodes"),
                        help="also a Flight Recorder dump per rank, derived from the trainer's recorded ones: as "
                             "torch's files beside the node files, or reduced on the nodes and carried in them")
    parser.add_argument("--rev", help="also measure this git revision's code, alternating with this checkout's")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        print(json.dumps(measure(args.child)))
        return 0
    print("| ranks | node files | form | on disk | load (parse) s | verdict s | report s | load+verdict s | "
          "whole s | us per rank: load / verdict / terminal / JSON / HTML / whole | peak MiB |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="hd-bench-") as tmp:
        trees = {"this checkout": REPO}
        if args.rev:
            trees[args.rev] = Path(tmp) / "rev"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(trees[args.rev]),
                            args.rev], check=True, timeout=120)
        try:
            for size, form in ((size, form) for size in args.sizes for form in args.forms):
                measure_size(args, Path(tmp), size, form, trees)
        finally:
            if args.rev:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(trees[args.rev])],
                               timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
