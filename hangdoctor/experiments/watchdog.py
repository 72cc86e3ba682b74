"""The hang watch: follow a run's log and state until it completes, dies, hangs or runs out of time.

A run is hung when no new iteration line (a higher iteration number, as `throughput.megatron_log` reads it, or
the user's `--iteration-regex` as `throughput.regex_log` does)
arrives within `hang_timeout` seconds of the previous one, or when no first line arrives within
`startup_timeout` of the job starting to run (a rendezvous or start-up that never ends). Time spent queued
(sbatch PENDING) counts against `queue_timeout` only. A run that ends by itself is completed (exit 0) or failed;
`run_timeout` bounds a run that keeps progressing too slowly. Every wait here is bounded by these four limits.
The watchdog only watches: the runner diagnoses a hung run with hangdoctor and only then stops it. The log is
followed and silence judged by the same code as `hangdoctor watch` (hangdoctor/watch/: logtail, stall).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from hangdoctor.experiments.launch import Launched, Launcher
from slurm.jobstate import DONE, ENDING, PENDING, JobState
from hangdoctor.throughput.logtail import LogTail
from hangdoctor.throughput.stall import StallClock
from hangdoctor.throughput.megatron_log import ParsedIteration
from hangdoctor.throughput.regex_log import parse_line

COMPLETED, FAILED, HUNG, TIMEOUT, NOT_STARTED = "completed", "failed", "hung", "timeout", "not started"


@dataclass(frozen=True)
class Limits:
    hang_timeout: float = 300.0  # seconds without a new iteration line, once the first one came
    startup_timeout: float = 900.0  # seconds from RUNNING to the first iteration line
    queue_timeout: float = 3600.0  # seconds queued (sbatch PENDING) before giving up on the run
    run_timeout: float = 4 * 3600.0  # seconds of RUNNING in all
    poll_interval: float = 1.0

    def __post_init__(self) -> None:
        for name in ("hang_timeout", "startup_timeout", "queue_timeout", "run_timeout", "poll_interval"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name.replace('_', '-')} {getattr(self, name)} must be positive")


@dataclass(frozen=True)
class WatchResult:
    outcome: str  # COMPLETED, FAILED, HUNG, TIMEOUT, NOT_STARTED
    reason: str  # one line, e.g. "no new iteration line for 300s after iteration 2"
    state: JobState  # the last state seen
    last_iteration: int | None
    queued_seconds: float
    running_seconds: float
    silent_seconds: float  # since the last iteration line (or since the start) when the watch ended


def watch(launcher: Launcher, run: Launched, limits: Limits, *, on_iteration: Callable[[ParsedIteration], None]
          | None = None, pattern: re.Pattern | None = None, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> WatchResult:
    """`pattern`: the user's --iteration-regex (throughput.regex_log); None: Megatron's iteration lines."""
    tail = LogTail(run.log_path)
    began = clock()
    running_since: float | None = None
    silence = StallClock(startup=limits.startup_timeout, stall=limits.hang_timeout)
    last_iteration: int | None = None

    def read_log() -> None:
        nonlocal last_iteration
        for line in tail.new_lines():
            parsed = parse_line(line, pattern)
            if parsed is not None and (last_iteration is None or parsed.iteration > last_iteration):
                last_iteration = parsed.iteration
                silence.progress(clock())
                if on_iteration is not None:
                    on_iteration(parsed)

    def result(outcome: str, reason: str, state: JobState) -> WatchResult:
        now = clock()
        start = running_since if running_since is not None else now
        return WatchResult(outcome, reason, state, last_iteration, queued_seconds=start - began,
                           running_seconds=now - start,
                           silent_seconds=now - (silence.last if silence.last is not None else start))

    while True:
        state = launcher.state(run)
        read_log()
        now = clock()
        if state.phase == DONE:
            read_log()  # what the ranks printed last
            if state.exit_code == 0:
                return result(COMPLETED, state.detail, state)
            return result(FAILED, state.detail or "ended", state)
        if state.phase == ENDING:  # the final state and exit code come after (the jobstate bounds this)
            pass
        elif state.phase == PENDING:
            if now - began > limits.queue_timeout:
                return result(NOT_STARTED, f"still {state.detail or 'queued'} after {limits.queue_timeout:g}s", state)
        else:
            if running_since is None:
                running_since = silence.started = now
            if silence.check(now):
                if silence.last is None:
                    return result(HUNG, f"no iteration line within {limits.startup_timeout:g}s of the start", state)
                return result(HUNG, f"no new iteration line for {limits.hang_timeout:g}s after iteration "
                                    f"{last_iteration}", state)
            if now - running_since > limits.run_timeout:
                return result(TIMEOUT, f"still running after {limits.run_timeout:g}s (at iteration "
                                       f"{last_iteration if last_iteration is not None else '-'})", state)
        sleep(limits.poll_interval)
