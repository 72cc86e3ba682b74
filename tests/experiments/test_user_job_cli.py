"""`hangdoctor experiment` on the user's own job, without running it: --program filled in per run under torchrun
and srun (--dry-run), --sbatch-script's sbatch command line, and every bad input as one Error line, exit 2."""

import shlex

import pytest

from hangdoctor.experiments.results import RunResult, fill_from_run_dir
from hangdoctor.experiments.tables import render_markdown
from hangdoctor.experiments.user_program import parse_program, torchrun_target
from hangdoctor.throughput.progress import compile_iteration_regex, iteration_of
from tests.experiments.test_experiment_cli import assert_one_error, cli
from hangdoctor.throughput.regex_log import check_timed, parse_lines, parse_regex_line

REGEX = r"step (?P<iteration>\d+)/(?P<total>\d+) \| loss (?P<loss>\S+) \| (?P<ms>[\d.]+) ms/step"


@pytest.mark.parametrize("argv, expected", [
    (["--program", "python t.py --x {tpp}"],
     "--program 'python t.py --x {tpp}': unknown placeholder {tpp} (known: {tp}, {pp}, {dp}, {gpus}, {run_dir})"),
    (["--program", "python t.py", "--config", "b=--gpus 2 --save {out}"],
     "configuration 'b': unknown placeholder {out}"),
    (["--program", "python 't.py"], "No closing quotation"),
    (["--program", "python t.py", "--sbatch-script", "job.sbatch"], "--program and --sbatch-script are two ways"),
    (["--program", "python t.py", "--iteration-regex", r"step (\d+) (?P<ms>\d+)"], "no (?P<iteration>...) group"),
    (["--program", "python t.py", "--iteration-regex", r"step (?P<iteration>\d+)"],
     "has no group for the iteration time"),
    (["--program", "python t.py", "--iteration-regex", "step (?P<iteration>"], "is not a regular expression"),
    (["--program", "python t.py", "--iteration-regex", r"(?P<iteration>\d+)(?P<ms>(a+)+)"], "repeats a repeat"),
    (["--sbatch-script", "no/such.sbatch"], "--sbatch-script no/such.sbatch does not exist"),
    (["--sbatch-script", "."], "--sbatch-script . is not a file"),
    (["--sbatch-script", "job.sbatch", "--launcher", "torchrun"], "takes no --launcher torchrun"),
    (["--sbatch-script", "job.sbatch", "--gpus-per-node", "2"], "--gpus-per-node shapes the batch script"),
])
def test_bad_user_job_input_is_one_line_and_exit_2(argv, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\nsrun true\n")
    code, out, err = cli("--config", "a=--gpus 2", *argv, "--out", str(tmp_path / "x"), "--dry-run")
    assert code == 2 and out == ""
    assert_one_error(err, expected)
    assert not (tmp_path / "x").exists()


def dry_run(*argv: str) -> list[str]:
    """The command of each run, as --dry-run prints it (one block per run)."""
    code, out, err = cli(*argv, "--dry-run")
    assert code == 0, err
    return [block.split("\n", 1)[1].strip() for block in out.split("--- run ")[1:]]


def test_the_program_is_filled_in_per_run_under_torchrun(tmp_path):
    out = tmp_path / "exp"
    runs = dry_run("--program", "python my_train.py --tp {tp} --dp {dp} --save {run_dir}/ckpt",
                   "--config", "a=--tp 2 --gpus 4 --lr 0.1", "--toggle", "NCCL_ALGO=Ring,Tree",
                   "--toggle=--zero-stage=0,1", "--launcher", "torchrun", "--out", str(out))
    assert len(runs) == 4
    first = shlex.split(runs[0])
    assert first[0] == "NCCL_ALGO=Ring" and first[first.index("--nproc-per-node=4") + 1:] == [
        "my_train.py", "--tp", "2", "--dp", "2", "--save", f"{out}/runs/01-a-NCCL_ALGO=Ring-zero-stage=0-r1/ckpt",
        "--lr", "0.1", "--zero-stage", "0"]
    assert "--tensor-model-parallel-size" not in runs[0] and "--run-dir" not in runs[0]


def test_the_program_runs_through_srun_inside_the_batch_job(tmp_path):
    runs = dry_run("--program", "python -m my.train --pp {pp}", "--config", "a=--pp 2 --gpus 2",
                   "--toggle", "CUDA_LAUNCH_BLOCKING=0,1", "--out", str(tmp_path / "exp"))
    assert "export CUDA_LAUNCH_BLOCKING=1" in runs[1]
    assert "\nsrun --kill-on-bad-exit=1 python -m my.train --pp 2\n" in runs[1] + "\n"


def test_torchrun_runs_python_scripts_and_modules_itself_and_anything_else_without_python():
    assert torchrun_target(["python", "my.py", "a"]) == ["my.py", "a"]
    assert torchrun_target(["python3.11", "-m", "pkg.train", "a"]) == ["-m", "pkg.train", "a"]
    assert torchrun_target(["python", "-u", "my.py"]) == ["--no-python", "python", "-u", "my.py"]
    assert torchrun_target(["./run.sh", "a"]) == ["--no-python", "./run.sh", "a"]
    assert parse_program("python t.py '{\"a\": 1}'").words == ("python", "t.py", '{"a": 1}')  # no {name}: kept


def test_the_sbatch_script_is_submitted_as_it_is_with_the_run_exported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=2\nsrun python train.py \"$@\"\n")
    out = tmp_path / "exp"
    runs = dry_run("--sbatch-script", "job.sbatch", "--config", "a=--tp 2 --gpus 4 --save {run_dir}",
                   "--toggle", "CUDA_LAUNCH_BLOCKING=0,1", "--toggle=--lr=0.1", "--time-limit", "00:10:00",
                   "--out", str(out))
    run_dir = out / "runs" / "02-a-CUDA_LAUNCH_BLOCKING=1-lr=0.1-r1"
    assert shlex.split(runs[1]) == [
        "sbatch", "--parsable", f"--export=ALL,CUDA_LAUNCH_BLOCKING=1,HANGDOCTOR_TP=2,HANGDOCTOR_PP=1,HANGDOCTOR_DP=2,"
        f"HANGDOCTOR_GPUS=4,HANGDOCTOR_RUN_DIR={run_dir}", "--time=00:10:00", str(tmp_path / "job.sbatch"),
        "--save", str(run_dir), "--lr", "0.1"]
    assert (tmp_path / "job.sbatch").read_text().startswith("#!/bin/bash\n#SBATCH --nodes=2\n")  # untouched


