"""Inputs -> `model.Collection`: collector node documents (live or from a folder), py-spy JSON files and
py-spy text files (one process or several concatenated, as the seed's `trace-%N.out`), and Python's own traceback
dumps (faulthandler's format: PYTHONFAULTHANDLER, faulthandler.register(SIGUSR1), one process per file).

A folder written by `hangdoctor attach` holds `nodes/<node>.json`; any other folder is read file by file.
A text file's node is its name without a `trace-` prefix and extension ("trace-n3.out" -> "n3").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from hangdoctor.clicore.inputs import InputRefused, parse_json, read_bytes
from hangdoctor.analysis.launchers import set_aside, world_from_launchers
from hangdoctor.analysis.waits import WaitTable, default_table
from hangdoctor.formats.flight_recorder import FrError, is_fr_json, is_pickle, rank_of, read_fr, read_many
from hangdoctor.formats.nodefile import Found, is_node_doc, read_node_doc
from hangdoctor.formats.pyspy_json import parse_threads, pid_of
from hangdoctor.formats.pyspy_text import looks_like_text_dump
from hangdoctor.formats.text import read_text
from hangdoctor.formats.watchdog_log import read_watchdog_status
from hangdoctor.identity import (TopologyFlags, assign_missing_ranks, build_records, guess_topology, natural_key,
                                 split_cmdline)
from hangdoctor.model import OK, Collection, NodeReport, Sample
from hangdoctor.topology import fold_ranks

MAX_INPUT_BYTES = 4 << 30  # one node's file or one paste; a FIFO or /dev/zero is refused before any of it

_COMPRESSED = ((b"\x1f\x8b", "gzip-compressed"), (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
               (b"\xfd7zXZ\x00", "xz-compressed"), (b"BZh", "bzip2-compressed"), (b"PK\x03\x04", "zip"))
_JSONISH = re.compile(r'[\[{]\s*(?:["\[{\]}\d-]|true|false|null)')
_SUFFIXES = (".json", ".out", ".txt", ".log", ".dump", ".trace")


class InputError(ValueError):
    """An input that cannot be read; the message names the file."""


def _stem(path: Path) -> str:
    """The file's name without the dump suffixes it ends with."""
    name = path.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def node_from_filename(path: Path, pid: int | None = None) -> str:
    """"trace-n3.out" -> "n3"; with the dump's pid, "n3-8218.json" -> "n3" (one file per process)."""
    name = _stem(path)
    name = re.sub(r"^(trace|dump|pyspy|py-spy)[-_.]", "", name) or path.name
    if pid:
        name = re.sub(rf"[-_.](pid)?{pid}$", "", name) or name
    return name


def _pid_in_filename(path: Path) -> int | None:
    """The pid that a file of one process's dump ends its name with ("n3-8218.json", "dump.pid8218.txt")."""
    match = re.search(r"[-_.](?:pid)?(\d{2,10})$", _stem(path))
    return int(match[1]) if match and 0 < int(match[1]) < 1 << 32 else None


