"""`hangdoctor watch --jobid` beside real jobs on the local SLURM cluster, started as soon as each job is submitted
(the log is the job's StdOut, as scontrol gives it):
- the reference trainer, PP=2 on 2 nodes, hung by skip-loss-broadcast at iteration 2: the stall is caught and its
  verdict saved while the job still runs (its process-group timeout is 300 s), the job is then cancelled and the
  watch ends saying so;
- a straggler (fixtures/watch_job.py) that stops for 8 s and goes on: stalled, then resumed, one report, and the
  watch ends with COMPLETED;
- a dead rank: the job FAILS, the watch ends with its state and no report;
- a job that does not exist: one line.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from hangdoctor.experiments.trainer_job import trainer_batch_job
from slurm.process import run_command
from slurm.sbatch import BatchJob, render_sbatch, submit
from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded
from tests.trainer_runs import MODEL
from hangdoctor.throughput.megatron_log import parse_log
from hangdoctor.topology import ParallelDims

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
JOB = Path(__file__).parent / "fixtures" / "watch_job.py"


@pytest.fixture
def base():
    folder = Path(f"/tmp/hangdoctor-watch-{os.getpid()}-{time.monotonic_ns()}")  # reachable by the job's tasks
    folder.mkdir(parents=True)
    yield folder
    run_command(["rm", "-rf", str(folder)], timeout=30)


def start(cluster, job: BatchJob, out: Path, *watch_args: str) -> tuple[str, subprocess.Popen]:
    env = cluster.env(child_env())
    job_id = submit(render_sbatch(job), env=env, cwd=REPO)
    watcher = subprocess.Popen([PYTHON, "-m", "hangdoctor", "watch", "--jobid", job_id, "--out", str(out),
                                "--poll", "0.5", *watch_args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, cwd=REPO, start_new_session=True)
    return job_id, watcher


def events(out: Path) -> list[dict]:
    path = out / "watch.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for_event(out: Path, kind: str, timeout: float, situation=lambda: "") -> dict:
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in events(out) if e["event"] == kind]
        if found:
            return found[0]
        if time.monotonic() >= deadline:
            pytest.fail(f"no {kind} event within {timeout:.0f}s: {events(out)}\n{situation()}")
        time.sleep(0.5)


def situation(cluster, job_id: str, log: Path, watcher: subprocess.Popen) -> str:
    """What the cluster, the job's log and the watcher say, for a test that waited in vain."""
    env = cluster.env(child_env())
    shown = [run_command(argv, timeout=30, env=env).stdout for argv in
             (["scontrol", "show", "job", "--oneliner", job_id], ["sinfo", "-N", "-l"], ["squeue", "-a"])]
    kill_tree(watcher.pid)
    said = watcher.communicate(timeout=30)[0] if watcher.stdout else ""
    text = log.read_text(errors="replace") if log.exists() else f"({log} does not exist)"
    return "\n".join([*shown, f"job log, last lines:\n{text[-3000:]}", f"watch said:\n{said[-3000:]}"])


def finish(watcher: subprocess.Popen, timeout: float = 120) -> str:
    try:
        out, _ = watcher.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(watcher.pid)
        raise
    return out


def job_state(cluster, job_id: str) -> str:
    shown = run_command(["scontrol", "show", "job", "--oneliner", job_id], timeout=30, env=cluster.env(child_env()))
    return next(f.split("=", 1)[1] for f in shown.stdout.split() if f.startswith("JobState="))


