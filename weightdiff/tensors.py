"""Stream one rank's tensor values from wherever its RankDump says they are.

- A dump: a safetensors file, opened with `safe_open` (memory-mapped; a tensor is read only when asked for,
  and a large one in row blocks through `get_slice`).
- A DeepSpeed checkpoint: a `CheckpointValues` object from `weightdiff.read_checkpoint`, whose state dicts are
  loaded with `torch.load(weights_only=True)`.

Any failure to read becomes `BadInput` with one line naming the file and the tensor.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import torch

from weightdiff.read_dump import BadInput

BLOCK_BYTES = 64 << 20  # compare large tensors in row blocks of about this size


class Values(Protocol):
    def names(self) -> set[str]: ...
    def get(self, name: str) -> torch.Tensor: ...
    def blocks(self, name: str) -> Iterator[torch.Tensor]: ...


class SafetensorsValues:
    def __init__(self, path: Path):
        from safetensors import safe_open

        self.path = path
        try:
            self._file = safe_open(str(path), framework="pt")
        except Exception as e:  # safetensors raises its own SafetensorError, or OSError
            raise BadInput(f"{path}: not a readable safetensors file ({_one_line(e)})") from None
        self._names = set(self._file.keys())

    def names(self) -> set[str]:
        return self._names

    def get(self, name: str) -> torch.Tensor:
        try:
            return self._file.get_tensor(name)
        except Exception as e:
            raise BadInput(f"{self.path}: cannot read tensor {name} ({_one_line(e)})") from None

    def blocks(self, name: str) -> Iterator[torch.Tensor]:
        """The tensor in row blocks (first dimension) of about BLOCK_BYTES; one block for small tensors."""
        try:
            piece = self._file.get_slice(name)
            shape = piece.get_shape()
        except Exception as e:
            raise BadInput(f"{self.path}: cannot read tensor {name} ({_one_line(e)})") from None
        rows = shape[0] if shape else 1
        row_bytes = max(1, _numel(shape[1:]) * _itemsize(piece.get_dtype()))
        step = max(1, BLOCK_BYTES // row_bytes)
        if not shape or rows <= step:
            yield self.get(name)
            return
        for start in range(0, rows, step):
            try:
                yield piece[start:start + step]
            except Exception as e:
                raise BadInput(f"{self.path}: cannot read tensor {name} rows {start}+ ({_one_line(e)})") from None

    def close(self) -> None:
        self._file = None


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


_ITEMSIZE = {"F64": 8, "I64": 8, "U64": 8, "C64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
             "I16": 2, "U16": 2}


def _itemsize(code: str) -> int:
    return _ITEMSIZE.get(code, 1)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


@contextmanager
def open_values(source: Any) -> Iterator[Values]:
    """Open a RankDump's `tensor_source` for reading values; raises BadInput when it cannot be read."""
    if source is None:
        raise BadInput("no tensor values: this dump holds fingerprints only (mode=fingerprint)")
    if isinstance(source, Path):
        values = SafetensorsValues(source)
        try:
            yield values
        finally:
            values.close()
        return
    yield source.open()
