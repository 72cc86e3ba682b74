"""The optimizer's fp32 master copy of each parameter, as a checkpoint keeps it: what flows from the readers of
optimizer state (`read/zero_master.py` for DeepSpeed, `read/megatron_master.py` for Megatron-LM) to the
master-copy check (`weightdiff.analysis.master_check`).

A master copy may be split: ZeRO gives each dp rank one flat fp32 partition per optimizer group, and a
parameter's elements can run across the partitions of consecutive dp ranks. One `MasterPiece` is one such
run: which elements of the parameter (flat, C order) it holds, and where they are in which file. A reader
also says which parameters should have a master (`MasterSet.params`), so that elements no readable piece
holds are reported as not checked instead of being passed over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.torch_load import is_tensor, walk


@dataclass(frozen=True)
class MasterPiece:
    """One contiguous run of one parameter's master copy, as one rank's optimizer state keeps it."""

    name: str
    pp: int
    tp: int
    dp: int  # the dp rank whose partition holds it (0 where the master is not partitioned)
    start: int  # the parameter's first element (flat, C order) in this piece
    numel: int
    file: Path
    key: tuple  # where the flat fp32 tensor is in the file's state: dict keys and list indices
    offset: int  # where the piece starts in that tensor (flattened)


@dataclass
class MasterSet:
    """Every master piece of one checkpoint, and what should be there."""

    kind: str  # e.g. "DeepSpeed ZeRO stage 1", "DeepSpeed bf16 optimizer", "Megatron-LM float16 optimizer"
    pieces: list[MasterPiece]
    params: dict[tuple[int, int], dict[str, tuple[int, ...] | None]]  # (pp, tp) -> name -> shape (None: unknown)
    load: Callable[[Path], Any]  # loads one file's state (weights_only, memory-mapped)
    dp_size: int = 1
    unread: dict[tuple[int, int, int], str] = field(default_factory=dict)  # (pp, tp, dp) -> why it is missing
    unplaced: dict[tuple[int, int, str], str] = field(default_factory=dict)  # (pp, tp, name) -> why not placed
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def open(self) -> "MasterValues":
        return MasterValues(self.load)


class MasterValues:
    """Reads master pieces, loading each file once (memory-mapped: only the pieces read are touched)."""

    def __init__(self, load: Callable[[Path], Any]):
        self._load = load
        self._states: dict[Path, Any] = {}

    def flat(self, piece: MasterPiece) -> Any:
        """The flat tensor holding `piece`; BadInput when the file or the tensor cannot be read."""
        if piece.file not in self._states:
            self._states[piece.file] = self._load(piece.file)
        tensor = walk(self._states[piece.file], piece.key)
        if not is_tensor(tensor):
            raise BadInput(f"{piece.file}: no tensor at {'/'.join(map(str, piece.key))}")
        flat = tensor.reshape(-1)
        if piece.offset + piece.numel > flat.numel():
            raise BadInput(f"{piece.file}: {piece.name}'s piece ends at element {piece.offset + piece.numel:,} of "
                           f"{'/'.join(map(str, piece.key))}, which has {flat.numel():,}")
        return flat

    def close(self) -> None:
        self._states.clear()
