"""A streaming safetensors writer: tensors go to disk one at a time, with no pickle and no second copy.

`safetensors.torch.save_file` wants every tensor at once and refuses tensors that share storage, which is the
normal state of a DeepSpeed model (ZeRO points parameters into flat buffers). The format is simple enough to
write directly (https://huggingface.co/docs/safetensors, "Format"): an 8-byte little-endian header length, a
JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}} padded with spaces to 8 bytes, then
the raw bytes of each tensor back to back. Files are read back memory-mapped (`weightdiff.read.values`).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

DTYPE_CODES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL", torch.complex64: "C64",
}
for _name, _code in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"), ("uint16", "U16"),
                     ("uint32", "U32"), ("uint64", "U64")):
    if hasattr(torch, _name):
        DTYPE_CODES[getattr(torch, _name)] = _code


def dtype_code(dtype: torch.dtype) -> str:
    try:
        return DTYPE_CODES[dtype]
    except KeyError:
        raise ValueError(f"safetensors cannot store dtype {dtype}") from None


def write_safetensors(path: Path, entries: Iterable[tuple[str, torch.Tensor]], *,
                      metadata: dict[str, str] | None = None,
                      on_bytes: Callable[[str, memoryview], None] | None = None) -> int:
    """Write (name, tensor) pairs to `path` atomically (temp file + rename); return the file's size.

    Tensors may live on any device: each is brought to the host only when its turn comes, so a GPU rank never
    holds more than one extra host copy. `on_bytes(name, data)` sees each tensor's raw bytes as they are
    written, so a caller can hash them without reading them twice.
    """
    from weightdiff.fingerprint import host_contiguous, raw_bytes

    items = list(entries)
    header: dict[str, object] = {}
    offset = 0
    for name, t in items:
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": dtype_code(t.dtype), "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(encoded)))
            f.write(encoded)
            for name, t in items:
                data = raw_bytes(host_contiguous(t))
                if on_bytes is not None:
                    on_bytes(name, data)
                f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return 8 + len(encoded) + offset
