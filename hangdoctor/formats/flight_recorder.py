"""PyTorch's Flight Recorder dumps -> per-rank records of the collectives each rank issued.

torch keeps, per process, a ring buffer of its last collectives (TORCH_FR_BUFFER_SIZE entries; gloo and NCCL) and
writes it as one file per rank: the prefix in TORCH_FR_DUMP_TEMP_FILE followed by the rank (`fr_rank_3`), as a
pickle (`_dump_fr_trace`) or as JSON (`_dump_fr_trace_json`). A dump is a dict: `version`, `pg_config` (name ->
ranks, desc; empty for gloo groups in torch 2.13), `pg_status` (local pg_id -> last enqueued/started/completed
sequence id; the id differs between ranks, the name does not: statuses are re-keyed by name), `entries` (each: process_group [name, desc], collective_seq_id or p2p_seq_id, profiling_name
"gloo:broadcast", input/output sizes and dtypes, state, the Python stack at issue time).

The pickle is untrusted input: `_PlainUnpickler` admits plain containers and scalars only (no class is ever
looked up, so nothing can be constructed or called); anything else is a `FrError`, one line that names the file.
Standard library only.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from hangdoctor.formats import frames as interned
from hangdoctor.model import Stack

MAX_BYTES = 512 << 20  # a dump of 20,000 entries with stacks is a few MB
_RANK = re.compile(r"(\d+)(?:\.json|\.pkl|\.pickle)?$")


class FrError(ValueError):
    """A file that is not a readable Flight Recorder dump; the message names the file."""


@dataclass(frozen=True, slots=True)
class FrEntry:
    group: str  # the process group's name, the same on every rank ("0" is the default group)
    seq: int  # collective_seq_id, or p2p_seq_id for point-to-point entries
    p2p: bool
    op: str  # "broadcast", from "gloo:broadcast" / "nccl:broadcast"
    detail: str  # what follows the op in the profiling name (p2p peers, "0->1"), else ""
    sizes: tuple  # input sizes, e.g. ((4,),)
    dtypes: tuple
    state: str  # "scheduled", "started", "completed"
    time_ns: int
    frames: tuple = ()  # the Python stack at issue time as torch wrote it (dicts), innermost first; see `stack`;
    # kept for each group's last entry of a rank only (memory: thousands of ranks x thousands of entries)

    @property
    def stack(self) -> Stack:
        """The issuing stack as interned frames (made on demand: thousands of ranks' entries are rarely all read)."""
        return interned.stack([interned.frame(str(f.get("name", "?")), _short(str(f.get("filename", "?"))),
                                              int(f.get("line") or 0), False) for f in self.frames if isinstance(f, dict)])

    @property
    def label(self) -> str:
        sizes = ",".join("x".join(map(str, s)) or "scalar" for s in self.sizes)
        return f"{self.op}{' ' + self.detail if self.detail else ''} #{self.seq} [{sizes}]"


@dataclass
class FrDump:
    rank: int  # global rank, from the file name
    source: str  # the file
    version: str
    entries: list[FrEntry] = field(default_factory=list)
    group_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)  # from pg_config, when torch filled it
    group_desc: dict[str, str] = field(default_factory=dict)
    status: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> last_enqueued/started/completed


class _PlainUnpickler(pickle.Unpickler):
    """Only dicts, lists, tuples, strings, numbers, booleans and None: every global lookup is refused, and with
    it every way a pickle has of calling code (REDUCE, BUILD, NEWOBJ, INST all need a looked-up class)."""

    def find_class(self, module: str, name: str):  # noqa: D102
        raise pickle.UnpicklingError(f"it refers to {module}.{name}, and only plain data is read")

    def persistent_load(self, pid):  # noqa: D102
        raise pickle.UnpicklingError("it refers to a persistent object, and only plain data is read")


def is_pickle(data: bytes) -> bool:
    """torch writes its dumps with pickle protocol 2 or later: they start with the PROTO opcode."""
    return data[:1] == b"\x80"


def is_fr_json(data: object) -> bool:
    """Decoded JSON shaped like a Flight Recorder dump (a node file holds such dumps, deeper down)."""
    return isinstance(data, dict) and isinstance(data.get("entries"), list) and "version" in data \
        and ("pg_status" in data or "pg_config" in data)


def rank_of(path: Path) -> int | None:
    match = _RANK.search(path.name)
    return int(match[1]) if match else None


