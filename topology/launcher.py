"""Which rank a process is, as its launcher said: the one table of launcher variables, read by the trainer, by
tracing (in the traced process) and by hangdoctor's collector (from /proc/PID/environ of another process).

    torchrun (and DeepSpeed's launcher)   RANK          LOCAL_RANK                  WORLD_SIZE
    srun                                  SLURM_PROCID  SLURM_LOCALID               SLURM_NTASKS
    MPICH / Intel MPI (PMI)               PMI_RANK      MPI_LOCALRANKID             PMI_SIZE
    Open MPI                              OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE
    PMIx launchers (prterun, srun --mpi=pmix)   PMIX_RANK

The first variable present wins, in this order: a torchrun started by srun leaves SLURM_PROCID (the node's
index) in its workers' environment, and their RANK is the one that counts. Only whole numbers count: a value
such as "" or "-1" is as if absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

RANK_VARS = ("RANK", "SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")
WORLD_SIZE_VARS = ("WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
LAUNCHER_OF = {"RANK": "torchrun", "SLURM_PROCID": "srun", "PMI_RANK": "mpi", "OMPI_COMM_WORLD_RANK": "mpi",
               "PMIX_RANK": "mpi"}


@dataclass(frozen=True)
class LaunchedRank:
    rank: int | None  # None: no launcher variable names one
    local_rank: int | None
    world_size: int | None
    rank_var: str = ""  # the variable the rank came from, e.g. "RANK" or "SLURM_PROCID"; "" when none

    @property
    def launcher(self) -> str:
        """"torchrun", "srun", "mpi", or "none" for a process started by hand."""
        return LAUNCHER_OF.get(self.rank_var, "none")


def first_whole_number(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[int | None, str]:
    """(value, name) of the first of `names` that holds a whole number, or (None, "")."""
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value), name
    return None, ""


def launched_rank(environ: Mapping[str, str]) -> LaunchedRank:
    rank, rank_var = first_whole_number(environ, RANK_VARS)
    local_rank, _ = first_whole_number(environ, LOCAL_RANK_VARS)
    world_size, _ = first_whole_number(environ, WORLD_SIZE_VARS)
    return LaunchedRank(rank, local_rank, world_size, rank_var)
