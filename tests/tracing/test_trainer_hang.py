"""The reference trainer hung by the seed's fault, run under the tracing wrapper as `make demo` runs it (PP=2 x
DP=2, --start-at train_batch): while it hangs, `tracing last` names the open frames of the stuck ranks (pp=0 in
the loss broadcast, pp=1 in the next iteration's recv) with their executing lines, and `tracing diverge` names the
broadcast that the last stage skipped as the first divergence. One trainer launch serves every test here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import PYTHON, child_env
from tests.tracing.helpers import Background, last_json, tracing_cli
from tests.trainer_runs import MODEL

pytestmark = pytest.mark.slow
INCLUDE = "trainer,deepspeed.runtime.pipe,torch.distributed.distributed_c10d"


def _logged(metrics, iteration: int) -> bool:
    return metrics.exists() and any(json.loads(l)["iteration"] >= iteration for l in metrics.read_text().splitlines())


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    """The traces folder of the trainer while it hangs: both stages waiting in their collective."""
    tmp_path = tmp_path_factory.mktemp("trainer_hang")
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
        yield out


def test_tracing_last_names_the_open_frames_of_a_hung_trainer(hung):
    report = last_json(hung)
    groups = {g["ranks_text"]: [f["qualname"] for f in g["open_frames"]] for g in report["groups"]}
    assert set(groups) == {"0-1", "2-3"}, groups
    first, last = groups["0-1"], groups["2-3"]
    assert first[first.index("train"):] == ["train", "_build_and_train", "PipelineEngine.train_batch",
                                            "PipelineEngine._aggregate_total_loss", "broadcast"], first
    assert last[last.index("train"):][:4] == ["train", "_build_and_train", "PipelineEngine.train_batch",
                                              "PipelineEngine._exec_schedule"]
    assert last[-3:] == ["PipelineEngine._exec_recv_activations", "recv", "recv"], last
    # The line each frame is executing, as hangdoctor (py-spy) prints it, not the line its function starts at.
    frames = {g["ranks_text"]: g["open_frames"] for g in report["groups"]}
    loss = frames["0-1"][-2]
    assert loss["line_source"] == "executing" and loss["line"] != loss["def_line"]
    assert "dist.broadcast(" in Path(loss["file"]).read_text().splitlines()[loss["line"] - 1]
    recv_activations = frames["2-3"][-3]
    assert "p2p.recv(" in Path(recv_activations["file"]).read_text().splitlines()[recv_activations["line"] - 1]


def test_tracing_diverge_names_the_skipped_broadcast_first(hung):
    done = tracing_cli("diverge", str(hung), "--json")
    assert done.returncode == 1, done.output  # the ranks diverged
    report = json.loads(done.stdout)
    assert report["anchor"] == "deepspeed.runtime.pipe.engine:PipelineEngine.train_batch"
    first = report["communication"][0]
    assert (first["round"], first["call"], first["function"]["qualname"]) == (
        2, "PipelineEngine._aggregate_total_loss > broadcast", "broadcast")
    sides = {s["ranks_text"]: (s["changed"], s["before"], s["calls"]) for s in first["sides"]}
    assert sides == {"2-3": (True, 1, 0), "0-1": (False, 1, 1)}  # the last stage skipped it; pp=0 waits in it
    assert report["first"].startswith("in round 2 of PipelineEngine.train_batch, ranks 2-3 skipped "
                                      "PipelineEngine._aggregate_total_loss > broadcast (1 call in round 1, 0 in "
                                      "round 2); ranks 0-1 went on as before")
    human = tracing_cli("diverge", str(hung))
    assert human.returncode == 1
    assert f"First departure: {report['first']}" in human.stdout.replace("\n", " ")
