"""PyTorch's Flight Recorder dumps -> per-rank records of the collectives each rank issued.

torch keeps, per process, a ring buffer of its last collectives (TORCH_FR_BUFFER_SIZE entries; gloo and NCCL) and
writes it as one file per rank: the prefix in TORCH_FR_DUMP_TEMP_FILE followed by the rank (`fr_rank_3`), as a
pickle (`_dump_fr_trace`) or as JSON (`_dump_fr_trace_json`). A dump is a dict: `version`, `pg_config` (name ->
ranks, desc; empty for gloo groups in torch 2.13), `pg_status` (local pg_id -> last enqueued/started/completed
sequence id; the id differs between ranks, the name does not: statuses are re-keyed by name), `entries` (each:
process_group [name, desc], collective_seq_id or p2p_seq_id, profiling_name "gloo:broadcast", input/output sizes
and dtypes, state, the Python stack at issue time).

Each dump is reduced as it is read (collector/fr_summary.py: per process group, its sequence as one string, and
its last entries with their stacks); collectors reduce the traces they fetch or read on the nodes, and a node
file carries the summaries. The pickle is untrusted input, read by collector/fr_summary.py's plain-data
unpickler; anything else is a `FrError`, one line that names the file. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hangdoctor.clicore.argtypes import MAX_RANKS
from hangdoctor.collector.fr_summary import FORMAT as SUMMARY
from hangdoctor.collector.fr_summary import (GAP, DecodeError, decode, durations_of, op_of, rank_in_name,
                                             read_regular, shapes, summarize, times_of, what)
from hangdoctor.formats import frames as interned
from hangdoctor.model import Stack



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
    frames: tuple = ()  # the Python stack at issue time as torch wrote it (dicts), innermost first; see `stack`

    @property
    def stack(self) -> Stack:
        """The issuing stack as interned frames (made on demand: thousands of ranks' entries are rarely all read)."""
        return interned.stack([interned.frame(str(f.get("name", "?")), _short(str(f.get("filename", "?"))),
                                              int(f.get("line") or 0), False) for f in self.frames if isinstance(f, dict)])

    @property
    def label(self) -> str:
        sizes = ",".join("x".join(map(str, s)) or "scalar" for s in self.sizes)
        return f"{self.op}{' ' + self.detail if self.detail else ''} #{self.seq} [{sizes}]"

    @property
    def what(self) -> str:
        return what(self.op, self.sizes, self.dtypes)


_seqs: dict[tuple[int, str], tuple[dict[int, str], int]] = {}  # (first, codes) -> ({seq: code}, last): shared


@dataclass(slots=True)
class GroupTrace:
    """One rank's collectives in one process group: ids `first`..`last`, each one's code (None: not in the
    buffer). Ranks that issued the same sequence share `codes` and the parsed form."""

    first: int
    codes: str
    times: str
    whats: dict[str, str]  # code -> what, e.g. "broadcast [4 float32]"
    durations: str = ""  # the kernels' milliseconds of the last ids, from `durations_first` (NCCL with timing on)
    durations_first: int = 0

    @property
    def key(self) -> tuple[int, str]:
        return self.first, self.codes

    def seqs(self) -> tuple[dict[int, str], int]:
        """({seq: code}, last seq), parsed once per distinct sequence."""
        found = _seqs.get(self.key)
        if found is None:
            parts = self.codes.split()
            found = _seqs[self.key] = ({self.first + i: c for i, c in enumerate(parts) if c != GAP},
                                       self.first + len(parts) - 1)
        return found

    @property
    def last(self) -> int:
        return self.seqs()[1]

    def kernel_times(self) -> dict[int, float]:
        """{seq: milliseconds the collective's kernel ran}, where torch timed it; {} where it did not."""
        return durations_of(self.durations_first, self.durations) if self.durations else {}

    def time_of(self, seq: int) -> int:
        """When `seq` was issued (ns since the epoch), 0 when unknown; only the parting group's ranks are asked."""
        return times_of(self.first, self.times).get(seq, 0)


@dataclass
class FrDump:
    rank: int  # global rank, from the file name
    source: str  # the file
    version: str
    entries: list[FrEntry] = field(default_factory=list)  # each group's last collective and last p2p entry, with
    # their stacks: where the rank is (the whole sequence is in `sequences`)
    group_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)  # from pg_config, when torch filled it
    group_desc: dict[str, str] = field(default_factory=dict)
    status: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> last_enqueued/started/completed
    sequences: dict[str, GroupTrace] = field(default_factory=dict)  # group -> its collectives in order
    count: int = 0  # entries in torch's dump
    # group -> its point-to-point ops counted by kind and peers ({"send 0->1": 3, "recv 0<-1": 4}, group ranks), when
    # the buffer holds every one since the group's first (p2p id 1): analysis/p2p_pairs.py pairs them across ranks
    p2p_counts: dict[str, dict[str, int]] = field(default_factory=dict)


