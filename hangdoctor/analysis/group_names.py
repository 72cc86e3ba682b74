"""Which ranks a collective's process group holds, read from the names the program keeps it under (`--locals`).

A collective called on a subgroup shows the group only as an object (`group: <ProcessGroup at 0x7f..>`), whose
members py-spy cannot read. Its caller keeps the same object under a name (`cp_group`, `dp_group`, `tp_pg`), and
programs built on a device mesh keep their coordinates beside it (`dp_rank: 1`, `cp_rank: 0`). A group named after a
dimension holds the ranks whose *other* coordinates equal this rank's: rank 2 (dp_rank 1, cp_rank 0) waiting in
its `cp_group` waits for the ranks with dp_rank 1, itself and rank 3. Read only where every rank that answered
carries the same coordinate names (a rank without them could be anyone) and the group's dimension is one of them.
"""

from __future__ import annotations

import re

from hangdoctor.analysis.ranks import RankView

_ADDRESS = re.compile(r"\bat (0x[0-9a-fA-F]+|#\d+)>")  # py-spy's, or numbered per process (attach)
_GROUP_ARGS = ("group", "process_group", "pg")
_GROUP_NAME = re.compile(r"^(?:_?)(\w+?)_(?:group|pg|process_group)$")
_COORD_NAME = re.compile(r"^(\w+?)_rank$")
_WHOLE = re.compile(r"^-?\d+$")


def named_group_members(view: RankView, views: list[RankView]) -> tuple[set[int], str] | None:
    """The ranks of the group this rank's collective runs on, and how that was read; None where the locals do not
    say (no group argument, no name for it, no coordinates, or ranks whose coordinates are unknown)."""
    found = _group_dimension(view)
    if found is None:
        return None
    dimension, name = found
    mine = coordinates(view)
    if dimension not in mine or len(mine) < 2:
        return None
    others = {}
    for other in views:
        coords = coordinates(other)
        if set(coords) != set(mine):
            return None  # a rank whose coordinates are not known as this one's: membership unknown
        others[other.rank] = coords
    fixed = {d: v for d, v in mine.items() if d != dimension}
    members = {rank for rank, coords in others.items() if all(coords[d] == v for d, v in fixed.items())}
    if len(members) < 2:
        return None
    said = ", ".join(f"{d}_rank={v}" for d, v in sorted(fixed.items()))
    return members, f"its group is its {name} (in the locals): the ranks with {said}"


def _group_dimension(view: RankView) -> tuple[str, str] | None:
    """(dimension, the name the caller keeps the group under): the innermost frame with a group argument, then an
    outer frame holding the same object under a dimension's name."""
    frames = view.frame_locals or ()
    address, start = None, 0
    for index, values in enumerate(frames):
        if not values:
            continue
        for key in _GROUP_ARGS:
            match = _ADDRESS.search(str(values.get(key, "")))
            if match:
                address, start = match.group(1), index + 1
                break
        if address:
            break
    if address is None:
        return None
    for values in frames[start:]:
        for key, value in (values or {}).items():
            named = _GROUP_NAME.match(key)
            if named and any(m.group(1) == address for m in _ADDRESS.finditer(str(value))):
                return named.group(1), key
    return None


def coordinates(view: RankView) -> dict[str, int]:
    """The rank's coordinates its frames keep (`dp_rank: 1`, `cp_rank: 0`): from the outermost frame that has two
    or more of them (the training loop's), the global `rank` left out."""
    for values in reversed(view.frame_locals or ()):
        coords = {}
        for key, value in (values or {}).items():
            named = _COORD_NAME.match(key)
            if named and named.group(1) not in ("global", "local", "node") and _WHOLE.match(str(value).strip()):
                coords[named.group(1)] = int(str(value).strip())
        if len(coords) >= 2:
            return coords
    return {}
