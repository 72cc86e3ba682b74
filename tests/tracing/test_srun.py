"""Under srun on the real local SLURM cluster: ranks come from SLURM_PROCID / SLURM_LOCALID, and `tracing last`
names the open frames of a hung 2-node job, then of its ranks after scancel killed them."""

from __future__ import annotations

import pytest

from slurm.process import run_command
from slurm.sbatch import submit, wait_until_done
from tests.support import PYTHON, REPO, child_env
from tests.tracing.helpers import FIXTURES, Background, last_json

pytestmark = pytest.mark.slurm


def test_hung_job_under_srun(slurm_cluster, tmp_path):
    traces = tmp_path / "traces"
    script = "\n".join([
        "#!/bin/bash",
        f"export PYTHONPATH={REPO} READY_DIR={tmp_path} STRAGGLERS=2,3",
        f"srun {PYTHON} -m tracing run --include __main__ --out {traces} -- {FIXTURES / 'hung_ranks.py'}",
        "",
    ])
    env = slurm_cluster.env(child_env())
    job_id = submit(script, env=env, cwd=tmp_path,
                    extra_args=["--nodes=2", "--ntasks-per-node=2", f"--output={tmp_path / 'job.txt'}"])
    try:
        try:
            Background().wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 4, 90, "4 srun tasks blocking")
        except AssertionError as e:
            output = (tmp_path / "job.txt").read_text() if (tmp_path / "job.txt").exists() else "(no job output)"
            raise AssertionError(f"{e}\njob output:\n{output[-6000:]}") from None
        report = last_json(traces)
        ranks = {r["rank"]: r for r in report["ranks"]}
        assert sorted(ranks) == [0, 1, 2, 3]
        groups = {g["ranks_text"]: [f["qualname"] for f in g["open_frames"]] for g in report["groups"]}
        assert groups == {"0-1": ["<module>", "pretrain", "train", "all_reduce", "_block"],
                          "2-3": ["<module>", "pretrain", "train", "train_step", "_aggregate_total_loss",
                                  "broadcast", "_block"]}
        files = sorted(p.name for p in traces.glob("*.ring"))
        assert len(files) == 4 and sum("-0-" in f for f in files) == 2  # local ranks 0 and 1 on each node
    finally:
        run_command(["scancel", job_id], timeout=30, env=env)
        wait_until_done(job_id, timeout=60, env=env)
    report = last_json(traces)
    assert {r["condition"] for r in report["ranks"]} == {"dead"}
    assert {g["ranks_text"] for g in report["groups"]} == {"0-1", "2-3"}
