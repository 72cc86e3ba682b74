"""Time the local test cluster: start (to all nodes idle), first batch job to RUNNING, one
`run_step_on_each_node` over every node, and stop. Several rounds in one run; medians printed.

    .venv/bin/python bench/slurm_cluster.py [--nodes 4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from slurm.process import run_command
from slurm.sbatch import wait_for_state
from slurm.steps import run_step_on_each_node
from slurm.testcluster import local_cluster_for_tests


def one_round(nodes: int) -> dict[str, float]:
    t0 = time.monotonic()
    cluster = local_cluster_for_tests(None, nodes=nodes)
    t1 = time.monotonic()
    env = cluster.env()
    job = run_command(["sbatch", "--parsable", f"--nodes={nodes}", "--output=/dev/null", "--chdir=/tmp",
                       "--wrap", "sleep 120"], timeout=30, env=env).stdout.strip()
    wait_for_state(job, {"RUNNING"}, timeout=60, env=env, interval=0.02)
    t2 = time.monotonic()
    run = run_step_on_each_node(job, cluster.node_names, ["true"], timeout=30, env=env, python=sys.executable)
    assert not run.missing, run
    t3 = time.monotonic()
    left = cluster.stop()
    assert not left, left
    t4 = time.monotonic()
    return {"start": t1 - t0, "first job running": t2 - t1, "step on every node": t3 - t2, "stop": t4 - t3}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds = [one_round(args.nodes) for _ in range(args.rounds)]
    print(f"local cluster of {args.nodes} nodes, {args.rounds} rounds (seconds: median [min-max])")
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        print(f"  {key:<20} {statistics.median(values):6.2f}  [{min(values):.2f}-{max(values):.2f}]")


if __name__ == "__main__":
    main()
