"""Undo what logs, launchers, terminals and issue trackers do to a dump before people paste it.

In this order, each step only when the text shows it:
- what editors and trackers add: ANSI colours, markdown fences (```), a `> ` quote on most lines, HTML entities
  (`&lt;module&gt;`), carriage returns;
- line prefixes, each when it starts most lines of a file (so that a stray `Error: ...` line is no prefix):
    2024-05-01 12:00:01,123 INFO ...     a timestamp, optionally a level and a logger name (stripped, any number)
    [rank3]: ...  /  [default3]: ...      PyTorch's and torchrun's per-rank prefixes -> that line is rank 3's
    [rank: 3] ...  /  [1,3]<stdout>: ...  Lightning's, OpenMPI's --tag-output
    (RayWorkerWrapper pid=8812) ...       Ray's prefix for an actor's output -> process 8812
    3: ...                                srun --label -> task 3: the rank when the task dumped one process
                                          (the training step's own output), the node when it dumped several
                                          (a monitoring step of one task per node, as the seeds ran py-spy)
    node12: ...                           pdsh -> host node12
    trainer-1  | ...                      docker compose -> host trainer-1
    node7{18..19,49}: ...                 a parallel debugger's group (STAT, ATP) -> ranks 18, 19, 49 on node7
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

from hangdoctor.topology import parse_ranks

_TIMESTAMP = re.compile(
    r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"  # date and time
    r"(?:\s*[-|]?\s*\[?(?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE)\]?)?"  # level
    r"(?:\s*[-|]?\s*\[?[\w.-]+(?::\d+)?\]?(?=\s*(?:[-|:]|>>?)\s))?"  # logger, file:line or worker, before a separator
    r"(?:\s*(?:[-|:]|>>?)\s?|\s?)"  # a separator, else one space: the indentation after it is the text's own
)
# seconds since a start, in brackets: dmesg's `[12345.678901] `, an OBS build log's `[  222s] `
_ELAPSED = re.compile(r"^\s*\[\s*\d+(?:\.\d+)?s?\]\s?")
_LOG_HEADER = re.compile(r"^[^\]\n]{0,100}?\b\d\d:\d\d:\d\d\b[^\]\n]{0,100}?\]\s?")  # "ERROR 01-29 20:00:47 x.py:240] "
_KEYED = (
    # PyTorch's [rank3]: (and `[rank3[]:`, a tracker's escape), torchrun's [default3]:, Lightning's [rank: 3],
    # OpenMPI's --tag-output [1,3]<stdout>:
    ("rank", re.compile(r"^\s*(?:\[(?:rank|default|Rank):?\s?(?P<key>\d+)[\[\]]{1,3}:?|\[\d+,(?P<mpi>\d+)\]"
                        r"<std(?:out|err)>:)\s?")),
    ("pid", re.compile(r"^\s*\((?P<actor>[^()]*?(?:\[[^\]]*\])?)\s*pid=(?P<key>\d+)(?:,\s*ip=[^)]*)?\)\s?")),
    ("task", re.compile(r"^\s*(?P<key>\d+):\s?")),
    # a launcher's tag of each process it started, its name and index (ros2 launch's `[bridge_node-1] `)
    ("label", re.compile(r"^\[(?P<key>[A-Za-z][\w.]*-\d+)\](?:\s|$)")),
    # pdsh's `node12: `, docker compose's `trainer-1  | ` (the service and its replica), and a parallel debugger's
    # host with the ranks that share the line (`node7{18..19,49}: `, as STAT and Cray's ATP group them)
    ("host", re.compile(r"^(?P<key>[A-Za-z0-9][\w.-]*(?:\{[\d.,\s-]+\})?)(?::\s|\s+\|(?: |$))")),
    ("label", re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z_ ]*\d[\d,\- ]*):\s+(?=\S)")),
)
_RANK_SECTION = re.compile(r"^\W*\s*[Rr]ank\s+[:#=]?\s*(\d+)\s*\W*$")  # a line that only names a rank
_ACTOR_RANK = re.compile(r"\brank[=_ :]?(\d+)", re.I)
# an inference worker named for its tensor-parallel index alone (vLLM's `Worker_TP8_EP8`, SGLang's
# `scheduler_TP1`): with no pipeline or data-parallel index beside it, that index is its rank
_TP_RANK = re.compile(r"(?:^|[_\W])TP(\d+)(?![\d])")
_OTHER_INDEX = re.compile(r"(?:^|[_\W])(?:PP|DP)\d+", re.I)
_FRAMEISH = re.compile(r'^\s*(?:#\d+ |File "|\(Python\) |\S+ \(.*:(?:\d+|\.\.\.)\)\s*$)')
_SHARE = 0.6  # a prefix must start at least this share of the non-blank lines
_RANK_SHARE = 0.2  # PyTorch's own `[rank3]:` (three lines or more): a launcher's unprefixed traceback may follow
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_GUTTER = re.compile(r"^\s*(\d+)(?: |$)")
# a markdown fence and its info string (```python); not a banner drawn with tildes around its text (pytest-timeout's
# `~~~~ Stack of MainThread (1399) ~~~~`)
_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})[^`~]*$")
_QUOTE = re.compile(r"^\s*(?:> ?)+")  # one or more levels of quoting
_BAR = re.compile(r"^\s*\| ?")  # a CI log viewer's gutter (Buildkite's, Jenkins'): "  | " before every line
_PANEL = re.compile(r"^\s*│ ?(.*?)\s*│\s*$")  # a line inside a rich panel: its border


@dataclass
class Source:
    """The lines of one process group's output: one rank's, one process's, one host's, or the whole file's."""

    lines: list[str]
    rank: int | None = None
    host: str | None = None
    task: int | None = None  # srun --label's task number: a rank's, or a node's when one task dumps a whole node
    pid: int | None = None  # Ray's `(Actor pid=N)` prefix
    label: str | None = None  # a person's group label
    ranks: tuple[int, ...] = ()  # the ranks that share these lines (`node7{18..19,49}: `): one stack, that many ranks
    stripped: list[str] = field(default_factory=list)  # what was undone, in words (for a note)


