"""The collector's node document (`hangdoctor-node/2`, and /1) -> processes found on that node, with their samples.

The hot path at 100k ranks: a node's distinct threads (`thread_table`, see collector/compact.py) are built once
per node, from frames interned across nodes; each rank's sample then costs a few small objects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoctor.clicore.argtypes import MAX_RANKS
from hangdoctor.collector.document import FORMAT
from hangdoctor.formats import frames as interned
from hangdoctor.formats.profile import frames_of_profiles, read_profile
from hangdoctor.formats.pyspy_json import frame_from_json, locals_of, parse_threads
from hangdoctor.formats.pyspy_text import parse_text
from hangdoctor.model import ERROR, Frame, NodeReport, RankProfile, Sample, ThreadStack


@dataclass
class Found:
    """A process as a reader found it, before ranks and coordinates are settled (see identity.py)."""

    host: str
    pid: int
    rank: int | None = None
    rank_source: str = "env"
    local_rank: int | None = None
    world_size: int | None = None
    cmdline: tuple[str, ...] = ()
    samples: list[Sample] = field(default_factory=list)
    ppid: int | None = None
    gpu: bool | None = None  # a GPU runtime loaded (the collector read /proc/PID/maps); None: unknown
    flight_recorder: object = None  # its Flight Recorder trace, fetched live (FrDump), or the error text
    profile: RankProfile | None = None  # `attach --profile`: its time profile
    endpoint: str | None = None  # "MASTER_ADDR:MASTER_PORT" from its environment, where the collector kept both


READABLE = ("hangdoctor-node/1", "hangdoctor-node/2")


def is_node_doc(data: object) -> bool:
    return isinstance(data, dict) and str(data.get("format", "")).startswith("hangdoctor-node/")


def _threads(sample: dict) -> tuple[tuple[ThreadStack, ...], str]:
    """py-spy's JSON as printed, or its text (the collector's --text mode)."""
    if sample.get("pyspy_json") is not None:
        try:
            return parse_threads(sample["pyspy_json"]), ""
        except ValueError as exc:
            return (), f"unreadable py-spy JSON: {exc}"
    if sample.get("pyspy_text"):
        processes = parse_text(sample["pyspy_text"])
        return (tuple(processes[0].threads) if processes else ()), ""
    return (), ""


def _factored_threads(raw: list, table: list[Frame], stacks: dict, raw_table: list | None = None) -> tuple[ThreadStack, ...]:
    """The collector's factored threads (frames as indices into the node's table); the hot path at scale.

    `stacks` maps a tuple of indices to its interned stack, for the whole node."""
    threads = []
    for item in raw:
        key = tuple(item["frames"])
        stack = stacks.get(key)
        if stack is None:
            stack = stacks[key] = interned.stack([table[i] for i in key])
        local_vars = None
        if raw_table is not None:  # only when some frame of the node has locals (py-spy --locals)
            local_vars = locals_of([raw_table[i] for i in key])
        threads.append(ThreadStack(item.get("os_thread_id") or item.get("thread_id") or 0,
                                   item.get("thread_name") or "", stack, item.get("active"), item.get("owns_gil"),
                                   local_vars))
    return tuple(threads)


def _thread_shapes(doc: dict, table: list[Frame], raw_table: list | None) -> list[tuple]:
    """The merged form's distinct threads, each as ThreadStack's arguments after the thread id."""
    shapes, stacks = [], {}
    for item in doc.get("thread_table") or []:
        key = tuple(item["frames"])
        stack = stacks.get(key)
        if stack is None:
            stack = stacks[key] = interned.stack([table[i] for i in key])
        local_vars = locals_of([raw_table[i] for i in key]) if raw_table is not None else None
        shapes.append((item.get("thread_name") or "", stack, item.get("active"), item.get("owns_gil"), local_vars))
    return shapes


def _merged_threads(refs: list, shapes: list[tuple]) -> tuple[ThreadStack, ...]:
    return tuple(ThreadStack(os_thread_id or thread_id or 0, *shapes[ref]) for ref, os_thread_id, thread_id in refs)


def read_sample(raw: dict, table: list[Frame] | None = None, stacks: dict | None = None,
                raw_table: list | None = None, shapes: list[tuple] | None = None, pid: int = 0) -> Sample:
    problem = ""
    if raw.get("faulthandler_text"):  # py-spy could not read the rank; its torch debug server dumped its threads
        from hangdoctor.formats.faulthandler import parse

        threads = parse(str(raw["faulthandler_text"]), pid)
    elif raw.get("threads") is not None:
        try:
            if not isinstance(raw["threads"], list):
                raise TypeError(f"threads is {type(raw['threads']).__name__}, not a list")
            threads = _merged_threads(raw["threads"], shapes or [])
        except (IndexError, TypeError, ValueError) as exc:
            threads, problem = (), f"unreadable py-spy JSON: {exc!r}"
    elif raw.get("pyspy_threads") is not None:
        try:
            threads = _factored_threads(raw["pyspy_threads"], table or [], {} if stacks is None else stacks, raw_table)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            threads, problem = (), f"unreadable py-spy JSON: {exc!r}"
    else:
        threads, problem = _threads(raw)
    status, cpu, index, when, state, wchan, error, seconds = _scalars(raw)
    status = status or ERROR
    return Sample(
        index=index or 0, time=float(when or 0.0),
        status=ERROR if problem and status == "ok" else status, threads=threads,
        state=state or "", cpu_percent=None if cpu is None else float(cpu),
        wchan=wchan or "", error=problem or error or "", seconds=float(seconds or 0.0),
        nonblocking=bool(raw.get("nonblocking")), source=str(raw.get("source") or ""),
        reader=_reader(raw) if threads else "",
    )


def _reader(raw: dict) -> str:
    """Which tool read a sample's stack: the collector's `reader` (pystack), the rank's debug server, or py-spy."""
    reader = raw.get("reader")
    if type(reader) is str and reader:
        return reader
    return "torch debug server" if raw.get("faulthandler_text") else "py-spy"


