"""Whole-model files as one RankDump: a `torch.save` state dict, and what the other whole-model readers
(HF safetensors, torch.distributed.checkpoint) share with it.

A whole-model record has no rank of its own (coordinates 0, `whole=True`): against a grid of ranks or
checkpoint slices it is paired with every one of them, and each pair compares the names that rank holds (see
`weightdiff.analysis.pairing.pair_keys`). These formats record no module classes and do not say which tensors
are buffers, so a buffer is recognised by its name (BatchNorm's `running_mean`, `running_var`,
`num_batches_tracked`).

`torch.save` files are read only with `torch.load(weights_only=True)` (memory-mapped when the file is in the
zip format): a file that needs any other global is refused with one line, and nothing named in it is
imported or run. Nested dicts (`{"model": {...}}`) are flattened with dots; non-tensor entries are ignored.
Names that share one storage (tied weights) are recorded as ties (weightdiff.read.shared_tensors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangdoctor.topology import RankCoords
from weightdiff.errors import BadInput
from weightdiff.read.checkpoint import BUFFER_LEAVES
from weightdiff.read.shared_tensors import config_ties, storage_groups, with_ties
from weightdiff.read.torch_load import is_tensor, safe_load
from weightdiff.read.zero3 import placeholder_reason
from weightdiff.records import RankDump, TensorMeta

KIND_NAMES = {"torch-save": "torch.save state dict", "safetensors": "safetensors", "dcp": "DCP checkpoint",
              "megatron-torch-dist": "Megatron-Core torch_dist checkpoint",
              "universal": "DeepSpeed universal checkpoint: fp32 masters"}


def role_by_name(name: str) -> str:
    return "buffer" if name.rsplit(".", 1)[-1] in BUFFER_LEAVES else "parameter"


def meta_for(name: str, shape: tuple[int, ...], dtype: str) -> TensorMeta:
    role = role_by_name(name)
    return TensorMeta(name=name, shape=tuple(shape), dtype=dtype, module_path=name.rpartition(".")[0], role=role,
                      requires_grad=role != "buffer")


def whole_dump(source: Path, kind: str, metas: dict[str, TensorMeta], tensor_source: Any,
               unreadable: dict[str, str] | None = None) -> RankDump:
    return RankDump(coords=RankCoords(rank=0, dp=0, pp=0, tp=0), iteration=0, tag=kind, source=source, kind=kind,
                    mode="full", tensors=metas, tensor_source=tensor_source, replicated_dp=True, whole=True,
                    unreadable=dict(unreadable or {}))


def flatten(state: Any, prefix: str = "") -> dict[str, Any]:
    """Tensor leaves of nested dicts and lists, by dotted name ({"model": {"w": t}} -> {"model.w": t})."""
    found: dict[str, Any] = {}
    items = state.items() if isinstance(state, Mapping) else enumerate(state) if isinstance(state, (list, tuple)) \
        else ()
    for key, value in items:
        name = f"{prefix}{key}"
        if is_tensor(value):
            found[name] = value
        elif isinstance(value, (Mapping, list, tuple)):
            found.update(flatten(value, name + "."))
    return found


@dataclass
class TensorDict:
    """Tensors already in memory (or memory-mapped by torch.load), name -> tensor."""

    tensors: dict[str, Any]

    def open(self) -> "TensorDict":
        return self

    def names(self) -> set[str]:
        return set(self.tensors)

    def get(self, name: str) -> Any:
        try:
            return self.tensors[name]
        except KeyError:
            raise BadInput(f"no tensor {name}") from None

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self.get(name)[start:stop]

    def close(self) -> None:
        pass


def read_torch_save(path: Path) -> RankDump:
    state = safe_load(path, mmap=True, allowed=())
    reason = placeholder_reason(state)
    if reason is not None:  # its tensors are size 0: compared, they would all be "equal"
        raise BadInput(f"{path}: {reason}")
    tensors = flatten(state)
    if not tensors:
        raise BadInput(f"{path}: a torch.save file with no tensors in it (not a state dict?)")
    metas = {name: meta_for(name, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for name, t in tensors.items()}
    ties = with_ties(metas, storage_groups(tensors), config_ties(path.parent, set(metas)))
    return whole_dump(path, "torch-save", ties, TensorDict(tensors))
