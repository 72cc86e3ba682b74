"""sbatch scripts for any program (pure); the real run on the local cluster is in test_live.py. The trainer's own
command line for a topology is experiments' (tests/experiments/test_trainer_job.py)."""

import pytest

from slurm.sbatch import BatchJob, render_sbatch


def job(**kw) -> BatchJob:
    base = dict(program=("python", "train.py", "--num-layers", "4"), tasks=8, tasks_per_node=4)
    base.update(kw)
    return BatchJob(**base)


def test_nodes_come_from_the_tasks():
    script = render_sbatch(job(description="TP=2 PP=2 DP=2 (8 ranks)"))
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --ntasks-per-node=4\n" in script
    assert "# Rendered by slurm/sbatch.py: TP=2 PP=2 DP=2 (8 ranks) on 2 node(s) x 4 tasks." in script
    assert "8 ranks on 2 node(s)" in render_sbatch(job())
    assert script.startswith("#!/bin/bash\n")


def test_srun_line_runs_the_program_as_given():
    last = render_sbatch(job(kill_on_bad_exit=False)).strip().splitlines()[-1]
    assert last == "srun --kill-on-bad-exit=0 python train.py --num-layers 4"


def test_toggles_and_values_are_shell_quoted():
    script = render_sbatch(job(env={"CUDA_LAUNCH_BLOCKING": "1", "NCCL_DEBUG": "INFO; rm -rf /"},
                               program=("python", "train.py", "--run-dir", "my runs/a"), job_name="tiny gpt"))
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
    (dict(tasks_per_node=3), "8 ranks do not fill nodes of 3 tasks"),
    (dict(program=()), "no program"),
    (dict(env={"BAD-NAME": "1"}), "bad environment variable name"),
    (dict(env={"X": "a\nb"}), "newline"),
    (dict(sbatch_options={"Partition;x": "a"}), "bad sbatch option"),
    (dict(master_port=70000), "not a TCP port"),
])
def test_bad_jobs_are_value_errors(kw, fragment):
    with pytest.raises(ValueError, match=fragment):
        render_sbatch(job(**kw))