def _share(lines: list[str], pattern: re.Pattern) -> float:
    content = [line for line in lines if line.strip()]
    if not content:
        return 0.0
    return sum(1 for line in content if pattern.match(line)) / len(content)


def _count(lines: list[str], pattern: re.Pattern) -> int:
    return sum(1 for line in lines if pattern.match(line))


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
    if _numbered(lines):
        lines = [_GUTTER.sub("", line, count=1) for line in lines]
        notes.append("line numbers")
    if _share(lines, _QUOTE) >= _SHARE:
        lines = [_QUOTE.sub("", line, count=1) for line in lines]
        notes.append("quote marks")
    if _share(lines, _BAR) >= _SHARE:
        lines = [_BAR.sub("", line, count=1) for line in lines]
        notes.append("a log viewer's gutter")
    if sum(1 for line in lines if _PANEL.match(line)) >= 2:
        lines = [_PANEL.sub(r"\1", line) for line in lines]
        notes.append("a rich panel's border")
    if any(_FENCE.match(line) for line in lines):
        lines = [line for line in lines if not _FENCE.match(line)]
        notes.append("markdown fences")
    return lines, notes


def _numbered(lines: list[str]) -> bool:
    """Most lines start with their own line number (a listing copied with its gutter): 1, 2, 3..."""
    numbers = [int(m[1]) for line in lines if (m := _GUTTER.match(line))]
    steps = sum(1 for a, b in zip(numbers, numbers[1:]) if b == a + 1)
    return len(numbers) >= 5 and len(numbers) >= _SHARE * len([x for x in lines if x.strip()]) and \
        steps >= 0.8 * (len(numbers) - 1)


def split_sources(text: str) -> list[Source]:
    lines, notes = clean(text)
    return _split(lines, notes, {}, depth=0)


