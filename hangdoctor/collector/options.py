"""The collector's contract, typed once: what to sample (`CollectOptions`) and which processes (`Selection`).

The front end builds them (attach, watch, the experiment runner); a collector gets them in-process (local) or as
the command line of `python -S .../collector/__main__.py` on each node (srun, pdsh). `to_argv` and
`add_arguments`/`from_namespace` are both generated from the fields below, so a field added here travels
everywhere and a misspelt one fails at once. Fields marked `wire=False` stay on the front end. Stdlib only.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import MISSING, dataclass, field, fields


@dataclass
class CollectOptions:
    """How to sample: the same for every front end and every node."""

    pyspy: str = "py-spy"  # the py-spy executable
    pystack: str = ""  # the pystack executable: reads the ranks py-spy could not ("": no second reader)
    samples: int = 1
    interval: float = 1.0  # seconds between samples
    native: bool = False  # py-spy --native
    locals: bool = False  # py-spy --locals: arguments and locals of every frame (the peer of a send/recv)
    nonblocking: bool = False  # py-spy --nonblocking for every rank (D- and T-state ranks always get it)
    text: bool = False  # py-spy's text output instead of --json
    dump_timeout: float = 10.0  # seconds for one py-spy dump
    flight_recorder: bool = False  # fetch Flight Recorder traces from torch's debug worker servers, where they run
    fr_dir: str | None = None  # read the ranks' Flight Recorder dump files in this folder, on each node
    pyspy_version: str = ""  # when the caller knows it: saves every node a `py-spy --version`
    profile: float = 0.0  # seconds of `py-spy record --nonblocking` of every rank at once, after the samples (0: none)
    profile_rate: int = 50  # samples a second of that profile, at most
    profile_cost: float = 2.0  # how much slower the samplers may make the job, percent; over it a lower rate (100: never)
    timeout: float = field(default=60.0, metadata={"wire": False})  # the whole collection, every node included


@dataclass
class Selection:
    """Which processes a collector dumps: those whose environment matches, or given PIDs."""

    match: dict[str, str | None] = field(default_factory=dict)  # KEY -> VALUE (None: the key is set at all)
    pids: list[int] = field(default_factory=list)  # instead of matching
    node: str | None = None  # the node name to report (default: SLURMD_NODENAME or the host name)
    all_nodes: bool = False  # keep processes whose SLURMD_NODENAME is another node's
    among: list[int] | None = field(default=None, metadata={"wire": False})  # search these pids, not all of /proc


_FLAGS = {"pyspy": "--py-spy", "pids": "--pid"}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def _wire(cls) -> list:
    return [f for f in fields(cls) if f.metadata.get("wire", True)]


def to_argv(options: CollectOptions, selection: Selection) -> list[str]:
    """The collector's command-line flags for these options (defaults left out)."""
    argv: list[str] = []
    for obj in (options, selection):
        for f in _wire(type(obj)):
            value = getattr(obj, f.name)
            default = f.default if f.default is not MISSING else f.default_factory()
            if value == default or value is None:
                continue
            if f.name == "match":
                argv += [a for key, val in value.items() for a in ("--match", key if val is None else f"{key}={val}")]
            elif f.name == "pids":
                argv += [a for pid in value for a in ("--pid", str(int(pid)))]
            elif isinstance(value, bool):
                argv.append(_flag(f.name))
            else:
                argv += [_flag(f.name), repr(value) if isinstance(value, float) else str(value)]
    return argv


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The collector's flags for every wire field, with the fields' defaults."""
    for cls in (CollectOptions, Selection):
        for f in _wire(cls):
            flag = _flag(f.name)
            if f.name == "match":
                parser.add_argument(flag, action="append", default=[], metavar="KEY[=VALUE]",
                                    help="environment variable the job's processes carry, e.g. SLURM_JOB_ID=1234")
            elif f.name == "pids":
                parser.add_argument(flag, dest="pids", type=int, action="append", default=[],
                                    help="dump these PIDs instead of matching")
            elif f.type in ("bool", bool):
                parser.add_argument(flag, dest=f.name, action="store_true")
            else:
                kind = {"int": int, "float": float}.get(str(f.type), str)
                parser.add_argument(flag, dest=f.name, type=kind, default=f.default)


def parse_match(items: list[str]) -> dict[str, str | None]:
    """["SLURM_JOB_ID=12", "RANK"] -> {"SLURM_JOB_ID": "12", "RANK": None}. Raises ValueError naming the item."""
    match: dict[str, str | None] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ValueError(f"--match {item!r}: expected KEY or KEY=VALUE")
        match[key] = value if sep else None
    return match


def from_namespace(ns: argparse.Namespace) -> tuple[CollectOptions, Selection]:
    """Raises ValueError with a one-line reason."""
    match = parse_match(ns.match)
    options = CollectOptions(**{f.name: getattr(ns, f.name) for f in _wire(CollectOptions)})
    selection = Selection(**{f.name: getattr(ns, f.name) for f in _wire(Selection) if f.name != "match"}, match=match)
    if options.samples < 1 or options.interval < 0 or options.dump_timeout <= 0:
        raise ValueError("--samples must be >= 1, --interval >= 0 and --dump-timeout > 0")
    if options.profile < 0 or not 1 <= options.profile_rate <= 1000 or not 0 < options.profile_cost <= 100:
        raise ValueError("--profile must be >= 0, --profile-rate between 1 and 1000, --profile-cost in (0, 100]")
    return options, selection
