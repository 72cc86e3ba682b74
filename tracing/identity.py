"""Who a traced process is: its rank, local rank, host and pid, read once from the launcher's environment.

torchrun sets RANK / LOCAL_RANK / WORLD_SIZE, srun sets SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS, MPI launchers
set their own. The identity is written into every trace file's header, so no later step re-derives it from file
names.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

RANK_VARS = ("RANK", "SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")
WORLD_SIZE_VARS = ("WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE")


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


def _first_int(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[int | None, str | None]:
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value), name
    return None, None


def current_identity(environ: Mapping[str, str] | None = None) -> RankIdentity:
    environ = os.environ if environ is None else environ
    rank, source = _first_int(environ, RANK_VARS)
    local_rank, _ = _first_int(environ, LOCAL_RANK_VARS)
    world_size, _ = _first_int(environ, WORLD_SIZE_VARS)
    return RankIdentity(
        rank=rank if rank is not None else 0,
        local_rank=local_rank if local_rank is not None else 0,
        world_size=world_size,
        host=socket.gethostname(),
        pid=os.getpid(),
        rank_source=source or "default",
        argv=tuple(getattr(sys, "orig_argv", sys.argv)),
    )
