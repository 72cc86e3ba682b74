"""The watch: poll the job and its progress; on a stall take `attach`'s verdict once, in a new folder, and run
the user's --on-hang command; record a stall that clears; end with the job.

Every step is bounded: the job's state (scontrol: 10 s), the log (a few MB per poll), the verdict (`attach` in
its own process, killed with its py-spy and srun children past --timeout plus a margin), the --on-hang command
(ON_HANG_TIMEOUT). Nothing is ever written over: each report gets a new folder, events are appended to
OUT/watch.jsonl, one line per event is printed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from slurm.jobstate import DONE, ENDING, PENDING, JobState
from hangdoctor.watch.slowdown import SlowDetector
from hangdoctor.throughput.stall import StallClock
from slurm.errors import SlurmCommandMissing
from slurm.process import run_command

ON_HANG_TIMEOUT = 120.0
ATTACH_MARGIN = 60.0  # beyond attach's own --timeout: its start, the analysis and the report files


@dataclass
class WatchPlan:
    target: list[str]  # attach's flags that select the job: ["--jobid", "12"], ["--pid", "4242", ...]
    job_state: Callable[[], JobState]
    progress: list  # LogProgress / HeartbeatProgress
    clock: StallClock
    out: Path
    attach_args: list[str] = field(default_factory=list)  # --samples, --interval, --timeout, topology, --fr-dir
    attach_timeout: float = 60.0
    on_hang: list[str] | None = None  # argv; the report folder is appended
    poll: float = 10.0
    env: dict[str, str] | None = None
    slow: SlowDetector | None = None  # --slow PCT: profile once when the iteration time rises that much
    profile_seconds: float = 20.0


@dataclass
class Outcome:
    ended: str  # how the job ended, e.g. "COMPLETED", "FAILED (exit 1)"; "" when the watch was interrupted
    succeeded: bool
    reports: list[Path] = field(default_factory=list)
    resumed: list[float] = field(default_factory=list)  # seconds each cleared stall lasted
    profiles: list[Path] = field(default_factory=list)  # --slow: each slowdown's profile


def unique_folder(out: Path, stem: str) -> Path:
    folder, n = out / stem, 2
    while folder.exists():
        folder, n = out / f"{stem}-{n}", n + 1
    return folder


class Recorder:
    """Say each event in one line and append it to OUT/watch.jsonl."""

    def __init__(self, out: Path, say: Callable[[str], None]):
        self.path = out / "watch.jsonl"
        self.say = say

    def __call__(self, event: str, text: str, **data) -> None:
        self.say(text)
        with open(self.path, "a") as handle:
            handle.write(json.dumps({"time": time.time(), "event": event, "text": text, **data}) + "\n")


def take_verdict(plan: WatchPlan, silent: float, iteration: int | None, record: Recorder) -> Path:
    folder = unique_folder(plan.out, time.strftime("hang-%Y%m%d-%H%M%S"))
    argv = [sys.executable, "-m", "hangdoctor", "attach", *plan.target, *plan.attach_args, "--out", str(folder)]
    where = f"after iteration {iteration}" if iteration is not None else "before any progress"
    try:
        result = run_command(argv, timeout=plan.attach_timeout + ATTACH_MARGIN, env=plan.env)
    except KeyboardInterrupt:  # the watch is being stopped: the attach was ended; the stall is still recorded
        record("stall", f"stall: no progress for {silent:.0f}s ({where}); the watch was stopped before its "
               f"verdict was taken (partial output in {folder}/)", report=str(folder),
               silent_seconds=round(silent, 1), iteration=iteration, attach_exit=None)
        raise
    folder.mkdir(parents=True, exist_ok=True)  # attach made it, unless it failed before collecting
    (folder / "report.txt").write_text(result.stdout)
    (folder / "attach.log").write_text(" ".join(argv) + "\n" + result.stderr)
    headline = _headline(folder, result)
    record("stall", f"stall: no progress for {silent:.0f}s ({where}); verdict in {folder}/: {headline}",
           report=str(folder), silent_seconds=round(silent, 1), iteration=iteration, attach_exit=result.returncode)
    if plan.on_hang:
        _run_on_hang(plan, folder, record)
    return folder


def take_profile(plan: WatchPlan, baseline: float, recent: float, iteration: int | None, record: Recorder) -> Path:
    """`attach --profile`: which rank the others wait for, in a new folder beside the hang reports."""
    folder = unique_folder(plan.out, time.strftime("slow-%Y%m%d-%H%M%S"))
    argv = [sys.executable, "-m", "hangdoctor", "attach", *plan.target, *plan.attach_args, "--profile",
            f"{plan.profile_seconds:g}", "--out", str(folder)]
    where = f" at iteration {iteration}" if iteration is not None else ""
    result = run_command(argv, timeout=plan.attach_timeout + plan.profile_seconds + ATTACH_MARGIN, env=plan.env)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text(result.stdout)
    (folder / "attach.log").write_text(" ".join(argv) + "\n" + result.stderr)
    headline = _headline(folder, result, "profile.json")
    record("slow", f"slow: {recent:.3g}s per iteration against {baseline:.3g}s{where}; profile in {folder}/: "
           f"{headline}", report=str(folder), baseline_s=round(baseline, 4), recent_s=round(recent, 4),
           iteration=iteration, attach_exit=result.returncode)
    return folder


def _headline(folder: Path, result, name: str = "report.json") -> str:
    try:
        return json.loads((folder / name).read_text())["headline"]
    except (OSError, ValueError, KeyError, TypeError):
        why = "timed out" if result.timed_out else result.first_error_line()
        return f"no verdict (attach {why}; see {folder}/attach.log)"


def _run_on_hang(plan: WatchPlan, folder: Path, record: Recorder) -> None:
    argv = [*plan.on_hang, str(folder)]
    try:
        result = run_command(argv, timeout=ON_HANG_TIMEOUT, env=plan.env)
    except SlurmCommandMissing:
        record("on-hang", f"--on-hang: {plan.on_hang[0]} not found", code=None)
        return
    except OSError as exc:  # removed or made unrunnable since the start: said, and the watch goes on
        record("on-hang", f"--on-hang: {plan.on_hang[0]} cannot run ({exc.strerror or exc})", code=None)
        return
    (folder / "on-hang.log").write_text(" ".join(argv) + "\n" + result.stdout + result.stderr)
    status = "killed after {:.0f}s".format(ON_HANG_TIMEOUT) if result.timed_out else f"exit {result.returncode}"
    record("on-hang", f"--on-hang {plan.on_hang[0]} ran ({status})", code=result.returncode)


def watch(plan: WatchPlan, say: Callable[[str], None], *, now: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> Outcome:
    plan.out.mkdir(parents=True, exist_ok=True)
    record = Recorder(plan.out, say)
    outcome = Outcome(ended="", succeeded=False)
    running = False
    while True:
        state = plan.job_state()
        t = now()
        if state.phase == DONE:
            for source in plan.progress:  # the last lines the job wrote
                source.poll(t)
            outcome.ended, outcome.succeeded = state.detail, state.succeeded
            record("ended", f"job ended: {state.detail}", succeeded=state.succeeded, exit_code=state.exit_code)
            return outcome
        if state.phase in (PENDING, ENDING):  # not started, or its processes being ended: nothing can stall
            sleep(plan.poll)
            continue
        if not running:
            running, plan.clock.started = True, t
            for source in plan.progress:  # where the job was when the watch began, and since when
                seeded = source.seed(t)
                if seeded is not None:
                    plan.clock.progress(seeded.time)
                    at = f"iteration {seeded.iteration}" if seeded.iteration is not None else "progress"
                    say(f"last {at} {t - seeded.time:.0f}s before the watch began")
        stalled = plan.clock.stalled_since is not None
        for source in plan.progress:
            for step in source.poll(t, stalled=stalled):
                cleared = plan.clock.progress(step.time)
                if cleared is not None:
                    outcome.resumed.append(cleared)
                    at = f" at iteration {step.iteration}" if step.iteration is not None else ""
                    record("resumed", f"resumed after {cleared:.0f}s{at}", seconds=round(cleared, 1),
                           iteration=step.iteration)
                stalled = False
            tail = getattr(source, "tail", None)
            for event in tail.take_events() if tail is not None else ():
                record("log", f"Warning: log {tail.path} was {event}; following it from its start"
                       if event != "not a regular file" else f"Warning: log {tail.path} is not a regular file; "
                       f"not read", what=event)
        if plan.slow is not None and not stalled:
            newest = next((s.last for s in plan.progress if getattr(s, "last", None) is not None), None)
            slow = plan.slow.feed(t, newest)
            if slow is not None:
                outcome.profiles.append(take_profile(plan, *slow, newest, record))
        if plan.clock.check(t):
            iteration = next((s.last for s in plan.progress if getattr(s, "last", None) is not None), None)
            outcome.reports.append(take_verdict(plan, plan.clock.silent_for(t), iteration, record))
        sleep(plan.poll)
