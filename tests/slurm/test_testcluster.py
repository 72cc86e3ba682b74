"""The local test cluster's own life cycle, through its CLI: start, status, stop, and what it refuses."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slurm.clusterconf import ClusterLayout
from slurm.daemons import read_daemons
from slurm.pids import list_pids
from slurm.process import is_running, run_command
from slurm.sbatch import wait_for_state
from tests.support import PYTHON, child_env, run_bounded

pytestmark = pytest.mark.slurm


def cli(*args: str, timeout: float = 60, env: dict | None = None):
    return run_bounded([PYTHON, "-m", "slurm.testcluster", *args], timeout=timeout, env=env)


@pytest.fixture
def base(tmp_path_factory):
    """A base folder munged can reach (pytest's own tmp folders are 0700); removed afterwards."""
    path = Path(f"/tmp/hangdoctor-cli-test-{os.getpid()}-{time.monotonic_ns()}")
    yield path
    cli("stop", "--base", str(path))
    run_command(["rm", "-rf", str(path)], timeout=30)


def test_start_status_stop_leaves_no_process_behind(base):
    started = cli("start", "--base", str(base), "--nodes", "3")
    assert started.returncode == 0, started.output
    assert f"export SLURM_CONF={base}/etc/slurm.conf" in started.stdout
    status = cli("status", "--base", str(base))
    assert status.returncode == 0, status.output
    assert [line.split() for line in status.stdout.splitlines() if line.startswith("n")] == [
        ["n1", "idle"], ["n2", "idle"], ["n3", "idle"]]
    daemons = read_daemons(ClusterLayout.load(base))
    assert sorted(d.name for d in daemons) == ["munged", "slurmctld", "slurmd-n1", "slurmd-n2", "slurmd-n3"]
    # a job whose tasks must die with the cluster
    env = child_env(SLURM_CONF=str(base / "etc" / "slurm.conf"))
    job = run_command(["sbatch", "--parsable", "--nodes=2", "--output=/dev/null", "--chdir=/tmp",
                       "--wrap", "srun sleep 600"], timeout=30, env=env).stdout.strip()
    wait_for_state(job, {"RUNNING"}, timeout=60, env=env)
    deadline = time.monotonic() + 30
    while not (tasks := [r.pid for n in ("n1", "n2") for r in list_pids(job, n, env=env) if r.is_task and r.pid]):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert cli("start", "--base", str(base)).stderr.startswith("Error: a cluster is already running")

    stopped = cli("stop", "--base", str(base))
    assert stopped.returncode == 0, stopped.output
    assert not [d for d in daemons if d.running]  # zombies waiting for PID 1 do not count
    assert not [pid for pid in tasks if is_running(pid)]
    after = cli("status", "--base", str(base))
    assert after.returncode == 1 and "unreachable" in after.stdout


def test_restart_in_the_same_base_keeps_counting_job_ids(base):
    env = child_env(SLURM_CONF=str(base / "etc" / "slurm.conf"))
    ids = []
    for _ in range(2):
        assert cli("start", "--base", str(base), "--nodes", "1").returncode == 0
        ids.append(int(run_command(["sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", "--wrap", "true"],
                                   timeout=30, env=env).stdout))
        assert cli("stop", "--base", str(base)).returncode == 0
    assert ids[1] > ids[0]  # never assume job 1


def test_watchdog_stops_the_cluster_when_its_owner_dies():
    owner = run_bounded([PYTHON, "-c", (
        "import os; from slurm.testcluster import local_cluster_for_tests; "
        "c = local_cluster_for_tests(None, nodes=1); print(c.base, flush=True); os._exit(0)"  # no clean-up at all
    )], timeout=60)
    assert owner.returncode == 0, owner.output
    layout = ClusterLayout.load(Path(owner.stdout.strip()))
    daemons = read_daemons(layout)
    deadline = time.monotonic() + 30
    while any(is_running(d.pid, d.started) for d in daemons):
        assert time.monotonic() < deadline, "the watchdog did not stop the orphaned cluster"
        time.sleep(0.2)
    assert {d.name for d in daemons} >= {"munged", "slurmctld", "slurmd-n1", "watchdog"}
    deadline = time.monotonic() + 10
    while layout.base.exists():  # a temporary base goes with its cluster
        assert time.monotonic() < deadline, f"{layout.base} was left behind"
        time.sleep(0.1)


def test_a_base_munged_cannot_reach_is_a_one_line_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    result = cli("start", "--base", str(locked / "cluster"))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: munged cannot reach") and lines[1].startswith("Hint: choose a base folder")
    assert len(lines) == 2
