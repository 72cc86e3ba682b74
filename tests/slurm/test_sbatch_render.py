"""sbatch scripts rendered from a topology (pure); the real run on the local cluster is in test_live.py."""

import pytest

from slurm.sbatch import TrainerJob, render_sbatch, trainer_command
from topology import ParallelDims


def job(**kw) -> TrainerJob:
    base = dict(dims=ParallelDims(tp=2, pp=2, dp=2), tasks_per_node=4, trainer_args=["--num-layers", "4"])
    base.update(kw)
    return TrainerJob(**base)


def test_nodes_and_tasks_come_from_the_topology():
    script = render_sbatch(job())
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --ntasks-per-node=4\n" in script
    assert "TP=2 PP=2 DP=2 (8 ranks" in script
    assert script.startswith("#!/bin/bash\n")


def test_srun_line_runs_the_trainer_with_its_topology_flags():
    last = render_sbatch(job(kill_on_bad_exit=False)).strip().splitlines()[-1]
    assert last == ("srun --kill-on-bad-exit=0 python -m trainer --tensor-model-parallel-size 2 "
                    "--pipeline-model-parallel-size 2 --num-layers 4")
    assert trainer_command(job())[:3] == ["python", "-m", "trainer"]


def test_toggles_and_values_are_shell_quoted():
    script = render_sbatch(job(env={"CUDA_LAUNCH_BLOCKING": "1", "NCCL_DEBUG": "INFO; rm -rf /"},
                               trainer_args=["--run-dir", "my runs/a"], job_name="tiny gpt"))
    assert "export CUDA_LAUNCH_BLOCKING=1\n" in script
    assert "export NCCL_DEBUG='INFO; rm -rf /'\n" in script
    assert "'my runs/a'" in script
    assert "#SBATCH '--job-name=tiny gpt'" in script  # sbatch honours quotes in #SBATCH lines


def test_master_addr_is_derived_from_the_node_list():
    script = render_sbatch(job(master_port=29500))
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST"' in script
    assert "export MASTER_PORT=29500" in script


def test_optional_headers():
    script = render_sbatch(job(gpus_per_node=4, time_limit="01:00:00", sbatch_options={"partition": "gpu_p5"}))
    for line in ("#SBATCH --gres=gpu:4", "#SBATCH --time=01:00:00", "#SBATCH --partition=gpu_p5"):
        assert line in script
    assert "--gres" not in render_sbatch(job())


@pytest.mark.parametrize("kw, fragment", [
    (dict(tasks_per_node=3), "do not fill nodes of 3 tasks"),
    (dict(env={"BAD-NAME": "1"}), "bad environment variable name"),
    (dict(env={"X": "a\nb"}), "newline"),
    (dict(sbatch_options={"Partition;x": "a"}), "bad sbatch option"),
    (dict(master_port=70000), "not a TCP port"),
])
def test_bad_jobs_are_value_errors(kw, fragment):
    with pytest.raises(ValueError, match=fragment):
        render_sbatch(job(**kw))
