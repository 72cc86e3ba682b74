"""A path given on the command line -> the rank dumps to work on, whatever its format (the one reader
interface: name -> tensor records with (pp, tp, dp) coordinates, and a source for their values):

    a folder of weightdiff dumps          one (iteration, tag) of the dump set            read/sidecar.py
    a DeepSpeed checkpoint folder         one tag folder, one record per (pp, tp)         read/checkpoint.py
    a Megatron-LM checkpoint folder       one iteration, one record per (pp, tp)          read/megatron.py
    anything else (a whole model, one record): torch.save files, HF safetensors and .bin shards, DCP
    folders, Megatron-Core torch_dist, DeepSpeed universal checkpoints                 read/formats.py

Only the readers that need torch import it (DeepSpeed, Megatron, torch.save, DCP): dumps and safetensors do not.

Dump files are found anywhere under the folder (`RUN/`, `RUN/weights/` or a copy made with `mv debug-* a/`),
selected by the iteration and tag in their names, and only then read: a run with 384 ranks and 1,000 dumped
iterations costs 384 sidecar reads, not 768,000. Problems with single files (truncated, foreign, not a regular
file, a tensor file without its sidecar, two dumps of one rank) become one-line errors; the rest is still used.
"""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hangdoctor.clicore.bulk import paused_gc
from weightdiff.errors import BadInput
from weightdiff.naming import DumpName, parse_name
from weightdiff.read.checkpoint import latest_tag_folder, read_checkpoint, tag_folders
from weightdiff.read.files import kind_of, require_folder, require_regular_file, why
from weightdiff.read.formats import folder_format, select_megatron, select_whole, whole_format
from weightdiff.read.selection import Selection
from weightdiff.read.sidecar import read_sidecar
from weightdiff.records import RankDump


def _dump_names(path: Path) -> tuple[list[tuple[DumpName, Path]], list[str]]:
    found, errors = [], []
    sidecars = set()
    for p in sorted(path.rglob("debug-*")):
        parsed = parse_name(p.name)
        if parsed is None or p.suffix != ".json":
            continue
        sidecars.add(p.with_suffix(""))
        try:
            require_regular_file(p)
        except BadInput as e:
            errors.append(f"{e}; skipped")
            continue
        found.append((parsed, p))
    for p in sorted(path.rglob("debug-*.safetensors")):
        if p.with_suffix("") not in sidecars and parse_name(p.name):
            errors.append(f"{p}: tensor file without its .json sidecar (dump interrupted?); skipped")
    return found, errors


@dataclass
class FolderScan:
    """The dump files of one folder by name (nothing read yet), to select several moments from one scan."""

    path: Path
    names: list[tuple[DumpName, Path]]
    errors: list[str]


def scan(path: str | Path) -> FolderScan:
    path = require_folder(Path(path))
    names, errors = _dump_names(path)
    return FolderScan(path, names, errors)


