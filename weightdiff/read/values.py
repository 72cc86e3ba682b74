"""Stream one rank's tensor values from wherever its RankDump says they are.

- A dump: a safetensors file, first checked against its sidecar (`weightdiff.read.tensor_file`: a regular
  file of the right size, each tensor's shape and dtype), then opened with `safe_open` (memory-mapped; a
  tensor is read only when asked for, and a large one in row blocks through `get_slice`).
- A DeepSpeed checkpoint: `CheckpointValues` from `weightdiff.read.checkpoint`, whose state dicts are loaded
  with `torch.load(weights_only=True, mmap=True)`.

Both offer the same small interface (`Values`). Any failure to read becomes `BadInput`, one line naming the
file and the tensor; a tensor that does not match its sidecar fails alone, the others are still read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import torch

from weightdiff.errors import BadInput
from weightdiff.read.files import one_line
from weightdiff.read.tensor_file import verify_tensor_file
from weightdiff.records import RankDump

BLOCK_BYTES = 32 << 20  # large tensors are read and compared in row blocks of about this size


class Values(Protocol):
    def names(self) -> set[str]: ...
    def rows(self, name: str, start: int, stop: int) -> torch.Tensor: ...
    def get(self, name: str) -> torch.Tensor: ...
    def close(self) -> None: ...


class SafetensorsValues:
    def __init__(self, path: Path, expected: dict):
        from safetensors import safe_open

        self.path = path
        self._mismatched = verify_tensor_file(path, expected)
        try:
            self._file = safe_open(str(path), framework="pt")
            self._names = set(self._file.keys())
        except Exception as e:  # safetensors raises its own SafetensorError, or OSError
            raise BadInput(f"{path}: not a readable safetensors file ({one_line(e)})") from None

    def names(self) -> set[str]:
        return self._names

    def _check(self, name: str) -> None:
        if name in self._mismatched:
            raise BadInput(self._mismatched[name])

    def get(self, name: str) -> torch.Tensor:
        self._check(name)
        try:
            return self._file.get_tensor(name)
        except Exception as e:
            raise BadInput(f"{self.path}: cannot read tensor {name} ({one_line(e)})") from None

    def rows(self, name: str, start: int, stop: int) -> torch.Tensor:
        self._check(name)
        try:
            return self._file.get_slice(name)[start:stop]
        except Exception as e:
            raise BadInput(f"{self.path}: cannot read tensor {name} rows {start}:{stop} ({one_line(e)})") from None

    def close(self) -> None:
        self._file = None


def row_blocks(shape: tuple[int, ...], itemsize: int) -> list[tuple[int, int]] | None:
    """Row ranges of about BLOCK_BYTES along the first dimension; None when one read is enough."""
    if len(shape) < 1:
        return None
    row_bytes = itemsize
    for s in shape[1:]:
        row_bytes *= s
    step = max(1, BLOCK_BYTES // max(1, row_bytes))
    if shape[0] <= step:
        return None
    return [(start, min(start + step, shape[0])) for start in range(0, shape[0], step)]


def iter_pieces(values: Values, name: str, blocks: list[tuple[int, int]] | None) -> Iterator[torch.Tensor]:
    if blocks is None:
        yield values.get(name)
        return
    for start, stop in blocks:
        yield values.rows(name, start, stop)


@contextmanager
def open_values(dump: RankDump) -> Iterator[Values]:
    """Open a RankDump's values (its `tensor_source`) for reading; raises BadInput when they cannot be read."""
    source = dump.tensor_source
    if source is None:
        raise BadInput(f"{dump.source}: no tensor values: this dump holds fingerprints only (mode=fingerprint)")
    values = SafetensorsValues(source, dump.tensors) if isinstance(source, Path) else source.open()
    try:
        yield values
    finally:
        values.close()
