"""What flows between weightdiff's parts: one rank's dump as plain data, and its JSON sidecar form.

A `RankDump` is one rank's view of its parameters at one moment (an iteration and a tag such as "before" or
"after"), whichever way it was collected: `weightdiff.dump` on a live model, or a DeepSpeed checkpoint folder.
Its identity (global rank and (dp, pp, tp) coordinates) is attached once, when it is collected; nothing after
that re-derives it from file names or pids. Tensors themselves are not held here: `tensor_source` says where to
stream them from (see `weightdiff.read.values`), so a report over 384 ranks never holds more than a few tensors.

No torch import: the comparison and check logic over these records is pure Python.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hangdoctor.topology import ParallelDims, RankCoords

FORMAT = "weightdiff-dump"
VERSION = 1
HASH_NAME = "sha256"


@dataclass(frozen=True)
class Fingerprint:
    """Cheap summary of one tensor: an exact hash of its bytes plus three statistics for a human."""

    sha256: str  # of the raw little-endian bytes, in C order
    norm: float  # L2 norm, accumulated in float32 (NaN/inf propagate)
    absmax: float
    mean: float
    nonfinite: int = 0  # number of NaN or inf elements


@dataclass(frozen=True)
class Tie:
    """A parameter that is one copy of a weight shared with other places (usually other pipeline stages)."""

    key: str  # DeepSpeed's tied-module key (e.g. "embed"), or the first name of a shared parameter
    synced: bool  # False: lives in a tied module but is not one of its tied_weight_attrs (never all-reduced)
    ranks: tuple[int, ...] = ()  # global ranks holding a copy, when DeepSpeed knows them
    aliases: tuple[str, ...] = ()  # other names of the very same tensor in this rank's module


@dataclass(frozen=True)
class TensorMeta:
    """Everything known about one tensor (a parameter or a buffer) of one rank, except its values."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # torch spelling without the prefix: "float32", "bfloat16"
    fingerprint: Fingerprint | None = None
    module_path: str = ""  # the owning submodule's dotted name ("" for the root)
    module_class: str = ""  # class path, e.g. "torch.nn.modules.normalization.LayerNorm"
    module_mro: tuple[str, ...] = ()  # class paths of the owning module's MRO, object excluded
    tie: Tie | None = None
    group: dict[str, Any] | None = None  # this parameter's optimizer group hyperparameters (lr, weight_decay, ...)
    group_index: int | None = None
    tp_partitioned: bool | None = None  # the Megatron `tensor_model_parallel` attribute, when the model sets it
    requires_grad: bool = True
    role: str = "parameter"  # or "buffer" (BatchNorm's running_mean...): in the state dict, not optimised; or
    # "value": a non-tensor entry of a checkpoint (a learning rate, a step count) read as a small tensor

    @property
    def is_buffer(self) -> bool:
        return self.role == "buffer"

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def leaf(self) -> str:
        """"weight" for "3.attention.dense.weight"."""
        return self.name.rsplit(".", 1)[-1]


@dataclass
class RankDump:
    """One rank's parameters at one moment. `tensors` is ordered as the model lists its parameters."""

    coords: RankCoords
    iteration: int
    tag: str
    source: Path  # the sidecar (dumps) or the checkpoint folder it came from
    kind: str  # "dump", "deepspeed-checkpoint", or a whole-model file: "torch-save", "safetensors", "dcp"
    mode: str  # "full": values available; "fingerprint": only the fingerprints
    tensors: dict[str, TensorMeta]
    tensor_source: Any = None  # what weightdiff.read.values opens to stream values; None: fingerprints only
    replicated_dp: bool = False  # a checkpoint: one copy stands for every dp rank of its (pp, tp)
    pid: int | None = None
    host: str = ""
    world_size: int | None = None
    dims: ParallelDims | None = None  # the run's parallel sizes, when the writer knew them
    created: float | None = None
    notes: list[str] = field(default_factory=list)
    absent: dict[str, str] = field(default_factory=dict)  # names the source should hold but does not -> why
    unreadable: dict[str, str] = field(default_factory=dict)  # names it holds whose records could not be read
    whole: bool = False  # one record holds the whole model (a state dict), whatever the other side's grid

    @cached_property
    def kept_names(self) -> dict[str, str]:
        """{a name this dump does not hold: the tensor it keeps for it}, from its ties (a tied weight kept once
        under one name: a module's shared parameter, a name declared in safetensors metadata)."""
        return {alias: name for name, meta in self.tensors.items() if meta.tie is not None
                for alias in meta.tie.aliases if alias not in self.tensors}

    @property
    def key(self) -> tuple[int, int, int]:
        """What pairs two dumps of the same place in the grid: (pp, tp, dp), ignoring pid and iteration."""
        return (self.coords.pp, self.coords.tp, self.coords.dp)

    def label(self) -> str:
        return self.coords.label()


# --- JSON sidecar form ------------------------------------------------------------------------------------------

def meta_to_json(meta: TensorMeta) -> dict[str, Any]:
    data = asdict(meta)
    data["shape"] = list(meta.shape)
    data["module_mro"] = list(meta.module_mro)
    if meta.tie is not None:
        data["tie"] = {**asdict(meta.tie), "ranks": list(meta.tie.ranks), "aliases": list(meta.tie.aliases)}
    return data


def fingerprint_from_json(data: dict[str, Any]) -> Fingerprint:
    """Non-finite statistics are stored as text ("nan", "inf"), which float() reads back."""
    return Fingerprint(sha256=str(data["sha256"]), norm=float(data["norm"]), absmax=float(data["absmax"]),
                       mean=float(data["mean"]), nonfinite=int(data.get("nonfinite", 0)))


def meta_from_json(data: dict[str, Any]) -> TensorMeta:
    fp = data.get("fingerprint")
    tie = data.get("tie")
    return TensorMeta(
        name=str(data["name"]),
        shape=tuple(int(s) for s in data["shape"]),
        dtype=str(data["dtype"]),
        fingerprint=fingerprint_from_json(fp) if fp else None,
        module_path=str(data.get("module_path", "")),
        module_class=str(data.get("module_class", "")),
        module_mro=tuple(data.get("module_mro", ())),
        tie=Tie(key=str(tie["key"]), synced=bool(tie["synced"]), ranks=tuple(tie.get("ranks", ())),
                aliases=tuple(tie.get("aliases", ()))) if tie else None,
        group=data.get("group"),
        group_index=data.get("group_index"),
        tp_partitioned=data.get("tp_partitioned"),
        requires_grad=bool(data.get("requires_grad", True)),
        role="buffer" if data.get("role") == "buffer" else "parameter",
    )


def dims_from_json(value: object) -> ParallelDims | None:
    """A sidecar's "dims" ({"tp", "pp", "dp", "order"}, each optional) as ParallelDims; None when absent.
    Raises ValueError (the sidecar is malformed) on sizes that are not positive integers."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"dims is {type(value).__name__}, not an object")
    sizes = {axis: value.get(axis, 1) for axis in ("tp", "pp", "dp")}
    return ParallelDims(**sizes, **({"order": str(value["order"])} if value.get("order") else {}))
