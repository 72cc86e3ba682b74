"""Who a traced process is: its rank, local rank, host and pid, read once from the launcher's environment.

The launcher's variables are read by topology.launcher (the one table of them: torchrun, srun, MPI). The identity is
written into every trace file's header, so no later step re-derives it from file names.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from hangdoctor.topology.launcher import launched_rank


@dataclass(frozen=True)
class RankIdentity:
    rank: int  # global rank; 0 for a process started without any launcher variable
    local_rank: int  # rank on this host
    world_size: int | None
    host: str
    pid: int
    rank_source: str = "default"  # the variable the rank came from, e.g. "RANK" or "SLURM_PROCID"
    argv: tuple[str, ...] = field(default_factory=tuple)

    def file_name(self, prefix: str, suffix: str) -> str:
        """The seed's per-rank name: trace-{hostname}-{local_rank}-{pid}.txt for prefix "trace", suffix "txt"."""
        return f"{prefix}-{self.host}-{self.local_rank}-{self.pid}.{suffix}"

    @property
    def label(self) -> str:
        return f"rank {self.rank} ({self.host}:{self.pid})"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> RankIdentity:
        return cls(
            rank=int(data["rank"]), local_rank=int(data["local_rank"]),
            world_size=None if data.get("world_size") is None else int(data["world_size"]),
            host=str(data["host"]), pid=int(data["pid"]), rank_source=str(data.get("rank_source", "default")),
            argv=tuple(str(a) for a in data.get("argv", ())),
        )


def current_identity(environ: Mapping[str, str] | None = None) -> RankIdentity:
    launched = launched_rank(os.environ if environ is None else environ)
    return RankIdentity(
        rank=launched.rank if launched.rank is not None else 0,
        local_rank=launched.local_rank if launched.local_rank is not None else 0,
        world_size=launched.world_size,
        host=socket.gethostname(),
        pid=os.getpid(),
        rank_source=launched.rank_var or "default",
        argv=tuple(getattr(sys, "orig_argv", sys.argv)),
    )