def _file_or_folder(path: Path) -> bool:
    """True for a regular file (a whole-model file); False for a folder; BadInput for anything else."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file or folder") from None
    except OSError as e:
        raise BadInput(f"{path}: cannot open ({why(e)})") from None
    if stat.S_ISREG(st.st_mode):
        return True
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{path}: {kind_of(st.st_mode)}; give a folder or a model file")
    return False


def select(path: str | Path, *, iteration: int | None = None, tag: str | None = None, which: str = "last",
           prefer_tag: str = "after", jobs: int = 8, scanned: FolderScan | None = None) -> Selection:
    """Choose one moment in `path`: `iteration` (default: the last or first one, per `which`) and `tag`
    (default: `prefer_tag` when such dumps exist). Raises BadInput when nothing at all can be used."""
    if scanned is None and _file_or_folder(Path(path)):
        kind, target = whole_format(Path(path))
        return select_whole(kind, target, Path(path), iteration, tag)
    scanned = scanned or scan(path)
    path, names, errors = scanned.path, scanned.names, list(scanned.errors)
    if not names:
        found = folder_format(path)
        if found == "deepspeed-checkpoint":
            return _select_checkpoint(path, iteration)
        if found == "megatron-checkpoint":
            return select_megatron(path, iteration, tag)
        if found is not None:
            return select_whole(*found, path, iteration, tag)
        if errors:
            raise BadInput(errors[0])
        raise BadInput(f"{path}: no weightdiff dumps (debug-*.json), DeepSpeed, universal or Megatron-LM checkpoint, "
                       "model.safetensors, *.index.json, pytorch_model.bin or DCP .metadata here")
    tags = {n.tag for n, _ in names}
    if tag is None:
        tag = prefer_tag if prefer_tag in tags else sorted(tags)[0]
    elif tag not in tags:
        raise BadInput(f"{path}: no {tag!r} dumps (tags present: {', '.join(sorted(tags))})")
    with_tag = [(n, p) for n, p in names if n.tag == tag]
    iterations = sorted({n.iteration for n, _ in with_tag})
    if iteration is None:
        iteration = iterations[-1] if which == "last" else iterations[0]
    elif iteration not in iterations:
        raise BadInput(f"{path}: no {tag}-dumps of iteration {iteration} (available: {_span(iterations)})")
    chosen = [p for n, p in with_tag if n.iteration == iteration]
    warnings = []
    with paused_gc(), ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # a record per tensor (clicore/bulk.py)
        results = list(pool.map(_read_or_error, chosen))
    dumps: dict[tuple[int, int, int], RankDump] = {}
    for result in results:
        if isinstance(result, str):
            errors.append(result)
            continue
        old = dumps.get(result.key)
        if old is not None:
            newer, older = sorted([old, result], key=lambda d: d.created or 0, reverse=True)
            warnings.append(f"two {tag}-dumps of iteration {iteration} for {result.label()} "
                            f"({older.source.name}, {newer.source.name}): using the newer")
            result = newer
        dumps[result.key] = result
    if not dumps:
        raise BadInput(errors[0] if errors else f"{path}: no readable dumps")
    return Selection(path=path, kind="dumps", iteration=iteration, tag=tag, dumps=dumps, errors=errors,
                     warnings=warnings, iterations=iterations)


def restart_boundary(path: str | Path) -> tuple[int, int] | None:
    """(last iteration before, first iteration after) the latest restart in one dump folder, or None.

    A restart is where every rank's pid changes between two consecutive dumped iterations (the file names
    carry the pids), which is how a resumed run that writes into the same folder is told apart."""
    names, _ = _dump_names(Path(path))
    pids: dict[int, set[int]] = {}
    for n, _ in names:
        pids.setdefault(n.iteration, set()).add(n.pid)
    iterations = sorted(pids)
    boundary = None
    for before, after in zip(iterations, iterations[1:]):
        if not pids[before] & pids[after]:
            boundary = (before, after)
    return boundary


def _read_or_error(sidecar: Path) -> RankDump | str:
    try:
        dump = read_sidecar(sidecar)
    except BadInput as e:
        return str(e)
    named = parse_name(sidecar.name)
    if named is not None and (named.coords != dump.coords or named.iteration != dump.iteration):
        return (f"{sidecar}: its name says {named.coords.label()} iteration {named.iteration}, its content "
                f"{dump.label()} iteration {dump.iteration}; skipped")
    return dump


def _select_checkpoint(path: Path, iteration: int | None) -> Selection:
    if iteration is None:
        folder = latest_tag_folder(path)
    else:
        folders = tag_folders(path)
        matching = [f for f in folders if f.name == f"global_step{iteration}" or f.name == str(iteration)]
        if not matching:
            raise BadInput(f"{path}: no checkpoint of step {iteration} "
                           f"(tag folders: {', '.join(f.name for f in folders) or 'none'})")
        folder = matching[0]
    dumps, errors = read_checkpoint(folder)
    if not dumps:
        raise BadInput(errors[0] if errors else f"{folder}: no readable checkpoint files")
    return Selection(path=path, kind="deepspeed-checkpoint", iteration=dumps[0].iteration, tag="checkpoint",
                     dumps={d.key: d for d in dumps}, errors=errors)


def _span(values: list[int]) -> str:
    from hangdoctor.topology import fold_ranks

    return fold_ranks(values)
