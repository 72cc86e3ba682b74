"""Compare two tensors element by element, streamed in row blocks, exactly or within a tolerance.

Exact (the default) means equal bytes: each element's bit pattern is compared, so NaN equals the same NaN and
-0.0 differs from 0.0. With a tolerance, elements differ when |a - b| > atol + rtol * |b| (numpy.isclose, the
formula of torch.isclose; NaN equal to NaN). Tensors of different dtypes are compared as float64 values.
Everything runs on numpy arrays (bfloat16 and float8 decoded exactly, `weightdiff.read.dtypes`), so a diff of
safetensors files never imports torch; a torch tensor from a reader is viewed as numpy without a copy.

Besides the counts, the result says where the first and the largest difference are, and whether either side
is a constant 0 or 1 everywhere (a norm's default initialisation). Values that do not have the size their
records say raise BadInput (that tensor is not compared) instead of failing inside numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from weightdiff.errors import BadInput
from weightdiff.read.dtypes import NARROWER, as_array, bits, decode, round_to, same_values
from weightdiff.read.values import Values, iter_pieces, row_blocks

CHUNK = 1 << 18  # elements compared per pass: a pass's temporaries stay in the CPU's cache
SIXTEEN_BIT = ("bfloat16", "float16")


@dataclass(frozen=True)
class Tolerance:
    atol: float = 0.0
    rtol: float = 0.0
    rounded: bool = False  # different float types: round the wider to the narrower, then compare exactly

    @property
    def exact(self) -> bool:
        return self.atol == 0.0 and self.rtol == 0.0

    def describe(self) -> str:
        base = "exact (bitwise)" if self.exact else f"atol={self.atol:g}, rtol={self.rtol:g}"
        return base + (", the wider float type rounded to the narrower" if self.rounded else "")


@dataclass
class ValueDiff:
    numel: int
    n_differ: int = 0
    max_abs: float = 0.0  # largest |a - b| over elements that differ (inf when one side is NaN or inf)
    sum_abs: float = 0.0
    first_index: tuple[int, ...] | None = None
    max_index: tuple[int, ...] | None = None
    a_constant: float | None = None  # 0.0 or 1.0 when every element of a equals it
    b_constant: float | None = None
    a_nonfinite: int = 0  # NaN or inf elements of a (equal bit for bit or not, a model that holds them is broken)
    b_nonfinite: int = 0

    @property
    def mean_abs(self) -> float:
        return self.sum_abs / self.numel if self.numel else 0.0

    @property
    def fraction(self) -> float:
        return self.n_differ / self.numel if self.numel else 0.0


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size) if size else (flat, 0)
        index.append(rest)
    return tuple(reversed(index))


def _differs(a: np.ndarray, da: str, b: np.ndarray, db: str, tol: Tolerance) -> np.ndarray:
    if tol.exact and da == db:
        return ~same_values(a, b, da) if tol.rounded else bits(a) != bits(b)
    af, bf = decode(a, da), decode(b, db)
    if tol.exact:
        return ~((af == bf) | (np.isnan(af) & np.isnan(bf)))
    return ~np.isclose(af, bf, rtol=tol.rtol, atol=tol.atol, equal_nan=True)


def _round_wider(a: np.ndarray, da: str, b: np.ndarray, db: str) -> tuple[np.ndarray, str, np.ndarray, str]:
    """Both sides in the narrower of two float types (the wider rounded as torch's .to() rounds)."""
    if da == db or da not in NARROWER or db not in NARROWER:
        return a, da, b, db
    if NARROWER[da] > NARROWER[db] or (NARROWER[da] == NARROWER[db] and da == "float16"):
        return round_to(a, da, db), db, b, db
    return a, da, round_to(b, db, da), da


def _constant(t: np.ndarray, dtype: str, previous: float | None, first: bool) -> float | None:
    """0.0 or 1.0 when every element of t (and of the blocks before it) equals it: all elements with the bits of
    the first one, checked chunk by chunk (no decoded copy); cheap when the first is neither."""
    if not first and previous is None:
        return None
    head = decode(t[:1], dtype)[0]
    if isinstance(head, complex) or np.iscomplexobj(head) or head not in (0.0, 1.0):
        return None
    if not first and previous != head:
        return None
    pattern, flat = bits(t[:1])[0], bits(t)
    for start in range(0, flat.size, CHUNK):
        if not (flat[start:start + CHUNK] == pattern).all():
            return None
    return float(head)


def _wide(a: np.ndarray, name: str) -> np.ndarray:
    """Values to subtract: 16-bit floats as float32 (their difference is exact there unless the exponents are
    far apart), anything else as float64 (`decode`)."""
    if name == "bfloat16":
        return np.left_shift(a, 16, dtype=np.uint32).view(np.float32)
    if name == "float16":
        return a.astype(np.float32)
    return decode(a, name)


def _gaps(a: np.ndarray, da: str, b: np.ndarray, db: str, mask: np.ndarray, n: int, first: int | None,
          exact: bool) -> tuple[np.ndarray, np.ndarray | None, float, int]:
    """(|a - b| at the differing elements, their flat positions or None for all, largest gap, its index).
    NaN against a number counts as inf.

    Few differences: gather them (one difference: its position is already known). Many: subtract the whole
    chunk (`_wide`); elements that do not differ get 0."""
    if n * 16 < mask.size:
        positions = np.array([first]) if n == 1 and first is not None else np.flatnonzero(mask)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, NaN: counted, not warned about
            gaps = np.nan_to_num(np.abs(decode(a[positions], da) - decode(b[positions], db)), nan=math.inf)
    else:
        positions = None
        if da in SIXTEEN_BIT and db in SIXTEEN_BIT:
            gaps = _wide(a, da)  # a new array: subtracted in place
        else:
            gaps = decode(a, da)  # always a new array (astype copies)
        with np.errstate(invalid="ignore", over="ignore"):
            np.subtract(gaps, _wide(b, db) if gaps.dtype == np.float32 else decode(b, db), out=gaps)
        np.abs(gaps, out=gaps)
        if not exact:
            gaps[~mask] = 0.0  # within the tolerance: not a difference
    where = int(np.argmax(gaps))
    top = float(gaps[where])
    if math.isnan(top):  # argmax stops at the first NaN: NaN vs NaN (equal) or NaN vs a number (inf)
        gaps = np.where(mask, np.nan_to_num(gaps, nan=math.inf), 0.0)
        where = int(np.argmax(gaps))
        top = float(gaps[where])
    return gaps, positions, top, where


def compare_tensor(va: Values, vb: Values, name: str, shape: tuple[int, ...], tol: Tolerance,
                   itemsize: int = 4, dtypes: tuple[str | None, str | None] = (None, None)) -> ValueDiff:
    """Compare tensor `name` of equal `shape` in two sources, reading at most one row block of each at a time.
    `dtypes`: each side's logical element type (torch spelling), needed for numpy pieces of bfloat16/float8."""
    numel = math.prod(shape)
    result = ValueDiff(numel=numel)
    blocks = row_blocks(shape, itemsize)
    row_numel = math.prod(shape[1:]) if shape else 1
    first = True
    for i, (pa, pb) in enumerate(zip(iter_pieces(va, name, blocks), iter_pieces(vb, name, blocks))):
        offset = blocks[i][0] * row_numel if blocks else 0
        expected = (blocks[i][1] - blocks[i][0]) * row_numel if blocks else numel
        a, da = as_array(pa, dtypes[0])
        b, db = as_array(pb, dtypes[1])
        if a.size != expected or b.size != expected:
            raise BadInput(f"{name}: read {a.size} elements from a and {b.size} from b where their records "
                           f"say {expected}; not compared")
        a, b = a.reshape(-1), b.reshape(-1)
        if a.size == 0:
            continue
        result.a_constant = _constant(a, da, result.a_constant, first)
        result.b_constant = _constant(b, db, result.b_constant, first)
        first = False
        if tol.rounded:
            a, da, b, db = _round_wider(a, da, b, db)
        for start in range(0, a.size, CHUNK):
            ca, cb = a[start:start + CHUNK], b[start:start + CHUNK]
            differing, finite = _compare_chunk(result, ca, da, cb, db, tol, offset + start, shape)
            if finite:  # every element's |a - b| was summed to a finite number: no NaN or inf on either side
                continue
            here = _nonfinite(ca, da)
            result.a_nonfinite += here
            result.b_nonfinite += here if not differing else _nonfinite(cb, db)  # equal: the same NaN and inf
    for values in (va, vb):  # this tensor's pages are no longer needed in this process (the page cache keeps them)
        release = getattr(values, "release", None)
        if release is not None:
            release(name)
    return result


_EXPONENT = {"bfloat16": 0x7F80, "float16": 0x7C00}  # all exponent bits set (sign aside): inf or NaN


def _nonfinite(x: np.ndarray, name: str) -> int:
    """NaN and inf elements of a chunk: for 16-bit floats held as integers, from the magnitude bits (one masked
    copy and its maximum; counted only when the maximum says there are some), else numpy's isfinite (float8
    types and integers: none counted)."""
    if name in _EXPONENT and x.dtype.kind in "ui":
        magnitude = np.bitwise_and(x.view(np.uint16), 0x7FFF)
        if magnitude.size == 0 or magnitude.max() < _EXPONENT[name]:
            return 0
        return int(np.count_nonzero(magnitude >= _EXPONENT[name]))
    if x.dtype.kind in "fc":
        return int(x.size - np.count_nonzero(np.isfinite(x)))
    return 0


def _sum(gaps: np.ndarray) -> float:
    """The sum of a chunk's gaps: summed as rows of 1,024 first (vectorised; float32 is accurate enough for a
    mean), then the rows' sums."""
    if gaps.size % 1024 == 0 and gaps.size > 1024:
        return float(gaps.reshape(-1, 1024).sum(axis=0, dtype=gaps.dtype).sum(dtype=np.float64))
    return float(gaps.sum(dtype=np.float64))


def _compare_chunk(result: ValueDiff, a: np.ndarray, da: str, b: np.ndarray, db: str, tol: Tolerance,
                   offset: int, shape: tuple[int, ...]) -> tuple[int, bool]:
    """Add one chunk's differences (flat elements offset.. of the tensor) to `result`; returns how many, and
    whether every element's gap was summed to a finite number (then neither side holds NaN or inf here)."""
    mask = _differs(a, da, b, db, tol)
    n = int(np.count_nonzero(mask))
    if n == 0:
        return 0, False
    first_here = None
    if result.first_index is None or n == 1:
        first_here = int(np.argmax(mask))
        if result.first_index is None:
            result.first_index = unravel(offset + first_here, shape)
    exact = tol.exact and da == db
    gaps, positions, top, peak = _gaps(a, da, b, db, mask, n, first_here, exact)
    total = _sum(gaps)
    result.n_differ += n
    result.sum_abs += total
    if top > result.max_abs or result.max_index is None:
        result.max_abs = top
        result.max_index = unravel(offset + (int(positions[peak]) if positions is not None else peak), shape)
    return n, positions is None and exact and math.isfinite(total)  # exact: equal elements' gaps are 0 or NaN
