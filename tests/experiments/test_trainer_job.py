"""The trainer's command line and batch job for a topology (experiments/trainer_job.py), rendered by slurm.sbatch."""

import pytest

from hangdoctor.experiments.trainer_job import trainer_batch_job, trainer_command
from slurm.sbatch import render_sbatch
from hangdoctor.topology import ParallelDims

DIMS = ParallelDims(tp=2, pp=2, dp=2)


def test_the_trainer_gets_its_topology_flags_and_dp_is_the_rest_of_the_world():
    assert trainer_command(DIMS, ["--num-layers", "4"]) == [
        "python", "-m", "trainer", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
        "--num-layers", "4"]
    job = trainer_batch_job(DIMS, 4, ["--num-layers", "4"], program=("py", "stand_in.py"), env={"A": "1"})
    assert (job.tasks, job.nodes, job.program[:2], job.env) == (8, 2, ("py", "stand_in.py"), {"A": "1"})
    script = render_sbatch(job)
    assert "TP=2 PP=2 DP=2 (8 ranks" in script
    assert script.strip().splitlines()[-1] == ("srun --kill-on-bad-exit=1 py stand_in.py --tensor-model-parallel-size "
                                               "2 --pipeline-model-parallel-size 2 --num-layers 4")


def test_a_topology_that_does_not_fill_the_nodes_names_itself():
    with pytest.raises(ValueError, match=r"8 ranks \(TP=2 PP=2 DP=2.*do not fill nodes of 3 tasks"):
        render_sbatch(trainer_batch_job(DIMS, 3))
