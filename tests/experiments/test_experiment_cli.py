"""`hangdoctor experiment` on the command line: bad input is one Error line and a Hint (never a traceback),
--dry-run shows what would be launched, --logs tabulates existing logs, an existing folder is never overwritten."""

import contextlib
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from hangdoctor.cli import main
from tests.support import PYTHON, REPO, child_env, run_bounded

DATA = Path(__file__).parent / "data"


def cli(*argv: str) -> tuple[int, str, str]:
    """main() in this process; argparse's own errors (it exits) are caught the same way."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(["experiment", *argv], out=Console(file=out, width=200), err=Console(file=err, width=200))
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def assert_one_error(err: str, expected: str) -> None:
    lines = err.strip().splitlines()
    assert lines[0].startswith("Error: ") and expected in lines[0], err
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("Hint: ")), err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv, expected", [
    (["--config", "a=--gpus 2", "--toggle", "CUDA_LAUNCH_BLOCKING"], "expected NAME=VALUE[,VALUE...]"),
    (["--config", "a=--gpus 2", "--toggle", "CUDA_LAUNCH_BLOCKING=0,,1"], "every value must be non-empty"),
    (["--config", "a=--gpus 2", "--toggle=--tp=1,2"], "--tp is part of a configuration"),
    (["--config", "a=--gpus 2", "--toggle", "X=1", "--toggle", "X=2"], "toggle X is given twice"),
    (["--toggle", "X=1"], "no configuration"),
    (["--config", "a"], 'expected NAME="FLAGS"'),
    (["--config", "a=--tp 2 --gpus 3"], "world size 3 is not divisible by tp=2"),
    (["--config", "a=--gpus 4", "--gpus-per-node", "3"], "4 ranks (TP=1 PP=1 DP=4"),
    (["--config", "a=--gpus 2", "--nodelist", "n[1-3"], "--nodelist: bad node list 'n[1-3': '[' is never closed"),
    (["--config", "a=--gpus 2", "--exclude", "n[3-1]"], "--exclude: bad node list"),
    (["--config", "a=--gpus 4", "--gpus-per-node", "1", "--nodelist", "n[1-3]"], "needs 4 nodes, --nodelist names 3"),
    (["--config", "a=--gpus 2", "--sbatch-option", "partition"], "expected KEY=VALUE"),
    (["--config", "a=--gpus 2", "--warmup", "-1"], "--warmup -1 must be 0 or more"),
    (["--config", "a=", "--logs", "x.log"], "--logs tabulates existing logs"),
    (["--config", "a=", "--plot", "speed"], "choose among tokens, tflops"),
    (["--config", "a=", "--hang-timeout", "0"], "'0' must be a positive, finite number"),
])
def test_bad_input_is_one_line_and_exit_2(argv, expected, tmp_path):
    code, out, err = cli(*argv, "--out", str(tmp_path / "x"), "--dry-run")
    assert code == 2 and out == ""
    assert_one_error(err, expected)
    assert not (tmp_path / "x").exists()


def test_a_bad_spec_file_is_one_line(tmp_path):
    spec = tmp_path / "m.json"
    spec.write_text('{"configs": {"a": "--gpus 2"}, "toggles": {"CUDA LAUNCH": [0, 1]}}')
    code, _, err = cli("--spec", str(spec), "--dry-run")
    assert code == 2
    assert_one_error(err, "toggle 'CUDA LAUNCH': neither an environment variable name")


def test_dry_run_prints_every_run_and_its_script(tmp_path):
    code, out, err = cli("--config", "pp2=--pp 2 --gpus 4", "--toggle", "CUDA_LAUNCH_BLOCKING=0,1",
                         "--toggle=--zero-stage=0,1", "--common", "--num-layers 2 --train-iters 5",
                         "--gpus-per-node", "2", "--exclude", "n[3-4]", "--out", str(tmp_path / "x"), "--dry-run")
    assert code == 0 and err == ""
    names = [line.split(": ")[1][:-4] for line in out.splitlines() if line.startswith("--- run ")]
    assert names == ["01-pp2-CUDA_LAUNCH_BLOCKING=0-zero-stage=0-r1", "02-pp2-CUDA_LAUNCH_BLOCKING=0-zero-stage=1-r1",
                     "03-pp2-CUDA_LAUNCH_BLOCKING=1-zero-stage=0-r1", "04-pp2-CUDA_LAUNCH_BLOCKING=1-zero-stage=1-r1"]
    script = out.split("--- run 4/4")[1]
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=2" in script
    assert "#SBATCH '--exclude=n[3-4]'" in script and "export CUDA_LAUNCH_BLOCKING=1" in script
    assert "-m trainer --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --num-layers 2 " \
           "--train-iters 5 --zero-stage 1 --run-dir " in script
    assert not (tmp_path / "x").exists()


def test_an_existing_experiment_is_never_overwritten(tmp_path, monkeypatch):
    out = tmp_path / "exp"
    out.mkdir()
    (out / "matrix.json").write_text("{}")
    code, _, err = cli("--config", "a=--gpus 2", "--out", str(out), "--launcher", "torchrun")
    assert code == 2
    assert_one_error(err, f"{out.resolve()} already holds an experiment")
    code, _, err = cli("--config", "a=--gpus 2", "--out", str(out), "--launcher", "torchrun", "--resume")
    assert code == 2
    assert_one_error(err, "--resume: the matrix differs")
    assert (out / "matrix.json").read_text() == "{}"


def test_no_sbatch_is_an_environment_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = cli("--config", "a=--gpus 2", "--out", str(tmp_path / "x"))
    assert code == 4
    assert_one_error(err, "sbatch not found on PATH")


def test_logs_are_tabulated_and_an_empty_one_is_named(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    code, out, err = cli("--logs", str(DATA / "pp2-sbatch" / "train.log"), str(empty), "--out", str(tmp_path / "t"))
    assert code == 1  # one of the two logs could not be measured
    assert f"Warning: {empty} is empty: nothing to measure" in err and "Traceback" not in err
    assert "train" in out and "0.0230" in out
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == [
        "results.csv", "results.json", "results.md", "tflops.png", "throughput.png"]
    code, out, err = cli("--logs", str(empty))
    assert code == 3 and out == ""
    assert_one_error(err, f"{empty} is empty: nothing to measure")


def test_logs_as_json(tmp_path):
    code, out, _ = cli("--logs", str(DATA / "megatron-200b-20nodes.log"), "--warmup", "0", "--json")
    assert code == 0
    run = json.loads(out)["runs"][0]
    assert (run["config"], run["gpus"], run["sec_per_it"], run["tflops_printed"]) == (
        "megatron-200b-20nodes", 160, 434.14, 96.19)


def test_the_console_script_runs_without_torch():
    probe = ("import sys; from hangdoctor.cli import main; code = main(['experiment', '--config', 'a=--gpus 2', "
             "'--dry-run', '--launcher', 'torchrun']); assert 'torch' not in sys.modules, 'torch imported'; "
             "assert 'matplotlib' not in sys.modules and 'pandas' not in sys.modules; sys.exit(code)")
    result = run_bounded([PYTHON, "-c", probe], timeout=60, env=child_env(), cwd=REPO)
    assert result.returncode == 0, result.output
    assert "-m torch.distributed.run --standalone --nproc-per-node=2 -m trainer" in result.stdout
