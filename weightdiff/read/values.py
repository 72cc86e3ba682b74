"""Stream one rank's tensor values from wherever its RankDump says they are, as numpy arrays.

- safetensors (our dumps, HF `model.safetensors` and its shards): the header is checked (a complete file,
  each tensor's dtype, shape and byte range; for a dump also against its sidecar, `weightdiff.read.tensor_file`),
  then the file is memory-mapped read-only and a tensor is a numpy view of its bytes: nothing is read until
  it is compared, a large one row block by row block. No torch.
- anything else (`tensor_source.open()`): DeepSpeed checkpoints, `torch.save` files and DCP folders hand back
  torch tensors, which the comparison turns into the same numpy form (`weightdiff.read.dtypes.as_array`).

All offer the same small interface (`Values`). Any failure to read becomes `BadInput`, one line naming the
file and the tensor; a tensor that does not match its record fails alone, the others are still read.
"""

from __future__ import annotations

import math
import mmap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from weightdiff.errors import BadInput
from weightdiff.read.dtypes import SAFETENSORS, storage_dtype
from weightdiff.read.files import open_regular, why
from weightdiff.read.tensor_file import read_header, verify_tensor_file
from weightdiff.records import RankDump

BLOCK_BYTES = 32 << 20  # large tensors are read and compared in row blocks of about this size


class Values(Protocol):
    """A piece is a numpy array in its storage dtype (see `weightdiff.read.dtypes`) or a torch tensor."""

    def names(self) -> set[str]: ...
    def rows(self, name: str, start: int, stop: int) -> Any: ...
    def get(self, name: str) -> Any: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Located:
    """Where one tensor's bytes are: a safetensors file and the absolute offset of its data."""

    path: Path
    offset: int
    dtype: str  # logical name, e.g. "bfloat16"
    shape: tuple[int, ...]


def locate(path: Path) -> tuple[dict[str, Located], dict[str, str]]:
    """Every tensor of one safetensors file, and name -> one-line problem for entries that cannot be read
    (an unknown dtype, a byte range that does not match dtype and shape). BadInput when the file as a whole
    is unusable (truncated, not safetensors)."""
    return locate_in(path, *read_header(path))


def locate_in(path: Path, header: dict, data_start: int) -> tuple[dict[str, Located], dict[str, str]]:
    """`locate` over a header already read (read_header), for a caller that needs its `__metadata__` too."""
    found, problems = {}, {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = SAFETENSORS[entry["dtype"]]
            shape = tuple(int(s) for s in entry["shape"])
            begin, end = (int(x) for x in entry["data_offsets"])
            if any(s < 0 for s in shape) or end - begin != math.prod(shape) * storage_dtype(dtype).itemsize:
                raise ValueError(f"{end - begin} bytes for shape {list(shape)} of {dtype}")
        except (KeyError, TypeError, ValueError) as e:
            problems[name] = f"{path}: tensor {name} cannot be read (bad header entry: {type(e).__name__}: {e})"
            continue
        found[name] = Located(path, data_start + begin, dtype, shape)
    return found, problems


class SafetensorsValues:
    """Tensors in one or more safetensors files, each file memory-mapped read-only when first needed. Reads of
    different tensors may run in several threads at once (`thread_safe`)."""

    thread_safe = True

    def __init__(self, located: dict[str, Located], problems: dict[str, str] | None = None):
        self._located = located
        self._problems = dict(problems or {})
        self._maps: dict[Path, mmap.mmap] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_dump(cls, path: Path, expected: dict) -> "SafetensorsValues":
        mismatched = verify_tensor_file(path, expected)
        located, problems = locate(path)
        return cls(located, {**problems, **mismatched})

    def names(self) -> set[str]:
        return set(self._located)

    def _map(self, path: Path) -> mmap.mmap:
        with self._lock:
            if path not in self._maps:
                with open_regular(path) as f:
                    try:
                        self._maps[path] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    except (OSError, ValueError) as e:
                        what = why(e) if isinstance(e, OSError) else str(e)
                        raise BadInput(f"{path}: cannot memory-map ({what})") from None
            return self._maps[path]

    def get(self, name: str) -> np.ndarray:
        if name in self._problems:
            raise BadInput(self._problems[name])
        loc = self._located.get(name)
        if loc is None:
            raise BadInput(f"no tensor {name} in the safetensors file(s)")
        dtype = storage_dtype(loc.dtype)
        count = math.prod(loc.shape)
        if count == 0:
            return np.empty(loc.shape, dtype=dtype)
        mapped = self._map(loc.path)
        if loc.offset + count * dtype.itemsize > len(mapped):
            raise BadInput(f"{loc.path}: tensor {name} ends after the end of the file (changed while reading?)")
        return np.frombuffer(mapped, dtype=dtype, count=count, offset=loc.offset).reshape(loc.shape)

    def rows(self, name: str, start: int, stop: int) -> np.ndarray:
        return self.get(name)[start:stop]

    def release(self, name: str) -> None:
        """Drop a compared tensor's pages from this process (MADV_DONTNEED on the whole pages it covers; a later
        read maps them again from the page cache), so that memory stays at about one tensor, not one file."""
        loc = self._located.get(name)
        mapped = self._maps.get(loc.path) if loc is not None else None
        advise = getattr(mmap, "MADV_DONTNEED", None)
        if mapped is None or advise is None:
            return
        size = math.prod(loc.shape) * storage_dtype(loc.dtype).itemsize
        start = -(-loc.offset // mmap.PAGESIZE) * mmap.PAGESIZE
        stop = min((loc.offset + size) // mmap.PAGESIZE * mmap.PAGESIZE, len(mapped))
        if stop > start:
            try:
                mapped.madvise(advise, start, stop - start)
            except (OSError, ValueError):
                pass  # only advice

    def close(self) -> None:
        self._maps.clear()  # numpy views may still hold a map: it is unmapped when the last view goes


@dataclass
class SafetensorsSet:
    """A tensor source made of safetensors files (HF single or sharded): what `open()` reads."""

    located: dict[str, Located]
    problems: dict[str, str]

    def open(self) -> SafetensorsValues:
        return SafetensorsValues(self.located, self.problems)


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


def iter_pieces(values: Values, name: str, blocks: list[tuple[int, int]] | None) -> Iterator[Any]:
    if blocks is None:
        yield values.get(name)
        return
    for start, stop in blocks:
        yield values.rows(name, start, stop)


@contextmanager
def open_values(dump: RankDump) -> Iterator[Values]:
    """Open a RankDump's values (its `tensor_source`) for reading; raises BadInput when they cannot be read."""
    if dump.tensor_source is None:
        raise BadInput(f"{dump.source}: no tensor values: this dump holds fingerprints only (mode=fingerprint)")
    values = open_source(dump.tensor_source, dump.tensors)
    try:
        yield values
    finally:
        values.close()


def open_source(source: Any, expected: dict) -> Values:
    """A dump's tensor file (a Path, checked against `expected`, its sidecar's records) or a reader's source."""
    return SafetensorsValues.for_dump(source, expected) if isinstance(source, Path) else source.open()
