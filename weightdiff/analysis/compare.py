"""Compare two tensors element by element, streamed in row blocks, exactly or within a tolerance.

Exact (the default) means equal bytes: each element's bit pattern is compared, so NaN equals the same NaN and
-0.0 differs from 0.0. With a tolerance, elements differ when |a - b| > atol + rtol * |b| (torch.isclose,
NaN equal to NaN). Tensors of different dtypes are compared as float64 values.

Besides the counts, the result says where the first and the largest difference are, and whether either side
is a constant 0 or 1 everywhere (a norm's default initialisation). Values that do not have the size their
records say raise BadInput (that tensor is not compared) instead of failing inside torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from weightdiff.errors import BadInput
from weightdiff.read.values import Values, iter_pieces, row_blocks

INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class Tolerance:
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.atol == 0.0 and self.rtol == 0.0

    def describe(self) -> str:
        return "exact (bitwise)" if self.exact else f"atol={self.atol:g}, rtol={self.rtol:g}"


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

    @property
    def mean_abs(self) -> float:
        return self.sum_abs / self.numel if self.numel else 0.0

    @property
    def fraction(self) -> float:
        return self.n_differ / self.numel if self.numel else 0.0


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size) if size else (flat, 0)
        index.append(rest)
    return tuple(reversed(index))


def _bits(t: torch.Tensor) -> torch.Tensor:
    view = INT_VIEW.get(t.element_size())
    return t if t.dtype == torch.bool or view is None or t.is_complex() else t.view(view)


def _differs(a: torch.Tensor, b: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    if tol.exact and a.dtype == b.dtype:
        return _bits(a) != _bits(b)
    af, bf = a.to(torch.float64), b.to(torch.float64)
    if tol.exact:
        return ~((af == bf) | (torch.isnan(af) & torch.isnan(bf)))
    return ~torch.isclose(af, bf, rtol=tol.rtol, atol=tol.atol, equal_nan=True)


def _constant(t: torch.Tensor, previous: float | None, first: bool) -> float | None:
    """0.0 or 1.0 when every element of t (and of the blocks before it) equals it; cheap when it does not."""
    if not first and previous is None:
        return None
    head = float(t[0]) if not t.is_complex() else None
    for value in (0.0, 1.0):
        if head == value and (first or previous == value) and bool((t == value).all()):
            return value
    return None


def _gaps(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, n: int, first: int | None,
          exact: bool) -> tuple[torch.Tensor, torch.Tensor | None, float, int]:
    """(|a - b| at the differing elements, their flat positions or None for all, largest gap, its index).
    NaN against a number counts as inf.

    Few differences: gather them (one difference: its position is already known). Many: subtract whole
    blocks in a wide enough float type (a difference of two 16-bit floats is exact in float32); elements that
    do not differ get 0."""
    if n * 16 < mask.numel():
        positions = torch.tensor([first]) if n == 1 and first is not None else torch.nonzero(mask).reshape(-1)
        gaps = (a[positions].to(torch.float64) - b[positions].to(torch.float64)).abs().nan_to_num_(nan=math.inf)
    else:
        positions = None
        wide = torch.float32 if max(a.element_size(), b.element_size()) <= 2 and a.is_floating_point() \
            and b.is_floating_point() else torch.float64
        gaps = (a.to(wide) - b.to(wide)).abs_()
        if not exact:
            gaps.masked_fill_(~mask, 0.0)  # within the tolerance: not a difference
    top, where = torch.max(gaps, 0)
    if math.isnan(float(top)):  # max propagates NaN: NaN vs NaN (equal) or NaN vs a number (inf)
        gaps = torch.where(mask, gaps.nan_to_num(nan=math.inf), 0.0)
        top, where = torch.max(gaps, 0)
    return gaps, positions, float(top), int(where)


def compare_tensor(va: Values, vb: Values, name: str, shape: tuple[int, ...], tol: Tolerance,
                   itemsize: int = 4) -> ValueDiff:
    """Compare tensor `name` of equal `shape` in two sources, reading at most one row block of each at a time."""
    numel = math.prod(shape)
    result = ValueDiff(numel=numel)
    blocks = row_blocks(shape, itemsize)
    row_numel = math.prod(shape[1:]) if shape else 1
    first = True
    for i, (a, b) in enumerate(zip(iter_pieces(va, name, blocks), iter_pieces(vb, name, blocks))):
        offset = blocks[i][0] * row_numel if blocks else 0
        expected = (blocks[i][1] - blocks[i][0]) * row_numel if blocks else numel
        if a.numel() != expected or b.numel() != expected:
            raise BadInput(f"{name}: read {a.numel()} elements from a and {b.numel()} from b where their records "
                           f"say {expected}; not compared")
        a, b = a.reshape(-1), b.reshape(-1)
        if a.numel() == 0:
            continue
        result.a_constant = _constant(a, result.a_constant, first)
        result.b_constant = _constant(b, result.b_constant, first)
        first = False
        if tol.exact and a.dtype == b.dtype and torch.equal(_bits(a), _bits(b)):
            continue
        mask = _differs(a, b, tol)
        n = int(torch.count_nonzero(mask))
        if n == 0:
            continue
        first_here = None
        if result.first_index is None or n == 1:
            first_here = int(torch.argmax(mask.view(torch.uint8)))
            if result.first_index is None:
                result.first_index = _unravel(offset + first_here, shape)
        gaps, positions, top, peak = _gaps(a, b, mask, n, first_here, tol.exact and a.dtype == b.dtype)
        result.n_differ += n
        result.sum_abs += float(gaps.sum())
        if top > result.max_abs or result.max_index is None:
            result.max_abs = top
            result.max_index = _unravel(offset + (int(positions[peak]) if positions is not None else peak), shape)
    return result