def _strip_headers(lines: list[str], notes: list[str]) -> tuple[list[str], list[str]]:
    """Timestamps and log headers that start most lines, removed; not a header that starts with a rank's or an
    actor's own prefix (`(VllmWorker rank=1 pid=N) ERROR 01-29 20:00:47 [x.py:522] `): that prefix is split on
    first, and the header inside it goes at the next level."""
    keyed = [pattern for kind, pattern in _KEYED if kind in ("rank", "pid")]
    for pattern, what in ((_ELAPSED, "elapsed-time prefixes"), (_TIMESTAMP, "timestamps"), (_LOG_HEADER, "log headers")):
        if pattern is _LOG_HEADER and any(_share(lines, k) >= _SHARE for k in keyed):
            continue
        if _share(lines, pattern) >= _SHARE:
            lines = [pattern.sub("", line, count=1) if pattern.match(line) else line for line in lines]
            notes = notes + [what] if what not in notes else notes
    return lines, notes


def _split(lines: list[str], notes: list[str], known: dict, depth: int) -> list[Source]:
    """Sources of these lines: split by the first prefix that starts most of them, then again inside each group
    (a Ray actor's lines carry a rank prefix or a log header of their own; a log collector may double a prefix)."""
    lines, notes = _strip_headers(lines, notes)
    sections = [i for i, line in enumerate(lines) if _RANK_SECTION.match(line)]
    if depth == 0 and len(sections) >= 2:  # "=== Rank 3 ===" over each rank's part (torch's debug server's stacks)
        here = notes + ["rank sections"]
        out = _split(lines[:sections[0]], here, known, depth + 1) if sections[0] else []
        for start, end in zip(sections, sections[1:] + [len(lines)]):
            rank = int(_RANK_SECTION.match(lines[start])[1])
            out += _split(lines[start + 1:end], here, {**known, "rank": rank}, depth + 1)
        return out
    for kind, pattern in _KEYED if depth < 3 else ():
        body = [line for line in lines if not _FRAMEISH.match(line)]
        if _share(body, pattern) < (_RANK_SHARE if kind == "rank" and _count(body, pattern) >= 3 else _SHARE):
            continue  # (frames printed without the prefix of the line before them do not count against it)
        groups: dict[str, list[str]] = {}
        ranks: dict[str, int] = {}
        last = None
        for line in lines:
            match = pattern.match(line)
            if match:
                last = match["key"] or match.groupdict().get("mpi")
                groups.setdefault(last, []).append(line[match.end():])
                actor = match.groupdict().get("actor") or ""
                if kind == "pid" and (found := _ACTOR_RANK.search(actor) or _tp_rank(actor)):
                    ranks[last] = int(found[1])
            elif last is not None and line.strip() and (not groups[last] or _continues(groups[last][-1], line)):
                groups[last].append(line)  # a frame printed without the prefix, or the rest of a cut line
            elif line.strip():  # other output (a launcher's own traceback): a source of its own, after the ranks'
                last = ""
                groups.setdefault(last, []).append(line)
        here = notes + [f"{kind} prefixes"] if f"{kind} prefixes" not in notes else notes
        sources = []
        for key, group in sorted(groups.items(), key=lambda kv: kv[0] == ""):
            found = dict(known)
            if key == "":
                pass  # the unprefixed remainder: whatever it holds carries no rank of its own
            elif kind in ("rank", "task"):
                found[kind] = int(key)
            elif kind == "pid":
                found["pid"] = int(key)
                if key in ranks:
                    found.setdefault("rank", ranks[key])
            elif kind == "host" and (listed := _RANK_SET.search(key)):
                found["host"], found["ranks"] = key[:listed.start()], _unfold(listed[1])
            else:
                found[kind] = key
            sources += _split(group, here, found, depth + 1)
        return sources
    return [Source(join_wrapped(lines), stripped=notes, **known)]


_RANK_SET = re.compile(r"\{([\d.,\s-]+)\}$")


def _unfold(text: str) -> tuple[int, ...]:
    """`18..19,49` (or `18-19,49`) -> (18, 19, 49); () when it is no rank set."""
    try:
        return tuple(parse_ranks(text.replace("..", "-").replace(" ", "")))
    except ValueError:
        return ()


