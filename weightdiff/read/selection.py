"""What a path given on the command line selects: the rank dumps of one moment (sources.py finds them, per format)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from weightdiff.records import RankDump

# the formats read as one whole-model record (read/formats.py reads them)
WHOLE_KINDS = ("torch-save", "safetensors", "dcp", "universal", "megatron-torch-dist")


@dataclass
class Selection:
    """The dumps of one folder chosen for a comparison or a check, keyed by (pp, tp, dp)."""

    path: Path
    kind: str  # "dumps", "deepspeed-checkpoint", or a whole-model kind: "torch-save", "safetensors", "dcp"
    iteration: int | None
    tag: str | None
    dumps: dict[tuple[int, int, int], RankDump]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    iterations: list[int] = field(default_factory=list)  # every iteration available with this tag

    @property
    def whole(self) -> bool:
        return self.kind in WHOLE_KINDS