_TEXT, _NUMBER, _WHOLE = (str, type(None)), (int, float, type(None)), (int, type(None))
_SCALAR_FIELDS = (("status", _TEXT), ("cpu_percent", _NUMBER), ("index", _WHOLE), ("time", _NUMBER),
                  ("state", _TEXT), ("wchan", _TEXT), ("error", _TEXT), ("seconds", _NUMBER))
_SCALAR_KEYS = tuple(key for key, _ in _SCALAR_FIELDS)
_CHECKED_SHAPES: set[tuple[type, ...]] = set()  # the field types seen valid: one set lookup per sample at 131k ranks


def _scalars(raw: dict) -> tuple:
    """A sample's scalar fields, each of its exact types (None: absent; a bool is not a number; a float finite),
    else damage: ValueError, the file refused with the field named."""
    values = tuple(map(raw.get, _SCALAR_KEYS))
    shape = tuple(map(type, values))
    if shape not in _CHECKED_SHAPES:
        for (key, kinds), value in zip(_SCALAR_FIELDS, values):
            if type(value) not in kinds:
                raise ValueError(f"sample field {key!r} is {value!r}")
        _CHECKED_SHAPES.add(shape)
    _, cpu, _, when, _, _, _, seconds = values
    if (cpu or 0) * 0 + (when or 0) * 0 + (seconds or 0) * 0 != 0:  # 0 * x is 0 for a finite x only
        key = next(key for key, value in zip(_SCALAR_KEYS, values) if type(value) is float and value * 0 != 0)
        raise ValueError(f"sample field {key!r} is {raw[key]!r}")
    return values


def _fetched_trace(proc: dict, node: str):
    """The trace a collector fetched from the rank's debug worker server or read from its dump file, reduced on
    the node, as an FrDump (or why there is none, a str; or the FrError of a damaged one). Older node files carry
    the whole trace."""
    fetched = proc.get("flight_recorder")
    if not isinstance(fetched, dict) or proc.get("rank") is None:
        return None
    raw = fetched.get("summary", fetched.get("trace"))
    if raw is None:
        return str(fetched.get("error") or "no trace")
    from hangdoctor.formats.flight_recorder import FrError, parse_dump

    where = fetched.get("file") or f"{node} pid {proc.get('pid')} port {fetched.get('port')}"
    try:
        return parse_dump(raw, int(proc["rank"]), str(where))
    except FrError as exc:
        return exc  # a trace that was taken and is damaged: an error of the input, not a note


