"""Read one dump's JSON sidecar into a RankDump; the values stay on disk until `weightdiff.read.values` streams them.

Every way a sidecar can be bad raises `BadInput` with a one-line message naming the file, so a caller can
report it and go on with the other ranks.
"""

from __future__ import annotations

import json
from pathlib import Path

from topology import RankCoords
from weightdiff.errors import BadInput
from weightdiff.records import FORMAT, RankDump, meta_from_json


def read_sidecar(path: Path) -> RankDump:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not a weightdiff sidecar (invalid JSON at char {getattr(e, 'pos', '?')}; "
                       f"truncated?)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadInput(f"{path}: not a weightdiff sidecar (no \"format\": \"{FORMAT}\")")
    try:
        c = data["coords"]
        coords = RankCoords(rank=int(c["rank"]), dp=int(c["dp"]), pp=int(c["pp"]), tp=int(c["tp"]))
        tensors = {}
        for item in data["params"]:
            meta = meta_from_json(item)
            tensors[meta.name] = meta
        mode = str(data["mode"])
        tensor_file = data.get("tensor_file")
        dump = RankDump(
            coords=coords, iteration=int(data["iteration"]), tag=str(data["tag"]), source=path, kind="dump",
            mode=mode, tensors=tensors,
            tensor_source=(path.parent / tensor_file) if (mode == "full" and tensor_file) else None,
            pid=data.get("pid"), host=str(data.get("host", "")), world_size=data.get("world_size"),
            dims=data.get("dims"), created=data.get("created"), notes=list(data.get("notes", [])),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise BadInput(f"{path}: malformed weightdiff sidecar ({type(e).__name__}: {e})") from None
    if dump.tensor_source is not None and not dump.tensor_source.exists():
        raise BadInput(f"{path}: its tensor file {dump.tensor_source.name} is missing")
    return dump
