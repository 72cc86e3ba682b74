"""DeepSpeed ZeRO stage 3 checkpoints as RankDumps: the module weights rebuilt in memory from the fp32 partitions.

Layout (deepspeed 0.19.8, `engine.save_checkpoint` with ZeRO-3; XX is the model-parallel rank):

    global_step3/zero_pp_rank_D_mp_rank_XX_model_states.pt   dp rank D: `module` holds size-0 placeholders for
                                                             every partitioned parameter and the real buffers;
                                                             `param_shapes` (per optimizer group, in order) the
                                                             real shapes; `frozen_param_fragments` this rank's
                                                             piece of each frozen parameter
    global_step3/zero_pp_rank_D_mp_rank_XX_optim_states.pt   dp rank D: `fp32_flat_groups`, one flat fp32
                                                             partition per optimizer group

ZeRO-3 splits each parameter on its own: of a parameter of n elements every dp rank of W holds ceil(n / W)
elements (the last rank's share padded), and a rank's partitions of the parameters lie end to end in the order
of `param_shapes`, the groups one after another. So parameter p's elements are, rank by rank, the slice
[offset_p, offset_p + ceil(n_p / W)) of each rank's concatenated groups, cut to n_p: what DeepSpeed's own
`zero_to_fp32` computes, here per parameter when a comparison asks for it, nothing written. A frozen parameter
(`frozen_param_shapes`) is split the same way, its pieces in each dp rank's model-states file
(`frozen_param_fragments`).

The model-states files alone hold no weight: given one as a file, or a folder whose optimizer files are missing,
the reader says so and compares nothing it cannot rebuild (the verdict is incomplete, never SAME).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangdoctor.topology import ParallelDims, RankCoords
from weightdiff.errors import BadInput
from weightdiff.read.torch_load import is_tensor, safe_load, walk
from weightdiff.records import RankDump, TensorMeta

MODEL_FILE = re.compile(r"^zero_pp_rank_(\d+)_mp_rank_(\d+)_model_states\.pt$")
OPTIM_NAME = "zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt"
MODEL_NAME = "zero_pp_rank_{dp}_mp_rank_{mp:02d}_model_states.pt"
FLAT_GROUPS = ("optimizer_state_dict", "fp32_flat_groups")


def is_zero3_folder(path: Path) -> bool:
    try:
        return any(MODEL_FILE.match(p.name) for p in path.iterdir())
    except OSError:
        return False


def placeholder_reason(state: Any) -> str | None:
    """Why a torch.save file is a ZeRO-3 model-states file whose weights are not in it, or None."""
    if not isinstance(state, dict) or "param_shapes" not in state or not isinstance(state.get("module"), dict):
        return None
    shapes = _shapes(state)
    empty = [n for n, shape in shapes.items() if math.prod(shape) and _numel(state["module"].get(n)) == 0]
    if not empty:
        return None
    return (f"a DeepSpeed ZeRO-3 model-states file: its {len(empty)} parameters are size-0 placeholders (their "
            "values live in the zero_pp_rank_*_optim_states.pt files beside it); give the checkpoint folder")


def _numel(value: Any) -> int:
    return int(value.numel()) if is_tensor(value) else -1


def _shapes(state: dict) -> dict[str, tuple[int, ...]]:
    """Name -> shape of the partitioned parameters, in the partitions' order (the groups one after another)."""
    shapes: dict[str, tuple[int, ...]] = {}
    groups = state.get("param_shapes") or []
    for group in groups if isinstance(groups, list) else [groups]:
        if isinstance(group, dict):
            shapes.update((str(name), tuple(int(d) for d in shape)) for name, shape in group.items())
    return shapes


@dataclass
class Zero3Values:
    """Where each parameter's elements are: its offset in every dp rank's concatenated fp32 groups."""

    optim_files: list[Path]  # by dp rank
    layout: dict[str, tuple[int, int, tuple[int, ...]]]  # name -> (offset, elements per rank, shape)
    buffers: dict[str, tuple[Path, str]]  # name -> (model-states file, key) for what is stored whole
    frozen: dict[str, tuple[int, ...]] = field(default_factory=dict)  # frozen parameters: name -> shape
    model_files: list[Path] = field(default_factory=list)  # by dp rank: each holds its fragment of the frozen ones

    def open(self) -> "_OpenZero3":
        return _OpenZero3(self)