def test_a_user_regex_reads_iterations_and_their_time_as_megatron_lines_are_read():
    pattern = compile_iteration_regex(REGEX)
    check_timed(pattern)
    parsed = parse_regex_line("[rank0]: step 3/8 | loss 0.9812 | 4.5 ms/step | world 2", pattern)
    assert (parsed.iteration, parsed.train_iters, parsed.elapsed_ms, parsed.lm_loss, parsed.prefix) == (
        3, 8, 4.5, 0.9812, "[rank0]:")
    seconds = compile_iteration_regex(r"it (?P<iteration>\d+) took (?P<s>[\d.]+)s")
    assert [p.elapsed_ms for p in parse_lines("it 1 took 0.25s\nnoise\nit 2 took 1.5s\n", seconds)] == [250.0, 1500.0]
    assert iteration_of("step 12/20 | loss 1 | 3 ms/step", pattern) == 12  # watch reads the same group
    assert iteration_of("took 3 ms at step 12", compile_iteration_regex(r"(\d+) ms at step (?P<iteration>\d+)")) == 12
    assert iteration_of("step 7 of 9", compile_iteration_regex(r"step (\d+)")) == 7  # the first group, as before


def test_a_log_that_never_matches_has_no_figure_and_says_so(tmp_path):
    pattern = compile_iteration_regex(REGEX)
    log = tmp_path / "train.log"
    log.write_text("epoch 1 done in 3.2s\nepoch 2 done in 3.1s\n")  # the script prints something else
    result = RunResult(run="r", config="a")
    fill_from_run_dir(result, tmp_path, log, 0, pattern)
    assert result.sec_per_it is None and result.first_measured is None
    assert result.measured_over == "no figure: no line of the log matches --iteration-regex"
    code, out, err = cli("--logs", str(log), "--iteration-regex", REGEX)
    assert code == 3 and f"{log} has no line matching --iteration-regex: nothing to measure" in err
    log.write_text("step 1/2 | loss 1 | 10 ms/step\nstep 2/2 | loss 1 | 30 ms/step\n")
    code, out, err = cli("--logs", str(log), "--iteration-regex", REGEX, "--warmup", "0", "--json")
    assert code == 0 and '"sec_per_it": 0.02' in out and '"first_measured": 1' in out


def test_a_table_of_a_scripts_own_lines_has_no_empty_megatron_columns():
    runs = [RunResult(run=f"0{i}-a-X={i}-r1", config="a", toggles={"X": str(i)}, gpus=2, tp=1, pp=1, dp=2,
                      status="completed", sec_per_it=0.25 * (i + 1), measured_over="median of iterations 3-6",
                      first_measured=3, last_measured=6) for i in range(2)]
    lines = render_markdown(runs).strip().splitlines()
    assert lines[0] == "| Config | GPUs | DP | TP | PP | X | Sec/it | Notes |"
    assert lines[2:4] == ["| a | 2 | 2 | 1 | 1 | 0 | 0.250 |  |", "| a | 2 | 2 | 1 | 1 | 1 | 0.500 |  |"]
    assert lines[-1] == "* Sec/it: median of iterations 3-6 of each run (the first 2 iterations are warm-up)."
    runs[1].tflops = 1.5  # one Megatron figure: every column is back
    assert render_markdown(runs).splitlines()[0].startswith("| Config | GPUs | Size | DP | TP | PP | MBS | GBS | X |")
