"""The hang watch on real processes (fixtures/iterations.py): completed, died, hung after an iteration, hung at
start-up, too slow; and the log tail that only ever hands out complete lines."""

import pytest

from hangdoctor.experiments.matrix import build_matrix
from hangdoctor.experiments.watchdog import COMPLETED, FAILED, HUNG, TIMEOUT, Limits, watch
from hangdoctor.watch.logtail import LogTail
from tests.experiments.proclauncher import ProcessLauncher


@pytest.fixture
def launcher():
    launcher = ProcessLauncher()
    yield launcher
    launcher.kill_all()


def start(launcher, tmp_path, flags: str):
    spec = build_matrix(configs=[f"fixture={flags}"]).runs()[0]
    return launcher.start(spec, tmp_path)


FAST = dict(poll_interval=0.1, startup_timeout=30, hang_timeout=30, run_timeout=60)


def test_a_run_that_ends_well_is_completed_and_every_new_iteration_is_reported(launcher, tmp_path):
    run = start(launcher, tmp_path, "--lines 5 --interval 0.05")
    seen = []
    result = watch(launcher, run, Limits(**FAST), on_iteration=lambda parsed: seen.append(parsed.iteration))
    assert (result.outcome, result.state.exit_code, result.last_iteration) == (COMPLETED, 0, 5)
    assert seen == [1, 2, 3, 4, 5]


def test_a_run_that_dies_is_failed_with_its_exit_code(launcher, tmp_path):
    run = start(launcher, tmp_path, "--lines 2 --interval 0.05 --then exit:3 --error boom")
    result = watch(launcher, run, Limits(**FAST))
    assert (result.outcome, result.state.exit_code, result.last_iteration) == (FAILED, 3, 2)
    assert result.reason == "exit 3"


def test_no_new_line_within_the_hang_timeout_is_a_hang_and_the_run_is_left_running(launcher, tmp_path):
    run = start(launcher, tmp_path, "--lines 2 --interval 0.05 --then hang")
    result = watch(launcher, run, Limits(**{**FAST, "hang_timeout": 1.5}))
    assert (result.outcome, result.last_iteration) == (HUNG, 2)
    assert result.reason == "no new iteration line for 1.5s after iteration 2"
    assert result.silent_seconds >= 1.5
    assert launcher.state(run).phase == "running"  # the watchdog only watches: stopping is the runner's job


def test_no_first_line_within_the_startup_timeout_is_a_hang(launcher, tmp_path):
    run = start(launcher, tmp_path, "--delay 60 --then hang")
    result = watch(launcher, run, Limits(**{**FAST, "startup_timeout": 1.0}))
    assert (result.outcome, result.last_iteration) == (HUNG, None)
    assert result.reason == "no iteration line within 1s of the start"


def test_a_run_that_keeps_progressing_past_the_run_timeout_is_timed_out_not_hung(launcher, tmp_path):
    run = start(launcher, tmp_path, "--lines 0 --then forever --interval 0.1")
    result = watch(launcher, run, Limits(**{**FAST, "hang_timeout": 1.0, "run_timeout": 2.0}))
    assert result.outcome == TIMEOUT and result.last_iteration >= 5
    assert result.reason.startswith("still running after 2s (at iteration ")


def test_log_tail_hands_out_complete_lines_only(tmp_path):
    path = tmp_path / "train.log"
    tail = LogTail(path)
    assert tail.new_lines() == []  # not created yet (sbatch creates it when the job starts)
    path.write_bytes(b"one\ntw")
    assert tail.new_lines() == ["one"]
    with open(path, "ab") as fh:
        fh.write(b"o\nthree\n\xff\n")
    assert tail.new_lines() == ["two", "three", "\ufffd"]
    assert tail.new_lines() == []


@pytest.mark.parametrize("name", ["hang_timeout", "startup_timeout", "queue_timeout", "run_timeout", "poll_interval"])
def test_limits_must_be_positive(name):
    with pytest.raises(ValueError, match=f"{name.replace('_', '-')} 0 must be positive"):
        Limits(**{name: 0})
