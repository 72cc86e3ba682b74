"""A stand-in for `python -m trainer` in sbatch tests (no torch): every rank reports what the script gave it and
proves MASTER_ADDR:MASTER_PORT is a usable rendezvous (rank 0 listens, every other rank connects and sends its
rank; rank 0 writes the ranks it heard). Every wait is bounded."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--run-dir") + 1])
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    record = {
        "rank": rank, "world": world, "local_rank": int(os.environ["SLURM_LOCALID"]),
        "node": os.environ["SLURMD_NODENAME"], "master_addr": addr, "master_port": port,
        "cuda_launch_blocking": os.environ.get("CUDA_LAUNCH_BLOCKING"), "argv": sys.argv[1:],
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    if rank == 0:
        server = socket.create_server((addr, port))
        server.settimeout(30)
        heard = []
        while len(heard) < world - 1:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(10)
                heard.append(int(conn.recv(16).decode()))
        (out / "rendezvous.json").write_text(json.dumps(sorted(heard)))
    else:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((addr, port), timeout=5) as conn:
                    conn.sendall(str(rank).encode())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
