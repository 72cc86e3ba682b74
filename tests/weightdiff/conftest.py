"""weightdiff's shared fixtures: the real DeepSpeed runs of ds_scenarios.py, launched once per session (one
torchrun launch of 4 ranks, about 35-50 s here) and read by test_deepspeed.py, test_masters.py and
test_ds_exports.py. Tests that change a checkpoint work on a copy."""

from __future__ import annotations

import sys

import pytest

from tests.support import REPO, child_env, run_bounded


@pytest.fixture(scope="session")
def ds_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds")
    done = run_bounded([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
                        str(REPO / "tests" / "weightdiff" / "ds_scenarios.py"), str(out)],
                       timeout=400, env=child_env(DS_ACCELERATOR="cpu"), cwd=REPO)
    assert done.returncode == 0 and (out / "done").exists(), done.output[-6000:]
    return out
