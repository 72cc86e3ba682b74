"""A dump's safetensors file checked against its sidecar, without reading any tensor data.

Read: os.stat (a regular file, its size), the 8-byte header length, and the JSON header (at most
MAX_HEADER_BYTES, safetensors' own limit). Checked:
- the file as a whole: its size is exactly 8 + header length + the end of the last tensor's data, so a
  truncated file (by one byte or to zero), a header length that runs past the end (2^63 - 1) or a header that
  is not JSON is one `BadInput` naming the file;
- each tensor: present, with the shape and dtype its sidecar records. A mismatch is one line per tensor, so
  that tensor is reported and not compared, and the others still are.

`weightdiff check` runs this on every rank (it otherwise reads only sidecars); the values reader runs it
before opening a file.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from weightdiff.errors import BadInput
from weightdiff.read.dtypes import CODES
from weightdiff.read.files import open_regular, read_at
from weightdiff.records import TensorMeta

MAX_HEADER_BYTES = 100 << 20


def read_header(path: Path) -> tuple[dict, int]:
    """(the parsed JSON header, the offset where tensor data starts) of a complete safetensors file; BadInput
    when the file is truncated, longer than its header says, or not safetensors."""
    header, start, end, size = _header(path)
    if size != start + end:
        what = "truncated" if size < start + end else "longer than its header describes"
        raise BadInput(f"{path}: {what} ({size:,} bytes, its header needs {start + end:,})")
    return header, start


def _header(path: Path) -> tuple[dict, int, int, int]:
    """(the parsed JSON header, where the data starts, where it ends relative to that, the file's size)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise BadInput(f"{path}: truncated ({size} bytes; a safetensors file starts with an 8-byte header "
                           "length)")
        (length,) = struct.unpack("<Q", read_at(f, path, 0, 8))
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise BadInput(f"{path}: truncated or not safetensors (header length {length:,} bytes in a file of "
                           f"{size:,} bytes)")
        raw = read_at(f, path, 8, length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise BadInput(f"{path}: not a safetensors file (header is not JSON: {type(e).__name__})") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path}: not a safetensors file (header is not a JSON object)")
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, stop = (int(x) for x in entry["data_offsets"])
            if not 0 <= start <= stop:
                raise ValueError(f"data_offsets {start}..{stop}")
        except (KeyError, TypeError, ValueError) as e:
            raise BadInput(f"{path}: not a safetensors file (bad header entry for {name}: "
                           f"{type(e).__name__})") from None
        end = max(end, stop)
    return header, 8 + length, end, size


def verify_tensor_file(path: Path, expected: dict[str, TensorMeta]) -> dict[str, str]:
    """Raise BadInput when the file cannot be used at all; return tensor name -> one-line problem for each
    tensor of `expected` that the file lacks or holds with another shape or dtype."""
    header, _ = read_header(path)
    codes = CODES
    problems = {}
    for name, meta in expected.items():
        entry = header.get(name)
        if not isinstance(entry, dict):
            problems[name] = f"{path}: tensor {name} is in its sidecar but not in the file; not compared"
            continue
        shape = entry.get("shape")
        if not isinstance(shape, list) or tuple(shape) != tuple(meta.shape):
            problems[name] = (f"{path}: tensor {name} has shape {shape} in the file, {list(meta.shape)} in its "
                              "sidecar; not compared")
        elif entry.get("dtype") != codes.get(meta.dtype, meta.dtype):
            problems[name] = (f"{path}: tensor {name} has dtype {entry.get('dtype')} in the file, {meta.dtype} "
                              f"({codes.get(meta.dtype, '?')}) in its sidecar; not compared")
    return problems
