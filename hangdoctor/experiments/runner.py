"""Run a matrix, one run at a time: launch, watch, diagnose a hang with hangdoctor, stop, measure, record.

For each run, in order (`Matrix.runs()`), in OUT/runs/<run name>/:
1. the launcher starts it (an sbatch job or a local torchrun);
2. the watchdog follows RUN/train.log until the run completes, dies, hangs or runs out of time;
3. a hung run is diagnosed with `hangdoctor attach` while it is still hung; only then
4. the run is stopped (scancel / its whole process tree killed): always, whatever happened before;
5. its figures are read from the log and RUN/result.json is written.
Runs go one at a time so that they do not slow each other down. A result already in RUN/result.json is kept
with `resume=True`, so an interrupted experiment continues where it stopped; the run that was interrupted is
run again, its first attempt moved to OUT/interrupted/.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hangdoctor.experiments.hang import diagnose
from hangdoctor.experiments.launch import Launched, LaunchError, Launcher
from hangdoctor.experiments.matrix import Matrix, RunSpec
from hangdoctor.experiments.results import RESULT_NAME, RunResult, fill_from_run_dir
from hangdoctor.experiments.watchdog import HUNG, Limits, watch
from hangdoctor.request import AttachRequest
from hangdoctor.throughput.megatron_log import ParsedIteration


@dataclass
class RunnerOptions:
    limits: Limits = field(default_factory=Limits)
    attach: AttachRequest | None = field(default_factory=AttachRequest)  # None: do not diagnose hung runs
    warmup: int = 2
    resume: bool = False
    iteration_pattern: re.Pattern | None = None  # --iteration-regex; None: Megatron's iteration lines


@dataclass
class Events:
    """Callbacks for progress (all optional): a run started, printed an iteration, was diagnosed, ended."""

    started: Callable[[RunSpec, Launched], None] = lambda spec, launched: None
    iteration: Callable[[RunSpec, ParsedIteration], None] = lambda spec, parsed: None
    diagnosing: Callable[[RunSpec, str], None] = lambda spec, reason: None
    ended: Callable[[RunSpec, RunResult, list[RunResult]], None] = lambda spec, result, so_far: None


def run_dir_of(out: Path, spec: RunSpec) -> Path:
    return out / "runs" / spec.name


def new_result(spec: RunSpec, launcher: Launcher, run_dir: Path, warmup: int) -> RunResult:
    dims = spec.config.dims
    return RunResult(run=spec.name, config=spec.config.name, index=spec.index, repeat=spec.repeat,
                     toggles=spec.toggles, launcher=launcher.name, gpus=dims.world_size, tp=dims.tp, pp=dims.pp,
                     dp=dims.dp, warmup=warmup, run_dir=str(run_dir))


def run_one(spec: RunSpec, launcher: Launcher, out: Path, options: RunnerOptions, events: Events) -> RunResult:
    run_dir = run_dir_of(out, spec)
    if options.resume and (run_dir / RESULT_NAME).exists():
        kept = RunResult.load(run_dir)
        if kept.status != "interrupted":
            return kept
    if run_dir.exists():  # an interrupted attempt: kept aside, out of the tables, and the run starts afresh
        aside = out / "interrupted" / f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        run_dir.rename(aside)
    run_dir.mkdir(parents=True)
    result = new_result(spec, launcher, run_dir, options.warmup)
    try:
        launched = launcher.start(spec, run_dir)
    except LaunchError as exc:
        if exc.fatal:
            raise
        result.status, result.reason = "not started", exc.message
        result.save(run_dir)
        return result
    result.job = launched.ident
    try:
        events.started(spec, launched)
        watched = watch(launcher, launched, options.limits,
                        on_iteration=lambda parsed: events.iteration(spec, parsed),
                        pattern=options.iteration_pattern)
        result.status, result.reason, result.exit_code = watched.outcome, watched.reason, watched.state.exit_code
        result.queued_s, result.running_s = round(watched.queued_seconds, 2), round(watched.running_seconds, 2)
        if watched.outcome == HUNG and options.attach is not None:
            events.diagnosing(spec, watched.reason)
            verdict = diagnose(launched.attach_args, run_dir / "hangdoctor", options.attach)
            result.verdict, result.verdict_hung, result.verdict_folder = verdict.summary, verdict.hung, verdict.folder
    except BaseException:  # Ctrl-C or a bug: the run is still stopped and what it printed still measured
        if not result.status:
            result.status, result.reason = "interrupted", "the experiment was interrupted"
        raise
    finally:
        result.stopped = launcher.stop(launched)
        fill_from_run_dir(result, run_dir, launched.log_path, options.warmup, options.iteration_pattern)
        result.save(run_dir)
    return result


def run_matrix(matrix: Matrix, launcher: Launcher, out: Path, options: RunnerOptions,
               events: Events | None = None) -> list[RunResult]:
    events = events or Events()
    results: list[RunResult] = []
    for spec in matrix.runs():
        result = run_one(spec, launcher, out, options, events)
        results.append(result)
        events.ended(spec, result, list(results))
    return results
