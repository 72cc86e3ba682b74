"""Rank sets as people read them: folded ranges ("0-5,8-13") and parallel coordinates ("pp=1 (all tp, all dp)").

Used by every report that groups ranks: hangdoctor's classes, tracing's `last`, weightdiff's summaries.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from hangdoctor.clicore.argtypes import MAX_RANKS
from hangdoctor.topology.dims import ParallelDims


def fold_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 4, 5, 8, 9] -> "0-5,8-9". Duplicates are ignored; an empty set is ""."""
    ordered = sorted(set(ranks))
    if not ordered:
        return ""
    parts = []
    first = last = ordered[0]
    for value in ordered[1:]:  # a plain loop: rank sets of 100k members are folded here
        if value != last + 1:
            parts.append(str(first) if first == last else f"{first}-{last}")
            first = value
        last = value
    parts.append(str(first) if first == last else f"{first}-{last}")
    return ",".join(parts)


def parse_ranks(text: str) -> list[int]:
    """"0-5,8,10-11" -> [0, 1, 2, 3, 4, 5, 8, 10, 11]. Raises ValueError naming the bad piece."""
    spans: list[tuple[int, int]] = []  # merged before expanding: 5,000 pieces of one range are one range
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
        if last >= MAX_RANKS:  # 0-99999999999 would take minutes and gigabytes to expand
            raise ValueError(f"rank range {piece!r} in {text!r} goes past rank {MAX_RANKS - 1:,}")
        spans.append((first, last))
    result: list[int] = []
    for first, last in sorted(spans):
        start = max(first, result[-1] + 1) if result else first
        result.extend(range(start, last + 1))
    return result


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


MAX_PHRASES = 4  # past this many boxes a coordinate description is no longer easier to read than the ranks
MAX_DESCRIBED = 1 << 18  # larger sets are folded: growing boxes costs O(axis size) per box (seconds at millions)


def describe_ranks(ranks: Iterable[int], dims: ParallelDims | None) -> str:
    """Say where a set of ranks sits, e.g. "pp=1 (all tp, all dp)" or "pp=0 dp=1 tp=0-1; pp=1 dp=0 tp=0".

    The set is split greedily into boxes (products of per-axis value sets), each grown from the smallest rank
    left, so a set that is one box reads as one phrase. A set that needs more than MAX_PHRASES boxes, a set
    outside the topology, no topology at all, or more than MAX_DESCRIBED ranks gives the folded ranks instead.
    Cost: O(MAX_PHRASES x ranks).
    """
    chosen = set(ranks)
    if dims is None or not chosen or max(chosen) >= dims.world_size or min(chosen) < 0:
        return f"ranks {fold_ranks(chosen)}" if chosen else "no ranks"
    if len(chosen) == dims.world_size:
        return "all ranks"
    if len(chosen) > MAX_DESCRIBED:
        return f"ranks {fold_ranks(chosen)}"
    (sp, np_), (sd, nd), (st, nt) = ((dims.stride(a), dims.size(a)) for a in ("pp", "dp", "tp"))
    remaining = {r: (r // sp % np_, r // sd % nd, r // st % nt) for r in chosen}  # rank -> (pp, dp, tp), once
    present = set(remaining.values())
    phrases = []
    while remaining and len(phrases) < MAX_PHRASES:
        box = _largest_box(dims, present, remaining[min(remaining)])
        phrases.append(_box_label(dims, box))
        covered = set(itertools.product(box["pp"], box["dp"], box["tp"]))
        present -= covered
        remaining = {r: point for r, point in remaining.items() if point not in covered}
    return f"ranks {fold_ranks(chosen)}" if remaining else "; ".join(phrases)


def _largest_box(dims: ParallelDims, present: set[tuple[int, int, int]], seed: tuple[int, int, int]) -> dict[str, set[int]]:
    """Grow a box from `seed`: along each axis, add the values for which the whole slab is present."""
    box = {"pp": {seed[0]}, "dp": {seed[1]}, "tp": {seed[2]}}
    # Merge the fastest axis (tp) first, then dp, then pp: the order in which neighbouring ranks differ.
    for axis in ("tp", "dp", "pp"):
        for value in range(dims.size(axis)):
            if value in box[axis]:
                continue
            trial = {a: ({value} if a == axis else box[a]) for a in box}
            if all(point in present for point in itertools.product(trial["pp"], trial["dp"], trial["tp"])):
                box[axis].add(value)
    return box
