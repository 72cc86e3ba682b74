"""The reference trainer's command line for a topology, and its batch job: what slurm.sbatch runs for a run.

    trainer_command(dims, ["--num-layers", "4"])  ->  python -m trainer --tensor-model-parallel-size TP
                                                      --pipeline-model-parallel-size PP --num-layers 4
DP is what is left of the world size (the trainer derives it), so a job of dims.world_size tasks carries it.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm.sbatch import BatchJob
from hangdoctor.topology import ParallelDims

TRAINER = ("python", "-m", "trainer")


def trainer_command(dims: ParallelDims, trainer_args: Sequence[str] = (), *,
                    program: Sequence[str] = TRAINER) -> list[str]:
    """`program` is the trainer, or anything that takes its topology flags (a test's stand-in)."""
    return [*program, "--tensor-model-parallel-size", str(dims.tp), "--pipeline-model-parallel-size", str(dims.pp),
            *trainer_args]


def trainer_batch_job(dims: ParallelDims, tasks_per_node: int, trainer_args: Sequence[str] = (), *,
                      program: Sequence[str] = TRAINER, **batch) -> BatchJob:
    """One task per rank of `dims`; `batch` are BatchJob's other fields (env, job_name, output, ...)."""
    return BatchJob(program=tuple(trainer_command(dims, trainer_args, program=program)), tasks=dims.world_size,
                    tasks_per_node=tasks_per_node, description=dims.describe(), **batch)
