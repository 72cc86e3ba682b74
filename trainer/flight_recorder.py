"""PyTorch's Flight Recorder for the trainer: `--flight-recorder DIR` records every rank's collectives and,
when an exception leaves training (a collective that timed out, which is how a hang ends), dumps them.

torch keeps a per-process ring buffer of the last N collectives it issued (NCCL's; gloo's too, but not gloo's
send/recv) when TORCH_FR_BUFFER_SIZE=N is set before the first process group is created. `enable()` sets it
(`--fr-buffer-size`, else the user's value, else 2000) and, unless set, TORCH_FR_DUMP_TEMP_FILE=DIR/fr_rank_
(torch's own per-rank prefix, used by NCCL's watchdog dumps). On the way out of an exception,
`dump_on_error()` writes:

    DIR/fr_rank_<global rank>       the pickle bytes exactly as torch._C._distributed_c10d._dump_fr_trace returns
    DIR/fr_rank_<global rank>.json  torch._C._distributed_c10d._dump_fr_trace_json (same entries, no stacks)

each atomically (a temporary file, then os.replace), and lets the exception go on unchanged. Both torch calls
are private APIs: when they are missing, rank 0 says so at start in one `Warning:` line; when a dump fails,
that rank prints one `Warning:` line; never a traceback.
Read a dump with hangdoctor (or `pickle.load` for a file you wrote yourself: a pickle can run code).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

DEFAULT_BUFFER_SIZE = 2000
PREFIX = "fr_rank_"


def _c10d():
    import torch._C._distributed_c10d as c10d

    return c10d


def available() -> bool:
    c10d = _c10d()
    return hasattr(c10d, "_dump_fr_trace") and hasattr(c10d, "_dump_fr_trace_json")


def _warn(message: str) -> None:
    print(f"Warning: {message}", file=sys.stderr, flush=True)


def enable(folder: str | Path, *, buffer_size: int = 0, rank: int = 0) -> None:
    """Call before the first process group exists. buffer_size 0: TORCH_FR_BUFFER_SIZE if set, else 2000."""
    if buffer_size:
        os.environ["TORCH_FR_BUFFER_SIZE"] = str(buffer_size)
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", str(DEFAULT_BUFFER_SIZE))
    os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE", str(Path(folder) / PREFIX))
    Path(folder).mkdir(parents=True, exist_ok=True)
    if rank == 0 and not available():
        _warn("this torch has no torch._C._distributed_c10d._dump_fr_trace (a private API): "
              "--flight-recorder will write no dumps")


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def dump(folder: str | Path, rank: int) -> list[Path]:
    """Write this rank's dump (pickle and JSON) into folder; return the files written. Raises on failure."""
    c10d = _c10d()
    pickled = c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=True)
    # Keywords: the JSON call's second positional argument is onlyActive, not includeStackTraces.
    as_json = c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    base = Path(folder) / f"{PREFIX}{rank}"
    json_path = base.with_name(base.name + ".json")
    _write_atomically(base, pickled)
    _write_atomically(json_path, as_json)
    return [base, json_path]


@contextlib.contextmanager
def dump_on_error(folder: str | Path | None, rank: int) -> Iterator[None]:
    """On any exception inside the block, dump this rank's Flight Recorder, then re-raise it unchanged."""
    try:
        yield
    except BaseException:
        if folder and available():  # else enable() has said so once
            try:
                dump(folder, rank)
            except Exception as err:  # e.g. the private API changed: say so, keep the original error
                reason = " ".join(str(err).split())[:200]
                _warn(f"rank {rank}: no Flight Recorder dump ({type(err).__name__}: {reason})")
        raise
