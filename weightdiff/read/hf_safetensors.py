"""Hugging Face safetensors as one whole-model RankDump: `model.safetensors`, or shards listed by
`model.safetensors.index.json` (`{"weight_map": {name: shard file}}`). No torch.

A tied tensor that the file keeps once is declared in the metadata (the file's `__metadata__`, or the index's
`metadata`): it becomes a tie on the kept tensor (weightdiff.read.shared_tensors). Each shard's header is read
and checked (`weightdiff.read.values.locate`: a complete file, every entry's dtype,
shape and byte range); values are memory-mapped only when compared. A shard that cannot be used is one error
line, and its tensors are counted as unreadable (never equal, never missing); the other shards are compared.
"""

from __future__ import annotations

import json
from pathlib import Path

from weightdiff.errors import BadInput
from weightdiff.read.files import read_bounded
from weightdiff.read.shared_tensors import config_ties, declared_aliases, with_ties
from weightdiff.read.tensor_file import read_header
from weightdiff.read.values import Located, SafetensorsSet, locate_in
from weightdiff.read.whole import meta_for, whole_dump
from weightdiff.records import RankDump

INDEX_SUFFIX = ".safetensors.index.json"
MAX_INDEX_BYTES = 64 << 20


def find_safetensors(folder: Path) -> Path | None:
    """The index (sharded) or the single file of a HF model folder, or None."""
    indexes = sorted(folder.glob(f"*{INDEX_SUFFIX}"))
    if indexes:
        return indexes[0]
    single = folder / "model.safetensors"
    return single if single.exists() else None


def weight_map(index: Path) -> dict[str, str]:
    """An HF index's `weight_map` (tensor name -> shard file in the index's folder), checked; BadInput if not."""
    return read_index(index)[0]


def read_index(index: Path) -> tuple[dict[str, str], dict]:
    """(weight_map, metadata) of an HF index, checked; BadInput if not one. `metadata` may declare tensors kept
    once under another name (weightdiff.read.shared_tensors)."""
    try:
        data = json.loads(read_bounded(index, limit=MAX_INDEX_BYTES, what="an HF index").decode("utf-8"))
        mapping = data["weight_map"]
        if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in mapping.items()):
            raise ValueError("weight_map is not an object of names to file names")
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise BadInput(f"{index}: not an HF index ({type(e).__name__}: {e})") from None
    for shard in set(mapping.values()):
        if "/" in shard or "\\" in shard or shard in ("", ".", ".."):
            raise BadInput(f"{index}: shard {shard!r} is not a file name in the index's folder")
    metadata = data.get("metadata") if isinstance(data, dict) else None
    return mapping, metadata if isinstance(metadata, dict) else {}


def read_safetensors(path: Path) -> tuple[RankDump, list[str]]:
    """One RankDump for a single file or an index (path: either file), and one-line errors."""
    metadata: dict = {}
    if path.name.endswith(INDEX_SUFFIX):
        mapping, metadata = read_index(path)
        shards = {shard: [n for n, s in mapping.items() if s == shard] for shard in sorted(set(mapping.values()))}
        folder = path.parent
    else:
        shards, folder = {path.name: []}, path.parent
    located: dict[str, Located] = {}
    problems: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    errors: list[str] = []
    for shard, listed in shards.items():
        try:
            header, data_start = read_header(folder / shard)
            found, bad = locate_in(folder / shard, header, data_start)
        except BadInput as e:
            errors.append(f"{e}" + (f"; its {len(listed)} tensors not compared" if listed else ""))
            unreadable.update({name: str(e) for name in listed})
            continue
        for name in listed:
            if name not in found and name not in bad:
                bad[name] = f"{folder / shard}: no tensor {name}, which the index puts in this file"
        errors.extend(bad.values())
        problems.update(bad)
        located.update(found)
        if not listed:  # a single file: its own header's metadata declares what it keeps once
            metadata = header.get("__metadata__") or {}
    unreadable.update({name: line for name, line in problems.items() if name not in located})
    if not located and not unreadable:
        raise BadInput(errors[0] if errors else f"{path}: no tensors")
    metas = {name: meta_for(name, loc.shape, loc.dtype) for name, loc in located.items()}
    present = {*located, *unreadable}
    metas = with_ties(metas, [], {**config_ties(folder, present), **declared_aliases(metadata, present)})
    return whole_dump(path, "safetensors", metas, SafetensorsSet(located, problems), unreadable), errors