def read_fr(path: Path, data: bytes | None = None) -> FrDump:
    """One rank's dump. Raises FrError."""
    try:
        data = path.read_bytes() if data is None else data
    except OSError as exc:
        raise FrError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise FrError(f"{path}: {len(data) >> 20} MiB is more than a Flight Recorder dump holds")
    rank = rank_of(path)
    if rank is None:
        raise FrError(f"{path}: no rank at the end of the file name (torch names dumps <prefix><rank>)")
    if data[:1] == b"\x80":
        try:
            raw = _PlainUnpickler(io.BytesIO(data)).load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                MemoryError, RecursionError) as exc:
            raise FrError(f"{path}: not a readable Flight Recorder pickle ({exc or type(exc).__name__})") from None
    else:
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise FrError(f"{path}: not a Flight Recorder dump (neither its pickle nor its JSON: {exc})") from None
    return parse_dump(raw, rank, str(path))


def parse_dump(raw: object, rank: int, source: str) -> FrDump:
    """A dump already decoded (a worker server's JSON reply, a file's pickle or JSON). Raises FrError."""
    try:
        return _dump(raw, rank, source)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FrError(f"{source}: a damaged Flight Recorder dump ({type(exc).__name__}: {exc})") from None


def _dump(raw: object, rank: int, source: str) -> FrDump:
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise ValueError("no list of entries")
    dump = FrDump(rank=rank, source=source, version=str(raw.get("version", "")))
    for name, config in (raw.get("pg_config") or {}).items():
        if not isinstance(config, dict) or not name:
            continue
        ranks = config.get("ranks")
        if isinstance(ranks, str):  # torch writes the list as its text, "[0, 1]"
            ranks = [int(r) for r in re.findall(r"-?\d+", ranks)]
        if isinstance(ranks, list) and ranks:
            dump.group_ranks[str(name)] = tuple(int(r) for r in ranks)
        dump.group_desc[str(name)] = str(config.get("desc", ""))
    names_of_ids: dict[str, str] = {}  # pg_status is keyed by the local pg_id, which differs between ranks
    for item in raw["entries"]:
        dump.entries.append(_entry(item))
        group = item.get("process_group")
        if isinstance(group, (list, tuple)) and len(group) == 2:
            names_of_ids.setdefault(str(item.get("pg_id")), str(group[0]))
            if group[1]:
                dump.group_desc.setdefault(str(group[0]), str(group[1]))
    keep = set({e.group: i for i, e in enumerate(dump.entries)}.values())
    for i, entry in enumerate(dump.entries):  # stacks are kept for each group's last entry: where a rank waits
        if entry.frames and i not in keep:
            dump.entries[i] = replace(entry, frames=())
    for pg_id, status in (raw.get("pg_status") or {}).items():
        if isinstance(status, dict) and str(pg_id) in names_of_ids:
            dump.status[names_of_ids[str(pg_id)]] = {key: int(value) for key, value in status.items()
                                                     if str(value).lstrip("-").isdigit()}
    return dump


_OPS: dict[str, tuple[str, str]] = {}  # profiling name -> (op, detail): a job uses a few dozen names


def _entry(item: dict) -> FrEntry:
    group = item.get("process_group") or ("", "")
    name = str(group[0]) if isinstance(group, (list, tuple)) and group else str(item.get("pg_id", ""))
    profiling = item.get("profiling_name") or ""
    parsed = _OPS.get(profiling)
    if parsed is None:
        op, _, detail = str(profiling).split(":", 1)[-1].strip().partition(" ")
        parsed = _OPS[profiling] = (op or "?", detail.strip())
    p2p = bool(item.get("is_p2p"))
    seq = int(item.get("p2p_seq_id") if p2p else item.get("collective_seq_id") or 0)
    frames = item.get("frames")
    dtypes = item.get("input_dtypes")
    return FrEntry(group=name, seq=seq, p2p=p2p, op=parsed[0], detail=parsed[1],
                   sizes=_shape_list(item.get("input_sizes")), dtypes=tuple(dtypes) if isinstance(dtypes, list) else (),
                   state=str(item.get("state", "")), time_ns=int(item.get("time_created_ns") or 0),
                   frames=tuple(frames) if isinstance(frames, list) else ())


def _shape_list(value) -> tuple:
    if not isinstance(value, list):
        return ()
    return tuple(tuple(shape) if isinstance(shape, list) else (shape,) for shape in value)


_SITE = re.compile(r"^.*?/(?:site-packages|dist-packages)/")


def _short(filename: str) -> str:
    """py-spy's short file name: relative to site-packages when it is there."""
    return _SITE.sub("", filename)



def read_many(paths: list[Path]) -> list[FrDump | FrError]:
    """Every file's dump, or its FrError, in order."""
    out: list[FrDump | FrError] = []
    for path in paths:
        try:
            out.append(read_fr(path))
        except FrError as exc:
            out.append(exc)
    return out
