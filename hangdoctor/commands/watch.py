"""Watch a running job; when it stalls, take the verdict at once, keep it, and tell someone.

    hangdoctor watch --jobid 1234                        # from a login node; the log is the job's StdOut
    hangdoctor watch --jobid "$SLURM_JOB_ID" &           # from the job's own sbatch script (docs/hangdoctor.md)
    hangdoctor watch --local --log train.log --stall 600 --on-hang "notify-send hang"
    hangdoctor watch --pid 4242 --heartbeat /scratch/run/heartbeat

Progress is a higher iteration in the run's log (Megatron and Megatron-DeepSpeed lines by default,
--iteration-regex for others) or a heartbeat file that changes. With no progress for --stall seconds (by default
10 x the median time between iteration lines seen, at least --min-stall; --startup before the first one), the
watch runs `hangdoctor attach` once (several samples; the Flight Recorder where the ranks serve it), saves its
report in a new folder OUT/hang-<time>/, prints one line with the folder and the headline, and runs --on-hang
with the folder as its last argument. A stall that clears is recorded ("resumed after N s"), never reported
twice. The watch ends with the job and says how it ended; everything is in OUT/watch.jsonl.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.errors import (EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE,
                            INTERRUPTED_TEXT, CommandError)
from hangdoctor.clicore.argtypes import positive_float
from hangdoctor.commands.common import add_topology_flags, check_order
from hangdoctor.request import add_arguments as add_request_arguments
from hangdoctor.request import from_namespace, to_argv

EXIT_CODES = {
    EXIT_OK: "the job ended and no stall was reported (for --local and --pid, whose exit status cannot be seen "
             "from outside, however it ended)",
    EXIT_PARTIAL: "a stall was reported (its verdict is in its folder), or the SLURM job failed, was cancelled or "
                  "timed out",
    EXIT_USAGE: "bad command line, or --out cannot be written",
    EXIT_NOT_FOUND: "nothing to watch: the job or processes do not exist or have ended, no log to follow",
    EXIT_ENVIRONMENT: "cannot watch: scontrol missing or failing",
    EXIT_INTERRUPTED: INTERRUPTED_TEXT + " or SIGTERM",
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("what to watch (one of)").add_mutually_exclusive_group(required=True)
    target.add_argument("--jobid", metavar="N", help="a SLURM job (running or queued; run as its owner)")
    target.add_argument("--local", action="store_true", help="the torchrun job on this machine")
    target.add_argument("--pid", type=int, nargs="+", metavar="PID", help="these processes")
    parser.add_argument("--run-id", help="with --local: the torchrun run id, when several run here")
    signs = parser.add_argument_group("progress")
    signs.add_argument("--log", type=Path, metavar="FILE", help="the run's log (default: the job's StdOut under "
                       "SLURM; the ranks' stdout when it is a file)")
    signs.add_argument("--iteration-regex", metavar="REGEX", help="lines that mark progress, the iteration number "
                       "in the group named iteration, else the first group (default: Megatron's ' iteration N/ M |' "
                       "lines)")
    signs.add_argument("--heartbeat", type=Path, metavar="FILE", help="a file the job touches while it runs")
    bounds = parser.add_argument_group("when silence is a stall")
    bounds.add_argument("--stall", type=positive_float, metavar="S",
                        help="seconds without progress that make a stall (default: derived from the run)")
    bounds.add_argument("--min-stall", type=positive_float, default=120.0, metavar="S",
                        help="the least a derived bound can be (default 120)")
    bounds.add_argument("--startup", type=positive_float, default=900.0, metavar="S",
                        help="seconds to the first sign of progress (default 900)")
    bounds.add_argument("--poll", type=positive_float, default=10.0, metavar="S",
                        help="seconds between looks at the log and the job (default 10)")
    verdict = parser.add_argument_group("the verdict on a stall (hangdoctor attach)")
    add_request_arguments(verdict)  # attach's own sampling flags, with its defaults
    verdict.add_argument("--slow", type=positive_float, metavar="PCT",
                         help="slow, not stalled: when the time per iteration stays PCT%% over its running median "
                              "for 3 polls, take `attach --profile` once (a slow-*/ folder beside the hang reports)")
    verdict.add_argument("--profile-seconds", type=positive_float, default=20.0, metavar="S",
                         help="with --slow: how long the profile samples every rank (default 20)")
    verdict.add_argument("--on-hang", metavar="COMMAND", help="run on each stall, with the report folder appended "
                         "as its last argument (split like a shell would, never run by one)")
    parser.add_argument("--out", type=Path, help="folder for the reports and watch.jsonl (default "
                        "./hangdoctor-watch-<job>-<time>)")
    add_topology_flags(parser)


def _check(args: argparse.Namespace) -> list[str] | None:
    check_order(args)
    if args.jobid and not re.match(r"^\d+(_\d+)?$", args.jobid):
        raise CommandError(f"{args.jobid!r} is not a SLURM job id",
                           hint="a job id is a number such as 2180718", exit_code=EXIT_USAGE)
    if args.run_id and not args.local:
        raise CommandError("--run-id goes with --local", hint="hangdoctor watch --local --run-id ID",
                           exit_code=EXIT_USAGE)
    if args.samples < 1:
        raise CommandError(f"--samples {args.samples}: at least one sample is needed", hint="e.g. --samples 3",
                           exit_code=EXIT_USAGE)
    if (args.samples - 1) * args.interval >= args.timeout:
        raise CommandError(f"--samples {args.samples} x --interval {args.interval:g} does not fit in --timeout "
                           f"{args.timeout:g}", hint="e.g. --samples 3 --interval 2 --timeout 90", exit_code=EXIT_USAGE)
    if args.iteration_regex:
        from hangdoctor.throughput.progress import compile_iteration_regex

        try:
            compile_iteration_regex(args.iteration_regex)
        except ValueError as exc:
            raise CommandError(str(exc), hint="e.g. --iteration-regex 'step (\\d+)'", exit_code=EXIT_USAGE) from None
    if args.on_hang is None:
        return None
    try:
        argv = shlex.split(args.on_hang)
    except ValueError as exc:
        raise CommandError(f"--on-hang {args.on_hang!r}: {exc}", hint="quote it as for a shell",
                           exit_code=EXIT_USAGE) from None
    if not argv:
        raise CommandError("--on-hang is empty", hint="e.g. --on-hang 'mail -s hang me@example.org'",
                           exit_code=EXIT_USAGE)
    found = shutil.which(argv[0])  # refused now, not at the first stall hours later
    if found is None or not os.path.isfile(found):
        why = "a folder" if os.path.isdir(argv[0]) else "not executable" if os.path.exists(argv[0]) else "not found"
        raise CommandError(f"--on-hang {argv[0]}: {why}", hint="a program on PATH or an executable file",
                           exit_code=EXIT_USAGE)
    try:
        with open(found, "rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise CommandError(f"--on-hang {argv[0]}: cannot read ({exc.strerror or exc})",
                           hint="a program on PATH or an executable file", exit_code=EXIT_USAGE) from None
    if not head.startswith((b"#!", b"\x7fELF")):
        raise CommandError(f"--on-hang {argv[0]}: neither a program nor a script starting with #!",
                           hint="add a #! line (e.g. #!/bin/sh) or run it through its interpreter",
                           exit_code=EXIT_USAGE)
    return argv


def _stdout_file(pid: int) -> Path | None:
    try:
        target = Path(os.readlink(f"/proc/{pid}/fd/1"))
    except OSError:
        return None
    return target if target.is_absolute() and target.is_file() else None


def _slurm_target(args: argparse.Namespace):
    from slurm.jobstate import DONE, SlurmJobState
    from slurm.errors import JobNotFound, SlurmError
    from slurm.jobs import show_job

    try:
        job = show_job(args.jobid, timeout=10.0)
    except JobNotFound as exc:
        raise CommandError(exc.message, hint=exc.hint, exit_code=EXIT_NOT_FOUND) from None
    except SlurmError as exc:
        raise CommandError(exc.message, hint=exc.hint or "check that scontrol works from here",
                           exit_code=EXIT_ENVIRONMENT) from None
    state = SlurmJobState(job.job_id)
    if state().phase == DONE:
        raise CommandError(f"job {job.job_id} has ended ({job.state}): nothing to watch",
                           hint="look at its output file, or `hangdoctor analyze` a report taken before",
                           exit_code=EXIT_NOT_FOUND)
    log = args.log or (Path(job.stdout_path) if job.stdout_path and job.stdout_path != "(null)" else None)
    return ["--jobid", job.job_id], state, log, job.state == "RUNNING"


def _local_target(args: argparse.Namespace):
    from hangdoctor.collector import procs
    from hangdoctor.sources.local import pick_torchrun_job
    from hangdoctor.watch.processes import ProcessesState

    if args.local:
        run_id, pids = pick_torchrun_job(args.run_id)
        target = ["--local", "--run-id", run_id]
    else:
        pids = args.pid
        missing = [p for p in pids if procs.read_stat(p) is None]
        if missing:
            raise CommandError(f"no process {', '.join(map(str, missing))}", hint="check the PIDs with ps",
                               exit_code=EXIT_NOT_FOUND)
        target = ["--pid", *map(str, pids)]
    log = args.log or next((f for f in map(_stdout_file, sorted(pids)) if f is not None), None)
    return target, ProcessesState(pids), log, True


# A batch job is RUNNING a moment before slurmstepd creates its output file: the job's own log, not there yet, is
# waited for this long before it is called missing (a --log the user names is checked at once).
LOG_APPEARS_S = 20.0


def _appears(path: Path, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _progress(args: argparse.Namespace, log: Path | None, running: bool) -> list:
    from hangdoctor.throughput.progress import HeartbeatProgress, LogProgress, compile_iteration_regex

    sources = []
    if log is not None:
        if running and not _appears(log, 0.0 if args.log else LOG_APPEARS_S):
            what = "a symbolic link that leads nowhere (a loop, or its target is gone)" if log.is_symlink() else \
                "no such file"
            raise CommandError(f"log {log}: {what}", hint="pass the run's log with --log FILE",
                               exit_code=EXIT_NOT_FOUND)
        if log.exists() and not log.is_file():
            raise CommandError(f"log {log}: not a regular file", hint="pass the run's log with --log FILE",
                               exit_code=EXIT_USAGE)
        pattern = compile_iteration_regex(args.iteration_regex) if args.iteration_regex else None
        sources.append(LogProgress(log, pattern))
    if args.heartbeat is not None:
        if not args.heartbeat.is_file():
            what = "not a regular file" if args.heartbeat.exists() else "no such file"
            raise CommandError(f"heartbeat {args.heartbeat}: {what}", hint="pass a file the job touches while it "
                               "runs", exit_code=EXIT_NOT_FOUND)
        sources.append(HeartbeatProgress(args.heartbeat))
    if not sources:
        raise CommandError("nothing shows this job's progress: no log found (its stdout is not a file)",
                           hint="pass --log FILE (the run's log) or --heartbeat FILE", exit_code=EXIT_NOT_FOUND)
    return sources


def _attach_args(args: argparse.Namespace) -> list[str]:
    request = from_namespace(args)
    if request.fr_dir is not None:
        request = replace(request, fr_dir=str(Path(request.fr_dir).absolute()))
    out = [*to_argv(request), "--order", args.order]
    for flag in ("tp", "pp", "dp", "world_size"):
        if getattr(args, flag) is not None:
            out += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    return out


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hangdoctor.watch.loop import WatchPlan, watch
    from hangdoctor.watch.slowdown import SlowDetector
    from hangdoctor.throughput.stall import StallClock

    on_hang = _check(args)
    target, state, log, running = _slurm_target(args) if args.jobid else _local_target(args)
    sources = _progress(args, log, running)
    label = f"job{args.jobid}" if args.jobid else "local" if args.local else "pids"
    folder = args.out or Path(f"hangdoctor-watch-{label}-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "watch.jsonl", "a"):
            pass
    except OSError as exc:
        raise CommandError(f"cannot write to {folder}: {exc.strerror or exc}",
                           hint="pass --out to a writable folder", exit_code=EXIT_USAGE) from None
    plan = WatchPlan(target=target, job_state=state, progress=sources,
                     clock=StallClock(startup=args.startup, stall=args.stall, floor=args.min_stall), out=folder,
                     attach_args=_attach_args(args), attach_timeout=args.timeout, on_hang=on_hang, poll=args.poll,
                     slow=SlowDetector(args.slow) if args.slow else None, profile_seconds=args.profile_seconds)

    def say(text: str) -> None:
        out.print(text, markup=False, highlight=False, soft_wrap=True)

    shown = ", ".join(str(s.tail.path) if hasattr(s, "tail") else f"heartbeat {s.path}" for s in sources)
    say(f"watching {' '.join(target)} ({shown}); reports in {folder}/")
    previous = signal.signal(signal.SIGTERM, _interrupt)  # the end of an sbatch script sends SIGTERM
    try:
        outcome = watch(plan, say)
    except KeyboardInterrupt:
        say("watch stopped")
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
    ok = outcome.succeeded or (not args.jobid and not outcome.ended.startswith("unreachable"))
    return EXIT_OK if ok and not outcome.reports else EXIT_PARTIAL


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt
