"""A rank's Flight Recorder trace reduced where it is read: per process group, its sequence of collectives as
one short string. Stdlib only: collectors run it on every node, in parallel, and the front end runs it on the
files it is given.

torch's dump (formats/flight_recorder.py says what it holds) repeats, for each of up to thousands of entries,
the Python stack at issue time: about 30 KiB per rank for 110 entries, and 0.9 ms to unpickle. What the join
of ranks needs from it is much less:
- per process group, the ids issued (from `first`, consecutive) and what each was: `codes`, one 8-character code
  per id ("-" for an id the buffer lacks), each code naming a `what` ("broadcast [4 float32]") in `whats`.
  Ranks in the same place of the same program have the same `codes`, whatever their group: the front end
  compares each distinct string once, not each rank;
- when each was issued: `times`, nanoseconds as deltas from the first (read only for the group that parted);
- where torch timed the kernels (NCCL with TORCH_NCCL_ENABLE_TIMING=1): `durations`, each one's milliseconds
  for the group's last KEPT_DURATIONS ids, from `durations_first` (a slow rank's collectives are the short ones:
  its peers' kernels started first and waited for it);
- each group's last collective and last point-to-point entry; the latest of them (where the rank is) with the
  Python stack it was issued from, the others without (a stack is most of a dump's bytes);
- the group configuration and status, the status re-keyed from the local pg_id to the group's name.

`decode` reads torch's file, pickle or JSON. The pickle is untrusted input: `_PlainUnpickler` admits plain
containers and scalars only (no class is ever looked up, so nothing can be constructed or called).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import time

from pathlib import Path

from hangdoctor.clicore.argtypes import MAX_RANKS  # a rank in a file name beyond it is not a rank
from hangdoctor.clicore.inputs import InputRefused, NotRegular, read_bytes

FORMAT = "hangdoctor-fr-summary/1"
GAP = "-"
KEPT_DURATIONS = 256  # the last ids' kernel times are kept (each rank's differ: they are not shared like codes)
MAX_GAP = 100_000  # ids a group's entries may skip in all (torch keeps them consecutive; a few are evicted)
MAX_BYTES = 512 << 20  # a dump of 20,000 entries with stacks is a few MB
_RANK = re.compile(r"(\d+)(?:\.json|\.pkl|\.pickle)?$")


class DecodeError(ValueError):
    """Bytes that are not a Flight Recorder dump; the message says why (the caller names the file)."""


class _PlainUnpickler(pickle.Unpickler):
    """Only dicts, lists, tuples, strings, numbers, booleans and None: every global lookup is refused, and with
    it every way a pickle has of calling code (REDUCE, BUILD, NEWOBJ, INST all need a looked-up class)."""

    def find_class(self, module: str, name: str):  # noqa: D102
        raise pickle.UnpicklingError(f"it refers to {module}.{name}, and only plain data is read")

    def persistent_load(self, pid):  # noqa: D102
        raise pickle.UnpicklingError("it refers to a persistent object, and only plain data is read")


def rank_in_name(name: str) -> int | None:
    """torch names dumps <prefix><rank>: "fr_rank_3" -> 3 (also with .json, .pkl); None past MAX_RANKS."""
    match = _RANK.search(name)
    rank = int(match[1]) if match and len(match[1]) < 12 else None
    return rank if rank is not None and rank < MAX_RANKS else None


def decode(data: bytes) -> object:
    """torch's pickle (protocol 2 or later: it starts with PROTO) or JSON. Raises DecodeError."""
    if len(data) > MAX_BYTES:
        raise DecodeError(f"{len(data) >> 20} MiB is more than a Flight Recorder dump holds")
    if data[:1] == b"\x80":
        try:
            loaded = _PlainUnpickler(io.BytesIO(data)).load()
        except Exception as exc:  # noqa: BLE001 - any failure of plain-data unpickling means "not a dump"
            raise DecodeError(f"not a readable Flight Recorder pickle ({exc or type(exc).__name__})") from None
        _check_expanded_size(loaded, budget=4 * len(data) + 100_000)
        return loaded
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DecodeError(f"not a Flight Recorder dump (neither its pickle nor its JSON: {exc})") from None


def _check_expanded_size(obj: object, *, budget: int) -> None:
    """A pickle may refer to one object many times (and to itself): a few hundred bytes can stand for a tree of
    2**60 nodes, which every later walk (str, json, the summary) would expand. Refuse it past `budget` nodes as it
    will be walked (a real dump is a tree, a few nodes per byte at most), or when it contains itself.

    torch's own dumps share objects too (one frame dict in many entries' stacks), so the expanded size is
    computed over the graph: each container's size once (memoised by identity), in time linear in the distinct
    containers and their references."""
    sizes: dict[int, int] = {}  # id -> expanded size, of containers finished
    started: set[int] = set()
    stack: list[tuple[object, bool]] = [(obj, False)] if isinstance(obj, _CONTAINERS) else []
    while stack:
        item, finish = stack.pop()
        key = id(item)
        if finish:
            total = 1
            for part in _parts(item):
                if _leaves_only(part):
                    total += len(part)
                else:
                    for child in part:
                        total += sizes[id(child)] if isinstance(child, _CONTAINERS) else 1
            if total > budget:
                _refuse()
            sizes[key] = total
        elif key not in sizes:
            if key in started:  # met again below itself: it contains itself
                _refuse()
            started.add(key)
            stack.append((item, True))
            for part in _parts(item):
                if not _leaves_only(part):
                    stack.extend([(child, False) for child in part
                                  if isinstance(child, _CONTAINERS) and id(child) not in sizes])


_CONTAINERS = (dict, list, tuple)
_CONTAINER_TYPES = frozenset(_CONTAINERS)  # the unpickler makes no subclasses (it refuses every class)


def _parts(item) -> tuple:
    return (item.keys(), item.values()) if isinstance(item, dict) else (item,)


def _leaves_only(values) -> bool:
    """No container among them: most of a dump (a frame's fields, a list of sizes), decided at C speed."""
    return _CONTAINER_TYPES.isdisjoint(map(type, values))


def _refuse() -> None:
    raise DecodeError("its objects refer to each other over and over (shared or circular references): "
                      "not a Flight Recorder dump")


def read_regular(path: str) -> bytes:
    """A regular file's bytes, bounded; a FIFO or device is refused (reading one could wait forever).
    Raises OSError or DecodeError."""
    try:
        return read_bytes(Path(path), limit=MAX_BYTES, what="a Flight Recorder dump")
    except NotRegular:
        raise DecodeError("not a regular file") from None
    except InputRefused as exc:
        if "larger than" in str(exc):
            raise DecodeError(f"more than {MAX_BYTES >> 20} MiB: more than a Flight Recorder dump holds") from None
        raise OSError(str(exc)) from None


