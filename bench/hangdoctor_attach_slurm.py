"""`hangdoctor attach --jobid` vs the seed's own srun method, on a hung multi-node job of the local SLURM cluster.

The seed (seeds/002, "py-spying all processes") ran, from the login node, one extra step with one task per node:

    srun --jobid $JOBID --overlap --gres=gpu:0 --nodes=$N --tasks-per-node=1 sh -c \
        'ps aux | grep python | egrep -v "grep|srun" | grep `whoami` | awk "{print \$2}" | xargs -I {} py-spy dump --pid {}'

Two changes make that runnable here, neither of which makes it slower:
- `grep <the job's ready folder>` replaces `grep whoami`: other users' Python processes share this machine;
- the virtual nodes share one kernel, so `ps` on any of them lists every node's ranks: the seed's loop would dump
  all ranks on every node. A filter before `xargs` keeps the pids whose /proc/PID/environ says
  SLURMD_NODENAME=<this node>, so each node dumps its own ranks, as on a real cluster.
`hangdoctor attach --jobid J --json --out DIR` runs its one step (a collector per node, reports back through
srun's output), merges, analyses and writes its reports. Both run against the same hung job (the gloo fixture,
--ranks ranks over --nodes nodes, every rank blocked in a collective), alternately first, --rounds rounds after a
warm-up round; medians. The virtual nodes are slurmd processes on this one 2-core machine: every node's py-spy
runs on the same two cores, which a real cluster would run on N machines.

    .venv/bin/python bench/hangdoctor_attach_slurm.py --nodes 4 --ranks 16 --rounds 9 [--compare DIR]

`--compare DIR` also times the hangdoctor of another checkout (e.g. `git archive <commit> | tar -x -C DIR`),
interleaved with the others: its attach, its collector and its step wrapper all run from DIR.
`--pieces` then times the parts, interleaved, --rounds times: srun alone (`true`), our step alone (srun and the
step wrapper, `true`), and on this machine without srun, the node side of each method for all nodes side by side
(the seed's loops; our collectors; our collectors under the step wrapper).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hangdoctor.experiments.trainer_job import trainer_batch_job  # noqa: E402
from slurm.process import run_command  # noqa: E402
from slurm.sbatch import render_sbatch, submit, wait_for_state  # noqa: E402
from slurm.testcluster import local_cluster_for_tests  # noqa: E402
from tests.hangdoctor.livejobs import FIXTURES  # noqa: E402
from tests.support import PYTHON, child_env  # noqa: E402
from hangdoctor.topology import ParallelDims  # noqa: E402

PYSPY = str(Path(PYTHON).parent / "py-spy")
# Keeps the pids whose environment says they run on this virtual node (as `ps` on a real node would).
NODE_FILTER = "while read p; do grep -qzx \"SLURMD_NODENAME=$SLURMD_NODENAME\" /proc/$p/environ && echo $p; done"


def installed_env(base: dict[str, str], pycache: Path) -> dict[str, str]:
    """Python as an installed tool runs: bytecode cached (this sandbox sets PYTHONDONTWRITEBYTECODE=1, which
    would make every hangdoctor process compile its modules from source; the seed's loop has no Python)."""
    env = dict(base)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def timed(argv: list[str], env: dict[str, str], bound: float, cwd: Path = REPO) -> tuple[float, str, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        return float("inf"), "", -9
    return time.perf_counter() - start, out, proc.returncode


def pieces(job_id: str, nodes: list[str], seed_sh: str, env: dict[str, str], rounds: int) -> None:
    from hangdoctor.sources import CollectOptions
    from hangdoctor.sources.remote import collector_argv
    from slurm.steps import step_argv

    collector = collector_argv(CollectOptions(pyspy=PYSPY), python=PYTHON, match={"SLURM_JOB_ID": job_id},
                               time_limit=20)
    wrapper = step_argv(job_id, nodes, ["true"], payload_timeout=20, python=PYTHON)
    wrap = wrapper[wrapper.index("-S") - 1:-1]  # PYTHON -S .../stepwrap.py --timeout=20 --

    def on_each_node(argv_for) -> None:  # one process per virtual node, side by side, as srun would start them
        procs = [subprocess.Popen(argv_for(node), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=dict(env, SLURMD_NODENAME=node)) for node in nodes]
        for proc in procs:
            proc.communicate(timeout=60)

    parts = {
        "srun alone: the seed's step running `true`": lambda: subprocess.run(
            ["srun", f"--jobid={job_id}", "--overlap", "--gres=gpu:0", f"--nodes={len(nodes)}", "--tasks-per-node=1",
             "true"], env=env, capture_output=True, timeout=60),
        "our step alone: srun and the step wrapper running `true`": lambda: subprocess.run(
            wrapper, env=env, capture_output=True, timeout=60),
        "node side, no srun: the seed's loops": lambda: on_each_node(lambda node: ["sh", "-c", seed_sh]),
        "node side, no srun: our collectors": lambda: on_each_node(lambda node: [*collector, "--node", node]),
        "node side, no srun: our collectors under the step wrapper": lambda: on_each_node(
            lambda node: [*wrap, *collector, "--node", node]),
    }
    times: dict[str, list[float]] = {name: [] for name in parts}
    for round_ in range(rounds + 1):
        for name in (list(parts) if round_ % 2 else list(reversed(parts))):
            start = time.perf_counter()
            parts[name]()
            if round_:
                times[name].append(time.perf_counter() - start)
    print(f"pieces, {len(nodes)} nodes side by side on this machine, {rounds} rounds (seconds, median [min])")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.3f} [{min(values):.3f}] |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--ranks", type=int, default=16, help="ranks of the hung job (a multiple of --nodes)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--bound", type=float, default=60, help="seconds after which a method is stopped")
    parser.add_argument("--compare", type=Path, metavar="DIR", help="also time the hangdoctor of this checkout")
    parser.add_argument("--pieces", action="store_true", help="then time the parts of each method")
    args = parser.parse_args()
    if args.ranks % args.nodes:
        parser.error("--ranks must be a multiple of --nodes")
    per_node = args.ranks // args.nodes
    with tempfile.TemporaryDirectory(prefix="hd-bench-slurm-") as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)  # the job runs as this user, but keep the ready folder readable anyway
        ready = tmp / "ready"
        cluster = local_cluster_for_tests(None, nodes=args.nodes, cpus_per_node=max(8, per_node))
        job_id = None
        try:
            env = installed_env(cluster.env(child_env()), tmp / "pycache")
            job = trainer_batch_job(ParallelDims.from_world(args.ranks, tp=2, pp=2), per_node, ["--ready-dir", str(ready), "--lifetime", "1800"], job_name="hung-gloo-bench", program=(PYTHON, "-u", str(FIXTURES / "hung_gloo.py")), output=str(tmp / "gloo-%j.out"), master_port=29671)
            job_id = submit(render_sbatch(job), env=env, cwd=REPO)
            wait_for_state(job_id, {"RUNNING"}, timeout=60, env=env)
            deadline = time.monotonic() + 600
            while len(list(ready.glob("rank*"))) < args.ranks:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the job's ranks were not ready: {sorted(ready.glob('*'))}")
                time.sleep(0.5)
            time.sleep(2.0)  # from "ready" to blocked in the collective
            seed_sh = (f"ps aux | grep python | egrep -v 'grep|srun' | grep {ready} | awk '{{print $2}}' "
                       f"| {NODE_FILTER} | xargs -I {{}} {PYSPY} dump --pid {{}}")
            seed = ["srun", f"--jobid={job_id}", "--overlap", "--gres=gpu:0", f"--nodes={args.nodes}",
                    "--tasks-per-node=1", "sh", "-c", seed_sh]
            attach = [PYTHON, "-m", "hangdoctor", "attach", "--jobid", job_id, "--json"]
            commands = {"seed": seed, "hangdoctor": attach}
            cwds = {"seed": REPO, "hangdoctor": REPO}
            if args.compare:
                commands["compared"], cwds["compared"] = attach, args.compare.resolve()
            times: dict[str, list[float]] = {name: [] for name in commands}
            for round_ in range(args.rounds + 1):  # round 0 warms caches (and the bytecode cache) and is not kept
                order = list(commands) if round_ % 2 else list(reversed(commands))
                for name in order:
                    argv = commands[name] + (["--out", str(tmp / f"{name}{round_}")] if name != "seed" else [])
                    seconds, stdout, code = timed(argv, env, args.bound, cwds[name])
                    if name != "seed":
                        data = json.loads(stdout)
                        assert code == 0 and data["responded"]["count"] == args.ranks, data["headline"]
                        assert len(data["nodes"]) == args.nodes, data["nodes"]
                        headline = data["headline"]
                    else:
                        assert code == 0, stdout[-2000:]
                        processes = stdout.count("Process ")
                        assert processes == args.ranks, f"the seed's loop dumped {processes} processes"
                    if round_:
                        times[name].append(seconds)
            med = {name: statistics.median(v) for name, v in times.items()}
            print(f"job {job_id}: gloo fixture, {args.ranks} ranks over {args.nodes} virtual nodes "
                  f"({per_node} per node, one 2-core machine), {args.rounds} rounds after a warm-up, alternating order")
            print(f"hangdoctor verdict: {headline}")
            print(f"seed's loop: {processes} processes dumped ({per_node} per node), stacks as text, no analysis")
            print("| method | median s | min s | max s |")
            print("|---|---:|---:|---:|")
            labels = {"seed": "seed's `srun ... sh -c 'ps | grep | xargs py-spy dump'`",
                      "hangdoctor": "`hangdoctor attach --jobid --json` (step, collect, analyse, report)",
                      "compared": f"the same, hangdoctor from {args.compare}"}
            for name, values in times.items():
                print(f"| {labels[name]} | {med[name]:.2f} | {min(values):.2f} | {max(values):.2f} |")
            print(f"ratio seed / hangdoctor (medians): {med['seed'] / med['hangdoctor']:.2f}x")
            if args.compare:
                print(f"ratio seed / hangdoctor from {args.compare} (medians): {med['seed'] / med['compared']:.2f}x")
            if args.pieces:
                pieces(job_id, cluster.node_names, seed_sh, env, args.rounds)
        finally:
            if job_id:
                run_command(["scancel", job_id], timeout=30, env=cluster.env())
            left = cluster.stop()
            assert not left, left
    return 0


if __name__ == "__main__":
    sys.exit(main())
