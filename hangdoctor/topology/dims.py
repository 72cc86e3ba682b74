"""The parallel topology: one source of truth for global rank <-> (dp, pp, tp) coordinates.

Pure Python, no torch: the trainer, hangdoctor (on a login node) and weightdiff all use it.

The rank grid is a row-major array whose fastest-varying axis comes first in `order`. The default,
"tp-dp-pp", is Megatron's and DeepSpeed's (`PipeModelDataParallelTopology` with axes pipe, data, model):
tensor-parallel peers are neighbours, so a node holds whole TP groups. With tp=2, dp=2, pp=2:

    rank:  0  1  2  3  4  5  6  7
    tp:    0  1  0  1  0  1  0  1
    dp:    0  0  1  1  0  0  1  1
    pp:    0  0  0  0  1  1  1  1

picotron's `torch.arange(world).view(dp, pp, tp)` is order "tp-pp-dp".
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

AXES = ("tp", "dp", "pp")
DEFAULT_ORDER = "tp-dp-pp"


@dataclass(frozen=True, order=True)
class RankCoords:
    """Where one global rank sits in the grid."""

    rank: int
    dp: int
    pp: int
    tp: int

    def axis(self, name: str) -> int:
        return getattr(self, name)

    def label(self) -> str:
        """The seed's file-name spelling, e.g. "pp1-tp0-dp3-global13"."""
        return f"pp{self.pp}-tp{self.tp}-dp{self.dp}-global{self.rank}"


def parse_order(order: str) -> tuple[str, str, str]:
    """"tp-dp-pp" -> ("tp", "dp", "pp"), fastest-varying axis first. Raises ValueError on anything else."""
    parts = tuple(p.strip() for p in order.replace(",", "-").split("-") if p.strip())
    if sorted(parts) != sorted(AXES):
        raise ValueError(f"parallel order {order!r} must name each of tp, dp, pp exactly once, e.g. 'tp-dp-pp'")
    return parts  # type: ignore[return-value]


@dataclass(frozen=True)
class ParallelDims:
    """Tensor, pipeline and data parallel sizes, and the order in which they tile the global ranks."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    order: str = DEFAULT_ORDER  # fastest-varying axis first (Megatron's convention)
    _axes: tuple[str, str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in AXES:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r}: every parallel size must be a positive integer")
        object.__setattr__(self, "_axes", parse_order(self.order))

    @classmethod
    def from_world(cls, world_size: int, *, tp: int = 1, pp: int = 1, order: str = DEFAULT_ORDER) -> "ParallelDims":
        """Derive dp = world_size / (tp * pp), as Megatron does; the error names every factor."""
        if world_size < 1:
            raise ValueError(f"world size {world_size} must be positive")
        if tp < 1 or pp < 1 or world_size % (tp * pp):
            raise ValueError(
                f"world size {world_size} is not divisible by tp={tp} x pp={pp} = {tp * pp}: "
                f"cannot derive a data-parallel size"
            )
        return cls(tp=tp, pp=pp, dp=world_size // (tp * pp), order=order)

    def check_world(self, world_size: int) -> None:
        if self.world_size != world_size:
            raise ValueError(
                f"tp={self.tp} x pp={self.pp} x dp={self.dp} = {self.world_size} does not match the world size {world_size}"
            )

    @property
    def axes(self) -> tuple[str, str, str]:
        """The axes, fastest-varying first, e.g. ("tp", "dp", "pp")."""
        return self._axes

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    def size(self, axis: str) -> int:
        if axis not in AXES:
            raise ValueError(f"unknown parallel axis {axis!r}; expected one of {', '.join(AXES)}")
        return getattr(self, axis)

    def coords(self, rank: int) -> RankCoords:
        if not 0 <= rank < self.tp * self.pp * self.dp:
            raise ValueError(f"rank {rank} is outside the world of {self.world_size} ranks ({self})")
        (a, b, c), values = self._axes, {}
        rest, values[a] = divmod(rank, getattr(self, a))  # asked once per rank of 100k-rank jobs: no helper calls
        values[c], values[b] = divmod(rest, getattr(self, b))
        return RankCoords(rank=rank, **values)

    def stride(self, axis: str) -> int:
        """How far apart in rank two neighbours along `axis` are: 1 for the fastest-varying axis."""
        result = 1
        for name in self._axes:
            if name == axis:
                return result
            result *= self.size(name)
        raise ValueError(f"unknown parallel axis {axis!r}; expected one of {', '.join(AXES)}")

    def rank(self, *, dp: int, pp: int, tp: int) -> int:
        values = {"dp": dp, "pp": pp, "tp": tp}
        result, stride = 0, 1
        for axis in self._axes:
            if not 0 <= values[axis] < self.size(axis):
                raise ValueError(f"{axis}={values[axis]} is outside 0..{self.size(axis) - 1} ({self})")
            result += values[axis] * stride
            stride *= self.size(axis)
        return result

    def all_coords(self) -> list[RankCoords]:
        return [self.coords(r) for r in range(self.world_size)]

    def ranks_where(self, **fixed: int) -> list[int]:
        """Global ranks whose coordinates match every given axis value, e.g. ranks_where(pp=0)."""
        for axis in fixed:
            self.size(axis)
        return [c.rank for c in self.all_coords() if all(c.axis(a) == v for a, v in fixed.items())]

    def groups(self, axis: str) -> list[list[int]]:
        """The process groups along one axis: ranks that differ only in `axis`, e.g. the DP groups.

        groups("pp") are the pipelines; groups("tp") the tensor-parallel groups. Ordered by the other coordinates.
        """
        others = [a for a in ("pp", "dp", "tp") if a != axis]
        result = []
        for values in itertools.product(*(range(self.size(a)) for a in others)):
            fixed = dict(zip(others, values))
            result.append([self.rank(**fixed, **{axis: i}) for i in range(self.size(axis))])
        return result

    def describe(self) -> str:
        return f"TP={self.tp} PP={self.pp} DP={self.dp} ({self.world_size} ranks, order {'-'.join(self._axes)})"
