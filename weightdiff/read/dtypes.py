"""Element types without torch: safetensors codes, numpy storage, and exact decoding to float64.

Values travel through weightdiff as numpy arrays in a *storage* dtype plus a *logical* dtype name in torch's
spelling ("bfloat16", "float32"). numpy has no bfloat16 or float8, so those are stored as unsigned integers
of their width and decoded exactly when values are needed:

    bfloat16       uint16   the top half of a float32          -> (bits << 16) viewed as float32
    float8_e5m2    uint8    the top byte of a float16          -> (bits << 8) viewed as float16
    float8_e4m3fn  uint8    1 sign, 4 exponent (bias 7), 3 mantissa bits, no inf, 0x7f/0xff NaN -> a table

Bitwise comparison views any array as the unsigned integer of its width (`bits`), so no decoding is needed
for the common case of equal blocks. A torch tensor (from `torch.load` or DCP) becomes the same pair through
`from_torch`, with no copy for a contiguous CPU tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SAFETENSORS = {  # safetensors dtype code -> logical name (torch spelling, no "torch." prefix)
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U8": "uint8", "U16": "uint16", "U32": "uint32", "U64": "uint64",
    "BOOL": "bool", "C64": "complex64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}
CODES = {name: code for code, name in SAFETENSORS.items()}
_STORED_AS = {"bfloat16": "<u2", "float8_e4m3fn": "u1", "float8_e5m2": "u1", "bool": "?"}
UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: None}


def storage_dtype(name: str) -> np.dtype:
    """The numpy dtype that holds `name`'s bytes; ValueError for a type weightdiff cannot read."""
    try:
        return np.dtype(_STORED_AS[name]) if name in _STORED_AS else np.dtype(name).newbyteorder("<")
    except TypeError:
        raise ValueError(f"element type {name!r} is not supported") from None


def itemsize(name: str, default: int = 4) -> int:
    try:
        return storage_dtype(name).itemsize
    except ValueError:
        return default


def bits(a: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers of the same width (complex: its raw bytes)."""
    unsigned = UNSIGNED.get(a.dtype.itemsize)
    return a.view(unsigned) if unsigned is not None else a.view(np.uint8)


def _e4m3fn_table() -> np.ndarray:
    table = np.empty(256, dtype=np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exp, man = (byte >> 3) & 0xF, byte & 0x7
        if exp == 0xF and man == 0x7:
            table[byte] = np.nan
        elif exp == 0:
            table[byte] = sign * man / 8 * 2.0 ** -6
        else:
            table[byte] = sign * (1 + man / 8) * 2.0 ** (exp - 7)
    return table


_E4M3FN = _e4m3fn_table()


def decode(a: np.ndarray, name: str) -> np.ndarray:
    """Exact values of `a` (stored as `name`) as float64 (complex128 for complex types)."""
    if name == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if name == "float8_e5m2":
        return (a.astype(np.uint16) << 8).view(np.float16).astype(np.float64)
    if name == "float8_e4m3fn":
        return _E4M3FN[a]
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def is_float16ish(name: str) -> bool:
    return name in ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


def from_torch(t: Any) -> tuple[np.ndarray, str]:
    """(storage array, logical name) of a torch tensor, on the host; no copy when it is contiguous on the CPU."""
    import torch

    name = str(t.dtype).removeprefix("torch.")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if name in _STORED_AS and name != "bool":
        width = {1: torch.uint8, 2: torch.int16}[t.element_size()]
        return t.view(width).numpy().view(storage_dtype(name)), name
    return t.numpy(), name


def as_array(piece: Any, name: str | None) -> tuple[np.ndarray, str]:
    """A piece a reader returned (numpy array in storage dtype, or torch tensor) -> (array, logical name)."""
    if isinstance(piece, np.ndarray):
        return piece, name or piece.dtype.name
    return from_torch(piece)


NARROWER = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}  # floats a master copy can round to


def round_to(a: np.ndarray, name: str, target: str) -> np.ndarray:
    """The elements of `a` (stored as float type `name`) rounded to float type `target`, in target's storage
    dtype, as torch's `.to(target)` rounds: to nearest, ties to even, too large to inf. NaN stays a NaN (its
    payload may differ from torch's: compare NaNs as equal, `same_values`). This is what a bfloat16 or float16
    module weight should equal: its fp32 master copy rounded."""
    if name == target:
        return a
    if target == "bfloat16":
        wide = a if name == "float32" else decode(a, name).astype(np.float32)
        bits32 = wide.view(np.uint32)
        rounded = ((bits32 + (np.uint32(0x7FFF) + ((bits32 >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16))
        nan = np.isnan(wide)
        if nan.any():
            rounded = np.where(nan, (bits32 >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0), rounded)
        return rounded.astype(np.uint16)
    with np.errstate(over="ignore"):  # too large for float16: inf, as torch rounds it
        return decode(a, name).astype(storage_dtype(target))


def same_values(a: np.ndarray, b: np.ndarray, name: str) -> np.ndarray:
    """Element-wise equality of two arrays of the same float type `name`: equal bits, or both NaN."""
    equal = bits(a) == bits(b)
    if name in NARROWER and not equal.all():
        equal |= np.isnan(decode(a, name)) & np.isnan(decode(b, name))
    return equal
