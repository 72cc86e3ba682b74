"""A user's own training script under `hangdoctor experiment --program ... --launcher torchrun`: the DDP example
in fixtures/ddp_example.py (after PyTorch's examples; its own log lines, read with --iteration-regex), two sizes
(2 ranks and 1) x the environment toggle SKIP_LOSS_ALLREDUCE=0,1. With 2 ranks and the toggle on, rank 1 stops
before the loss all_reduce of step 3: that run hangs, hangdoctor attach names both ranks' places while it hangs,
then its process tree is killed. On one rank there is no rank 1 to skip: the toggle changes nothing there."""

import csv
import json
import statistics
from pathlib import Path

import pytest

from tests.experiments.test_torchrun import processes_mentioning
from tests.support import PYTHON, REPO, child_env, run_bounded

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).parent / "fixtures" / "ddp_example.py"
REGEX = r"step (?P<iteration>\d+)/(?P<total>\d+) \| loss (?P<loss>\S+) \| (?P<ms>[\d.]+) ms/step"
TRAIN = "Trainer.train (tests/experiments/fixtures/ddp_example.py)"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    out = tmp_path_factory.mktemp("user-torchrun") / "exp"
    result = run_bounded([
        PYTHON, "-m", "hangdoctor", "experiment", "--launcher", "torchrun", "--out", str(out),
        "--program", f"python {SCRIPT.relative_to(REPO)} --steps 6 --save {{run_dir}}",
        "--config", "two=--gpus 2", "--config", "one=--gpus 1 --width 16", "--toggle", "SKIP_LOSS_ALLREDUCE=0,1",
        "--iteration-regex", REGEX, "--warmup", "1", "--hang-timeout", "8", "--poll-interval", "0.5", "--json",
    ], timeout=280, env=child_env(), cwd=REPO)
    with open(out / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return out, result, rows


def test_one_row_per_run_each_measured_from_its_own_log_lines(experiment):
    out, result, rows = experiment
    assert result.returncode == 1, result.output[-5000:]  # 1: a run hung
    assert [(r["config"], r["SKIP_LOSS_ALLREDUCE"], r["status"]) for r in rows] == [
        ("two", "0", "completed"), ("two", "1", "hung"), ("one", "0", "completed"), ("one", "1", "completed")]
    for row in (rows[0], rows[2], rows[3]):
        log = (Path(row["run_dir"]) / "train.log").read_text()
        printed = {int(line.split()[1].split("/")[0]): float(line.split("|")[2].split()[0])
                   for line in log.splitlines() if line.startswith("step ")}
        assert sorted(printed) == [1, 2, 3, 4, 5, 6]
        assert (row["measured_over"], row["first_measured"], row["last_measured"]) == (
            "median of iterations 2-6", "2", "6")
        assert float(row["sec_per_it"]) == pytest.approx(statistics.median(printed[i] for i in range(2, 7)) / 1000)
        assert (row["gpus"], row["last_iteration"], row["train_iters"]) == (
            "2" if row["config"] == "two" else "1", "6", "6")
        assert (Path(row["run_dir"]) / "model.pt").is_file()  # {run_dir} was filled in
    command = (Path(rows[0]["run_dir"]) / "command.txt").read_text()
    assert command.startswith("SKIP_LOSS_ALLREDUCE=0 ") and "--nproc-per-node=2 tests/experiments/" in command


def test_the_hung_run_is_diagnosed_while_it_hangs_then_killed(experiment):
    out, result, rows = experiment
    hung = json.loads(result.stdout)["runs"][1]
    assert hung["reason"] == "no new iteration line for 8s after iteration 2" and hung["last_iteration"] == 2
    assert hung["sec_per_it"] is not None and hung["measured_over"] == "median of iteration 2"
    assert hung["verdict_hung"] is True and "2/2 responded" in hung["verdict"]
    verdict = json.loads((Path(hung["verdict_folder"]) / "verdict.json").read_text())
    assert sorted(p["position"] for p in verdict["places"]) == [f"all_reduce <- {TRAIN}", f"sleep <- {TRAIN}"]
    assert hung["stopped"].startswith("killed ")
    assert processes_mentioning(str(out)) == []
