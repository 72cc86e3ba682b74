"""What `hangdoctor attach` is asked to do, typed once: `AttachRequest`, with one set of defaults.

attach, watch and the experiment runner (experiments/) all take these options; their command-line flags are
generated here from the fields (`add_arguments`, optionally with a prefix: `--attach-samples`), read back with
`from_namespace`, and passed to an attach process with `to_argv`. `read_verdict` reads what attach printed or wrote
(`--json`, report.json) and checks its format before anything reads a key of it. Standard library (and clicore) only:
this is the contract experiments/ imports from hangdoctor, and nothing else.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field, fields

from hangdoctor.clicore.argtypes import positive_float, positive_int

VERDICT_FORMAT = "hangdoctor-verdict/1"


def _help(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class AttachRequest:
    """How attach samples the ranks (the target, the output and the topology are each command's own)."""

    samples: int = field(default=2, metadata=_help("samples per rank (default 2: a rank whose stack never changes "
                                                   "is stuck)"))
    interval: float = field(default=1.0, metadata=_help("seconds between samples (default 1)"))
    timeout: float = field(default=60.0, metadata=_help("bound on the whole collection, in seconds (default 60)"))
    dump_timeout: float = field(default=10.0, metadata=_help("bound on each py-spy dump, in seconds (default 10)"))
    native: bool = field(default=False, metadata=_help("include C/C++ frames (py-spy --native)"))
    locals: bool = field(default=True, metadata=_help(
        "read every frame's arguments and locals (py-spy --locals; default on: about 8%% more time per dump, "
        "docs/BENCHMARKS.md): the src/dst of a blocked broadcast, send or recv names the peer that never came"))
    nonblocking: bool = field(default=False, metadata=_help(
        "read stacks without pausing the ranks (py-spy --nonblocking; may be inconsistent)"))
    fr_dir: str | None = field(default=None, metadata=_help(
        "the folder the job writes its Flight Recorder dumps to (files <prefix><rank>, TORCH_FR_DUMP_TEMP_FILE's "
        "folder; node-local like /tmp, or shared): each node's collector reads its own ranks' dumps there, "
        "reduces them and joins them with the stacks"))

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples must be at least 1, not {self.samples}")
        needed = (self.samples - 1) * self.interval
        if needed >= self.timeout:
            raise ValueError(f"--samples {self.samples} x --interval {self.interval:g} needs {needed:g}s, more than "
                             f"--timeout {self.timeout:g}")


_TYPES = {"samples": positive_int, "interval": positive_float, "timeout": positive_float,
          "dump_timeout": positive_float, "fr_dir": str}


def _flag(name: str, prefix: str) -> str:
    return "--" + prefix + name.replace("_", "-")


def add_arguments(group, prefix: str = "") -> None:
    """attach's sampling flags on a parser or argument group (`prefix` "attach-" gives --attach-samples...)."""
    for f in fields(AttachRequest):
        flag, dest = _flag(f.name, prefix), (prefix.replace("-", "_") + f.name)
        if f.type == "bool" or isinstance(f.default, bool):
            action = argparse.BooleanOptionalAction if f.default else "store_true"
            group.add_argument(flag, dest=dest, action=action, default=f.default, help=f.metadata["help"])
        else:
            group.add_argument(flag, dest=dest, type=_TYPES[f.name], default=f.default,
                               metavar="DIR" if f.name == "fr_dir" else None, help=f.metadata["help"])


def from_namespace(args: argparse.Namespace, prefix: str = "") -> AttachRequest:
    """The request the parsed flags ask for; ValueError (one line) when they contradict each other."""
    dest = prefix.replace("-", "_")
    values = {f.name: getattr(args, dest + f.name) for f in fields(AttachRequest)}
    if values["fr_dir"] is not None:
        values["fr_dir"] = str(values["fr_dir"])
    return AttachRequest(**values)


def to_argv(request: AttachRequest) -> list[str]:
    """attach's command-line flags for this request (every field, so that the attach process needs no default)."""
    argv: list[str] = []
    for f in fields(AttachRequest):
        value = getattr(request, f.name)
        flag = _flag(f.name, "")
        if isinstance(f.default, bool):
            argv += [flag] if value else ([f"--no-{f.name.replace('_', '-')}"] if f.default else [])
        elif value is not None:
            argv += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return argv


def read_verdict(text: str) -> dict:
    """attach's or analyze's verdict (`--json`, report.json) as a dict, after checking its format; ValueError
    with one line when it is not one."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a hangdoctor verdict (a JSON object was expected)")
    found = data.get("format")
    if found != VERDICT_FORMAT:
        raise ValueError(f"not a hangdoctor verdict: format {found!r}, expected {VERDICT_FORMAT!r}")
    return data
