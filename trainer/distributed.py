"""Process identity and torch.distributed start-up, under torchrun or srun, on CPU (gloo) or GPUs (NCCL).

Under srun (or an MPI launcher) its variables are translated to the torchrun ones (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT) before DeepSpeed reads them. The backend follows the device: NCCL when CUDA is
available, else gloo with DeepSpeed's CPU accelerator.

Two of DeepSpeed's CPU traps are avoided here (see shared notes/deepspeed-cpu.md): DS_ACCELERATOR=cpu is set
before deepspeed is imported, and the shared-memory comm op that `deepspeed.comm.torch` JIT-compiles at init
(66-73 s, used only for inference) is replaced by a no-op. The third (fused Adam) is avoided in engine.py.
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
from dataclasses import dataclass
from datetime import timedelta

import torch

from hangdoctor.topology.launcher import launched_rank


@dataclass(frozen=True)
class ProcessIdentity:
    rank: int
    world_size: int
    local_rank: int
    launcher: str  # "torchrun", "srun", "mpi" or "single"


def _first_slurm_host(nodelist: str) -> str:
    try:
        from slurm.nodelist import expand_nodelist  # pure Python, no scontrol needed

        return expand_nodelist(nodelist)[0]
    except ImportError:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=10)
        return out.stdout.split()[0]


def _check_resolves(host: str) -> None:
    """Fail at once, not after the rendezvous timeout, when the first node's name is not a host name."""
    try:
        socket.getaddrinfo(host, None)
    except OSError:
        raise ValueError(
            f"MASTER_ADDR {host} (the first node of the job) does not resolve; export MASTER_ADDR=<its address> "
            f"before srun (e.g. NodeAddr from `scontrol show node {host}`)"
        ) from None


def identify_process(env: dict[str, str] | None = None) -> ProcessIdentity:
    """Read (and, under srun or an MPI launcher, complete) the launcher's environment (topology.launcher reads
    the variables). Mutates os.environ when env is None."""
    env = os.environ if env is None else env
    launched = launched_rank(env)
    if launched.rank is None or launched.world_size is None:
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", "29511")
        return ProcessIdentity(0, 1, 0, "single")
    local_rank = launched.local_rank or 0
    if launched.launcher != "torchrun":  # torch.distributed's env:// rendezvous reads the torchrun names
        env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"] = str(launched.rank), str(launched.world_size), str(local_rank)
    if launched.launcher == "srun":
        if "MASTER_ADDR" not in env:
            env["MASTER_ADDR"] = _first_slurm_host(env.get("SLURM_STEP_NODELIST") or env["SLURM_JOB_NODELIST"])
            _check_resolves(env["MASTER_ADDR"])
        env.setdefault("MASTER_PORT", str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000))
    elif launched.launcher == "mpi" and "MASTER_ADDR" not in env:
        raise ValueError(f"{launched.rank_var} is set but MASTER_ADDR is not: MPI launchers do not set it; export "
                         "MASTER_ADDR=<the first node's address> and MASTER_PORT=<a free port> for every rank")
    return ProcessIdentity(launched.rank, launched.world_size, local_rank, launched.launcher)


def use_cuda() -> bool:
    return torch.cuda.is_available()


def prepare_deepspeed_import() -> None:
    """Call before the first `import deepspeed`."""
    if not use_cuda():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


def init_distributed(timeout_seconds: float, local_rank: int) -> None:
    """Start torch.distributed through DeepSpeed with one timeout for the world AND every later group.

    torch gives groups made by new_group() its module default (30 min for gloo), not the world's timeout; the
    pipe, data and tied groups that DeepSpeed creates are such groups. We set that default first, so that a
    hung broadcast in the pipe group also ends after --pg-timeout.
    """
    import deepspeed

    timeout = timedelta(seconds=timeout_seconds)
    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    c10d.default_pg_timeout = timeout
    if hasattr(c10d, "default_pg_nccl_timeout"):
        c10d.default_pg_nccl_timeout = timeout
    if use_cuda():
        torch.cuda.set_device(local_rank)
    else:
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="nccl" if use_cuda() else "gloo", timeout=timeout, verbose=False)