def expand(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            nodes = sorted((path / "nodes").glob("*.json"), key=str) if (path / "nodes").is_dir() else []
            if nodes:  # an attach folder: its node files, and the Flight Recorder dumps it fetched
                files.extend(nodes)
                if (path / "fr").is_dir():
                    files.extend(sorted((p for p in (path / "fr").iterdir() if p.is_file() and rank_of(p) is not None),
                                        key=lambda p: (rank_of(p), p.name)))
            else:  # dumps, and Flight Recorder files named <prefix><rank>
                files.extend(sorted((p for p in path.iterdir() if p.is_file()
                                     and (p.suffix in _SUFFIXES or rank_of(p) is not None)), key=str))
        elif path.is_file() or path.exists():  # a FIFO or a device: read_file refuses it in one line
            files.append(path)
        elif path.is_symlink():
            raise InputError(f"{path}: a symbolic link that leads nowhere (a loop, or its target is gone)")
        else:
            raise InputError(f"{path}: no such file or folder")
    return files


@dataclass
class Extras:
    """What files carry beside their processes."""

    notes: list[str] = field(default_factory=list)  # what a reader left out or guessed
    partial: list[str] = field(default_factory=list)  # why the input is incomplete (a dump cut off)
    source_lines: dict = field(default_factory=dict)  # (file, line) -> text, read by collectors
    source_blocks: dict = field(default_factory=dict)  # (file, line) -> the loops and conditions around it
    native: bool = False  # a collector was asked for native frames
    flight_recorder: list = field(default_factory=list)  # FrDump per rank
    fr_unread: list[int] = field(default_factory=list)  # ranks whose Flight Recorder file could not be read
    left_out: list[int] = field(default_factory=list)  # pids `attach --pid` left out beside those it was given


def read_file(path: Path, extras: Extras | None = None) -> tuple[list[NodeReport], list[Found]]:
    """One input file's processes; `extras` collects what it carries beside them."""
    extras = Extras() if extras is None else extras
    try:
        raw = read_bytes(path, limit=MAX_INPUT_BYTES, what="a dump")
    except InputRefused as exc:
        raise InputError(str(exc)) from None
    if not raw.strip():
        raise InputError(f"{path}: an empty file" if not raw else f"{path}: only blank space, no dump in it")
    packed = next((what for magic, what in _COMPRESSED if raw.startswith(magic)), None)
    if packed:
        raise InputError(f"{path}: a {packed} file, not a dump: decompress it first")
    if is_pickle(raw):
        return _flight_recorder(path, raw, extras)
    text = decode_text(raw)
    stripped = text.lstrip()
    data, not_json = None, ""
    if stripped.startswith(("{", "[")):
        try:
            data = parse_json(text, where=str(path))
        except InputRefused as exc:
            if stripped.startswith("{") and not looks_like_text_dump(text):  # "[rank0]: ..." starts like JSON
                raise InputError(str(exc)) from None
            if _JSONISH.match(stripped):  # said if the text holds no frame either ("[rank3]:" is no JSON)
                not_json = str(exc)
    if data is not None:
        if is_fr_json(data):
            return _flight_recorder(path, raw, extras)
        if is_node_doc(data):
            try:
                report, found = read_node_doc(data, node_from_filename(path))
                extras.source_lines.update(source_lines_of([data]))
                extras.source_blocks.update(source_blocks_of([data]))
            except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
                raise InputError(f"{path}: damaged hangdoctor node file ({exc})") from None
            options = data.get("options")
            extras.native = extras.native or bool(isinstance(options, dict) and options.get("native"))
            extras.left_out += left_out_of(data)
            return [report], found
        if isinstance(data, list):
            try:
                threads = parse_threads(data)
                pid = pid_of(data) or 0
                if not isinstance(pid, int) or isinstance(pid, bool) or not 0 <= pid < 1 << 32:
                    raise ValueError(f"pid is {pid!r}")
            except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
                raise InputError(f"{path}: not a py-spy JSON dump ({type(exc).__name__}: {exc})") from None
            host = node_from_filename(path, pid)
            found = Found(host=host, pid=pid, rank=None, rank_source="order",
                          samples=[Sample(index=0, time=path.stat().st_mtime, status=OK, threads=threads,
                                          source=str(path))])
            return [NodeReport(name=host, ranks_found=1)], [found]
        raise InputError(f"{path}: JSON that is neither a hangdoctor node file nor a py-spy dump")
    return _text_dumps(path, text, extras, not_json)


def _text_dumps(path: Path, text: str, extras: Extras, not_json: str = "") -> tuple[list[NodeReport], list[Found]]:
    """Whatever stacks a text holds (py-spy's, faulthandler's, tracebacks, pystack's, gdb's, behind any prefixes):
    never refused while it holds a frame; what was undone to read it is said in one note."""
    processes, undone = read_text(text)
    file_host = node_from_filename(path)
    named_pid = _pid_in_filename(path) if len([p for p in processes if p.status != "fragment"]) == 1 else None
    when = path.stat().st_mtime
    found: list[Found] = []
    for proc in processes:
        if not proc.pid and named_pid:  # py-spy's error for one process names no pid; its file (host-PID) does
            proc.pid, proc.host = named_pid, proc.host or node_from_filename(path, named_pid)
        if proc.status == "fragment":
            extras.notes.append(f"{path}: {proc.error}")
            continue
        if proc.truncated:
            extras.partial.append(f"{path}: the dump of {f'pid {proc.pid}' if proc.pid else 'a process'} is cut off "
                                  f"(its stack does not reach its start): partial")
        found.append(Found(
            host=proc.host or file_host, pid=proc.pid, rank=proc.rank,
            rank_source="prefix" if proc.rank is not None else "order", cmdline=split_cmdline(proc.cmdline),
            samples=[Sample(index=0, time=when, status=proc.status, threads=tuple(proc.threads), error=proc.error,
                            source=str(path)),
                     *(Sample(index=i, time=when + after, status=OK, threads=tuple(threads), source=str(path))
                       for i, (after, threads) in enumerate(proc.later, start=1))],
        ))
    statuses = read_watchdog_status(text, str(path))
    if statuses:  # the NCCL watchdog's last collective per rank: read like Flight Recorder sequences
        extras.flight_recorder.extend(statuses)
        extras.notes.append(f"{path}: read the NCCL watchdog's last collective of rank"
                            f"{'s' if len(statuses) > 1 else ''} {fold_ranks([d.rank for d in statuses])}")
        if not found:
            return [], []
    if not found and not_json:
        raise InputError(not_json)
    if not found:
        raise InputError(f"{path}: not a dump: no stack frame in it (read as py-spy, faulthandler, traceback, pystack "
                         "and gdb text, and as hangdoctor's and py-spy's JSON)")
    if undone:
        extras.notes.append(f"{path}: read {len(found)} process{'es' if len(found) > 1 else ''} from text with "
                            f"{', '.join(undone)}")
    hosts = sorted({f.host for f in found}, key=natural_key)
    return [NodeReport(name=h, ranks_found=sum(1 for f in found if f.host == h)) for h in hosts], found


def decode_text(raw: bytes) -> str:
    """A paste's bytes as text: UTF-8 (a bad byte becomes U+FFFD), or UTF-16 when it says so with a byte-order
    mark or looks so (every other byte of its start NUL: Windows editors and PowerShell's `>` write that)."""
    if raw[:3] == b"\xef\xbb\xbf":
        return raw[3:].decode("utf-8", "replace")
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16", "replace")
    head = raw[:400]
    if len(head) >= 8 and head[1::2].count(0) > 0.9 * len(head[1::2]):
        return raw.decode("utf-16-le", "replace")
    if len(head) >= 8 and head[0::2].count(0) > 0.9 * len(head[0::2]):
        return raw.decode("utf-16-be", "replace")
    return raw.decode("utf-8", "replace")


def _flight_recorder(path: Path, raw: bytes, extras: Extras) -> tuple[list[NodeReport], list[Found]]:
    """A Flight Recorder dump carries no process to analyse: it goes beside them, in `extras`."""
    try:
        extras.flight_recorder.append(read_fr(path, raw))
    except FrError as exc:
        if rank_of(path) is not None:
            extras.fr_unread.append(rank_of(path))
        raise InputError(str(exc)) from None
    return [], []


def merge_samples(found: list[Found]) -> list[Found]:
    """Dumps of the same process (same host and pid, e.g. `analyze s1/ s2/`) are samples of one rank, in time
    order (reading order where times tie)."""
    merged: dict[tuple[str, int], Found] = {}
    out, grown = [], {}
    for f in found:
        key = (f.host, f.pid)
        if not f.pid or key not in merged:
            merged[key] = f
            out.append(f)
            continue
        first = grown[key] = merged[key]
        first.samples = first.samples + f.samples
        first.rank = first.rank if first.rank is not None else f.rank
    for f in grown.values():
        if len(f.samples) > 1:
            f.samples = sorted(f.samples, key=lambda s: s.time)  # stable: reading order among equal times
            for index, sample in enumerate(f.samples):
                sample.index = index
    return out


def merge_same_host(reports: list[NodeReport]) -> list[NodeReport]:
    merged: dict[str, NodeReport] = {}
    for report in reports:
        if report.name in merged:
            merged[report.name].ranks_found += report.ranks_found
            merged[report.name].skipped += report.skipped
        else:
            merged[report.name] = report
    return list(merged.values())


def build_collection(reports: list[NodeReport], found: list[Found], flags: TopologyFlags, *, source: str,
                     samples: int = 1, interval: float = 0.0, warnings: list[str] | None = None,
                     table: WaitTable | None = None, partial: list[str] | None = None,
                     source_lines: dict | None = None, native: bool = False,
                     flight_recorder: list | None = None, errors: list[str] | None = None,
                     source_blocks: dict | None = None, fr_unread: list[int] | None = None) -> Collection:
    """Set launchers and workers aside, merge samples of the same process, settle identities (ranks,
    coordinates) once, and wrap everything analysis needs."""
    notes = list(warnings or [])
    flight_recorder = list(flight_recorder or [])
    unread = list(fr_unread or [])
    errors = list(errors or [])
    for f in found:  # traces fetched live, by the collectors
        if isinstance(f.flight_recorder, FrError):  # taken, and damaged: the verdict is partial
            errors.append(f"rank {f.rank} on {f.host}: {f.flight_recorder}")
            unread.append(f.rank)
        elif isinstance(f.flight_recorder, str):
            notes.append(f"rank {f.rank} on {f.host}: {f.flight_recorder}")
            if f.rank is not None:
                unread.append(f.rank)
        elif f.flight_recorder is not None:
            flight_recorder.append(f.flight_recorder)
    found, aside = set_aside(merge_samples(found), table or default_table())
    most = max((len(f.samples) for f in found), default=1)
    if most > samples:  # dumps of the same processes given as several files
        times = [s.time for f in found for s in f.samples]
        interval = round((max(times) - min(times)) / (most - 1), 2) if times else 0.0
        samples = most
    if (found and flags.world_size is None and not any(f.world_size for f in found)
            and (stated := world_from_launchers(aside))):  # no rank at all: rendezvous.py says why
        flags = replace(flags, world_size=stated[0])
        notes.append(stated[1])
    notes += assign_missing_ranks(found, flags.ranks)
    fr = _one_per_rank(flight_recorder or [], notes)
    unread = sorted(set(unread) - {d.rank for d in fr})
    if fr and flags.world_size is None and not any(f.world_size for f in found):
        # the dumps' own evidence: the default group's members, else one dump per rank (read or not)
        default = next((d.group_ranks["0"] for d in fr if d.group_ranks.get("0")), ())
        flags = replace(flags, world_size=max(len(default), max(d.rank for d in fr) + 1, *(r + 1 for r in unread),
                                              len(found)))
    dims, dims_source, world, topo_notes = guess_topology(found, flags)
    notes += topo_notes
    beyond = sorted({f.rank for f in found if isinstance(f.rank, int) and world and f.rank >= world})
    if beyond:
        notes.append(f"rank{'s' if len(beyond) > 1 else ''} {fold_ranks(beyond)} beyond the world size {world}: "
                     "the dumps and the world size do not belong together (--world-size, or another run's dumps?)")
    records, record_notes = build_records(found, dims)
    notes += record_notes
    native = native or any(frame.native for stack in _unique_stacks(found) for frame in stack)
    return Collection(records=records, dims=dims, dims_source=dims_source, world_size=world, nodes=reports,
                      source=source, samples=samples, interval=interval, warnings=notes, set_aside=aside,
                      source_lines=dict(source_lines or {}), native=native, partial=list(partial or []),
                      flight_recorder=fr, errors=list(errors or []), source_blocks=dict(source_blocks or {}),
                      flight_recorder_unread=unread)


def _one_per_rank(dumps: list, notes: list[str]) -> list:
    """The Flight Recorder dumps, one per rank: the JSON and the pickle of one rank say the same, the pickle (which
    carries the stacks) is kept."""
    kept: dict[int, object] = {}
    for dump in dumps:
        other = kept.get(dump.rank)
        if other is not None and dump.version == "log":  # a log's watchdog lines say less than a dump of the rank
            continue
        if other is None or other.version == "log" or (other.source.endswith(".json") and not dump.source.endswith(".json")):
            kept[dump.rank] = dump
        elif other.count != dump.count:
            notes.append(f"two Flight Recorder dumps of rank {dump.rank} differ ({other.source}, {dump.source}): "
                         f"keeping {other.source}")
    return [kept[r] for r in sorted(kept)]


def _unique_stacks(found: list[Found]):
    seen = set()
    for f in found:
        for sample in f.samples:
            for thread in sample.threads:
                if id(thread.frames) not in seen:
                    seen.add(id(thread.frames))
                    yield thread.frames


def load_paths(paths: list[Path], flags: TopologyFlags, table: WaitTable | None = None) -> Collection:
    files = expand(paths)
    if not files:
        raise InputError(f"no dump files in {', '.join(map(str, paths))}")
    reports, found, extras, errors, total = [], [], Extras(), [], len(files)
    named = [p for p in files if p.suffix not in _SUFFIXES and rank_of(p) is not None and _starts_with(p, b"\x80")]
    for path, result in zip(named, read_many(named)):  # torch's pickled Flight Recorder dumps, <prefix><rank>
        if isinstance(result, FrError):
            errors.append(str(result))
            extras.fr_unread.append(rank_of(path))
        else:
            extras.flight_recorder.append(result)
    if named:
        pickled = set(named)
        files = [p for p in files if p not in pickled]
    for path in files:
        try:
            file_reports, file_found = read_file(path, extras)
        except InputError as exc:
            if total == 1:
                raise
            errors.append(str(exc))  # one bad file among many: said, and the rest analysed
            continue
        reports += file_reports
        found += file_found
    if errors and len(errors) == total:
        if total == 1:
            raise InputError(errors[0])
        raise InputError(errors[0] + (f" (and {len(errors) - 1} more unreadable files)" if len(errors) > 1 else ""))
    what = f"{total} file{'s' if total != 1 else ''}"
    collection = build_collection(merge_same_host(reports), found, flags, source=what, warnings=extras.notes,
                                  table=table, partial=extras.partial, source_lines=extras.source_lines,
                                  native=extras.native, flight_recorder=extras.flight_recorder, errors=errors,
                                  source_blocks=extras.source_blocks, fr_unread=extras.fr_unread)
    return picked(collection, extras.left_out)


def left_out_of(doc: dict) -> list[int]:
    """The pids a node's `attach --pid` left out beside those it was given (collector options' `left_out`)."""
    options = doc.get("options")
    left = options.get("left_out") if isinstance(options, dict) else None
    return [pid for pid in left if type(pid) is int] if isinstance(left, list) else []


def picked(collection: Collection, left_out: list[int]) -> Collection:
    """Where `attach --pid` was given some of a launcher's ranks and not others, the ranks absent here were not
    looked at: they are not counted missing, and a note says so. Given all of them (every rank of the job on its
    node), an absent rank is on no node looked at, or exited, or never started: missing, as in a whole job's
    collection. The same for attach's own verdict and for `analyze` of its saved node files."""
    if left_out:
        collection.whole_job = False
        shown = ", ".join(map(str, sorted(left_out)[:8])) + (" ..." if len(left_out) > 8 else "")
        collection.warnings.append(f"--pid left out {len(left_out)} process{'es' if len(left_out) > 1 else ''} "
                                   f"beside those given, running the same command under the same parent (pids "
                                   f"{shown}): ranks absent here were not looked at, so none is counted missing")
    return collection


def _starts_with(path: Path, prefix: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(prefix)) == prefix
    except OSError:
        return False


def source_lines_of(docs: list[dict]) -> dict:
    """The source lines collectors read on their nodes: {(short file, line): text}."""
    lines = {}
    for doc in docs:
        for key, text in (doc.get("source_lines") or {}).items():
            file, _, line = str(key).rpartition(":")
            if file and line.isdigit() and isinstance(text, str):
                lines[(file, int(line))] = text
    return lines


def source_blocks_of(docs: list[dict]) -> dict:
    """The loops, conditions and `with` statements collectors read around each frame's line: {(short file, line):
    {"loops": [[first, last], ...], "conditions": [...], "withs": [...], "loop_vars": [[first, last, [names]]],
    "tests": [[first, last, text]], "with_items": [[first, last, [what each `with` enters]]]}};
    malformed entries are left out."""
    blocks = {}
    for doc in docs:
        found = doc.get("source_blocks")
        for key, value in (found.items() if isinstance(found, dict) else ()):
            file, _, line = str(key).rpartition(":")
            if file and line.isdigit() and isinstance(value, dict):
                entry = {kind: [r for r in value.get(kind) or [] if isinstance(r, list)
                                and len(r) == 2 and all(isinstance(x, int) for x in r)]
                         for kind in ("loops", "conditions", "withs")}
                entry["loop_vars"] = [r for r in value.get("loop_vars") or [] if isinstance(r, list) and len(r) == 3
                                      and all(isinstance(x, int) for x in r[:2]) and isinstance(r[2], list)
                                      and all(isinstance(x, str) for x in r[2])]
                entry["tests"] = [r for r in value.get("tests") or [] if isinstance(r, list) and len(r) == 3
                                  and all(isinstance(x, int) for x in r[:2]) and isinstance(r[2], str)]
                entry["with_items"] = [r for r in value.get("with_items") or [] if isinstance(r, list)
                                       and len(r) == 3 and all(isinstance(x, int) for x in r[:2])
                                       and isinstance(r[2], list) and all(isinstance(x, str) for x in r[2])]
                blocks[(file, int(line))] = entry
    return blocks


def collection_from_docs(docs: list[dict], flags: TopologyFlags, *, source: str, samples: int, interval: float,
                         warnings: list[str] | None = None, failed_nodes: list[NodeReport] | None = None,
                         table: WaitTable | None = None,
                         flight_recorder: tuple[list, list[str]] = ([], [])) -> Collection:
    """`flight_recorder`: (dumps, errors) read beside the nodes' documents."""
    reports, found = list(failed_nodes or []), []
    for doc in docs:
        report, node_found = read_node_doc(doc)
        reports.append(report)
        found += node_found
    collection = build_collection(reports, found, flags, source=source, samples=samples, interval=interval,
                                  warnings=warnings, table=table, source_lines=source_lines_of(docs),
                                  source_blocks=source_blocks_of(docs),
                                  native=any((d.get("options") or {}).get("native") for d in docs),
                                  flight_recorder=flight_recorder[0], errors=flight_recorder[1])
    return picked(collection, [pid for doc in docs for pid in left_out_of(doc)])
