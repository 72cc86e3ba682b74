"""Undo what logs, launchers, terminals and issue trackers do to a dump before people paste it.

In this order, each step only when the text shows it:
- what editors and trackers add: ANSI colours, markdown fences (```), a `> ` quote on most lines, HTML entities
  (`&lt;module&gt;`), carriage returns;
- line prefixes, each when it starts most lines of a file (so that a stray `Error: ...` line is no prefix):
    2024-05-01 12:00:01,123 INFO ...     a timestamp, optionally a level and a logger name (stripped, any number)
    [rank3]: ...  /  [default3]: ...      PyTorch's and torchrun's per-rank prefixes -> that line is rank 3's
    (RayWorkerWrapper pid=8812) ...       Ray's prefix for an actor's output -> process 8812
    3: ...                                srun --label -> task 3: the rank when the task dumped one process
                                          (the training step's own output), the node when it dumped several
                                          (a monitoring step of one task per node, as the seeds ran py-spy)
    node12: ...                           pdsh -> host node12
    DP0,3,5,7: ...                        a person's label for a group of ranks -> that group's lines
  Lines of different ranks, processes or hosts may be interleaved (several processes printing at once); they are
  split back into one source per prefix, each parsed on its own;
- lines wrapped by a terminal or a log collector (Ray's at 80 columns): a frame line cut in two is joined again.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, field

_TIMESTAMP = re.compile(
    r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"  # date and time
    r"(?:\s*[-|]?\s*\[?(?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE)\]?)?"  # level
    r"(?:\s*[-|]?\s*\[?[\w.]+(?::\d+)?\]?(?=\s*[-|:]\s))?"  # logger or file:line, before a separator
    r"\s*[-|:]?\s?"
)
_KEYED = (
    ("rank", re.compile(r"^\s*\[(?:rank|default)(\d+)\]:\s?")),
    ("pid", re.compile(r"^\s*\((?:[^()]*?\s)?pid=(\d+)(?:,\s*ip=[^)]*)?\)\s?")),
    ("task", re.compile(r"^\s*(\d+):\s?")),
    ("host", re.compile(r"^([A-Za-z0-9][\w.-]*):\s")),
    ("label", re.compile(r"^\s*([A-Za-z][A-Za-z_ ]*\d[\d,\- ]*):\s+(?=\S)")),
)
_SHARE = 0.6  # a prefix must start at least this share of the non-blank lines
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_QUOTE = re.compile(r"^\s*> ?")


@dataclass
class Source:
    """The lines of one process group's output: one rank's, one process's, one host's, or the whole file's."""

    lines: list[str]
    rank: int | None = None
    host: str | None = None
    task: int | None = None  # srun --label's task number: a rank's, or a node's when one task dumps a whole node
    pid: int | None = None  # Ray's `(Actor pid=N)` prefix
    label: str | None = None  # a person's group label
    stripped: list[str] = field(default_factory=list)  # what was undone, in words (for a note)


def _share(lines: list[str], pattern: re.Pattern) -> float:
    content = [line for line in lines if line.strip()]
    if not content:
        return 0.0
    return sum(1 for line in content if pattern.match(line)) / len(content)


def clean(text: str) -> tuple[list[str], list[str]]:
    """The text's lines without what editors and trackers add, and what was removed, in words."""
    notes = []
    if "\x1b" in text:
        text = _ANSI.sub("", text)
        notes.append("terminal colours")
    if "&lt;" in text or "&gt;" in text or "&quot;" in text:
        text = html.unescape(text)
        notes.append("HTML entities")
    lines = text.splitlines()
    if _share(lines, _QUOTE) >= _SHARE:
        lines = [_QUOTE.sub("", line, count=1) for line in lines]
        notes.append("quote marks")
    if any(_FENCE.match(line) for line in lines):
        lines = [line for line in lines if not _FENCE.match(line)]
        notes.append("markdown fences")
    return lines, notes


def split_sources(text: str) -> list[Source]:
    lines, notes = clean(text)
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
        return [Source(join_wrapped(group), rank=int(key) if kind == "rank" else None,
                       host=key if kind == "host" else None, task=int(key) if kind == "task" else None,
                       pid=int(key) if kind == "pid" else None, label=key if kind == "label" else None,
                       stripped=notes) for key, group in groups.items()]
    return [Source(join_wrapped(lines), stripped=notes)]


# A frame line's start and its whole, in the formats people paste (py-spy's `name (file:line)`, faulthandler's
# `File "f", line N in name`, a traceback's `File "f", line N, in name`)
_STARTS = re.compile(r'^\s*(?:File "|Thread |Process |Python v|Current thread |Traceback |#\d+ |\S+ \()')
_WHOLE = re.compile(r'^\s*File ".*", line \d+,? in \S+\s*$|^\s*\S.* \([^()]*\)\s*$')


def _open(line: str) -> bool:
    """A frame line cut before its end: `File "...` without its `in name`, or a `(` left open."""
    stripped = line.strip()
    if stripped.startswith('File "'):
        return not _WHOLE.match(line)
    return "(" in stripped and stripped.count("(") > stripped.count(")") and not stripped.endswith(":")


def _wrap_width(lines: list[str]) -> int | None:
    """The column a collector cut lines at: the longest length, shared by several lines of 60 or more."""
    lengths = Counter(len(line) for line in lines if len(line) >= 60)
    if not lengths:
        return None
    width = max(lengths)
    return width if lengths[width] >= 2 else None


def join_wrapped(lines: list[str]) -> list[str]:
    """Lines cut by a terminal or a log collector joined again: a frame line left open, or a line as long as
    the cut followed by the rest of a frame (unindented: a cut falls mid-text)."""
    width = _wrap_width(lines)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        joins = 0
        while i + 1 < len(lines) and joins < 4:
            following = lines[i + 1]
            if not following.strip() or _STARTS.match(following) and not _open(line):
                break
            # a cut mid-text leaves the rest at the line's start (a frame's or a local's own line is indented)
            cut = width is not None and len(line) == width and len(following) - len(following.lstrip()) <= 1 \
                and not _WHOLE.match(following) and bool(_WHOLE.match(line + following))
            if not (_open(line) or cut):
                break
            line += following
            i += 1
            joins += 1
        out.append(line)
        i += 1
    return out