def is_pickle(data: bytes) -> bool:
    """torch writes its dumps with pickle protocol 2 or later: they start with the PROTO opcode."""
    return data[:1] == b"\x80"


def is_fr_json(data: object) -> bool:
    """Decoded JSON shaped like a Flight Recorder dump (a node file holds such dumps, deeper down)."""
    return isinstance(data, dict) and isinstance(data.get("entries"), list) and "version" in data \
        and ("pg_status" in data or "pg_config" in data)


def rank_of(path: Path) -> int | None:
    return rank_in_name(path.name)


def read_fr(path: Path, data: bytes | None = None) -> FrDump:
    """One rank's dump. Raises FrError."""
    rank = rank_of(path)
    if rank is None:
        raise FrError(f"{path}: no rank (0 to {MAX_RANKS - 1:,}) at the end of the file name (torch names dumps "
                      "<prefix><rank>)")
    try:
        raw = decode(read_regular(str(path)) if data is None else data)
    except OSError as exc:
        raise FrError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except DecodeError as exc:
        raise FrError(f"{path}: {exc}") from None
    return parse_dump(raw, rank, str(path))


def parse_dump(raw: object, rank: int, source: str) -> FrDump:
    """A dump already decoded (a worker server's JSON reply, a file's pickle or JSON), or its summary made on a
    node. Raises FrError."""
    try:
        summary = raw if isinstance(raw, dict) and raw.get("format") == SUMMARY else summarize(raw)
        return from_summary(summary, rank, source)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise FrError(f"{source}: a damaged Flight Recorder dump ({type(exc).__name__}: {exc})") from None


_strings: dict[str, str] = {}  # one object for each distinct `codes` string: 16k ranks share a handful


def from_summary(summary: dict, rank: int, source: str) -> FrDump:
    dump = FrDump(rank=rank, source=source, version=str(summary.get("version", "")), count=int(summary["entries"]))
    for name, config in summary["pg_config"].items():
        if config.get("ranks"):
            dump.group_ranks[name] = tuple(int(r) for r in config["ranks"])
        dump.group_desc[name] = str(config.get("desc", ""))
    whats = {str(k): str(v) for k, v in summary["whats"].items()}
    for name, trace in summary["groups"].items():
        codes = str(trace["codes"])
        group = GroupTrace(int(trace["first"]), _strings.setdefault(codes, codes), str(trace["times"]),
                           whats, str(trace.get("durations", "")), int(trace.get("durations_first", 0)))
        group.kernel_times()  # read once here: a damaged value is this file's error (ValueError), not the analysis'
        dump.sequences[name] = group
        dump.entries.append(_entry(trace["last"]))
    dump.entries += [_entry(item) for item in summary["p2p_last"].values()]
    for name, pairs in (summary.get("p2p") or {}).items():  # summaries of older collectors have none
        first, count = pairs.get("first"), int(pairs.get("count", 0))
        if first in (0, 1) and count == sum(int(n) for n in pairs["ops"].values()):
            dump.p2p_counts[name] = {str(k): int(v) for k, v in pairs["ops"].items()}
    dump.entries.sort(key=lambda e: e.time_ns)
    dump.status = {str(k): {str(a): int(b) for a, b in v.items()} for k, v in summary["pg_status"].items()}
    return dump


_OPS: dict[str, tuple[str, str]] = {}  # profiling name -> (op, detail): a job uses a few dozen names


def _entry(item: dict) -> FrEntry:
    group = item.get("process_group") or ("", "")
    name = str(group[0]) if isinstance(group, (list, tuple)) and group else str(item.get("pg_id", ""))
    profiling = item.get("profiling_name") or ""
    parsed = _OPS.get(profiling)
    if parsed is None:
        parsed = _OPS[profiling] = op_of(profiling)
    p2p = bool(item.get("is_p2p"))
    seq = int(item.get("p2p_seq_id") if p2p else item.get("collective_seq_id") or 0)
    frames = item.get("frames")
    dtypes = item.get("input_dtypes")
    return FrEntry(group=name, seq=seq, p2p=p2p, op=parsed[0], detail=parsed[1],
                   sizes=shapes(item.get("input_sizes")), dtypes=tuple(dtypes) if isinstance(dtypes, list) else (),
                   state=str(item.get("state", "")), time_ns=int(item.get("time_created_ns") or 0),
                   frames=tuple(frames) if isinstance(frames, list) else ())


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
