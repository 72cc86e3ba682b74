"""The parallel grid of a set of rank dumps, for phrases like "pp=11 (all tp, all dp)".

Every dump carries its own (rank, dp, pp, tp). The sizes are the largest coordinate + 1 on each axis (or the
sizes a dump declares, when larger), and the rank order is whichever of the six orders maps every dump's
coordinates to its global rank, Megatron's "tp-dp-pp" first. When none does (dumps from two different
layouts), there is no grid and reports fall back to folded rank lists.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from hangdoctor.topology import DEFAULT_ORDER, ParallelDims
from weightdiff.records import RankDump


def infer_dims(dumps: Iterable[RankDump]) -> ParallelDims | None:
    """The grid of these dumps. Checkpoints (one copy per (pp, tp)) count only when nothing else is there;
    their grid then has dp=1, and `placement_rank` places them in it."""
    dumps = list(dumps)
    live = [d for d in dumps if not d.replicated_dp]
    if not live:
        return _checkpoint_dims(dumps)
    dumps = live
    sizes = {axis: 1 + max(d.coords.axis(axis) for d in dumps) for axis in ("tp", "pp", "dp")}
    for d in dumps:
        if d.dims is not None:
            for axis in sizes:
                sizes[axis] = max(sizes[axis], getattr(d.dims, axis))
    orders = [DEFAULT_ORDER] + ["-".join(p) for p in itertools.permutations(("tp", "dp", "pp"))
                                if "-".join(p) != DEFAULT_ORDER]
    for order in orders:
        dims = ParallelDims(tp=sizes["tp"], pp=sizes["pp"], dp=sizes["dp"], order=order)
        try:
            if all(dims.rank(dp=d.coords.dp, pp=d.coords.pp, tp=d.coords.tp) == d.coords.rank for d in dumps):
                return dims
        except ValueError:
            return None
    return None


def _checkpoint_dims(dumps: list[RankDump]) -> ParallelDims | None:
    if not dumps:
        return None
    tp = max(1 + max(d.coords.tp for d in dumps), *(d.dims.tp if d.dims else 1 for d in dumps))
    pp = max(1 + max(d.coords.pp for d in dumps), *(d.dims.pp if d.dims else 1 for d in dumps))
    return ParallelDims(tp=tp, pp=pp, dp=1)


def placement_rank(dump_coords, dims: ParallelDims | None, replicated: bool) -> int:
    """The rank to place a result at in `dims`: its own, or for a checkpoint-only grid, its (pp, tp) slot."""
    if replicated and dims is not None and dims.dp == 1:
        return dims.rank(dp=0, pp=dump_coords.pp, tp=dump_coords.tp)
    return dump_coords.rank


def grid_json(dims: ParallelDims | None, dumps: list[RankDump]) -> dict | None:
    """The grid as reports show it. A checkpoint-only grid places its slices at dp=0, but the run it came
    from had the dp size its files declare (`dp_world_size`): that is the size shown."""
    if dims is None:
        return None
    grid = {"tp": dims.tp, "pp": dims.pp, "dp": dims.dp, "order": "-".join(dims.axes)}
    declared = [d.dims.dp for d in dumps if d.dims is not None]
    if dumps and all(d.replicated_dp for d in dumps) and declared:
        grid["dp"] = max(declared)
    return grid
