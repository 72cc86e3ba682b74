"""Undo what logs and launchers do to py-spy's text before people paste it: line prefixes and interleaving.

Recognised prefixes, each when it starts most lines of a file (so that a stray `Error: ...` line is no prefix):
    2024-05-01 12:00:01,123 INFO ...     a timestamp, optionally a level and a logger name (stripped, any number)
    [rank3]: ...  /  [default3]: ...      PyTorch's and torchrun's per-rank prefixes -> that line is rank 3's
    3: ...                                srun --label -> task 3: the rank when the task dumped one process
                                          (the training step's own output), the node when it dumped several
                                          (a monitoring step of one task per node, as the seeds ran py-spy)
    node12: ...                           pdsh -> host node12
Lines of different ranks or hosts may be interleaved (several processes printing at once); they are split back
into one source per prefix, each parsed on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TIMESTAMP = re.compile(
    r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"  # date and time
    r"(?:\s*[-|]?\s*\[?(?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE)\]?)?"  # level
    r"(?:\s*[-|]?\s*\[?[\w.]+(?::\d+)?\]?(?=\s*[-|:]\s))?"  # logger or file:line, before a separator
    r"\s*[-|:]?\s?"
)
_KEYED = (
    ("rank", re.compile(r"^\s*\[(?:rank|default)(\d+)\]:\s?")),
    ("task", re.compile(r"^\s*(\d+):\s?")),
    ("host", re.compile(r"^([A-Za-z0-9][\w.-]*):\s")),
)
_SHARE = 0.6  # a prefix must start at least this share of the non-blank lines


@dataclass
class Source:
    """The lines of one process group's output: one rank's, one host's, or the whole file's."""

    lines: list[str]
    rank: int | None = None
    host: str | None = None
    task: int | None = None  # srun --label's task number: a rank's, or a node's when one task dumps a whole node
    stripped: list[str] = field(default_factory=list)  # prefixes removed, in words (for a note)


def _share(lines: list[str], pattern: re.Pattern) -> float:
    content = [line for line in lines if line.strip()]
    if not content:
        return 0.0
    return sum(1 for line in content if pattern.match(line)) / len(content)


def split_sources(text: str) -> list[Source]:
    lines = text.splitlines()
    notes = []
    if _share(lines, _TIMESTAMP) >= _SHARE:
        lines = [_TIMESTAMP.sub("", line, count=1) if _TIMESTAMP.match(line) else line for line in lines]
        notes.append("timestamps")
    for kind, pattern in _KEYED:
        if _share(lines, pattern) < _SHARE:
            continue
        groups: dict[str, list[str]] = {}
        for line in lines:
            match = pattern.match(line)
            if match:  # unprefixed lines (other output mixed in) are dropped
                groups.setdefault(match[1], []).append(line[match.end():])
        notes.append(f"{kind} prefixes")
        return [Source(group, rank=int(key) if kind == "rank" else None, host=key if kind == "host" else None,
                       task=int(key) if kind == "task" else None, stripped=notes) for key, group in groups.items()]
    return [Source(lines, stripped=notes)]
