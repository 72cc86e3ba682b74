"""Run your job (or the reference trainer) over configurations x toggles x repeats, catch hangs, tabulate, plot.

    hangdoctor experiment --program "python my_train.py --tp {tp} --out {run_dir}" \\
        --config a="--gpus 2" --config b="--gpus 4" --toggle CUDA_LAUNCH_BLOCKING=0,1 \\
        --iteration-regex 'step (?P<iteration>\\d+) .* (?P<ms>[\\d.]+) ms' --launcher torchrun --out exp0
    hangdoctor experiment --sbatch-script my_job.sbatch --config a="--gpus 8" \\
        --toggle CUDA_LAUNCH_BLOCKING=0,1 --out exp1                         # your own batch script, once per cell
    hangdoctor experiment --config tp2="--tp 2 --gpus 2" --config pp2="--pp 2 --gpus 2" \\
        --toggle CUDA_LAUNCH_BLOCKING=0,1 --repeats 2 --common "--num-layers 4 --train-iters 20" \\
        --launcher sbatch --gpus-per-node 8 --hang-timeout 300 --out exp2   # the reference trainer
    hangdoctor experiment --spec matrix.json --launcher torchrun --out exp2   # the matrix in JSON
    hangdoctor experiment --toggle=--zero-stage=0,1 ...                         # a trainer flag as a toggle
    hangdoctor experiment --logs old/*.log --out table                          # tables from existing logs

--program is the command every rank runs, {tp} {pp} {dp} {gpus} {run_dir} filled in per run, a configuration's
other words and the flag toggles after it; without it, the reference trainer runs (`python -m trainer`, its
topology flags and --run-dir set by the runner). --sbatch-script submits your batch script as it is, once per
run, with the toggles and HANGDOCTOR_TP/PP/DP/GPUS/RUN_DIR exported (--export=ALL,...) and its output file
found with scontrol.

Runs go one at a time (every cell once, then again for each repeat), through sbatch or a local torchrun. A
watchdog reads each run's iteration lines (Megatron's, or --iteration-regex with the named groups iteration
and ms or s for the iteration's time): with no new line for --hang-timeout seconds (or none
within --startup-timeout of the start) the run is hung, `hangdoctor attach` diagnoses it while it is still
hung, and only then is it cancelled (its whole process tree killed under torchrun). Figures are medians after
--warmup iterations, and say which iterations they cover.

In --out: results.csv (pandas), results.md (the seeds' table), results.json, throughput.png, tflops.png, and
runs/<run>/ with train.log, job.sbatch or command.txt, the trainer's config.json and metrics.jsonl,
hangdoctor/ (a hung run's verdict: verdict.txt, verdict.json, report.html) and result.json.
Ctrl-C, SIGTERM or SIGHUP stop the current run and still write the tables (--resume continues later).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.errors import (EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE,
                            CommandError)
from hangdoctor.clicore.argtypes import positive_float, positive_int
from hangdoctor.clicore.extras import check as check_extras
from hangdoctor.experiments.commands.job_flags import check_config_words, iteration_pattern, recorded_job, user_job
from hangdoctor.experiments.launch import LaunchError
from hangdoctor.experiments.matrix import Matrix, RunSpec, build_matrix, load_spec
from hangdoctor.experiments.plots import METRICS
from hangdoctor.experiments.results import RunResult
from hangdoctor.experiments.watchdog import Limits
from hangdoctor.request import add_arguments as add_request_arguments
from hangdoctor.request import from_namespace
from slurm.nodelist import compress_nodelist, expand_nodelist

EXIT_CODES = {
    EXIT_OK: "every run completed (with --logs: every log measured; with --dry-run: every script rendered)",
    EXIT_PARTIAL: "tables written, but some run hung, failed, timed out or never started (the table says which), "
                  "or with --logs some log had nothing to measure",
    EXIT_USAGE: "bad command line or matrix, or --out cannot be written (or holds another experiment), or the "
                "trainer's torch and deepspeed are missing (the train extra)",
    EXIT_NOT_FOUND: "with --logs: no log has an iteration line to measure",
    EXIT_ENVIRONMENT: "cannot launch at all: sbatch not found, or --python cannot be started (the tables of the "
                      "runs before are written)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM or SIGHUP): the current run is stopped and the tables of what "
                      "ran are written; --resume continues",
}


def plot_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in METRICS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose among {', '.join(METRICS)}, e.g. tokens,tflops")
    return names


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    m = parser.add_argument_group("the matrix")
    m.add_argument("--config", action="append", default=[], metavar='NAME="FLAGS"',
                   help="a configuration: --gpus N, --tp N, --pp N and the program's (or the trainer's) flags "
                        "(repeatable)")
    m.add_argument("--toggle", action="append", default=[], metavar="NAME=V1,V2",
                   help="an environment variable, or a trainer flag written --toggle=--flag=V1,V2 (repeatable)")
    m.add_argument("--repeats", type=positive_int, help="runs of every cell (default 1)")
    m.add_argument("--common", default="", metavar='"FLAGS"', help="trainer flags every configuration shares")
    m.add_argument("--spec", type=Path, metavar="FILE", help="the matrix as JSON: common, configs, toggles, repeats")
    m.add_argument("--logs", type=Path, nargs="+", metavar="LOG", help="no runs: tabulate these existing logs")
    job = parser.add_argument_group("your job (default: the reference trainer)")
    job.add_argument("--program", metavar='"CMD ARGS"',
                     help="the command every rank runs, with {tp} {pp} {dp} {gpus} {run_dir} filled in per run, "
                          'e.g. "python my_train.py --tp {tp}" (under torchrun or srun)')
    job.add_argument("--sbatch-script", type=Path, metavar="FILE",
                     help="your own batch script, submitted as it is once per run with the toggles and "
                          "HANGDOCTOR_TP/PP/DP/GPUS/RUN_DIR exported; its output file found with scontrol")
    job.add_argument("--iteration-regex", metavar="REGEX",
                     help="your log's iteration lines, with named groups iteration and ms (or s) for its time, "
                          "e.g. 'step (?P<iteration>\\d+) .* (?P<ms>[\\d.]+) ms' (default: Megatron's lines)")
    launch = parser.add_argument_group("launching")
    launch.add_argument("--launcher", choices=("sbatch", "torchrun"),
                        help="sbatch (the default) or a local torchrun")
    launch.add_argument("--python", default=sys.executable, help="the Python that runs the trainer (default: this one)")
    launch.add_argument("--gpus-per-node", type=positive_int, help="sbatch: ranks per node (default: one node per run)")
    launch.add_argument("--sbatch-option", action="append", default=[], metavar="KEY=VALUE",
                        help="sbatch: an #SBATCH option, e.g. partition=gpu_p5 or gres=gpu:8 (repeatable)")
    launch.add_argument("--nodelist", metavar="LIST",
                        help="sbatch: run on these nodes, e.g. gpu[01-04,07] (a smaller run takes the first ones)")
    launch.add_argument("--exclude", metavar="LIST", help="sbatch: never on these nodes (the ones a hang broke)")
    launch.add_argument("--time-limit", help="sbatch: --time of each job, e.g. 00:30:00")
    launch.add_argument("--master-port", type=positive_int, help="sbatch: rendezvous port (default: a free one per run)")
    w = parser.add_argument_group("hang watch")
    w.add_argument("--hang-timeout", type=positive_float, default=300.0,
                   help="seconds without a new iteration line before a run is hung (default 300)")
    w.add_argument("--startup-timeout", type=positive_float, default=900.0,
                   help="seconds from the start to the first iteration line (default 900)")
    w.add_argument("--queue-timeout", type=positive_float, default=3600.0,
                   help="sbatch: seconds a job may stay queued (default 3600)")
    w.add_argument("--run-timeout", type=positive_float, default=4 * 3600.0,
                   help="seconds a run may take in all (default 14400)")
    w.add_argument("--poll-interval", type=positive_float, default=1.0, help="seconds between checks (default 1)")
    w.add_argument("--no-attach", action="store_true", help="do not run hangdoctor on hung runs")
    add_request_arguments(w, prefix="attach-")  # attach's own flags: --attach-samples, --attach-timeout...
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, help="the experiment's folder (default ./experiment-<time>)")
    out.add_argument("--warmup", type=int, default=2, help="first iterations left out of the medians (default 2)")
    out.add_argument("--plot", type=plot_list, metavar="tokens,tflops",
                     help=f"PNG plots to draw, among {', '.join(METRICS)} (default tokens,tflops; sec with "
                          "--iteration-regex, whose lines give no tokens or TFLOPs)")
    out.add_argument("--title", default="", help="a title for the markdown table")
    out.add_argument("--resume", action="store_true", help="keep the runs --out already has and run the rest")
    out.add_argument("--dry-run", action="store_true", help="print the runs and what would launch them; run nothing")
    out.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def sbatch_options(args: argparse.Namespace) -> dict[str, str]:
    options = {}
    for item in args.sbatch_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"--sbatch-option {item!r}: expected KEY=VALUE",
                               hint="e.g. --sbatch-option partition=gpu", exit_code=EXIT_USAGE)
        options[key.lstrip("-")] = value
    if args.exclude is not None:
        options["exclude"] = compress_nodelist(node_list(args.exclude, "--exclude"))
    return options


def node_list(text: str | None, flag: str) -> list[str] | None:
    if text is None:
        return None
    try:
        nodes = expand_nodelist(text)
    except ValueError as exc:
        raise CommandError(f"{flag}: {exc}", hint="e.g. gpu[01-04,07] or n1,n2", exit_code=EXIT_USAGE) from None
    if not nodes:
        raise CommandError(f"{flag} {text!r} names no node", hint="e.g. gpu[01-04,07] or n1,n2", exit_code=EXIT_USAGE)
    return nodes


def make_matrix(args: argparse.Namespace) -> Matrix:
    try:
        spec = load_spec(args.spec) if args.spec else None
        return build_matrix(configs=args.config, toggles=args.toggle, repeats=args.repeats, common=args.common,
                            spec=spec)
    except ValueError as exc:
        raise CommandError(str(exc), hint="see `hangdoctor experiment --help`", exit_code=EXIT_USAGE) from None


def make_launcher(args: argparse.Namespace, program):
    if args.sbatch_script is not None:
        from hangdoctor.experiments.launch_script import ScriptLauncher

        return ScriptLauncher(script=args.sbatch_script, sbatch_options=sbatch_options(args),
                              time_limit=args.time_limit)
    if args.launcher == "torchrun":
        from hangdoctor.experiments.launch_torchrun import TorchrunLauncher

        return TorchrunLauncher(python=args.python, program=program)
    from hangdoctor.experiments.launch_sbatch import SbatchLauncher

    return SbatchLauncher(python=args.python, gpus_per_node=args.gpus_per_node,
                          sbatch_options=sbatch_options(args), nodelist=node_list(args.nodelist, "--nodelist"),
                          time_limit=args.time_limit,
                          master_port=args.master_port, program=program)


def check_runs(runs: list[RunSpec], launcher, out: Path) -> list[str]:
    from hangdoctor.experiments.runner import run_dir_of

    try:
        return [launcher.describe(spec, run_dir_of(out, spec).resolve()) for spec in runs]
    except ValueError as exc:
        raise CommandError(str(exc),
                           hint="fix the configuration (its --gpus, its words), or --gpus-per-node, or --nodelist",
                           exit_code=EXIT_USAGE) from None


def prepare_out(out: Path, matrix: Matrix, resume: bool, job: dict[str, str]) -> None:
    recorded = out / "matrix.json"
    wanted = {**matrix.to_dict(), **job}
    if recorded.exists():
        try:
            before = json.loads(recorded.read_text())
        except ValueError:
            before = None
        if not resume:
            raise CommandError(f"{out} already holds an experiment",
                               hint="pass --resume to continue it, or another --out", exit_code=EXIT_USAGE)
        if before != wanted:
            raise CommandError(f"--resume: the matrix differs from the one in {recorded}",
                               hint="run the same command again, or choose another --out", exit_code=EXIT_USAGE)
    try:
        out.mkdir(parents=True, exist_ok=True)
        recorded.write_text(json.dumps(wanted, indent=1) + "\n")
    except OSError as exc:
        raise CommandError(f"cannot write to {out}: {exc.strerror or exc}", hint="choose another --out",
                           exit_code=EXIT_USAGE) from None


def report(results: list[RunResult], args: argparse.Namespace, out_dir: Path | None, out: Console,
           err: Console) -> None:
    from hangdoctor.experiments.outputs import results_json, write_outputs
    from hangdoctor.experiments.tables import render_table

    if args.json:
        out.file.write(results_json(results))
        out.file.flush()
    else:
        render_table(results, out, title=args.title)
    if out_dir is not None and results:
        written = write_outputs(results, out_dir, title=args.title, metrics=args.plot)
        err.print(f"Wrote {', '.join(p.name for p in written)} in {out_dir}/", markup=False, highlight=False)
        from hangdoctor.experiments.plots import plots_available

        if args.plot and not plots_available():
            err.print("Warning: no plots: matplotlib is not installed (pip install 'hangdoctor[plots]')",
                      markup=False, highlight=False)


def run_logs(args: argparse.Namespace, out: Console, err: Console, pattern) -> int:
    from hangdoctor.experiments.logs import result_from_log

    if args.config or args.toggle or args.spec or args.program or args.sbatch_script:
        raise CommandError("--logs tabulates existing logs: it takes no --config, --toggle, --spec, --program or "
                           "--sbatch-script",
                           hint="run the matrix and the logs in two commands", exit_code=EXIT_USAGE)
    if args.out is not None:  # refused before any work: never over an experiment or a user's own tables
        from hangdoctor.experiments.outputs import output_names

        if (args.out / "matrix.json").exists():
            raise CommandError(f"{args.out} holds an experiment: --logs would replace its tables",
                               hint="choose another --out for the tables of these logs", exit_code=EXIT_USAGE)
        taken = [name for name in output_names(args.plot) if (args.out / name).exists()]
        if taken:
            raise CommandError(f"{args.out} already has {', '.join(taken)}", hint="choose another --out",
                               exit_code=EXIT_USAGE)
    stems = [path.stem for path in args.logs]  # "train" for every run folder's train.log: name them by folder
    names = [path.parent.name if stems.count(path.stem) > 1 else path.stem for path in args.logs]
    results = []
    for index, (path, name) in enumerate(zip(args.logs, names), start=1):
        try:
            results.append(result_from_log(path, warmup=args.warmup, index=index, name=name, pattern=pattern))
        except ValueError as exc:
            if len(args.logs) == 1:
                raise CommandError(str(exc), hint="give a Megatron log with iteration lines (lower --warmup for short "
                                   "ones)", exit_code=EXIT_NOT_FOUND) from None
            err.print(f"Warning: {exc}", markup=False, highlight=False, soft_wrap=True)
    if not results:
        raise CommandError(f"none of the {len(args.logs)} logs has a figure to measure",
                           hint="give Megatron logs with iteration lines", exit_code=EXIT_NOT_FOUND)
    report(results, args, args.out, out, err)
    return EXIT_OK if len(results) == len(args.logs) else EXIT_PARTIAL


ITERATION_EVERY = 10.0  # seconds between two progress lines of one run


def progress_events(err: Console, total: int):
    from hangdoctor.experiments.runner import Events

    def line(spec: RunSpec, text: str) -> None:
        err.print(f"[{spec.index}/{total}] {spec.name}: {text}", markup=False, highlight=False, soft_wrap=True)

    def ended(spec: RunSpec, result: RunResult, so_far: list) -> None:
        figure = f"{result.sec_per_it:.4g} s/it ({result.measured_over})" if result.sec_per_it is not None else ""
        detail = {"completed": figure, "hung": result.verdict or result.reason}.get(result.status) or result.reason
        line(spec, f"{result.status}" + (f": {detail}" if detail else ""))

    shown: dict[str, float] = {}  # run -> when its last iteration line was shown

    def iteration(spec: RunSpec, parsed) -> None:
        """The run's iterations as they come: the first one, then one line every ITERATION_EVERY seconds."""
        now = time.monotonic()
        if spec.name in shown and now - shown[spec.name] < ITERATION_EVERY:
            return
        shown[spec.name] = now
        fields, figures = parsed.fields, []
        try:
            figures.append(f"{float(fields['elapsed time per iteration (ms)']) / 1000:.3g} s/it")
        except (KeyError, ValueError):
            pass
        if "lm loss" in fields:
            figures.append(f"loss {fields['lm loss']}")
        of = f"/{parsed.train_iters}" if parsed.train_iters else ""
        line(spec, f"iteration {parsed.iteration}{of}" + (f" ({', '.join(figures)})" if figures else ""))

    return Events(started=lambda spec, launched: line(spec, f"started ({launched.ident})"), iteration=iteration,
                  diagnosing=lambda spec, reason: line(spec, f"{reason}: running hangdoctor attach"),
                  ended=ended)


