"""`hangdoctor attach --jobid N --profile`: a running (not hung) gloo job of 4 ranks on 2 nodes of the local SLURM
cluster, rank 3 slower than the others; the profile taken on every node at once names rank 3 on its node."""

import json
import os
from pathlib import Path

import pytest

from slurm.process import run_command
from slurm.sbatch import BatchJob, render_sbatch, submit, wait_for_state
from tests.hangdoctor.livejobs import FIXTURES, wait_until
from tests.support import PYTHON, REPO, child_env, run_bounded

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def slow_slurm_job(slurm_cluster):
    base = Path(f"/tmp/hangdoctor-slow-{os.getpid()}")  # reachable by the job's tasks
    ready = base / "ready"
    env = slurm_cluster.env(child_env())
    job = BatchJob(program=(PYTHON, "-u", str(FIXTURES / "slow_job.py"), "--slow-rank", "3", "--factor", "1.6",
                            "--how", "sleep", "--ready-dir", str(ready), "--lifetime", "300"),
                   tasks=4, tasks_per_node=2, job_name="slow-gloo", output=str(base / "slow-%j.out"),
                   master_port=29633)
    base.mkdir(parents=True, exist_ok=True)
    job_id = submit(render_sbatch(job), env=env, cwd=REPO)
    try:
        wait_for_state(job_id, {"RUNNING"}, timeout=60, env=env)
        wait_until(lambda: len(list(ready.glob("rank*[0-9]"))) == 4, timeout=180, what="the 4 ranks' ready markers")
        yield job_id
    finally:
        run_command(["scancel", job_id], timeout=30, env=env)
        run_command(["rm", "-rf", str(base)], timeout=30)


def test_the_slow_rank_of_a_slurm_job_is_named_on_its_node(slurm_cluster, slow_slurm_job, tmp_path):
    # --profile-cost 100: the rate stays (what is found at a lower one: bench/stragglers.py), the cost is still measured
    result = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--jobid", slow_slurm_job, "--profile", "4",
                          "--profile-cost", "100", "--json", "--out", str(tmp_path / "o")], timeout=180,
                         env=slurm_cluster.env(child_env()))
    assert result.returncode == 0, result.output[-3000:]
    report = json.loads(result.stdout)
    assert [s["ranks"] for s in report["stragglers"]] == [[3]], report["headline"]
    assert report["stragglers"][0]["hosts"] == ["n2"]
    assert {r["rank"]: r["host"] for r in report["ranks"]} == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    # each node's collector measured what its samplers cost and said so (collector/sampling_cost.py)
    assert sorted(note.split(":", 1)[0] for note in report["notes"] if "/s" in note) == ["n1", "n2"], report["notes"]
    assert all(r["samples"] >= 100 for r in report["ranks"])
    assert sorted(p.name for p in (tmp_path / "o" / "nodes").iterdir()) == ["n1.json", "n2.json"]
