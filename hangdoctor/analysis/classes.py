"""Equivalence classes: ranks with the same status and the same main-thread stack, largest first.

The largest class of ranks that answered is the majority; every other class is a minority. Each class
carries where its ranks sit in the parallel grid ("pp=1 (all tp, all dp)") and on which nodes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from hangdoctor.analysis.ranks import PROGRESSING, STUCK, UNKNOWN, RankView
from hangdoctor.analysis.waits import Wait
from hangdoctor.identity import natural_key
from hangdoctor.model import OK, Stack
from hangdoctor.topology import ParallelDims, describe_ranks, fold_ranks


@dataclass
class RankClass:
    id: int  # 1 = the largest
    ranks: list[int]
    status: str
    stack: Stack
    wait: Wait | None
    position: str  # the wait's label, or "outside any collective, in f (file)"
    where: str  # coordinates, e.g. "pp=1 (all tp, all dp)"
    hosts: list[str]
    progress: dict[str, int] = field(default_factory=dict)  # stuck / progressing / unknown -> count
    states: dict[str, int] = field(default_factory=dict)  # /proc state letter -> count
    cpu_percent: float | None = None  # mean over the class
    majority: bool = False

    @property
    def folded(self) -> str:
        return fold_ranks(self.ranks)


def where(ranks: list[int], dims: ParallelDims | None) -> str:
    """Coordinates of a rank set, or its folded ranks when the topology is unknown.

    Memoised: the same sets come back for places, classes, suspects and hints, and describing a large
    irregular set costs tenths of a second at 16,384 ranks."""
    if dims is None:
        return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {fold_ranks(ranks)}"
    return _describe(tuple(ranks), dims)


@lru_cache(maxsize=512)
def _describe(ranks: tuple[int, ...], dims: ParallelDims) -> str:
    return describe_ranks(ranks, dims)


def build_classes(views: list[RankView], dims: ParallelDims | None) -> list[RankClass]:
    groups: dict[tuple, list[RankView]] = {}
    for view in views:
        groups.setdefault((view.status, id(view.stack)), []).append(view)
    classes = []
    for (status, _), members in groups.items():
        first = members[0]
        ranks = sorted(v.rank for v in members)
        cpus = [v.cpu_percent for v in members if v.cpu_percent is not None]
        classes.append(RankClass(
            id=0, ranks=ranks, status=status, stack=first.stack, wait=first.wait, position=first.position,
            where=where(ranks, dims), hosts=sorted({v.identity.host for v in members}, key=natural_key),
            progress=dict(Counter(v.progress for v in members)), states=dict(Counter(v.state for v in members if v.state)),
            cpu_percent=round(sum(cpus) / len(cpus), 1) if cpus else None,
        ))
    classes.sort(key=lambda c: (c.status != OK, -len(c.ranks), c.ranks[0]))
    for number, cls in enumerate(classes, start=1):
        cls.id = number
    answered = [c for c in classes if c.status == OK]
    if answered and (len(answered) == 1 or len(answered[0].ranks) > len(answered[1].ranks)):
        answered[0].majority = True  # a tie has no majority: either side may be the odd one
    return classes


def progress_word(progress: dict[str, int]) -> str:
    """"stuck", "progressing", "unknown", or a mix such as "3 stuck, 1 progressing"."""
    present = [(k, progress.get(k, 0)) for k in (STUCK, PROGRESSING, UNKNOWN) if progress.get(k)]
    if len(present) == 1:
        return present[0][0]
    return ", ".join(f"{n} {k}" for k, n in present)
