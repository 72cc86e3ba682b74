"""The reference trainer hung by the seed's fault, run under the tracing wrapper: `tracing last` names the open
frames of the stuck ranks while they hang (pp=0 in the loss broadcast, pp=1 in the next iteration's recv)."""

from __future__ import annotations

import json

import pytest

from tests.support import PYTHON, child_env
from tests.tracing.helpers import Background, last_json
from tests.trainer_runs import MODEL

pytestmark = pytest.mark.slow
INCLUDE = "trainer,deepspeed.runtime.pipe,torch.distributed.distributed_c10d"


def _logged(metrics, iteration: int) -> bool:
    return metrics.exists() and any(json.loads(l)["iteration"] >= iteration for l in metrics.read_text().splitlines())


def test_tracing_last_names_the_open_frames_of_a_hung_trainer(tmp_path):
    run_dir, out = tmp_path / "run", tmp_path / "traces"
    program = ["-m", "tracing", "run", "--include", INCLUDE, "--start-at", "train_batch", "--out", str(out),
               "-m", "trainer", "--run-dir", str(run_dir), "--pp", "2", "--train-iters", "4", "--pg-timeout", "300",
               *MODEL, "--fault", "skip-loss-broadcast:iteration=2"]
    with Background() as bg:
        bg.start([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4", *program], env=child_env())
        bg.wait_for(lambda: _logged(run_dir / "metrics.jsonl", 2), 180, "iteration 2 logged")

        def settled() -> bool:
            groups = last_json(out)["groups"]
            return len(groups) == 2 and all(g["open_frames"] and g["open_frames"][-1]["qualname"] in ("broadcast", "recv")
                                            for g in groups)

        bg.wait_for(settled, 90, "both stages waiting in their collective")
        groups = {g["ranks_text"]: [f["qualname"] for f in g["open_frames"]] for g in last_json(out)["groups"]}
    assert set(groups) == {"0-1", "2-3"}, groups
    first, last = groups["0-1"], groups["2-3"]
    assert first[first.index("train"):] == ["train", "_build_and_train", "PipelineEngine.train_batch",
                                            "PipelineEngine._aggregate_total_loss", "broadcast"], first
    assert last[last.index("train"):][:4] == ["train", "_build_and_train", "PipelineEngine.train_batch",
                                              "PipelineEngine._exec_schedule"]
    assert last[-3:] == ["PipelineEngine._exec_recv_activations", "recv", "recv"], last
