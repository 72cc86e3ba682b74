import os

import pytest

# Children inherit these: one BLAS thread per rank on a 2-core machine, stacks dumped on SIGABRT.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PYTHONFAULTHANDLER", "1")


@pytest.fixture(scope="session")
def trainer_runs(tmp_path_factory):
    """Shared real runs of the reference trainer (see tests/trainer_runs.py), launched lazily, once per session."""
    from tests.trainer_runs import TrainerRuns

    return TrainerRuns(tmp_path_factory.mktemp("trainer-runs"))


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """One real local SLURM cluster of 4 virtual nodes per session (slurm/testcluster.py), shared by every suite.

    About a second to start; stopped at the end of the session, or by its watchdog if the session dies.
    Tests must not assume job ids: they keep counting across restarts.
    """
    from slurm.testcluster import local_cluster_for_tests

    cluster = local_cluster_for_tests(tmp_path_factory.getbasetemp(), nodes=4, cpus_per_node=8)
    yield cluster
    left = cluster.stop()
    assert not left, f"daemons still running after stop: {left}"
