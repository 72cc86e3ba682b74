"""Name a process group by the parallel axes it spans: "pipeline group of dp=1 tp=0", "tensor-parallel group of
pp=0 dp=1", "world". Pure Python; the same coordinates as `ParallelDims.coords` (Megatron's order by default).

The axes a group spans are those whose coordinate varies among its ranks; the others are fixed and name the
group's place in the grid. A group that spans an axis only in part (ranks 0 and 2 of a tp=4 group) is named
after the axes it touches all the same, with its ranks: the name is a description, not a claim that the group
is complete.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoctor.topology.dims import AXES, ParallelDims
from hangdoctor.topology.ranksets import fold_ranks

AXIS_NAMES = {"tp": "tensor-parallel", "pp": "pipeline", "dp": "data-parallel"}


def group_axes(ranks: Iterable[int], dims: ParallelDims) -> tuple[str, ...]:
    """The axes whose coordinate varies within the group, in (tp, pp, dp) order; () for a single rank."""
    world = dims.world_size
    inside = [r for r in ranks if 0 <= r < world]
    spanned = []
    for axis in ("tp", "pp", "dp"):  # arithmetic, not coordinates: thousands of groups of a 100k-rank job
        stride, size = dims.stride(axis), dims.size(axis)
        if len({r // stride % size for r in inside}) > 1:
            spanned.append(axis)
    return tuple(spanned)


def describe_group(ranks: Iterable[int], dims: ParallelDims | None, axes: tuple[str, ...] | None = None) -> str:
    """"pipeline group of dp=1 tp=0 [ranks 1,5]", "world [ranks 0-7]", or "group of ranks 0-3" without a topology.
    `axes`: group_axes(ranks, dims), when the caller has it."""
    ranks = sorted(set(ranks))
    folded = fold_ranks(ranks)
    if dims is None or not ranks or ranks[0] < 0 or ranks[-1] >= dims.world_size:
        return f"group of ranks {folded}"
    axes = group_axes(ranks, dims) if axes is None else axes
    if len(ranks) == dims.world_size:
        return f"world [ranks {folded}]"
    first = dims.coords(ranks[0])
    fixed = " ".join(f"{axis}={getattr(first, axis)}" for axis in ("pp", "dp", "tp") if axis not in axes
                     and getattr(dims, axis) > 1)
    kind = " x ".join(AXIS_NAMES[a] for a in axes) if axes else "single-rank"
    return f"{kind} group{' of ' + fixed if fixed else ''} [ranks {folded}]"


__all__ = ["AXES", "AXIS_NAMES", "describe_group", "group_axes"]