def _tp_rank(actor: str) -> re.Match | None:
    return None if _OTHER_INDEX.search(actor) else _TP_RANK.search(actor)


_PP_INDEX = re.compile(r"(?:^|[_\W])PP(\d+)(?![\d])", re.I)


def ranks_from_names(names: list[str]) -> list[int | None]:
    """The rank each process name gives by its tensor-parallel index (py-spy's `Process 181: sglang::scheduler_TP3`,
    `scheduler_DP1_TP3` where data-parallel attention numbers TP ranks across the DP groups): that index is the rank
    when the names that carry one all differ by it and none is in a later pipeline stage (`PP1`: its TP index
    repeats the first stage's). Else none: reading order stays."""
    if any((pp := _PP_INDEX.search(name)) and int(pp[1]) for name in names):
        return [None] * len(names)
    found = [int(tp[1]) if (tp := _TP_RANK.search(name)) else None for name in names]
    indices = [r for r in found if r is not None]
    return found if indices and len(set(indices)) == len(indices) else [None] * len(names)


def _continues(previous: str, line: str) -> bool:
    """An unprefixed line belongs to the prefixed line before it: a frame (a watchdog prints a stack's frames
    without the prefix of its first line), or the rest of a line a terminal cut (the cut line is long)."""
    return bool(_FRAMEISH.match(line)) or _open(previous) or (len(previous.rstrip()) >= 60 and not line[:1].isspace())


# A frame line's start and its whole, in the formats people paste (py-spy's `name (file:line)`, faulthandler's
# `File "f", line N in name`, a traceback's `File "f", line N, in name`)
_STARTS = re.compile(r'^\s*(?:File "|Thread |Process |Python v|Current thread |Traceback |#\d+ |\S+ \()')
_PYSPY_OPEN = re.compile(r"^\S+ \([^()\s]*$")  # py-spy's `name (file:line)` cut inside the parentheses
_RICH_OPEN = re.compile(r"\.py:\d+ in$")  # rich's traceback header, its function name on the next line
_WHOLE = re.compile(r'^\s*File ".*", line \d+,? in \S+\s*$|^\s*\S.* \([^()]*\)\s*$')


def _open(line: str) -> bool:
    """A frame line cut before its end: `File "...` without its `in name`, a rich header without its name, or a
    `(` left open."""
    stripped = line.strip()
    if _RICH_OPEN.search(stripped):
        return True
    if stripped.startswith('File "'):
        return not _WHOLE.match(line)
    return bool(_PYSPY_OPEN.match(stripped))


_NAME_REST = re.compile(r"[\w.<>]+")


def _wrap_width(lines: list[str]) -> int | None:
    """The column a collector cut lines at: the longest length without trailing padding, shared by several
    lines of 60 or more (a terminal pads lines with spaces; a cut line reaches the edge)."""
    lengths = Counter(len(line.rstrip()) for line in lines if len(line.rstrip()) >= 60)
    if not lengths:
        return None
    width = max(lengths)
    return width if lengths[width] >= 2 else None


def _glue(line: str, following: str) -> str:
    """Two pieces of one cut line: padding after the cut dropped (one space may be the text's own), a rich
    traceback's header and the function name it pushed to the next line joined by a space."""
    head = line.rstrip() if len(line) - len(line.rstrip()) > 1 else line
    if _RICH_OPEN.search(head):
        return head.rstrip() + " " + following.strip()
    return head + following.rstrip()


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
            cut = width is not None and len(line.rstrip()) == width and len(following) - len(following.lstrip()) <= 1 \
                and not _WHOLE.match(following) and bool(_WHOLE.match(_glue(line, following))) \
                and (not _WHOLE.match(line) or bool(_NAME_REST.fullmatch(following.strip())))
            # (a whole frame line of the cut's length goes on only with the rest of a name: `thread.join()` after
            # `File "...", line 75, in parallel_apply` is the source line an unindented traceback prints, not a cut)
            if not (_open(line) or cut):
                break
            line = _glue(line, following)
            i += 1
            joins += 1
        out.append(line)
        i += 1
    return out
