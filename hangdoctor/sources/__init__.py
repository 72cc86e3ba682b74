"""Front ends that run the per-node collector and hand back its node documents:
`local` (given PIDs, a torchrun job on this machine), `slurm_job` (one srun --overlap step per job),
`pdsh` (a hostfile). Each returns a `Gathered`; none of them signals the job's processes."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.collector.options import CollectOptions, Selection
from hangdoctor.model import NodeReport

__all__ = ["CollectOptions", "Gathered", "Selection"]  # the collector's contract, as the front ends use it


@dataclass
class Gathered:
    source: str  # e.g. "SLURM job 1234 (4 nodes)"
    docs: list[dict] = field(default_factory=list)  # collector node documents, raw outputs inside
    failed: list[NodeReport] = field(default_factory=list)  # nodes that produced no document, and why
    warnings: list[str] = field(default_factory=list)