@pytest.mark.timeout(600)  # above the event's own bound, so that a failure says what the job and the watch did
def test_the_trainer_hang_is_caught_while_it_happens_and_the_cancel_ends_the_watch(slurm_cluster, base):
    job = trainer_batch_job(ParallelDims(tp=1, pp=2, dp=1), 1, [*MODEL, "--train-iters", "6", "--run-dir",
                                                                str(base / "run"), "--pg-timeout", "300", "--fault",
                                                                "skip-loss-broadcast:iteration=2"],
                            program=(PYTHON, "-m", "trainer"), job_name="watch-trainer",
                            output=str(base / "trainer-%j.out"), master_port=29641)
    out = base / "watch"
    job_id, watcher = start(slurm_cluster, job, out, "--stall", "15", "--startup", "240", "--samples", "2",
                            "--interval", "1", "--timeout", "60", "--pp", "2")
    try:
        stall = wait_for_event(out, "stall", 360, lambda: situation(slurm_cluster, job_id,
                                                                    base / f"trainer-{job_id}.out", watcher))
        assert job_state(slurm_cluster, job_id) == "RUNNING", "the verdict came before the job's timeout"
        logged = parse_log((base / f"trainer-{job_id}.out").read_text())
        assert stall["iteration"] == logged[-1].iteration, stall  # the last iteration the job's log shows
        verdict = json.loads((Path(stall["report"]) / "report.json").read_text())
        waits = {p["wait"]["op"] for p in verdict["places"] if p["wait"]}
        assert {"broadcast", "recv"} <= waits, verdict["places"]
        run_command(["scancel", job_id], timeout=30, env=slurm_cluster.env(child_env()))
        text = finish(watcher)
    finally:
        run_command(["scancel", job_id], timeout=30, env=slurm_cluster.env(child_env()))
        kill_tree(watcher.pid)
    assert watcher.returncode == 1, text[-3000:]
    assert [e["event"] for e in events(out)] == ["stall", "ended"], events(out)
    assert "job ended: CANCELLED" in text and f"verdict in {stall['report']}/" in text


def test_a_straggler_is_stalled_then_resumed_and_the_job_completes(slurm_cluster, base):
    job = BatchJob(program=(PYTHON, "-u", str(JOB), "--iters", "20", "--step", "0.2", "--stall-at", "5",
                            "--stall-for", "8"), tasks=2, tasks_per_node=1, job_name="watch-straggler",
                   output=str(base / "straggler-%j.out"))
    out = base / "watch"
    job_id, watcher = start(slurm_cluster, job, out, "--stall", "3", "--samples", "1", "--timeout", "30")
    try:
        text = finish(watcher)
    finally:
        kill_tree(watcher.pid)
    assert watcher.returncode == 1, text[-3000:]  # a stall was reported, though the job completed
    assert [e["event"] for e in events(out)] == ["stall", "resumed", "ended"], events(out)
    stall, resumed, ended = events(out)
    assert stall["iteration"] == 4 and resumed["iteration"] == 5 and resumed["seconds"] >= 3
    assert ended["succeeded"] and ended["text"] == "job ended: COMPLETED"
    assert len([p for p in out.iterdir() if p.name.startswith("hang-")]) == 1


def test_a_dead_rank_ends_the_watch_with_the_jobs_state(slurm_cluster, base):
    job = BatchJob(program=(PYTHON, "-u", str(JOB), "--iters", "20", "--step", "0.2", "--fail-at", "4"), tasks=2,
                   tasks_per_node=1, job_name="watch-dead", output=str(base / "dead-%j.out"))
    out = base / "watch"
    job_id, watcher = start(slurm_cluster, job, out, "--stall", "30")
    try:
        text = finish(watcher)
    finally:
        kill_tree(watcher.pid)
    assert watcher.returncode == 1, text[-3000:]
    assert [e["event"] for e in events(out)] == ["ended"]
    # Both ranks exit 1 at iteration 4; a rank that gets there later (a busy machine) is ended by srun first
    # (--kill-on-bad-exit: SIGTERM, exit 143), and srun reports the highest code: the job's own, either way.
    ended = events(out)[0]
    assert ended["text"] in ("job ended: FAILED (exit 1)", "job ended: FAILED (exit 143)"), ended
    assert not ended["succeeded"] and ended["exit_code"] in (1, 143)


def test_a_job_that_does_not_exist_is_one_line(slurm_cluster, tmp_path):
    result = run_bounded([PYTHON, "-m", "hangdoctor", "watch", "--jobid", "987654", "--out", str(tmp_path / "w")],
                         timeout=60, env=slurm_cluster.env(child_env()), cwd=REPO)
    assert result.returncode == 3, result.output
    assert result.stderr.splitlines()[0] == "Error: job 987654 not found" and "Traceback" not in result.stderr
