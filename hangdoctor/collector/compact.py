"""Lossless factoring of py-spy's JSON in a node document: identical frame objects stored once per node.

py-spy's `dump --json` repeats every frame in full (about 250 bytes each: name, filename, short_filename,
line, ...) for every thread of every rank and sample. A node document keeps them once, in `frame_table`, and
each sample's `pyspy_threads` is py-spy's thread list with `frames` as indices into that table. `expand`
gives back py-spy's output exactly (with --locals, less the object addresses: `drop_addresses`). At 16,384 ranks this makes node files several times smaller and
quicker to read. Stdlib only.
"""

from __future__ import annotations

import json
import re


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def drop_addresses(doc: dict) -> dict:
    """py-spy --locals gives every local its object's address, and object reprs carry one too ("<Tensor at
    0x7f..>"): no two ranks would share a frame. Both are dropped (in place), so that identical frames
    factor again; the values that tell something (src=6, a shape, a string) stay."""
    for proc in doc.get("processes", []):
        for sample in proc.get("samples", []):
            for thread in sample.get("pyspy_json") or []:
                for frame in thread.get("frames") or [] if isinstance(thread, dict) else []:
                    for local in frame.get("locals") or [] if isinstance(frame, dict) else []:
                        if isinstance(local, dict):
                            local.pop("addr", None)
                            if isinstance(local.get("repr"), str):
                                local["repr"] = _ADDRESS.sub("", local["repr"])
    return doc


def factor(doc: dict) -> dict:
    """Move every sample's `pyspy_json` into `pyspy_threads` + the node's `frame_table` (in place)."""
    table: list = doc.setdefault("frame_table", [])
    index: dict = {json.dumps(frame, sort_keys=True): i for i, frame in enumerate(table)}
    for proc in doc.get("processes", []):
        for sample in proc.get("samples", []):
            threads = sample.pop("pyspy_json", None)
            if threads is None:
                continue
            compact = []
            for thread in threads:
                thread = dict(thread)
                ids = []
                for frame in thread.get("frames") or []:
                    key = json.dumps(frame, sort_keys=True)
                    if key not in index:
                        index[key] = len(table)
                        table.append(frame)
                    ids.append(index[key])
                thread["frames"] = ids
                compact.append(thread)
            sample["pyspy_threads"] = compact
    return doc


def expand(doc: dict, sample: dict) -> list | None:
    """py-spy's own JSON for one sample of a factored document (None when py-spy gave no JSON)."""
    if "pyspy_json" in sample:
        return sample["pyspy_json"]
    if sample.get("pyspy_threads") is None:
        return None
    table = doc["frame_table"]
    return [dict(thread, frames=[table[i] for i in thread["frames"]]) for thread in sample["pyspy_threads"]]
