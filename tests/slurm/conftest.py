"""Fixtures for the slurm suite: one real local SLURM cluster per test session (see slurm/testcluster.py).

`slurm_cluster` is session-scoped: about a second to start, stopped at the end of the session (a watchdog stops
it if the session is killed). Tests must not assume job ids: ids keep counting across restarts.
"""

from __future__ import annotations

import pytest

from slurm.testcluster import LocalCluster, local_cluster_for_tests


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> LocalCluster:
    cluster = local_cluster_for_tests(tmp_path_factory.getbasetemp(), nodes=4, cpus_per_node=8)
    yield cluster
    left = cluster.stop()
    assert not left, f"daemons still running after stop: {left}"
