"""What `weightdiff check` reports per check: a finding (copies that should be equal and are not, a decayed
norm, a weight that is not its master), and what could not be checked, with why."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Finding:
    kind: str
    name: str
    ranks: list[int]
    where: str
    detail: str
    max_abs: float | None = None
    fraction: float | None = None
    module_class: str = ""
    pairs: list[dict] = field(default_factory=list)  # each differing copy or piece, with its coordinates
    role: str = "parameter"  # or "buffer"


@dataclass
class Unchecked:
    """A tensor (or part of one) that a check could not look at: never counted as equal."""

    kind: str
    name: str
    where: str
    reason: str
