"""Capture real SLURM output from a fresh local cluster into tests/slurm/data/ (the parsers' test inputs).

    .venv/bin/python -m tests.slurm.capture_outputs [OUTDIR]

Starts its own 4-node cluster, submits: a running 4-node job with 2 tasks per node and a name with a space; a
job held until later (PENDING); a job that completes; a job of the user `nobody`. Then saves what squeue,
scontrol show job, scontrol listpids, scontrol show hostnames and srun print about them. Job ids differ from run
to run; the tests read them from the files.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from slurm.process import run_command
from slurm.testcluster import LocalCluster

DATA = Path(__file__).resolve().parent / "data"
PAYLOAD = "import os, time; print(os.environ['SLURMD_NODENAME'], os.environ['SLURM_PROCID'], flush=True); time.sleep(120)"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DATA
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="hangdoctor-capture-"))
    base.chmod(0o755)
    cluster = LocalCluster(base, nodes=4, remove_base_on_stop=True).start()
    env = cluster.env()

    def run(*argv: str, timeout: float = 20, **kw):
        return run_command(list(argv), timeout=timeout, env=env, cwd=base, **kw)

    def save(name: str, text: str) -> None:
        (out / name).write_text(text)

    def wait_state(job: str, state: str) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if run("squeue", "--noheader", "--jobs", job, "--format=%T").stdout.strip() == state:
                return
            if state == "COMPLETED" and "JobState=COMPLETED" in run("scontrol", "show", "job", "-o", job).stdout:
                return
            time.sleep(0.2)
        raise SystemExit(f"job {job} never reached {state}")

    try:
        script = base / "job.sh"
        script.write_text(f"#!/bin/bash\nsrun python3 -c \"{PAYLOAD}\"\n")
        running = run("sbatch", "--parsable", "--job-name=tiny gpt", "--nodes=4", "--ntasks-per-node=2",
                      f"--output={base}/out-%j.txt", str(script)).stdout.strip()
        pending = run("sbatch", "--parsable", "--begin=now+3600", "--nodes=2", "--job-name=later",
                      "--wrap", "sleep 1").stdout.strip()
        done = run("sbatch", "--parsable", "--nodes=1", "--job-name=quick", f"--output={base}/quick.txt",
                   "--wrap", "true").stdout.strip()
        other = run("runuser", "-u", "nobody", "--", "sbatch", "--parsable", "--nodes=1", "--job-name=theirs",
                    "--output=/dev/null", "--chdir=/tmp", "--wrap", "sleep 120").stdout.strip()
        for job, state in ((running, "RUNNING"), (pending, "PENDING"), (done, "COMPLETED"), (other, "RUNNING")):
            wait_state(job, state)
        lines = base / f"out-{running}.txt"  # each of the 8 tasks prints one line once it has started
        deadline = time.monotonic() + 30
        while not (lines.exists() and len(lines.read_text().splitlines()) == 8):
            if time.monotonic() > deadline:
                raise SystemExit(f"job {running}: not all of its 8 tasks started within 30s")
            time.sleep(0.2)
        save("squeue.txt", run("squeue", "--noheader", "--format=%i|%u|%T|%D|%N|%M|%l|%P|%j").stdout)
        save("squeue_seed_format.txt",
             run("squeue", "-u", "root", "-o", "%.16i %.9P %.26j %.8T %.10M %.8l %.6D %.20S %R").stdout)
        save("show_job_running_oneliner.txt", run("scontrol", "show", "job", "--oneliner", running).stdout)
        save("show_job_running.txt", run("scontrol", "show", "job", running).stdout)
        save("show_job_pending.txt", run("scontrol", "show", "job", "--oneliner", pending).stdout)
        save("show_job_completed.txt", run("scontrol", "show", "job", "--oneliner", done).stdout)
        save("show_job_other_user.txt", run("scontrol", "show", "job", "--oneliner", other).stdout)
        save("show_job_all.txt", run("scontrol", "show", "job").stdout)
        save("show_job_invalid.stderr", run("scontrol", "show", "job", "999999").stderr)
        for node in ("n1", "n3"):
            save(f"listpids_{node}.txt", run("scontrol", "listpids", running, node).stdout)
        missing = run("scontrol", "listpids", pending, "n2")
        save("listpids_no_steps.txt", missing.stdout + missing.stderr)
        save("show_hostnames.txt", run("scontrol", "show", "hostnames", "n[1-4]").stdout)
        save("srun_other_user.stderr", run("srun", f"--jobid={other}", "--overlap", "--gres=gpu:0", "--nodes=1",
                                           "--ntasks-per-node=1", "true").stderr)
        save("srun_invalid_job.stderr", run("srun", "--jobid=999999", "--overlap", "true").stderr)
        save("jobs.txt", f"running={running}\npending={pending}\ncompleted={done}\nother={other}\n")
        print(f"saved to {out}")
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
