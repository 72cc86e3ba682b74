"""Rank sets as people read them: folded ranges ("0-5,8-13") and parallel coordinates ("pp=1 (all tp, all dp)").

Used by every report that groups ranks: hangdoctor's classes, tracing's `last`, weightdiff's summaries.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from topology.dims import ParallelDims


def fold_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 4, 5, 8, 9] -> "0-5,8-9". Duplicates are ignored; an empty set is ""."""
    ordered = sorted(set(ranks))
    parts = []
    for _, run in itertools.groupby(enumerate(ordered), key=lambda pair: pair[1] - pair[0]):
        values = [v for _, v in run]
        parts.append(str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ",".join(parts)


def parse_ranks(text: str) -> list[int]:
    """"0-5,8,10-11" -> [0, 1, 2, 3, 4, 5, 8, 10, 11]. Raises ValueError naming the bad piece."""
    result: set[int] = set()
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        lo, sep, hi = piece.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"bad rank range {piece!r} in {text!r}; expected forms like 0-5,8") from None
        if first < 0 or last < first:
            raise ValueError(f"bad rank range {piece!r} in {text!r}; expected forms like 0-5,8")
        result.update(range(first, last + 1))
    return sorted(result)


def _box_label(dims: ParallelDims, values: dict[str, set[int]]) -> str:
    fixed = [
        f"{axis}={fold_ranks(values[axis])}"
        for axis in ("pp", "dp", "tp")
        if len(values[axis]) < dims.size(axis)
    ]
    full = [f"all {axis}" for axis in ("tp", "dp", "pp") if len(values[axis]) == dims.size(axis) > 1]
    if not fixed:
        return "all ranks"
    text = " ".join(fixed)
    return f"{text} ({', '.join(full)})" if full else text


def describe_ranks(ranks: Iterable[int], dims: ParallelDims | None) -> str:
    """Say where a set of ranks sits, e.g. "pp=1 (all tp, all dp)" or "pp=0 dp=1 tp=0-1; pp=1 dp=0 tp=0".

    The set is split greedily into boxes (products of per-axis value sets), largest first, so a set that is
    one box reads as one phrase. Without a topology, or for ranks outside it, the folded ranks are returned.
    """
    remaining = set(ranks)
    if dims is None or not remaining or max(remaining) >= dims.world_size or min(remaining) < 0:
        return f"ranks {fold_ranks(remaining)}" if remaining else "no ranks"
    if remaining == set(range(dims.world_size)):
        return "all ranks"
    phrases = []
    while remaining:
        box = _largest_box(dims, remaining)
        phrases.append(_box_label(dims, box))
        covered = {
            dims.rank(pp=p, dp=d, tp=t) for p in box["pp"] for d in box["dp"] for t in box["tp"]
        }
        remaining -= covered
    return "; ".join(phrases)


def _largest_box(dims: ParallelDims, ranks: set[int]) -> dict[str, set[int]]:
    """Grow a box from the smallest rank: along each axis, keep only values for which the whole slab is present."""
    coords = {r: dims.coords(r) for r in ranks}
    seed = coords[min(ranks)]
    box = {"pp": {seed.pp}, "dp": {seed.dp}, "tp": {seed.tp}}
    # Try the axes in an order that prefers merging the fastest ones (tp) first, then dp, then pp.
    for axis in ("tp", "dp", "pp"):
        for value in range(dims.size(axis)):
            if value in box[axis]:
                continue
            trial = {a: ({value} if a == axis else box[a]) for a in box}
            slab = {dims.rank(pp=p, dp=d, tp=t) for p in trial["pp"] for d in trial["dp"] for t in trial["tp"]}
            if slab <= ranks:
                box[axis].add(value)
    return box
