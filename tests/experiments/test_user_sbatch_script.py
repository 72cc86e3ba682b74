"""A user's own batch script on the local SLURM cluster (`hangdoctor experiment --sbatch-script FILE`): submitted
as it is once per cell, its #SBATCH lines deciding the job (2 tasks on one node, its own --output pattern), the
toggle exported (SKIP_LOSS_ALLREDUCE=0,1), the output file found with scontrol, the iteration lines read with
--iteration-regex. The run with the toggle on hangs (fixtures/ddp_example.py: rank 1 stops before an all_reduce),
is diagnosed with `hangdoctor attach --jobid` while it hangs, then cancelled."""

import json
from pathlib import Path

import pytest

from slurm.jobs import list_jobs, show_job
from tests.experiments.test_user_torchrun import REGEX, SCRIPT, TRAIN
from tests.support import PYTHON, child_env, run_bounded

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

USER_SCRIPT = f"""#!/bin/bash
#SBATCH --job-name=my-ddp
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --output=logs/%x-%j.out
# A user's job: torch's env:// rendezvous from SLURM's variables, the training script's flags in "$@".
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
echo "CLB=$CUDA_LAUNCH_BLOCKING skip=$SKIP_LOSS_ALLREDUCE gpus=$HANGDOCTOR_GPUS"
srun bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS exec "$0" "$@"' \\
    {PYTHON} {SCRIPT} --steps 6 "$@"
"""


@pytest.fixture(scope="module")
def experiment(slurm_cluster, tmp_path_factory):
    home = tmp_path_factory.mktemp("user-sbatch")
    (home / "logs").mkdir()
    (home / "train.sbatch").write_text(USER_SCRIPT)
    out = home / "exp"
    result = run_bounded([
        PYTHON, "-m", "hangdoctor", "experiment", "--sbatch-script", "train.sbatch", "--out", str(out),
        "--config", "two=--gpus 2 --width 16", "--toggle", "SKIP_LOSS_ALLREDUCE=0,1",
        "--iteration-regex", REGEX, "--warmup", "1", "--hang-timeout", "8", "--startup-timeout", "120",
        "--poll-interval", "0.5", "--json",
    ], timeout=280, env=child_env(SLURM_CONF=slurm_cluster.env()["SLURM_CONF"], CUDA_LAUNCH_BLOCKING="0"), cwd=home)
    return home, result, slurm_cluster


def test_the_script_ran_as_it_is_once_per_cell_and_was_measured(experiment):
    home, result, cluster = experiment
    assert result.returncode == 1, result.output[-5000:]
    runs = json.loads(result.stdout)["runs"]
    assert [(r["toggles"], r["status"], r["launcher"]) for r in runs] == [
        ({"SKIP_LOSS_ALLREDUCE": "0"}, "completed", "sbatch-script"),
        ({"SKIP_LOSS_ALLREDUCE": "1"}, "hung", "sbatch-script")]
    job_ids = [r["job"].split()[1] for r in runs]
    assert [show_job(j, env=cluster.env()).state for j in job_ids] == ["COMPLETED", "CANCELLED"]
    assert not list_jobs(job_ids=job_ids, env=cluster.env())
    for run, job_id, skip in zip(runs, job_ids, "01"):
        log = home / "logs" / f"my-ddp-{job_id}.out"  # the script's own --output, its own job name
        assert (Path(run["run_dir"]) / "train.log").resolve() == log
        assert f"CLB=0 skip={skip} gpus=2\n" in log.read_text()  # the caller's environment, the run's exported
    ok = runs[0]
    assert (ok["measured_over"], ok["first_measured"], ok["last_measured"]) == ("median of iterations 2-6", 2, 6)
    assert ok["sec_per_it"] > 0 and ok["last_iteration"] == 6


def test_the_hung_job_was_diagnosed_before_it_was_cancelled(experiment):
    home, result, _ = experiment
    hung = json.loads(result.stdout)["runs"][1]
    assert hung["reason"] == "no new iteration line for 8s after iteration 2"
    assert hung["stopped"] == "cancelled (CANCELLED)" and hung["verdict_hung"] is True
    verdict = json.loads((Path(hung["verdict_folder"]) / "verdict.json").read_text())
    assert verdict["headline"].endswith("(2/2 responded)")
    assert sorted(p["position"] for p in verdict["places"]) == [f"all_reduce <- {TRAIN}", f"sleep <- {TRAIN}"]
