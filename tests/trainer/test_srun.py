"""The trainer under srun on the real local SLURM cluster: 2 nodes x 2 tasks, identity from the SLURM variables."""

import json
import re

import pytest
import torch

from tests.support import PYTHON, child_env, run_bounded
from tests.trainer_runs import MODEL
from trainer.config import TrainConfig
from trainer.reference import reference_losses


@pytest.mark.slow
@pytest.mark.slurm
def test_trainer_runs_under_srun_across_two_nodes(slurm_cluster, tmp_path):
    run_dir = tmp_path / "srun-run"
    env = slurm_cluster.env(child_env(MASTER_ADDR="127.0.0.1"))  # the virtual nodes' names do not resolve
    cmd = ["srun", "--nodes=2", "--ntasks-per-node=2", "--export=ALL", PYTHON, "-m", "trainer",
           "--pp", "2", "--train-iters", "3", "--run-dir", str(run_dir), *MODEL]
    result = run_bounded(cmd, timeout=180, env=env)
    assert result.returncode == 0, result.output[-4000:]
    effective = json.loads((run_dir / "config.json").read_text())
    assert effective["launcher"] == "srun" and effective["dims"] == {"tp": 1, "pp": 2, "dp": 2, "order": "tp-dp-pp"}
    losses = [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    expected = reference_losses(TrainConfig(**{**_model_config(), "train_iters": 3}))
    torch.testing.assert_close(torch.tensor(losses, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64),
                               rtol=1e-5, atol=1e-6)


def _model_config() -> dict:
    pairs = dict(zip(MODEL[::2], MODEL[1::2]))
    return {key.lstrip("-").replace("-", "_"): int(value) for key, value in pairs.items()}


@pytest.mark.slurm
def test_unresolvable_first_node_is_a_one_line_error(slurm_cluster, tmp_path):
    env = slurm_cluster.env(child_env())
    env.pop("MASTER_ADDR", None)
    cmd = ["srun", "--nodes=1", "--ntasks=1", "--export=ALL", PYTHON, "-m", "trainer", "--run-dir", str(tmp_path)]
    result = run_bounded(cmd, timeout=60, env=env)
    assert result.returncode != 0
    assert re.search(r"Error: MASTER_ADDR n\d \(the first node of the job\) does not resolve", result.stderr), result.stderr
    assert "Traceback" not in result.stderr