@contextlib.contextmanager
def stop_signals_interrupt():
    """SIGTERM and SIGHUP (a closed terminal, a killed allocation) act as Ctrl-C: the current run is stopped and
    the tables written, instead of the experiment dying with its job still running."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.warmup < 0:
        raise CommandError(f"--warmup {args.warmup} must be 0 or more", hint="e.g. --warmup 2", exit_code=EXIT_USAGE)
    pattern = iteration_pattern(args.iteration_regex)
    if args.plot is None:
        args.plot = ["sec"] if pattern is not None else ["tokens", "tflops"]
    if args.logs:
        return run_logs(args, out, err, pattern)
    program = user_job(args)
    matrix = make_matrix(args)
    if program is not None or args.sbatch_script is not None:
        check_config_words(matrix)
    launcher = make_launcher(args, program)
    out_dir = (args.out or Path(f"experiment-{time.strftime('%Y%m%d-%H%M%S')}")).resolve()
    runs = matrix.runs()
    described = check_runs(runs, launcher, out_dir)
    if args.dry_run:
        for spec, text in zip(runs, described):
            out.print(f"--- run {spec.index}/{len(runs)}: {spec.name} ---", markup=False, highlight=False)
            out.print(text, markup=False, highlight=False, soft_wrap=True)
        return EXIT_OK
    if program is None and args.sbatch_script is None and args.python == sys.executable:
        # the reference trainer runs under this Python, here or on the nodes (the same path); a user's job brings its own
        check_extras("hangdoctor experiment", ("torch", "deepspeed"),
                     hint="or pass --python, a Python that has them, to run the trainer")
    if launcher.name != "torchrun" and shutil.which("sbatch") is None:
        raise CommandError("sbatch not found on PATH",
                           hint="run this on a SLURM login node, or use --launcher torchrun",
                           exit_code=EXIT_ENVIRONMENT)
    try:
        limits = Limits(hang_timeout=args.hang_timeout, startup_timeout=args.startup_timeout,
                        queue_timeout=args.queue_timeout, run_timeout=args.run_timeout,
                        poll_interval=args.poll_interval)
        attach = None if args.no_attach else from_namespace(args, prefix="attach-")
    except ValueError as exc:
        raise CommandError(str(exc), hint="", exit_code=EXIT_USAGE) from None
    prepare_out(out_dir, matrix, args.resume, recorded_job(args))
    from hangdoctor.experiments.outputs import load_results
    from hangdoctor.experiments.runner import RunnerOptions, run_matrix

    options = RunnerOptions(limits=limits, attach=attach, warmup=args.warmup, resume=args.resume,
                            iteration_pattern=pattern)
    settings = len(runs) // (len(matrix.configs) * matrix.repeats)
    err.print(f"{plural(len(runs), 'run')} ({plural(len(matrix.configs), 'configuration')} x "
              f"{plural(settings, 'toggle setting')} x {plural(matrix.repeats, 'repeat')}) through {launcher.name}, "
              f"in {out_dir}/", markup=False, highlight=False)
    try:
        with stop_signals_interrupt():
            run_matrix(matrix, launcher, out_dir, options, progress_events(err, len(runs)))
    except BaseException as exc:  # interrupted, or no launcher: still the tables of what ran
        from hangdoctor.experiments.outputs import write_outputs

        done = load_results(out_dir)
        if done:
            write_outputs(done, out_dir, title=args.title, metrics=args.plot)
        if isinstance(exc, LaunchError):
            raise CommandError(exc.message, hint=exc.hint, exit_code=EXIT_ENVIRONMENT) from None
        raise
    results = load_results(out_dir)
    report(results, args, out_dir, out, err)
    return EXIT_OK if all(r.status == "completed" for r in results) else EXIT_PARTIAL
