"""Attach to a running job, dump every rank's stack (py-spy; pystack where it fails), and say who is stuck where.

    hangdoctor attach --jobid 1234                      # SLURM: one extra `srun --overlap` step, one collector per node
    hangdoctor attach --local                           # the torchrun job on this machine (--run-id when several)
    hangdoctor attach --pid 4242 4243                   # given processes
    hangdoctor attach --hostfile hostfile --match MASTER_PORT=29500   # pdsh, without SLURM
    hangdoctor attach --ray --ray-job 02000000          # a Ray cluster's actors: one pinned Ray task per node
    hangdoctor attach --local --samples 3 --interval 2  # unchanged stacks = stuck, changing = progressing
    hangdoctor attach --jobid 1234 --profile 20         # slow, not hung: which rank the others wait for

The job's ranks are found through their environment (/proc/PID/environ), never by `grep python`, and are
never sent a signal. Everything is bounded by --timeout: a dead node, a stopped rank or a hanging py-spy
gives a partial report that says so. Raw outputs are kept in --out (default ./hangdoctor-<job>-<time>/):
`nodes/<node>.json` (py-spy's output verbatim, /proc state, CPU use), `report.json`, `report.html`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import time
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.argtypes import positive_float
from hangdoctor.clicore.outputs import hold_folder
from hangdoctor.clicore.errors import (EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE,
                            INTERRUPTED_TEXT, CommandError)
from hangdoctor.commands.common import (add_output_flags, add_rules_flag, add_topology_flags, check_order, show,
                                        topology_flags, wait_table, write_text)
from hangdoctor.collector.document import PYSPY_MISSING
from hangdoctor.collector.options import parse_match as match_items
from hangdoctor.collector.profile import GRACE as PROFILE_GRACE
from hangdoctor.commands.profile_out import print_profile
from hangdoctor.request import add_arguments as add_request_arguments
from hangdoctor.sources import CollectOptions, Gathered
from hangdoctor.sources.pyspy import MISSING_HINT, find_pyspy, find_pystack

EXIT_CODES = {
    EXIT_OK: "report complete: every expected rank answered",
    EXIT_PARTIAL: "report printed but partial: a rank did not answer (stopped, D state, py-spy timeout, ptrace "
                  "denied for some), is missing (a silent node), or --timeout cut collection short",
    EXIT_USAGE: "bad command line, or --out cannot be written",
    EXIT_NOT_FOUND: "nothing to attach to: job not found or not running, no rank found, hostfile names no host",
    EXIT_ENVIRONMENT: "cannot collect: py-spy (and pystack) missing, ptrace denied for every rank, srun/pdsh/"
                      "scontrol failed or missing, not the job's owner, ray missing or its cluster not reached",
    EXIT_INTERRUPTED: INTERRUPTED_TEXT,
}


def pid_list(text: str) -> list[int]:
    try:
        pids = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: PIDs are integers, e.g. 4242 or 4242,4243") from None
    if not pids or any(p < 1 for p in pids):
        raise argparse.ArgumentTypeError(f"{text!r}: PIDs are positive integers")
    return pids


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("what to attach to (one of)").add_mutually_exclusive_group(required=True)
    target.add_argument("--jobid", metavar="N", help="a running SLURM job (run as its owner)")
    target.add_argument("--local", action="store_true", help="the torchrun job on this machine")
    target.add_argument("--pid", type=pid_list, action="append", metavar="PID", nargs="+",
                        help="these processes (space- or comma-separated)")
    target.add_argument("--hostfile", type=Path, metavar="FILE", help="every host of a pdsh/DeepSpeed hostfile")
    target.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                        help="the actors of a Ray cluster (ADDRESS: HOST:PORT of its GCS, ray://..., or auto, the "
                             "default: RAY_ADDRESS or this machine's cluster); without --ray-* filters, every live "
                             "actor with RANK in its environment, else every live actor")
    select = parser.add_argument_group("selecting the job's processes")
    select.add_argument("--run-id", help="with --local: the torchrun run id (TORCHELASTIC_RUN_ID) to attach to")
    select.add_argument("--match", action="append", default=[], metavar="KEY[=VALUE]",
                        help="with --local or --hostfile: an environment variable the ranks carry, e.g. "
                             "MASTER_PORT=29500 (repeatable; --hostfile defaults to RANK)")
    select.add_argument("--ray-job", metavar="ID", help="with --ray: the Ray job id (e.g. 02000000) or job "
                        "submission id (raysubmit_...) whose actors to attach to")
    select.add_argument("--ray-actor-class", metavar="NAME", help="with --ray: actors of this class only")
    select.add_argument("--ray-actor-name", metavar="REGEX", help="with --ray: actors whose name matches REGEX")
    select.add_argument("--rcmd", default="ssh", help="with --hostfile: pdsh's remote command module (default ssh)")
    sampling = parser.add_argument_group("sampling")
    add_request_arguments(sampling)  # --samples --interval --timeout --dump-timeout --native --locals ...
    sampling.add_argument("--profile", type=positive_float, metavar="SECONDS",
                          help="slow, not hung: sample every rank for SECONDS without pausing it (py-spy record "
                               "--nonblocking) and name the ranks the others wait for (stragglers), with where "
                               "their time goes instead; writes profile.json and flame-*.folded to --out")
    sampling.add_argument("--profile-rate", type=int, default=50, metavar="HZ",
                          help="samples a second per rank with --profile, at most (default 50; 1-1000)")
    sampling.add_argument("--profile-cost", type=float, default=2.0, metavar="PCT",
                          help="with --profile: how much slower the samplers may make the job, in percent (default 2); "
                               "measured in their first second on each node, and where the ranks wait for cores "
                               "the samplers take, the rate is lowered to fit; 100: never lowered")
    sampling.add_argument("--py-spy", dest="py_spy", help="py-spy executable (default: on PATH or next to Python)")
    sampling.add_argument("--pystack", help="pystack executable, the second reader: it reads the ranks py-spy is "
                          "missing for, refused or fails on (default: on PATH or next to Python, when installed)")
    sampling.add_argument("--no-pystack", dest="pystack", action="store_const", const="",
                          help="no second reader: a rank py-spy cannot read did not respond")
    sampling.add_argument("--python", help="Python that runs the collector on the nodes (default: this one)")
    parser.add_argument("--out", type=Path, help="folder for raw outputs and reports (default ./hangdoctor-<job>-<time>)")
    parser.add_argument("--flight-recorder", action=argparse.BooleanOptionalAction, default=True,
                        help="fetch each rank's Flight Recorder trace from torch's debug worker server when the job "
                             "runs one (torch.distributed.debug.start_debug_server): one POST to each port the rank "
                             "listens on at every address, MASTER_PORT excepted (default on)")
    add_topology_flags(parser)
    add_rules_flag(parser)
    add_output_flags(parser)


def parse_match(items: list[str]) -> dict:
    try:
        return match_items(items)
    except ValueError as exc:
        raise CommandError(str(exc), hint="e.g. --match MASTER_PORT=29500", exit_code=EXIT_USAGE) from None


def check_args(args: argparse.Namespace) -> None:
    if args.pid:  # [[[1, 2], [3]], ...] from repeated --pid with several values each
        args.pid = [pid for group in args.pid for pids in group for pid in pids]
    if args.samples < 1:
        raise CommandError("--samples must be at least 1", hint="e.g. --samples 3 --interval 2", exit_code=EXIT_USAGE)
    needed = (args.samples - 1) * args.interval
    if needed >= args.timeout:
        raise CommandError(f"--samples {args.samples} x --interval {args.interval:g} needs {needed:g}s, more than "
                           f"--timeout {args.timeout:g}", hint=f"raise --timeout above {needed + 10:g}",
                           exit_code=EXIT_USAGE)
    if not 1 <= args.profile_rate <= 1000:
        raise CommandError(f"--profile-rate {args.profile_rate}: expected 1 to 1000 samples a second",
                           hint="e.g. --profile 20 --profile-rate 50", exit_code=EXIT_USAGE)
    if not 0 < args.profile_cost <= 100:
        raise CommandError(f"--profile-cost {args.profile_cost:g}: expected a percentage above 0, at most 100",
                           hint="e.g. --profile 20 --profile-cost 2", exit_code=EXIT_USAGE)
    if args.jobid and not re.match(r"^\d+(_\d+)?$", args.jobid):
        raise CommandError(f"{args.jobid!r} is not a SLURM job id", hint="a job id is a number such as 2180718 (see "
                           "squeue -u $USER)", exit_code=EXIT_USAGE)
    if args.run_id and not args.local:
        raise CommandError("--run-id goes with --local", hint="hangdoctor attach --local --run-id ID",
                           exit_code=EXIT_USAGE)
    ray_filters = [flag for flag, value in (("--ray-job", args.ray_job), ("--ray-actor-class", args.ray_actor_class),
                                            ("--ray-actor-name", args.ray_actor_name)) if value]
    if ray_filters and not args.ray:
        raise CommandError(f"{ray_filters[0]} goes with --ray", hint="e.g. --ray --ray-job 02000000",
                           exit_code=EXIT_USAGE)
    if args.ray_actor_name:
        try:
            re.compile(args.ray_actor_name)
        except re.error as exc:
            raise CommandError(f"--ray-actor-name {args.ray_actor_name!r}: {exc}", hint="e.g. --ray-actor-name "
                               "'^rank-'", exit_code=EXIT_USAGE) from None
    if args.match and not (args.local or args.hostfile):
        raise CommandError("--match goes with --local or --hostfile",
                           hint="e.g. --local --match MASTER_PORT=29500", exit_code=EXIT_USAGE)


def gather(args: argparse.Namespace, options: CollectOptions, err: Console) -> Gathered:
    if args.jobid:
        from hangdoctor.sources.slurm_job import collect_slurm_job
        with progress_display(err, f"collecting from SLURM job {args.jobid} (one srun step)"):
            return collect_slurm_job(options, args.jobid, python=args.python)
    if args.ray:
        from hangdoctor.sources.ray_job import RayTarget, collect_ray
        target = RayTarget(address=args.ray, job=args.ray_job, actor_class=args.ray_actor_class,
                           actor_name=args.ray_actor_name)
        with progress_display(err, f"collecting from the Ray cluster at {args.ray} (one task per node)"):
            return collect_ray(options, target)
    if args.hostfile:
        from hangdoctor.sources.pdsh import collect_hostfile
        with progress_display(err, f"collecting from the hosts of {args.hostfile} over pdsh"):
            return collect_hostfile(options, args.hostfile, match=parse_match(args.match) or {"RANK": None},
                                    rcmd=args.rcmd, **({"python": args.python} if args.python else {}))
    from hangdoctor.sources import local
    with progress_display(err, "dumping stacks", counted=True) as progress:
        if args.pid:
            return local.collect_pids(options, args.pid, progress)
        if args.match:
            return local.collect_matching(options, parse_match(args.match), progress)
        return local.collect_torchrun(options, args.run_id, progress)


@contextlib.contextmanager
def progress_display(err: Console, text: str, *, counted: bool = False):
    """A transient spinner (with a bar and k/N when `counted`) on a terminal; yields `progress(done, total)`.
    Not a terminal (a script, a pipe, the experiment runner): nothing is drawn and rich.progress is not imported."""
    if not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = [SpinnerColumn(), TextColumn(text)] + ([BarColumn(), MofNCompleteColumn()] if counted else [])
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("collect", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def default_out(args: argparse.Namespace) -> Path:
    label = (f"job{args.jobid}" if args.jobid else "local" if args.local else "pids" if args.pid else
             "ray" if args.ray else "hosts")
    return Path(f"hangdoctor-{label}-{time.strftime('%Y%m%d-%H%M%S')}")


def make_out(out: Path) -> list[Path]:
    """Create the output folder before collecting (a folder we cannot write must not cost the collection);
    returns the folders it created, innermost first."""
    earlier = [p.name for p in (out / "report.json", out / "nodes") if p.exists() and (p.is_file() or any(p.iterdir()))]
    if earlier:  # never over an earlier collection: it may be the only one taken before the job died
        raise CommandError(f"--out {out} already holds a report ({', '.join(earlier)})",
                           hint="pass a new folder (by default attach makes one per run)", exit_code=EXIT_USAGE)
    created, path = [], out / "nodes"
    while not path.exists() and path != path.parent:
        created.append(path)
        path = path.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create {out}: {exc.strerror or exc}",
                           hint="pass --out to a writable folder", exit_code=EXIT_USAGE) from None
    hold_folder(out, "--out")  # two attaches with one --out: the second is refused before it collects
    earlier = [p.name for p in (out / "report.json", out / "nodes") if p.exists() and (p.is_file() or any(p.iterdir()))]
    if earlier:  # checked again under the lock: another run may have finished there meanwhile
        raise CommandError(f"--out {out} already holds a report ({', '.join(earlier)})",
                           hint="pass a new folder (by default attach makes one per run)", exit_code=EXIT_USAGE)
    try:
        (out / "nodes").mkdir(exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create {out}/nodes: {exc.strerror or exc}",
                           hint="pass --out to a writable folder", exit_code=EXIT_USAGE) from None
    return created


def remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def save_docs(out: Path, gathered: Gathered) -> None:
    """Keep every node's raw output (on this machine, whatever the nodes see) before anything else can fail."""
    folder = out / "nodes"
    try:
        for doc in gathered.docs:
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(doc.get("node") or "node"))
            (folder / f"{name}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    except OSError as exc:
        raise CommandError(f"cannot write raw outputs to {out}: {exc.strerror or exc}", hint="pass --out to a writable "
                           "folder", exit_code=EXIT_USAGE) from None


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    check_args(args)
    check_order(args)
    table = wait_table(args)  # a bad rules file is refused before anything is collected
    second = "" if args.pystack == "" else find_pystack(args.pystack)
    options = CollectOptions(pyspy=find_pyspy(args.py_spy, required=not second), pystack=second,
                             samples=args.samples, interval=args.interval,
                             native=args.native, nonblocking=args.nonblocking, locals=args.locals,
                             flight_recorder=args.flight_recorder,
                             fr_dir=str(Path(args.fr_dir).absolute()) if args.fr_dir else None,
                             dump_timeout=min(args.dump_timeout, args.timeout),
                             profile=args.profile or 0.0, profile_rate=args.profile_rate,
                             profile_cost=args.profile_cost,
                             timeout=args.timeout + (args.profile + PROFILE_GRACE if args.profile else 0.0))
    folder = args.out or default_out(args)
    created = make_out(folder)
    try:
        gathered = gather(args, options, err)
    except (CommandError, KeyboardInterrupt):
        remove_empty(created)  # nothing was collected: leave no empty folder behind
        raise
    if args.pid:  # some of a launcher's ranks given and not others: those absent are not missing (formats/load.py)
        from hangdoctor.collector.procs import left_out_siblings

        left_out = left_out_siblings(args.pid)
        for doc in gathered.docs:
            if isinstance(doc.get("options"), dict):
                doc["options"]["left_out"] = left_out
    save_docs(folder, gathered)
    # Imported only now: an attach that finds nothing never pays for the analysis (importing it in a thread
    # during the dumps was measured slower on two cores: it competes with the /proc scan and with py-spy).
    from hangdoctor.analysis.verdict import diagnose, ptrace_hint
    from hangdoctor.formats.load import collection_from_docs
    from hangdoctor.model import PTRACE_DENIED
    from hangdoctor.render.jsonout import verdict_to_dict

    flags = topology_flags(args)
    missing_pyspy = [d.get("node") for d in gathered.docs if d.get("fatal") == PYSPY_MISSING]
    if missing_pyspy and len(missing_pyspy) == len(gathered.docs):
        raise CommandError(f"py-spy is missing on {', '.join(map(str, missing_pyspy[:5]))} (and no pystack there)",
                           hint=MISSING_HINT, exit_code=EXIT_ENVIRONMENT)
    collection = collection_from_docs(gathered.docs, flags, source=gathered.source, samples=args.samples,
                                      interval=args.interval if args.samples > 1 else 0.0,
                                      warnings=gathered.warnings, failed_nodes=gathered.failed, table=table)
    if not collection.records:
        skipped = sum(len(d.get("skipped") or []) for d in gathered.docs)
        raise CommandError(f"no rank of {gathered.source} found" + (f" ({skipped} launcher processes set aside)"
                           if skipped else ""), hint="check that the job is running and that you are its owner; "
                           f"node reports are in {folder}/nodes", exit_code=EXIT_NOT_FOUND)
    verdict = diagnose(collection, all_threads=args.all_threads, table=table)
    report = verdict_to_dict(verdict)
    write_text(folder / "report.json", json.dumps(report, indent=1) + "\n")
    denied = verdict.unresponsive.get(PTRACE_DENIED, [])
    if denied and len(denied) == len(verdict.views):
        raise CommandError(f"ptrace denied for all {len(denied)} ranks: py-spy may not read them",
                           hint=ptrace_hint(len(denied)), exit_code=EXIT_ENVIRONMENT)
    if args.profile:
        code = print_profile(collection, table, args.json, out, err, folder)
        err.print(f"Raw outputs and reports: {folder}/", markup=False, highlight=False)
        return code
    code = show(verdict, args, out, err, inputs=[folder], report=report)
    from hangdoctor.render.html import render_html  # the picture comes after the verdict is on screen

    write_text(folder / "report.html", render_html(verdict))
    err.print(f"Raw outputs and reports: {folder}/", markup=False, highlight=False)
    return code
