"""Compare two tensors element by element, streamed in row blocks, exactly or within a tolerance.

Exact (the default) means equal bytes: each element's bit pattern is compared, so NaN equals the same NaN and
-0.0 differs from 0.0. With a tolerance, elements differ when |a - b| > atol + rtol * |b| (torch.isclose,
NaN equal to NaN). Tensors of different dtypes are compared as float64 values.

Besides the counts, the result says where the first and the largest difference are, and whether either side
is a constant 0 or 1 everywhere (a norm's default initialisation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

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


def _differs(a: torch.Tensor, b: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    if tol.exact and a.dtype == b.dtype:
        view = INT_VIEW.get(a.element_size())
        if a.dtype == torch.bool or view is None or a.is_complex():
            return a != b
        return a.view(view) != b.view(view)
    af, bf = a.to(torch.float64), b.to(torch.float64)
    if tol.exact:
        return ~((af == bf) | (torch.isnan(af) & torch.isnan(bf)))
    return ~torch.isclose(af, bf, rtol=tol.rtol, atol=tol.atol, equal_nan=True)


def _constant(t: torch.Tensor, previous: float | None, first: bool) -> float | None:
    if not first and previous is None:
        return None
    for value in (0.0, 1.0):
        if (first or previous == value) and bool((t == value).all()):
            return value
    return None


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
        a, b = a.reshape(-1), b.reshape(-1)
        if a.numel() == 0:
            continue
        result.a_constant = _constant(a, result.a_constant, first)
        result.b_constant = _constant(b, result.b_constant, first)
        first = False
        mask = _differs(a, b, tol)
        positions = torch.nonzero(mask).reshape(-1)
        if positions.numel() == 0:
            continue
        if result.first_index is None:
            result.first_index = _unravel(offset + int(positions[0]), shape)
        gaps = (a[positions].to(torch.float64) - b[positions].to(torch.float64)).abs()
        gaps = torch.nan_to_num(gaps, nan=math.inf)
        result.n_differ += positions.numel()
        result.sum_abs += float(gaps.sum())
        peak = int(torch.argmax(gaps))
        if float(gaps[peak]) > result.max_abs or result.max_index is None:
            result.max_abs = float(gaps[peak])
            result.max_index = _unravel(offset + int(positions[peak]), shape)
    return result
