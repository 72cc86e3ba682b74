"""Lossless factoring of py-spy's JSON in a node document: the node's ranks merged before they travel.

py-spy's `dump --json` repeats every frame in full (about 250 bytes each: name, filename, short_filename,
line, ...) for every thread of every rank and sample, and ranks that wait in the same place repeat the same
threads. Two steps, both reversible:
- `factor`: each distinct frame once per node, in `frame_table`; each sample's `pyspy_threads` is py-spy's
  thread list with `frames` as indices into that table (format hangdoctor-node/1).
- `merge`: each distinct thread (name, state, frames) once per node, in `thread_table`, without the ids that
  belong to one process; each sample's `threads` lists `[index, os_thread_id, thread_id]` (hangdoctor-node/2).
  This is the node's summary: its distinct stacks, and which rank holds which in each sample. The front end
  builds each distinct thread once per node and merges nodes by interning.
`expand` gives back py-spy's output exactly from either form (with --locals, the object addresses numbered
per process: `drop_addresses`). Stdlib only.
"""

from __future__ import annotations

import json
import re


_ADDRESS = re.compile(r" at (0x[0-9a-fA-F]+)")


def drop_addresses(doc: dict) -> dict:
    """py-spy --locals gives every local its object's address, and object reprs carry one too ("<Tensor at
    0x7f..>"): no two ranks would share a frame. Each address is replaced (in place) by its number within its
    process, in the order met walking each stack from its outermost frame ("<ProcessGroup at #3>"), so that
    identical frames factor again (the outer frames, a training loop's, number their objects alike on every rank)
    while a process still shows which of its frames hold one same object (the group a collective runs on is its
    caller's `cp_group`: analysis/group_names.py); the values that tell something (src=6, a shape) stay."""
    for proc in doc.get("processes", []):
        numbers: dict[str, str] = {}

        def number(match: re.Match) -> str:
            return " at #" + numbers.setdefault(match.group(1), str(len(numbers) + 1))

        for sample in proc.get("samples", []):
            for thread in sample.get("pyspy_json") or []:
                frames = thread.get("frames") or [] if isinstance(thread, dict) else []
                for frame in reversed(frames):
                    for local in frame.get("locals") or [] if isinstance(frame, dict) else []:
                        if isinstance(local, dict):
                            local.pop("addr", None)
                            if isinstance(local.get("repr"), str):
                                local["repr"] = _ADDRESS.sub(number, local["repr"])
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


_OWN_IDS = ("pid", "os_thread_id", "thread_id")  # what differs between processes in the same place
MERGED = "hangdoctor-node/2"


def merge(doc: dict) -> dict:
    """Move every sample's factored `pyspy_threads` into the node's `thread_table` + `threads` (in place)."""
    table: list = doc.setdefault("thread_table", [])
    index: dict = {json.dumps(thread, sort_keys=True): i for i, thread in enumerate(table)}
    for proc in doc.get("processes", []):
        for sample in proc.get("samples", []):
            threads = sample.pop("pyspy_threads", None)
            if threads is None:
                continue
            refs = []
            for thread in threads:
                shape = {k: v for k, v in thread.items() if k not in _OWN_IDS}
                key = json.dumps(shape, sort_keys=True)
                if key not in index:
                    index[key] = len(table)
                    table.append(shape)
                refs.append([index[key], thread.get("os_thread_id"), thread.get("thread_id")])
            sample["threads"] = refs
    doc["format"] = MERGED
    return doc


def expand(doc: dict, sample: dict, pid: int | None = None) -> list | None:
    """py-spy's own JSON for one sample of a factored or merged document (None when py-spy gave no JSON).
    `pid`: the process's, for the merged form (py-spy writes it in every thread)."""
    if "pyspy_json" in sample:
        return sample["pyspy_json"]
    if sample.get("threads") is not None:
        threads = []
        for ref, os_thread_id, thread_id in sample["threads"]:
            shape = doc["thread_table"][ref]
            threads.append({"pid": pid, "thread_id": thread_id, "os_thread_id": os_thread_id, **shape})
        sample = {"pyspy_threads": threads}
    if sample.get("pyspy_threads") is None:
        return None
    table = doc["frame_table"]
    return [dict(thread, frames=[table[i] for i in thread["frames"]]) for thread in sample["pyspy_threads"]]
