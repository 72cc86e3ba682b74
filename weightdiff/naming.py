"""Dump file names, in the seed's scheme so that its users recognise them.

    debug-{iteration}-pp{pp}-tp{tp}-dp{dp}-global{rank}-{tag}-iteration-{pid}.safetensors   (values)
    debug-{iteration}-pp{pp}-tp{tp}-dp{dp}-global{rank}-{tag}-iteration-{pid}.json          (sidecar)

The name is for people and for finding files; the sidecar's metadata is the source of truth for a rank's
identity once a file is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoctor.topology import RankCoords

TAG_PATTERN = re.compile(r"^[A-Za-z0-9_]+$")
NAME_PATTERN = re.compile(
    r"^debug-(?P<iteration>\d+)-pp(?P<pp>\d+)-tp(?P<tp>\d+)-dp(?P<dp>\d+)-global(?P<rank>\d+)"
    r"-(?P<tag>[A-Za-z0-9_]+)-iteration-(?P<pid>\d+)\.(?P<ext>json|safetensors)$"
)


@dataclass(frozen=True)
class DumpName:
    iteration: int
    coords: RankCoords
    tag: str
    pid: int

    def stem(self) -> str:
        c = self.coords
        return (f"debug-{self.iteration}-pp{c.pp}-tp{c.tp}-dp{c.dp}-global{c.rank}"
                f"-{self.tag}-iteration-{self.pid}")


def check_tag(tag: str) -> str:
    if not isinstance(tag, str) or not TAG_PATTERN.match(tag):
        raise ValueError(f"dump tag {tag!r} must be letters, digits or '_' (e.g. 'before', 'after')")
    return tag


def parse_name(filename: str) -> DumpName | None:
    """The parts of a dump file name, or None when the name is not one of ours."""
    m = NAME_PATTERN.match(filename)
    if not m:
        return None
    coords = RankCoords(rank=int(m["rank"]), dp=int(m["dp"]), pp=int(m["pp"]), tp=int(m["tp"]))
    return DumpName(iteration=int(m["iteration"]), coords=coords, tag=m["tag"], pid=int(m["pid"]))
