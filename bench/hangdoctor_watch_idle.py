"""What `hangdoctor watch` costs while nothing is wrong: CPU time of the watch (and of the scontrol it runs, as
its waited-for children) over a window, as a share of one core, beside a job that logs an iteration a second.

Two targets, measured one after the other in one run: --pid (a local job: /proc and the log) and --jobid on the
local SLURM test cluster (adds one `scontrol show job` per poll). The first 5 s (Python's start, the first
look) are left out; the window is --seconds long. Default --poll 10 s, as the watch's own default; --polls adds
other values side by side.

    .venv/bin/python bench/hangdoctor_watch_idle.py --seconds 60 --polls 10 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
JOB = REPO / "tests" / "hangdoctor" / "fixtures" / "watch_job.py"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime (children waited for: the scontrol calls)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / TICKS


def measure(argv: list[str], seconds: float, env: dict) -> float:
    watcher = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    try:
        time.sleep(5.0)
        start_cpu, start = cpu_seconds(watcher.pid), time.monotonic()
        time.sleep(seconds)
        used, wall = cpu_seconds(watcher.pid) - start_cpu, time.monotonic() - start
    finally:
        watcher.kill()
        watcher.wait()
    return 100.0 * used / wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--polls", type=float, nargs="+", default=[10.0])
    parser.add_argument("--no-slurm", action="store_true", help="only the local target")
    args = parser.parse_args()
    env = dict(os.environ)
    print("| target | poll s | CPU, % of one core |")
    print("|---|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="hd-watch-") as tmp:
        log = Path(tmp) / "train.log"
        with open(log, "ab") as handle:
            job = subprocess.Popen([sys.executable, "-u", str(JOB), "--iters", "100000", "--step", "1"],
                                   stdout=handle, stderr=subprocess.STDOUT)
        try:
            for poll in args.polls:
                share = measure([sys.executable, "-m", "hangdoctor", "watch", "--pid", str(job.pid), "--log", str(log),
                                 "--poll", f"{poll:g}", "--stall", "3600", "--out", f"{tmp}/w-pid-{poll:g}"],
                                args.seconds, env)
                print(f"| --pid (local) | {poll:g} | {share:.3f} |", flush=True)
        finally:
            job.kill()
            job.wait()
        if args.no_slurm:
            return 0
        from slurm.sbatch import BatchJob, render_sbatch, submit
        from slurm.testcluster import local_cluster_for_tests

        cluster = local_cluster_for_tests(Path(tmp), nodes=2, cpus_per_node=4)
        try:
            slurm_env = cluster.env(env)
            spec = BatchJob(program=(sys.executable, "-u", str(JOB), "--iters", "100000", "--step", "1"), tasks=2,
                            tasks_per_node=1, job_name="watch-idle", output=f"/tmp/hd-watch-idle-{os.getpid()}.out")
            job_id = submit(render_sbatch(spec), env=slurm_env, cwd=REPO)
            for poll in args.polls:
                share = measure([sys.executable, "-m", "hangdoctor", "watch", "--jobid", job_id, "--poll", f"{poll:g}",
                                 "--stall", "3600", "--out", f"{tmp}/w-job-{poll:g}"], args.seconds, slurm_env)
                print(f"| --jobid (SLURM, scontrol per poll) | {poll:g} | {share:.3f} |", flush=True)
        finally:
            cluster.stop()
            Path(f"/tmp/hd-watch-idle-{os.getpid()}.out").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
