"""A tensor-parallel shard compared with its part of a whole-model tensor (a TP=2 checkpoint against its HF
export, or a whole torch.save of the same model).

Megatron-style tensor parallelism splits a weight into tp_degree equal parts along one dimension: column-
parallel layers (qkv, fc1, the vocabulary embedding and head) along dim 0, row-parallel layers (proj, fc2)
along dim 1; tp rank t holds part t. Which dimension is read from the shapes themselves: the one dimension where
the whole tensor is tp_degree times the shard (the whole shape is known, so there is no ambiguity: a layer
type could only say the same). Anything else (equal shapes: a replicated tensor, compared as it is; a padded
vocabulary; two dimensions that differ) is no shard, and a shape mismatch stays a shape mismatch.

Indices in reports are the whole tensor's, so the place of a difference is the same whichever side is split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ShardSpec:
    dim: int
    start: int
    stop: int
    tp: int
    tp_degree: int

    def whole_index(self, index: list[int] | tuple[int, ...] | None) -> list[int] | None:
        if index is None:
            return None
        index = list(index)
        index[self.dim] += self.start
        return index

    def describe(self) -> str:
        return (f"tp={self.tp}'s shard of {self.tp_degree}: indices {self.start}..{self.stop - 1} of dim {self.dim} "
                "of the whole tensor")


def shard_spec(whole: tuple[int, ...], part: tuple[int, ...], tp: int, tp_degree: int) -> ShardSpec | None:
    """Where `part` (tp rank `tp`'s shape) lies in `whole`, or None when it is not an even tp split of it."""
    if tp_degree <= 1 or len(whole) != len(part) or not 0 <= tp < tp_degree:
        return None
    differ = [d for d, (w, p) in enumerate(zip(whole, part)) if w != p]
    if len(differ) != 1:
        return None
    d = differ[0]
    if part[d] * tp_degree != whole[d]:
        return None
    return ShardSpec(dim=d, start=tp * part[d], stop=(tp + 1) * part[d], tp=tp, tp_degree=tp_degree)


class ShardView:
    """The Values interface over the whole tensor's part that one shard holds (row blocks of that part)."""

    def __init__(self, values: Any, spec: ShardSpec):
        self.values, self.spec = values, spec

    def _cut(self, t: Any) -> Any:
        return t[(slice(None),) * self.spec.dim + (slice(self.spec.start, self.spec.stop),)]

    def get(self, name: str) -> Any:
        return self._cut(self.values.get(name))

    def rows(self, name: str, start: int, stop: int) -> Any:
        if self.spec.dim == 0:
            return self.values.rows(name, self.spec.start + start, self.spec.start + stop)
        return self._cut(self.values.rows(name, start, stop))

    def names(self) -> set[str]:
        return self.values.names()

    def close(self) -> None:
        pass
