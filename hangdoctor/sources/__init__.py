"""Front ends that run the per-node collector and hand back its node documents:
`local` (given PIDs, a torchrun job on this machine), `slurm_job` (one srun --overlap step per job),
`pdsh` (a hostfile). Each returns a `Gathered`; none of them signals the job's processes."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.model import NodeReport


@dataclass
class CollectOptions:
    """How to sample: the same for every front end."""

    pyspy: str
    samples: int = 1
    interval: float = 1.0
    native: bool = False
    locals: bool = False  # py-spy --locals: arguments and locals of every frame (the peer of a send/recv)
    flight_recorder: bool = False  # fetch Flight Recorder traces from torch's debug worker servers, where they run
    fr_dir: str | None = None  # read the ranks' Flight Recorder dump files in this folder, on each node
    nonblocking: bool = False
    dump_timeout: float = 10.0
    timeout: float = 60.0  # the whole collection, every node included


@dataclass
class Gathered:
    source: str  # e.g. "SLURM job 1234 (4 nodes)"
    docs: list[dict] = field(default_factory=list)  # collector node documents, raw outputs inside
    failed: list[NodeReport] = field(default_factory=list)  # nodes that produced no document, and why
    warnings: list[str] = field(default_factory=list)
