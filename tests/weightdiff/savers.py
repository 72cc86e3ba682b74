"""What the scripts that write real checkpoints for weightdiff's tests share (dcp_save.py, mcore_save.py): their
gloo processes on CPU, and the fixture side that runs one, bounded, into a folder."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import REPO, child_env, run_bounded


def _gloo_rank(rank: int, work: Callable[..., None], world: int, port: int, args: tuple) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    work(rank, *args)
    dist.barrier()
    dist.destroy_process_group()


def spawn_gloo(work: Callable[..., None], world: int, *args: Any) -> None:
    """`work(rank, *args)` in `world` processes, each in one gloo process group (a free local port)."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_gloo_rank, args=(work, world, port, args), nprocs=world)


def run_saver(script: str, out: Path, *, timeout: float) -> Path:
    """Run tests/weightdiff/SCRIPT OUT (bounded: stacks dumped on a hang); OUT once it wrote OUT/full.pt."""
    done = run_bounded([sys.executable, str(REPO / "tests" / "weightdiff" / script), str(out)], timeout=timeout,
                       env=child_env(), cwd=REPO)
    assert done.returncode == 0 and (out / "full.pt").exists(), done.output[-4000:]
    return out
