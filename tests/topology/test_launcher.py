"""One table of launcher variables (topology/launcher.py), read alike by the trainer, tracing and the collector."""

from __future__ import annotations

import pytest

from hangdoctor.topology.launcher import LaunchedRank, launched_rank

# Environments as each launcher leaves them in a rank (torchrun under srun keeps srun's SLURM_PROCID: the node).
TORCHRUN_UNDER_SRUN = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_PROCID": "2", "SLURM_NTASKS": "4"}
SRUN = {"SLURM_PROCID": "13", "SLURM_LOCALID": "3", "SLURM_NTASKS": "16"}
OPEN_MPI = {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8"}
MPICH = {"PMI_RANK": "3", "MPI_LOCALRANKID": "1", "PMI_SIZE": "4"}


@pytest.mark.parametrize("environ, expected", [
    (TORCHRUN_UNDER_SRUN, LaunchedRank(5, 1, 8, "RANK")),
    (SRUN, LaunchedRank(13, 3, 16, "SLURM_PROCID")),
    (OPEN_MPI, LaunchedRank(6, 2, 8, "OMPI_COMM_WORLD_RANK")),
    (MPICH, LaunchedRank(3, 1, 4, "PMI_RANK")),
    ({"PMIX_RANK": "9"}, LaunchedRank(9, None, None, "PMIX_RANK")),
    ({}, LaunchedRank(None, None, None, "")),
    ({"RANK": "", "SLURM_PROCID": "-1", "PMI_RANK": " 4 "}, LaunchedRank(4, None, None, "PMI_RANK")),
])
def test_each_launchers_variables(environ, expected):
    assert launched_rank(environ) == expected


def test_launcher_names():
    assert [launched_rank(env).launcher for env in (TORCHRUN_UNDER_SRUN, SRUN, OPEN_MPI, MPICH, {})] == [
        "torchrun", "srun", "mpi", "mpi", "none"]


def test_the_collector_and_tracing_read_the_same_table():
    """Both readers give the same answer for every launcher's environment (one table, no copies)."""
    from hangdoctor.collector.procs import KEPT_ENV
    from tracing.identity import current_identity
    for environ in (TORCHRUN_UNDER_SRUN, SRUN, OPEN_MPI, MPICH):
        launched = launched_rank(environ)
        traced = current_identity(environ)
        assert (traced.rank, traced.local_rank, traced.world_size, traced.rank_source) == (
            launched.rank, launched.local_rank, launched.world_size, launched.rank_var)
        assert set(environ) <= set(KEPT_ENV)  # and the collector keeps every variable it read
