"""Analyse dumps offline: a folder written by `attach`, collector node files, or any text that holds stacks.

    hangdoctor analyze hangdoctor-1234-20240101-120000/
    hangdoctor analyze trace-*.out --tp 8 --pp 10 --world-size 320     # the seed's concatenated py-spy dumps
    hangdoctor analyze paste.txt --ranks 0-7                            # a paste that names no rank

What it reads: attach's folders and node files; py-spy's JSON and text (--native, --locals); Python's
faulthandler dumps (one process or several in one log); tracebacks and the thread-dump recipes built on them;
pystack's output; gdb's py-bt, bt and info threads; torch's Flight Recorder dumps (pickle or JSON). Around them,
what pastes carry: timestamps, log levels, [rankN]: / srun N: / pdsh host: / compose svc-1 | / Ray (Actor pid=N) /
host{ranks}: prefixes, interleaved ranks, lines wrapped by a collector, markdown fences and quotes, terminal
colours, UTF-16, several processes grouped over one stack, py-spy's own error for a process. A file that holds a frame is never refused: a Warning says what was read.

Text dumps carry no rank: ranks are then assumed from node order and --local_rank in the argv (or reading
order, or --ranks), and a warning says so.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.errors import (EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, INTERRUPTED_TEXT,
                            CommandError)
from hangdoctor.analysis.rendezvous import rendezvous_wait
from hangdoctor.analysis.verdict import diagnose
from hangdoctor.commands.common import add_output_flags, add_rules_flag, add_topology_flags, show, topology_flags, wait_table
from hangdoctor.commands.profile_out import print_profile
from hangdoctor.formats import job_source
from hangdoctor.formats.load import InputError, load_paths

EXIT_CODES = {
    EXIT_OK: "report complete: every expected rank answered in the dumps",
    EXIT_PARTIAL: "report printed but partial: in the dumps a rank did not answer or is missing",
    EXIT_USAGE: "bad command line, or --html/--svg cannot be written",
    EXIT_NOT_FOUND: "nothing to analyse: a path does not exist or is not a dump, or the dumps hold no rank",
    EXIT_INTERRUPTED: INTERRUPTED_TEXT,
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="FOLDER|FILE",
                        help="output folder of `attach`, node .json files, py-spy --json or text dumps")
    add_topology_flags(parser)
    parser.add_argument("--ranks", type=rank_list, metavar="LIST",
                        help="the ranks of the processes that carry none (a paste), in reading order: e.g. 0-3,8-11")
    parser.add_argument("--profile", action="store_true",
                        help="the slow-rank report from the time profiles in the node files (`attach --profile`'s "
                             "folder) instead of the hang verdict")
    parser.add_argument("--source", type=Path, action="append", default=[], metavar="DIR",
                        help="where the job's code is on this machine (repeatable): the frames' lines are read there "
                             "where the dumps carry none (py-spy's dumps never do; attach's node files do). Without "
                             "it, the directories of the scripts the ranks' command lines name are looked in")
    parser.add_argument("--no-source", action="store_true",
                        help="read no source file on this machine: judge the dumps by what they carry")
    add_rules_flag(parser)
    add_output_flags(parser)


def rank_list(text: str) -> tuple[int, ...]:
    from hangdoctor.topology.ranksets import parse_ranks

    try:
        ranks = parse_ranks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not ranks:
        raise argparse.ArgumentTypeError(f"{text!r}: no rank in it")
    return tuple(ranks)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    flags = replace(topology_flags(args), ranks=args.ranks or ())
    table = wait_table(args)
    try:
        collection = load_paths(args.paths, flags, table)
    except InputError as exc:
        raise CommandError(str(exc), hint="pass an attach output folder, node .json files or py-spy dumps",
                           exit_code=EXIT_NOT_FOUND) from None
    if not collection.records and not collection.flight_recorder:
        aside = collection.set_aside
        if not aside:
            raise CommandError("no rank in the input: it holds no process of the job",
                               hint="check the job was running when the dumps were taken, and that its ranks were "
                                    "dumped", exit_code=EXIT_NOT_FOUND)
        # what was read is shown (a paste of a launcher's or a driver's traceback says where it waits), and said
        collection.partial.append(
            f"no rank in the input: it holds only {len(aside)} launcher or helper process{'es' if len(aside) > 1 else ''} "
            f"({', '.join(sorted({a.why for a in aside}))})" + (
                ": no rank has started (the launchers wait in their rendezvous)" if rendezvous_wait(aside)
                else ": the ranks' own dumps tell where the job hangs"))
    if not args.no_source:
        missing = [str(d) for d in args.source if not d.is_dir()]
        if missing:
            raise CommandError(f"--source {missing[0]}: not a folder", hint="give the folder the job's code is in",
                               exit_code=EXIT_USAGE)
        collection.warnings += job_source.note(job_source.read_job_source(collection, args.source), args.source)
    if args.profile:
        if not any(record.profile is not None for record in collection.records):
            raise CommandError("no time profile in the input", hint="`hangdoctor attach --profile SECONDS` takes them; "
                               "pass its output folder", exit_code=EXIT_NOT_FOUND)
        return print_profile(collection, table, args.json, out)  # what attach --profile printed, read again
    verdict = diagnose(collection, all_threads=args.all_threads, table=table)
    return show(verdict, args, out, err, inputs=args.paths)
