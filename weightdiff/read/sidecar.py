"""Read one dump's JSON sidecar into a RankDump; the values stay on disk until `weightdiff.read.values` streams them.

Every way a sidecar can be bad (not a regular file, too large, not UTF-8, not JSON, foreign, malformed fields)
raises `BadInput` with a one-line message naming the file, so a caller can report it and go on with the other
ranks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hangdoctor.topology import RankCoords
from weightdiff.errors import BadInput
from weightdiff.read.files import one_line, read_bounded
from weightdiff.records import FORMAT, RankDump, dims_from_json, meta_from_json

MAX_SIDECAR_BYTES = 1 << 30  # a sidecar holds about 1 KB per parameter


def _decode(path: Path, raw: bytes) -> object:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not a weightdiff sidecar (not UTF-8 text: byte {e.start} is "
                       f"0x{raw[e.start]:02x}; replaced or corrupted?)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not a weightdiff sidecar (invalid JSON at char {e.pos}; truncated?)") from None
    except (ValueError, RecursionError) as e:  # nesting too deep, a number too long
        raise BadInput(f"{path}: not a weightdiff sidecar (unreadable JSON: {type(e).__name__})") from None


def read_sidecar(path: Path) -> RankDump:
    path = Path(path)
    data = _decode(path, read_bounded(path, limit=MAX_SIDECAR_BYTES, what="a weightdiff sidecar"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadInput(f"{path}: not a weightdiff sidecar (no \"format\": \"{FORMAT}\")")
    try:
        c = data["coords"]
        coords = RankCoords(rank=int(c["rank"]), dp=int(c["dp"]), pp=int(c["pp"]), tp=int(c["tp"]))
        tensors = {}
        for item in data["params"]:
            meta = meta_from_json(item)
            if any(s < 0 for s in meta.shape):
                raise ValueError(f"{meta.name} has a negative size in its shape {list(meta.shape)}")
            tensors[meta.name] = meta
        mode = str(data["mode"])
        tensor_file = data.get("tensor_file")
        dump = RankDump(
            coords=coords, iteration=int(data["iteration"]), tag=str(data["tag"]), source=path, kind="dump",
            mode=mode, tensors=tensors,
            tensor_source=(path.parent / tensor_file) if (mode == "full" and tensor_file) else None,
            pid=data.get("pid"), host=str(data.get("host", "")), world_size=data.get("world_size"),
            dims=dims_from_json(data.get("dims")), created=data.get("created"), notes=list(data.get("notes", [])),
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
        raise BadInput(f"{path}: malformed weightdiff sidecar ({type(e).__name__}: {one_line(e)})") from None
    if dump.tensor_source is not None and not os.path.lexists(dump.tensor_source):
        raise BadInput(f"{path}: its tensor file {dump.tensor_source.name} is missing")
    return dump  # the tensor file itself is checked when it is read (weightdiff.read.tensor_file)
