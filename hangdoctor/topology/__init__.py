"""Parallel topology (pure Python, no torch): ranks <-> (dp, pp, tp), folded rank ranges, readable rank sets."""

from hangdoctor.topology.dims import AXES, DEFAULT_ORDER, ParallelDims, RankCoords, parse_order
from hangdoctor.topology.groups import describe_group, group_axes
from hangdoctor.topology.ranksets import describe_ranks, fold_ranks, parse_ranks

__all__ = [
    "AXES",
    "DEFAULT_ORDER",
    "ParallelDims",
    "RankCoords",
    "describe_group",
    "describe_ranks",
    "fold_ranks",
    "group_axes",
    "parse_order",
    "parse_ranks",
]
