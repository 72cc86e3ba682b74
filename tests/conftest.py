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
