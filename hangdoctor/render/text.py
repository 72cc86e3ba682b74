"""Frame and stack text shared by the renderers: readable native names, runs of recursion folded."""

from __future__ import annotations

import re

from hangdoctor.analysis.tree import TreeNode, chains
from hangdoctor.model import Frame

_TEMPLATE = re.compile(r"<[^<>]*>")


def short_name(name: str, limit: int = 90) -> str:
    """C++ names without template arguments ("pybind11::cpp_function::initialize<...>" -> "...initialize<…>")."""
    previous = None
    while previous != name and len(name) > limit:
        previous, name = name, _TEMPLATE.sub("<…>", name)
    return name if len(name) <= limit else name[: limit - 1] + "…"


def frame_text(frame: Frame, limit: int = 90) -> str:
    if not frame.file:  # a marker such as "thread watchdog" (--all-threads), not a code location
        return short_name(frame.name, limit)
    where = f"{frame.file}:{frame.line}" if frame.line else frame.file
    return f"{short_name(frame.name, limit)} ({where})"


def runs(frames: list[Frame]) -> list[tuple[Frame, int]]:
    """Consecutive repeats folded: recursion shows as one frame with a count."""
    out: list[tuple[Frame, int]] = []
    for frame in frames:
        if out and out[-1][0] == frame:
            out[-1] = (frame, out[-1][1] + 1)
        else:
            out.append((frame, 1))
    return out


def run_lines(frames: list[Frame], *, keep_head: int = 2, keep_tail: int = 4, limit: int = 90,
              pinned: set[Frame] | None = None) -> list[str]:
    """Lines for a list of frames (outermost first): repeats folded, long middles elided except `pinned`
    frames (e.g. the caller of a collective), which always show."""
    folded = runs(frames)
    keep = set(range(min(keep_head, len(folded)))) | set(range(max(0, len(folded) - keep_tail), len(folded)))
    keep |= {i for i, (frame, _) in enumerate(folded) if pinned and frame in pinned}
    lines, hidden = [], 0
    for i, (frame, count) in enumerate(folded):
        if i not in keep:
            hidden += 1
            continue
        if hidden:
            lines.append(f"… {hidden} more frame{'s' if hidden > 1 else ''} …")
            hidden = 0
        lines.append(frame_text(frame, limit) + (f" ×{count}" if count > 1 else ""))
    if hidden:
        lines.append(f"… {hidden} more frame{'s' if hidden > 1 else ''} …")
    return lines


def pinned_frames(classes, ends: list[int]) -> set[Frame]:
    """The frames worth showing in a box where `ends` stop: each class's wait call and its caller."""
    ending = set(ends)
    pins = set()
    for cls in classes:
        if cls.wait is not None and ending and cls.ranks[0] in ending:
            pins.add(cls.wait.call)
            if cls.wait.caller is not None:
                pins.add(cls.wait.caller)
    return pins


def box_frames(node: TreeNode) -> tuple[list[Frame], TreeNode]:
    """The frames of the box that starts at `node` (its single-child chain) and the box's last node."""
    chain = chains(node)
    return [n.frame for n in chain if n.frame is not None], chain[-1]


def stack_lines(stack: tuple[Frame, ...], *, innermost: int = 12, limit: int = 100) -> list[str]:
    """A class's stack for its table: innermost frames first, repeats folded, the outer rest counted."""
    folded = runs(list(stack))
    lines = [frame_text(f, limit) + (f" ×{n}" if n > 1 else "") for f, n in folded[:innermost]]
    if len(folded) > innermost:
        outer = len(folded) - innermost
        lines.append(f"… {outer} outer frame{'s' if outer > 1 else ''}")
    return lines
