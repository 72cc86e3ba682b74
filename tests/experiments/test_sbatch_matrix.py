"""A real matrix through sbatch on the local SLURM cluster: the reference trainer, two topologies x
CUDA_LAUNCH_BLOCKING=0,1, the PP=2 one with the injected hang (skip-loss-broadcast at iteration 2, a long
--pg-timeout so that the watchdog, not gloo, ends it). The table shows the hung runs as hung with hangdoctor's
verdict, taken while they hung, and the others with figures from their logs. Plus a job that never leaves the
queue. About a minute on 2 cores: 4 DeepSpeed launches of 2 ranks on 2 nodes each."""

import json
import statistics
import time
from pathlib import Path

import pandas as pd
import pytest

from slurm.jobs import list_jobs, show_job
from tests.support import PYTHON, REPO, child_env, run_bounded

pytestmark = [pytest.mark.slow, pytest.mark.slurm]
MODEL = ("--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --vocab-size 64 "
         "--micro-batch-size 2 --global-batch-size 4 --train-iters 5")
ENGINE = "deepspeed/runtime/pipe/engine.py"
BROADCAST = f"broadcast <- PipelineEngine._aggregate_total_loss ({ENGINE})"
RECV = f"recv <- PipelineEngine._exec_recv_activations ({ENGINE})"


def experiment(cluster, out: Path, *argv: str, timeout: float = 420):
    env = child_env(SLURM_CONF=cluster.env()["SLURM_CONF"])
    return run_bounded([PYTHON, "-m", "hangdoctor", "experiment", "--out", str(out), *argv], timeout=timeout,
                       env=env, cwd=REPO)


@pytest.fixture(scope="module")
def matrix(slurm_cluster, tmp_path_factory):
    out = tmp_path_factory.mktemp("sbatch-matrix") / "exp"
    began = time.monotonic()
    result = experiment(
        slurm_cluster, out, "--config", "tp2=--tp 2 --gpus 2",
        "--config", "pp2-hang=--pp 2 --gpus 2 --fault skip-loss-broadcast:iteration=2 --pg-timeout 300",
        "--toggle", "CUDA_LAUNCH_BLOCKING=0,1", "--common", MODEL, "--gpus-per-node", "1",
        "--hang-timeout", "12", "--startup-timeout", "180", "--poll-interval", "0.5", "--title", "local cluster")
    print(f"sbatch matrix: {time.monotonic() - began:.0f}s")
    runs = json.loads((out / "results.json").read_text())["runs"] if (out / "results.json").exists() else []
    return out, result, runs, slurm_cluster


def test_every_run_ran_as_a_batch_job_and_ended(matrix):
    out, result, runs, cluster = matrix
    assert result.returncode == 1, result.output[-5000:]  # 1: some runs hung
    assert [(r["config"], r["toggles"], r["status"]) for r in runs] == [
        ("tp2", {"CUDA_LAUNCH_BLOCKING": "0"}, "completed"), ("tp2", {"CUDA_LAUNCH_BLOCKING": "1"}, "completed"),
        ("pp2-hang", {"CUDA_LAUNCH_BLOCKING": "0"}, "hung"), ("pp2-hang", {"CUDA_LAUNCH_BLOCKING": "1"}, "hung")]
    job_ids = [r["job"].split()[1] for r in runs]
    states = [show_job(j, env=cluster.env()).state for j in job_ids]
    assert states == ["COMPLETED", "COMPLETED", "CANCELLED", "CANCELLED"]
    assert not list_jobs(job_ids=job_ids, env=cluster.env()), "a job of the experiment is still queued or running"
    for run in runs:
        script = (Path(run["run_dir"]) / "job.sbatch").read_text()
        assert f"export CUDA_LAUNCH_BLOCKING={run['toggles']['CUDA_LAUNCH_BLOCKING']}" in script
        assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script


