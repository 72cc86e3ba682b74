"""The hang watch on real processes (fixtures/iterations.py): completed, died, hung after an iteration, hung at
start-up, too slow; and the log tail that only ever hands out complete lines.

Where a verdict depends on time (silence, the run's length), the watch runs on a `WatchClock` that only its own
polls advance, and the test first waits, by condition, for what the process must have written: the outcome then
follows from what the process did, never from how fast this machine ran it.
"""

from pathlib import Path

import pytest

from hangdoctor.experiments.matrix import build_matrix
from hangdoctor.experiments.watchdog import COMPLETED, FAILED, HUNG, TIMEOUT, Limits, watch
from hangdoctor.throughput.logtail import LogTail
from tests.experiments.proclauncher import ProcessLauncher
from tests.hangdoctor.livejobs import wait_until


@pytest.fixture
def launcher():
    launcher = ProcessLauncher()
    yield launcher
    launcher.kill_all()


def start(launcher, tmp_path, flags: str):
    spec = build_matrix(configs=[f"fixture={flags}"]).runs()[0]
    return launcher.start(spec, tmp_path)


FAST = dict(poll_interval=0.1, startup_timeout=30, hang_timeout=30, run_timeout=60)
STEP = 0.25  # the watch's poll interval on a WatchClock: a power of two, so its sums are exact


class WatchClock:
    """The watch's time: starts at 0 and moves only when the watch sleeps, by exactly what it asked for. Given the
    run's log, every sleep also waits (in real time, bounded) until the log gained a line, so the run is seen
    progressing at every poll however slowly this machine runs it."""

    def __init__(self, log: Path | None = None):
        self.now, self.polls = 0.0, 0
        self.lines = LogTail(log) if log else None
        self.seen = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.polls += 1
        if self.lines is not None:
            before = self.seen
            wait_until(lambda: self._count() > before, timeout=60, what=f"a new log line after poll {self.polls}",
                       poll=0.02)

    def _count(self) -> int:
        self.seen += len(self.lines.new_lines())
        return self.seen


def log_lines(run) -> list[str]:
    return run.log_path.read_text().splitlines() if run.log_path.exists() else []


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
    wait_until(lambda: len(log_lines(run)) == 2, timeout=60, what="the fixture's 2 iteration lines")  # then it hangs
    watch_time = WatchClock()
    result = watch(launcher, run, Limits(**{**FAST, "hang_timeout": 1.5, "poll_interval": STEP}),
                   clock=watch_time.clock, sleep=watch_time.sleep)
    assert (result.outcome, result.last_iteration) == (HUNG, 2)
    assert result.reason == "no new iteration line for 1.5s after iteration 2"
    # Both lines are read at the first poll (t=0); silence must pass 1.5 s: the first poll after it is t=1.75.
    assert (result.silent_seconds, watch_time.polls) == (1.75, 7)
    assert launcher.state(run).phase == "running"  # the watchdog only watches: stopping is the runner's job


def test_no_first_line_within_the_startup_timeout_is_a_hang(launcher, tmp_path):
    run = start(launcher, tmp_path, "--delay 3600 --then hang")  # prints nothing for an hour
    watch_time = WatchClock()
    result = watch(launcher, run, Limits(**{**FAST, "startup_timeout": 1.0, "poll_interval": STEP}),
                   clock=watch_time.clock, sleep=watch_time.sleep)
    assert (result.outcome, result.last_iteration) == (HUNG, None)
    assert result.reason == "no iteration line within 1s of the start"
    assert (result.silent_seconds, log_lines(run)) == (1.25, [])  # the first poll past 1 s of silence


def test_a_run_that_keeps_progressing_past_the_run_timeout_is_timed_out_not_hung(launcher, tmp_path):
    run = start(launcher, tmp_path, "--lines 0 --then forever --interval 0.05")
    watch_time = WatchClock(run.log_path)  # every poll sees a new line: the silence never lasts beyond one poll
    result = watch(launcher, run, Limits(**{**FAST, "hang_timeout": 1.0, "run_timeout": 2.0, "poll_interval": STEP}),
                   clock=watch_time.clock, sleep=watch_time.sleep)
    # Running from t=0; the first poll past 2 s of running is the 9th (t=2.25): 9 sleeps, each after a new line.
    assert (result.outcome, watch_time.polls, result.running_seconds) == (TIMEOUT, 9, 2.25)
    assert result.last_iteration >= 9
    assert result.reason == f"still running after 2s (at iteration {result.last_iteration})"


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
