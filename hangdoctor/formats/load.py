"""Inputs -> `model.Collection`: collector node documents (live or from a folder), py-spy JSON files and
py-spy text files (one process or several concatenated, as the seed's `trace-%N.out`).

A folder written by `hangdoctor attach` holds `nodes/<node>.json`; any other folder is read file by file.
A text file's node is its name without a `trace-` prefix and extension ("trace-n3.out" -> "n3").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hangdoctor.formats.nodefile import Found, is_node_doc, read_node_doc
from hangdoctor.formats.pyspy_json import parse_threads, pid_of
from hangdoctor.formats.pyspy_text import looks_like_text_dump, parse_text
from hangdoctor.identity import TopologyFlags, assign_missing_ranks, build_records, guess_topology, split_cmdline
from hangdoctor.model import OK, Collection, NodeReport, Sample

_SUFFIXES = (".json", ".out", ".txt", ".log", ".dump", ".trace")
# Launchers that `ps | grep python` also catches: their stacks say what they are.
_LAUNCHER_FILES = ("torch/distributed/elastic/", "torch/distributed/run.py", "torch/distributed/launch.py",
                   "deepspeed/launcher/")
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "deepspeed.launcher.launch",
                     "deepspeed.launcher.runner")
_LAUNCHER_PROGRAMS = ("torchrun", "deepspeed")


def is_launcher(cmdline: str, threads) -> bool:
    """torchrun's agent, torch.distributed.launch or DeepSpeed's launcher, not a rank."""
    head = cmdline.split()[:4]
    if any(arg in _LAUNCHER_MODULES or arg.rsplit("/", 1)[-1] in _LAUNCHER_PROGRAMS for arg in head):
        return True
    frames = [f for t in threads for f in t.frames]
    in_launcher = any(f.file.startswith(_LAUNCHER_FILES) for f in frames)
    return in_launcher and not any(f.file.startswith("torch/distributed/distributed_c10d") for f in frames)


class InputError(ValueError):
    """An input that cannot be read; the message names the file."""


def node_from_filename(path: Path) -> str:
    name = path.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return re.sub(r"^(trace|dump|pyspy|py-spy)[-_.]", "", name) or path.name


def expand(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            nodes = sorted((path / "nodes").glob("*.json")) if (path / "nodes").is_dir() else []
            files.extend(nodes or sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(f"{path}: no such file or folder")
    return files


def read_file(path: Path) -> tuple[list[NodeReport], list[Found]]:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON ({exc})") from None
        if is_node_doc(data):
            try:
                report, found = read_node_doc(data, node_from_filename(path))
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{path}: damaged hangdoctor node file ({exc})") from None
            return [report], found
        if isinstance(data, list):
            try:
                threads = parse_threads(data)
            except ValueError as exc:
                raise InputError(f"{path}: not a py-spy JSON dump ({exc})") from None
            host = node_from_filename(path)
            found = Found(host=host, pid=pid_of(data) or 0, rank=None, rank_source="order",
                          samples=[Sample(index=0, time=path.stat().st_mtime, status=OK, threads=threads)])
            return [NodeReport(name=host, ranks_found=1)], [found]
        raise InputError(f"{path}: JSON that is neither a hangdoctor node file nor a py-spy dump")
    if looks_like_text_dump(text) or "Error:" in text:
        host = node_from_filename(path)
        found, skipped = [], []
        for proc in parse_text(text):
            if is_launcher(proc.cmdline, proc.threads):
                skipped.append(f"pid {proc.pid}: launcher ({proc.cmdline[:80] or 'its stack is in a launcher'})")
                continue
            found.append(Found(
                host=host, pid=proc.pid, rank=None, rank_source="order", cmdline=split_cmdline(proc.cmdline),
                samples=[Sample(index=0, time=path.stat().st_mtime, status=proc.status, threads=tuple(proc.threads),
                                error=proc.error)],
            ))
        if not found:
            raise InputError(f"{path}: no py-spy dump of a rank in this file")
        return [NodeReport(name=host, ranks_found=len(found), skipped=skipped)], found
    raise InputError(f"{path}: not a py-spy dump (JSON or text) nor a hangdoctor node file")


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
                     samples: int = 1, interval: float = 0.0, warnings: list[str] | None = None) -> Collection:
    """Settle identities (ranks, coordinates) once, and wrap everything analysis needs."""
    notes = list(warnings or [])
    notes += assign_missing_ranks(found)
    dims, dims_source, world, topo_notes = guess_topology(found, flags)
    notes += topo_notes
    records, record_notes = build_records(found, dims)
    notes += record_notes
    return Collection(records=records, dims=dims, dims_source=dims_source, world_size=world, nodes=reports,
                      source=source, samples=samples, interval=interval, warnings=notes)


def load_paths(paths: list[Path], flags: TopologyFlags) -> Collection:
    files = expand(paths)
    if not files:
        raise InputError(f"no dump files in {', '.join(map(str, paths))}")
    reports, found = [], []
    for path in files:
        file_reports, file_found = read_file(path)
        reports += file_reports
        found += file_found
    samples = max((len(f.samples) for f in found), default=1)
    interval = 0.0
    times = [s.time for f in found for s in f.samples]
    if samples > 1 and times:
        interval = round((max(times) - min(times)) / (samples - 1), 2)
    what = f"{len(files)} file{'s' if len(files) != 1 else ''}"
    reports = merge_same_host(reports)
    notes = [f"{r.name}: set aside {s}" for r in reports for s in r.skipped if "launcher" in s]
    return build_collection(reports, found, flags, source=what, samples=samples, interval=interval, warnings=notes)


def collection_from_docs(docs: list[dict], flags: TopologyFlags, *, source: str, samples: int, interval: float,
                         warnings: list[str] | None = None, failed_nodes: list[NodeReport] | None = None) -> Collection:
    reports, found = list(failed_nodes or []), []
    for doc in docs:
        report, node_found = read_node_doc(doc)
        reports.append(report)
        found += node_found
    return build_collection(reports, found, flags, source=source, samples=samples, interval=interval,
                            warnings=warnings)