def read_node_doc(doc: dict, fallback_name: str = "?") -> tuple[NodeReport, list[Found]]:
    if not is_node_doc(doc):
        raise ValueError(f"not a hangdoctor node document (expected format {FORMAT})")
    if doc["format"] not in READABLE:
        raise ValueError(f"node format {doc['format']} is {_age(doc['format'])} ({', '.join(READABLE)} are read)")
    name = doc.get("node") or fallback_name
    if not isinstance(name, str):
        raise ValueError(f"node is {name!r}, not a name")
    try:
        raw_table = doc.get("frame_table") or []
        table = [frame_from_json(f) for f in raw_table]
        with_locals = raw_table if any(isinstance(f, dict) and f.get("locals") for f in raw_table) else None
        shapes = _thread_shapes(doc, table, with_locals)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        raise ValueError(f"bad frame or thread table: {exc!r}") from None
    found, stacks, cmdlines = [], {}, {}
    profile_frames = frames_of_profiles(doc.get("profile_frames")) if "profile_frames" in doc else []
    for proc in doc.get("processes", []):
        cmdline = tuple(proc.get("cmdline") or ())
        if cmdline not in cmdlines:  # checked once, and one tuple for the node's ranks that share it
            if not all(isinstance(arg, str) for arg in cmdline):
                raise ValueError(f"process field 'cmdline' is {list(cmdline)[:4]!r}..., not a list of strings")
            cmdlines[cmdline] = cmdline
        cmdline = cmdlines[cmdline]
        pid, rank, local_rank, world_size = _process_numbers(proc)
        found.append(Found(
            host=name, pid=pid, rank=rank, rank_source=proc.get("rank_key") or "env",
            local_rank=local_rank, world_size=world_size,
            cmdline=cmdline, samples=[read_sample(s, table, stacks, with_locals, shapes, pid)
                                      for s in proc.get("samples", [])],
            ppid=proc.get("ppid"), gpu=proc.get("gpu"),
            flight_recorder=_fetched_trace(proc, name) if "flight_recorder" in proc else None,
            profile=read_profile(proc["profile"], profile_frames, pid) if "profile" in proc else None,
            endpoint=_endpoint(proc.get("env")),
        ))
    errors = list(doc.get("errors") or [])
    report = NodeReport(
        name=name, ok=not doc.get("fatal"), error="; ".join(errors), ranks_found=len(found),
        skipped=list(doc.get("skipped") or []),
        seconds=max(0.0, float(doc.get("finished") or 0) - float(doc.get("started") or 0)),
    )
    return report, found


def _endpoint(env: object) -> str | None:
    """The rendezvous store's address a process was given (env://: MASTER_ADDR and MASTER_PORT), else None."""
    if not isinstance(env, dict):
        return None
    host, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if not (isinstance(host, str) and isinstance(port, str) and host and port):
        return None
    return f"{host[:200]}:{port[:20]}"


_PROCESS_NUMBERS = (("pid", 1, 1 << 32), ("rank", 0, MAX_RANKS), ("local_rank", 0, MAX_RANKS),
                    ("world_size", 1, MAX_RANKS + 1))


def _process_numbers(proc: dict) -> tuple:
    """pid, rank, local_rank and world_size of a process, each checked by _whole."""
    pid, rank, local_rank, world = proc.get("pid"), proc.get("rank"), proc.get("local_rank"), proc.get("world_size")
    if (type(pid) is int and 0 < pid < 1 << 32 and type(rank) is int and 0 <= rank < MAX_RANKS
            and type(world) is int and 0 < world <= MAX_RANKS and (local_rank is None or type(local_rank) is int
                                                                   and 0 <= local_rank < MAX_RANKS)):
        return pid, rank, local_rank, world  # the usual node file, in one test
    return tuple(_whole(proc, key, low=low, high=high) for key, low, high in _PROCESS_NUMBERS)


def _whole(proc: dict, key: str, *, low: int = 0, high: int = MAX_RANKS) -> int | None:
    """An integer field of a process in [low, high), or None when absent: a rank of 10**15 or "3" is damage
    (every loop over ranks would follow it), refused with the field named."""
    value = proc.get(key)
    if value is None and key != "pid":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise ValueError(f"process field {key!r} is {value!r}, not a whole number in [{low}, {high:,})")
    return value


def _age(name: object) -> str:
    """"newer than this hangdoctor reads" only for a later version of our own format; an older or foreign one
    is said as such."""
    version = re.fullmatch(r"hangdoctor-node/(\d+)", str(name))
    if version is None:
        return "not one hangdoctor writes"
    newest = max(int(f.rsplit("/", 1)[1]) for f in READABLE)
    return "newer than this hangdoctor reads" if int(version[1]) > newest else "older than this hangdoctor reads"
