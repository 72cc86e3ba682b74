"""HF's sharded `.bin` checkpoints as one whole-model RankDump: `pytorch_model.bin.index.json`
(`{"weight_map": {name: shard file}}`) and the `torch.save` shards it lists (what `save_pretrained` writes
with `safe_serialization=False`, and DeepSpeed's `zero_to_fp32` with a max shard size).

Each shard is loaded only with `torch.load(weights_only=True)`, memory-mapped, when the diff first needs one of
its tensors (so a diff touches one shard's pages at a time). A shard that cannot be loaded is one error line
and its tensors count as unreadable; the other shards are compared. Tied tensors, stored once by torch.save or
declared in the index's metadata, become ties (weightdiff.read.shared_tensors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.hf_safetensors import read_index
from weightdiff.read.shared_tensors import config_ties, declared_aliases, storage_groups, with_ties
from weightdiff.read.torch_load import safe_load
from weightdiff.read.whole import flatten, meta_for, whole_dump
from weightdiff.records import RankDump

BIN_INDEX = ".bin.index.json"


class BinShards:
    """name -> (shard file); a shard's state dict loaded (memory-mapped) the first time one of its names is."""

    def __init__(self, folder: Path, where: dict[str, str]):
        self.folder, self.where = folder, where
        self._loaded: dict[str, dict[str, Any]] = {}

    def open(self) -> "BinShards":
        return BinShards(self.folder, self.where)

    def names(self) -> set[str]:
        return set(self.where)

    def get(self, name: str) -> Any:
        shard = self.where[name]
        if shard not in self._loaded:
            self._loaded[shard] = flatten(safe_load(self.folder / shard, mmap=True, allowed=()))
        tensor = self._loaded[shard].get(name)
        if tensor is None:
            raise BadInput(f"{self.folder / shard}: no tensor {name}, which the index puts in this file")
        return tensor

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self.get(name)[start:stop]

    def close(self) -> None:
        self._loaded.clear()


def read_bin_shards(index: Path) -> tuple[RankDump, list[str]]:
    """One RankDump for an index of .bin shards, and one-line errors (a shard that cannot be loaded, a
    tensor the index names that its shard lacks)."""
    mapping, metadata = read_index(index)
    metas, where, unreadable, errors, groups = {}, {}, {}, [], []
    for shard in sorted(set(mapping.values())):
        listed = [n for n, s in mapping.items() if s == shard]
        try:
            tensors = flatten(safe_load(index.parent / shard, mmap=True, allowed=()))
        except BadInput as e:
            errors.append(f"{e}; its {len(listed)} tensors not compared")
            unreadable.update({n: str(e) for n in listed})
            continue
        for name in listed:
            t = tensors.get(name)
            if t is None:
                unreadable[name] = f"{index.parent / shard}: no tensor {name}, which the index puts in this file"
                errors.append(unreadable[name])
                continue
            metas[name] = meta_for(name, tuple(t.shape), str(t.dtype).removeprefix("torch."))
            where[name] = shard
        groups += storage_groups({n: tensors[n] for n in listed if n in tensors})
    if not metas and not unreadable:
        raise BadInput(f"{index}: an index of no tensors")
    present = {*metas, *unreadable}
    metas = with_ties(metas, groups, {**config_ties(index.parent, present), **declared_aliases(metadata, present)})
    return whole_dump(index, "torch-save", metas, BinShards(index.parent, where), unreadable), errors