def test_completed_runs_have_the_figures_of_their_logs(matrix):
    out, _, runs, _ = matrix
    for run in runs[:2]:
        metrics = [json.loads(line) for line in (Path(run["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
        kept = [m for m in metrics if m["iteration"] >= 3]  # iterations 3-5 after 2 of warm-up
        assert run["measured_over"] == "median of iterations 3-5" and run["last_iteration"] == 5
        assert run["sec_per_it"] * 1000 == pytest.approx(statistics.median(m["elapsed_ms"] for m in kept), abs=0.05)
        assert run["tflops"] == pytest.approx(statistics.median(m["tflops"] for m in kept), rel=5e-3)
        assert run["tokens_per_s"] == pytest.approx(run["samples_per_s"] * 16)
        assert (run["gpus"], run["tp"], run["pp"], run["dp"], run["mbs"], run["gbs"]) == (2, 2, 1, 1, 2, 4)


def test_hung_runs_carry_the_verdict_hangdoctor_gave_while_they_hung(matrix):
    out, _, runs, _ = matrix
    for run in runs[2:]:
        assert run["reason"] == "no new iteration line for 12s after iteration 2" and run["last_iteration"] == 2
        assert run["stopped"] == "cancelled (CANCELLED)" and run["verdict_hung"] is True
        folder = Path(run["verdict_folder"])
        verdict = json.loads((folder / "verdict.json").read_text())
        # Both ranks answered (2/2): hangdoctor attached before the job was cancelled.
        assert verdict["headline"] == "HUNG: 2 ranks stuck, 2 in 2 calls (2/2 responded)"
        assert [(p["position"], p["where"]) for p in verdict["places"]] == [(BROADCAST, "pp=0"), (RECV, "pp=1")]
        hosts = [p["hosts"] for p in verdict["places"]]
        assert len(hosts[0]) == len(hosts[1]) == 1 and hosts[0] != hosts[1]  # one rank on each of the job's 2 nodes
        assert run["verdict"] == (folder / "verdict.txt").read_text().strip()
        # the first suspect's sentence: the last stage skipped the loss broadcast and went on to the next step
        assert run["verdict"].startswith(verdict["headline"] + "; rank 1 [medium] never entered the broadcast of the "
                                         "loss from the last stage that rank 0 waits in")
        assert (folder / "report.html").exists()
        assert sorted(p.name for p in (folder / "nodes").iterdir()) == sorted(f"{h[0]}.json" for h in hosts)


def test_the_table_csv_and_plots(matrix):
    out, result, runs, _ = matrix
    lines = (out / "results.md").read_text().splitlines()
    assert lines[0] == "## local cluster"
    assert lines[2] == ("| Config | GPUs | Size | DP | TP | PP | MBS | GBS | CUDA_LAUNCH_BLOCKING | Sec/it | TFLOPs | "
                        "Samples/s | Tokens/s | Notes |")
    rows = [line.split(" | ") for line in lines[4:8]]
    assert [row[:9] for row in rows] == [["| tp2", "2", "28K", "1", "2", "1", "2", "4", "0"],
                                         ["| tp2", "2", "28K", "1", "2", "1", "2", "4", "1"],
                                         ["| pp2-hang", "2", "28K", "1", "1", "2", "2", "4", "0"],
                                         ["| pp2-hang", "2", "28K", "1", "1", "2", "2", "4", "1"]]
    assert all(cell != "-" for row in rows[:2] for cell in row[9:13])
    assert all(row[9:13] == ["-"] * 4 for row in rows[2:])
    for row, run in zip(rows[2:], runs[2:]):
        assert row[13] == f"hung after iteration 2: {run['verdict']} |"
    frame = pd.read_csv(out / "results.csv")
    assert list(frame["status"]) == ["completed", "completed", "hung", "hung"]
    assert list(frame["CUDA_LAUNCH_BLOCKING"]) == [0, 1, 0, 1]
    assert (out / "throughput.png").stat().st_size > 10_000 and (out / "tflops.png").stat().st_size > 10_000
    assert "hung [1]" in result.stdout and "[2] 04-pp2-hang-CUDA_LAUNCH_BLOCKING=1-r1: hung after iteration 2" in \
        result.stdout


def test_a_job_that_never_leaves_the_queue_is_cancelled_at_the_queue_timeout(slurm_cluster, tmp_path):
    result = experiment(slurm_cluster, tmp_path / "exp", "--config", "later=--gpus 1", "--sbatch-option",
                        "begin=now+3600", "--queue-timeout", "3", "--poll-interval", "0.5", "--json", timeout=120)
    assert result.returncode == 1, result.output
    run = json.loads(result.stdout)["runs"][0]
    assert (run["status"], run["reason"]) == ("not started", "still PENDING (BeginTime) after 3s")
    assert run["stopped"] == "cancelled (CANCELLED)" and run["measured_over"].startswith("no figure")
    assert show_job(run["job"].split()[1], env=slurm_cluster.env()).state == "CANCELLED"