def summaries_in(folder: str, ranks: set[int], deadline: float | None = None) -> dict[int, dict]:
    """The dumps of these ranks in a folder the job wrote them to (on this node): {rank: {"summary": ..., "file":
    ...} or {"error": why, "file": ...}}. Where a rank has both, the pickle (it carries the stacks) is read.
    Files not yet read when `deadline` (time.time()) passes are named, not read: the stacks already taken are
    worth more than the rest of the dumps. Raises OSError when the folder cannot be listed."""
    names = sorted(os.listdir(folder))
    chosen: dict[int, str] = {}
    for name in names:
        rank = rank_in_name(name)
        if rank in ranks and (rank not in chosen or chosen[rank].endswith(".json")):
            chosen[rank] = name
    out = {}
    for rank, name in chosen.items():
        path = os.path.join(folder, name)
        if deadline is not None and time.time() >= deadline:
            out[rank] = {"error": f"{path}: not read, the collection's deadline came first", "file": path}
            continue
        try:
            out[rank] = {"summary": summarize(decode(read_regular(path))), "file": path}
        except OSError as exc:
            out[rank] = {"error": f"{path}: cannot read ({exc.strerror or exc})", "file": path}
        except (DecodeError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            out[rank] = {"error": f"{path}: {exc}", "file": path}
    return out


def op_of(profiling_name: object) -> tuple[str, str]:
    """"gloo:broadcast" -> ("broadcast", ""); "nccl:send 0->1" -> ("send", "0->1")."""
    op, _, detail = str(profiling_name or "").split(":", 1)[-1].strip().partition(" ")
    return op or "?", detail.strip()


def shapes(value: object) -> tuple:
    if not isinstance(value, list):
        return ()
    return tuple(tuple(shape) if isinstance(shape, list) else (shape,) for shape in value)


def what(op: str, sizes: tuple, dtypes: tuple) -> str:
    """What ranks must agree on under one sequence id: "all_reduce [4x8 float32]"."""
    text = ",".join("x".join(map(str, s)) or "scalar" for s in sizes)
    return f"{op} [{text}{' ' + '/'.join(sorted(set(map(str, dtypes)))) if dtypes else ''}]"


_codes: dict[str, str] = {}  # a job issues a few dozen distinct collectives


def code(text: str) -> str:
    found = _codes.get(text)
    if found is None:
        found = _codes[text] = hashlib.blake2b(text.encode(), digest_size=4).hexdigest()
    return found


def _group_name(item: dict) -> str:
    group = item.get("process_group") or ("", "")
    return str(group[0]) if isinstance(group, (list, tuple)) and group else str(item.get("pg_id", ""))


def summarize(raw: dict) -> dict:
    """torch's decoded dump -> its summary. Raises KeyError, TypeError, ValueError or AttributeError on a dump
    that is not shaped like torch's."""
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise ValueError("no list of entries")
    per_group: dict[str, dict[int, tuple[str, int]]] = {}  # group -> seq -> (code, time)
    last: dict[str, tuple[int, dict]] = {}
    p2p_last: dict[str, dict] = {}
    p2p: dict[str, dict] = {}  # group -> {"first": lowest p2p id held, "count": entries, "ops": {"send 0->1": n}}
    whats: dict[str, str] = {}
    names_of_ids: dict[str, str] = {}
    descs: dict[str, str] = {}
    for item in raw["entries"]:
        if not isinstance(item, dict):
            raise ValueError("an entry that is not a dict")
        name = _group_name(item)
        group = item.get("process_group")
        if isinstance(group, (list, tuple)) and len(group) == 2:
            names_of_ids.setdefault(str(item.get("pg_id")), name)
            if group[1]:
                descs.setdefault(name, str(group[1]))
        if item.get("is_p2p"):
            p2p_last[name] = item
            pairs = p2p.setdefault(name, {"first": None, "count": 0, "ops": {}})
            op, detail = op_of(item.get("profiling_name"))
            pairs["ops"][f"{op} {detail}"] = pairs["ops"].get(f"{op} {detail}", 0) + 1
            pairs["count"] += 1
            seq = int(item.get("p2p_seq_id") or 0)
            pairs["first"] = seq if pairs["first"] is None else min(pairs["first"], seq)
            continue
        seq = int(item.get("collective_seq_id") or 0)
        dtypes = item.get("input_dtypes")
        text = what(op_of(item.get("profiling_name"))[0], shapes(item.get("input_sizes")),
                    tuple(dtypes) if isinstance(dtypes, list) else ())
        key = code(text)
        whats[key] = text
        per_group.setdefault(name, {})[seq] = (key, int(item.get("time_created_ns") or 0), _duration(item))
        if name not in last or seq >= last[name][0]:
            last[name] = (seq, item)
    kept = [item for _, item in last.values()] + list(p2p_last.values())
    latest = max(kept, key=lambda item: int(item.get("time_created_ns") or 0), default=None)
    last = {name: (seq, _trimmed(item, item is latest)) for name, (seq, item) in last.items()}
    p2p_last = {name: _trimmed(item, item is latest) for name, item in p2p_last.items()}
    groups = {}
    for name, seqs in per_group.items():
        first, end = min(seqs), max(seqs)
        if end - first >= 4 * len(seqs) + MAX_GAP:  # one code per id: a span of 10**15 ids is damage, not a dump
            raise ValueError(f"group {name}: collective_seq_id from {first} to {end} for {len(seqs)} entries")
        codes, times, durations, previous = [], [], [], None
        for seq in range(first, end + 1):
            found = seqs.get(seq)
            codes.append(found[0] if found else GAP)
            if found:
                times.append(str(found[1] - previous) if previous is not None else str(found[1]))
                previous = found[1]
            else:
                times.append(GAP)
            if seq > end - KEPT_DURATIONS:
                durations.append(GAP if found is None or found[2] is None else f"{found[2]:.3f}")
        groups[name] = {"first": first, "codes": " ".join(codes), "times": " ".join(times), "last": last[name][1]}
        if any(d != GAP for d in durations):  # kernel times: NCCL with TORCH_NCCL_ENABLE_TIMING=1
            groups[name]["durations"] = " ".join(durations)
            groups[name]["durations_first"] = end - len(durations) + 1
    status = {}
    for pg_id, value in (raw.get("pg_status") or {}).items():
        if isinstance(value, dict) and str(pg_id) in names_of_ids:
            status[names_of_ids[str(pg_id)]] = {k: int(v) for k, v in value.items() if str(v).lstrip("-").isdigit()}
    config = {}
    for name, value in (raw.get("pg_config") or {}).items():
        if not isinstance(value, dict) or not name:
            continue
        ranks = value.get("ranks")
        if isinstance(ranks, str):  # torch writes the list as its text, "[0, 1]"
            ranks = [int(r) for r in re.findall(r"-?\d+", ranks)]
        config[str(name)] = {"ranks": [int(r) for r in ranks] if isinstance(ranks, list) else [],
                             "desc": str(value.get("desc", ""))}
    for name, desc in descs.items():
        config.setdefault(name, {"ranks": [], "desc": desc})
        config[name]["desc"] = config[name]["desc"] or desc
    return {"format": FORMAT, "version": str(raw.get("version", "")), "entries": len(raw["entries"]),
            "pg_config": config, "pg_status": status, "groups": groups, "p2p_last": p2p_last, "p2p": p2p,
            "whats": whats}


_KEPT = ("process_group", "pg_id", "profiling_name", "is_p2p", "p2p_seq_id", "collective_seq_id", "input_sizes",
         "input_dtypes", "output_sizes", "state", "time_created_ns")


def _duration(item: dict) -> float | None:
    """The collective's kernel time in milliseconds (CUDA events around it: NCCL with TORCH_NCCL_ENABLE_TIMING=1;
    None where torch recorded none: gloo, timing off, or not yet completed)."""
    value = item.get("duration_ms")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        return None
    return float(value)


def durations_of(first: int, durations: str) -> dict[int, float]:
    """`durations` back to {seq: milliseconds}."""
    return {first + offset: float(value) for offset, value in enumerate(durations.split()) if value != GAP}


def _trimmed(item: dict, with_stack: bool) -> dict:
    """What the front end reads of an entry (formats/flight_recorder.py), the stack only where asked."""
    return {k: item[k] for k in (*_KEPT, "frames") if k in item and (with_stack or k != "frames")}


def times_of(first: int, times: str) -> dict[int, int]:
    """`times` back to {seq: time_ns}."""
    out, now = {}, None
    for offset, value in enumerate(times.split()):
        if value == GAP:
            continue
        now = int(value) if now is None else now + int(value)
        out[first + offset] = now
    return out