class _OpenZero3:
    def __init__(self, values: Zero3Values):
        self.values = values
        self._flat: dict[int, Any] = {}
        self._states: dict[Path, dict] = {}

    def names(self) -> set[str]:
        return set(self.values.layout) | set(self.values.buffers) | set(self.values.frozen)

    def _model_state(self, path: Path) -> dict:
        if path not in self._states:
            state = safe_load(path, mmap=True)
            self._states[path] = state if isinstance(state, dict) else {}
        return self._states[path]

    def _frozen(self, name: str) -> Any:
        """A frozen parameter: every dp rank's fragment (frozen_param_fragments), end to end, cut to its size."""
        import torch

        shape, pieces = self.values.frozen[name], []
        for path in self.values.model_files:
            piece = (self._model_state(path).get("frozen_param_fragments") or {}).get(name)
            if not is_tensor(piece):
                raise BadInput(f"{path}: no fragment of the frozen parameter {name!r}")
            pieces.append(piece.reshape(-1))
        return torch.cat(pieces)[:math.prod(shape)].view(shape)

    def _rank_flat(self, dp: int) -> Any:
        if dp not in self._flat:
            import torch

            path = self.values.optim_files[dp]
            groups = walk(safe_load(path, mmap=True), FLAT_GROUPS)
            if not isinstance(groups, list) or not groups or not all(is_tensor(g) for g in groups):
                raise BadInput(f"{path}: no fp32_flat_groups (not a ZeRO-3 optimizer file)")
            self._flat[dp] = groups[0].reshape(-1) if len(groups) == 1 else torch.cat([g.reshape(-1) for g in groups])
        return self._flat[dp]

    def get(self, name: str) -> Any:
        if name in self.values.buffers:
            path, key = self.values.buffers[name]
            return (self._model_state(path).get("module") or {})[key]
        if name in self.values.frozen:
            return self._frozen(name)
        import torch

        offset, per_rank, shape = self.values.layout[name]
        pieces = []
        for dp in range(len(self.values.optim_files)):
            flat = self._rank_flat(dp)
            if offset + per_rank > flat.numel():
                raise BadInput(f"{self.values.optim_files[dp]}: its fp32 partition ends before {name!r} "
                               f"(element {offset + per_rank:,} of {flat.numel():,}): not this checkpoint's")
            pieces.append(flat[offset:offset + per_rank])
        return torch.cat(pieces)[:math.prod(shape)].view(shape)

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self.get(name)[start:stop]

    def close(self) -> None:
        self._flat.clear()
        self._states.clear()


def read_zero3_checkpoint(folder: Path) -> tuple[list[RankDump], list[str]]:
    """One RankDump per model-parallel rank of a ZeRO-3 tag folder (dp=0, standing for every dp rank)."""
    errors: list[str] = []
    model_files: dict[int, dict[int, Path]] = {}
    for p in folder.iterdir():
        if m := MODEL_FILE.match(p.name):
            model_files.setdefault(int(m[2]), {})[int(m[1])] = p
    dumps = []
    for mp, by_dp in sorted(model_files.items()):
        path = by_dp[min(by_dp)]
        state = safe_load(path, mmap=True)
        if not isinstance(state, dict) or not isinstance(state.get("module"), dict):
            raise BadInput(f"{path}: no module state dict: not a DeepSpeed ZeRO-3 model-states file")
        dp_size = int(state.get("dp_world_size") or len(by_dp))
        shapes = _shapes(state)
        optim = [folder / OPTIM_NAME.format(dp=dp, mp=mp) for dp in range(dp_size)]
        missing = [p.name for p in optim if not p.is_file()]
        layout, offset = {}, 0
        for name, shape in shapes.items():
            per_rank = math.ceil(math.prod(shape) / dp_size)
            layout[name] = (offset, per_rank, shape)
            offset += per_rank
        metas: dict[str, TensorMeta] = {}
        buffers: dict[str, tuple[Path, str]] = {}
        buffer_names = set(state.get("buffer_names") or [])
        frozen = {str(n): tuple(int(d) for d in shape) for n, shape in (state.get("frozen_param_shapes") or {}).items()}
        for key, value in state["module"].items():
            if key in shapes or key in frozen or not is_tensor(value):
                continue
            if value.numel() == 0 and key not in buffer_names:
                errors.append(f"{path}: {key!r} is a size-0 placeholder that param_shapes does not list: not compared")
                continue
            metas[key] = TensorMeta(name=key, shape=tuple(value.shape), dtype=str(value.dtype).removeprefix("torch."),
                                    role="buffer", requires_grad=False)
            buffers[key] = (path, key)
        model_by_dp = [by_dp.get(dp) for dp in range(dp_size)]
        if frozen and None in model_by_dp:
            absent = [MODEL_NAME.format(dp=dp, mp=mp) for dp, f in enumerate(model_by_dp) if f is None]
            errors.append(f"{folder}: {', '.join(absent)} missing: the {len(frozen)} frozen parameters, a fragment "
                          "in each dp rank's model-states file, are not compared")
            frozen = {}
        for name, shape in frozen.items():
            dtype = str(getattr((state.get("frozen_param_fragments") or {}).get(name), "dtype", "torch.float32"))
            metas[name] = TensorMeta(name=name, shape=shape, dtype=dtype.removeprefix("torch."),
                                     module_path=name.rpartition(".")[0], role="parameter", requires_grad=False)
        if missing:
            errors.append(f"{folder}: {', '.join(missing)} missing: ZeRO-3 keeps its parameters only in the "
                          f"optimizer partitions, so the {len(shapes)} parameters of mp rank {mp} are not compared")
            layout = {}
        for name, (_, _, shape) in layout.items():
            metas[name] = TensorMeta(name=name, shape=shape, dtype="float32", module_path=name.rpartition(".")[0],
                                     role="parameter", requires_grad=True)
        dims = ParallelDims(tp=int(state.get("mp_world_size") or len(model_files)), pp=1, dp=dp_size)
        dumps.append(RankDump(
            coords=RankCoords(rank=dims.rank(dp=0, pp=0, tp=mp), dp=0, pp=0, tp=mp),
            iteration=int(state.get("global_steps") or 0), tag="checkpoint", source=folder,
            kind="deepspeed-checkpoint", mode="full", tensors=metas,
            tensor_source=Zero3Values(optim_files=optim, layout=layout, buffers=buffers, frozen=frozen,
                                      model_files=[f for f in model_by_dp if f is not None]),
            world_size=dims.world_size, dims=ParallelDims(tp=dims.tp, pp=1, dp=dp_size), replicated_dp=True,
            notes=[f"DeepSpeed ZeRO stage 3: {len(layout)} parameters rebuilt from {dp_size} fp32 partitions"],
        ))
    return dumps, errors
