"""DeepSpeed's optimizer files in a checkpoint tag folder: which exist, and what they say about the model.

    [bf16_]zero_pp_rank_D_mp_rank_XX_optim_states.pt    dp rank D's partition of model-parallel rank XX
                                                         (XX = pp * tp_degree + tp); "bf16_" when bf16 was on

written by ZeRO stages 1 and 2 (`runtime/zero/stage_1_and_2.py`) and by the bf16 optimizer (ZeRO-0 with bf16,
`runtime/bf16_optimizer.py`), deepspeed 0.19.8. Each holds `optimizer_state_dict` with the optimizer groups'
hyperparameters (`base_optimizer_state.param_groups`), this rank's flat fp32 partition of each group
(`single_partition_of_fp32_groups`) and where each parameter's piece lies in it (`param_slice_mappings`: per
group, name -> fragment_address(numel, start)). Loaded with `weightdiff.read.torch_load.safe_load`.

Used for the param-group audit (groups of dp rank 0), for the stage names of a checkpoint that has no ZeRO
`param_shapes` (the bf16 optimizer with pipeline parallelism: the names in the slice mappings of all dp ranks),
and for the master-copy check (`weightdiff.read.zero_master`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.torch_load import safe_load, walk
from weightdiff.records import RankDump

ZERO_FILE = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$")
STATE = "optimizer_state_dict"


def zero_files(folder: Path) -> dict[tuple[int, int], Path]:
    """(dp rank, model-parallel rank) -> its optimizer file."""
    found = {}
    for p in sorted(folder.iterdir()):
        m = ZERO_FILE.match(p.name)
        if m:
            found.setdefault((int(m[1]), int(m[2])), p)
    return found


def optimizer_groups(folder: Path, xx: int) -> list[dict[str, Any]] | None:
    """The optimizer groups' hyperparameters saved by dp rank 0 of model-parallel rank `xx` (ZeRO), or None."""
    path = zero_files(folder).get((0, xx))
    if path is None:
        return None
    groups = walk(safe_load(path, mmap=True), (STATE, "base_optimizer_state", "param_groups"))
    if not isinstance(groups, list):
        return None
    return [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items() if k != "params"} for g in groups]


def with_optimizer_groups(dump: RankDump) -> RankDump:
    """The same checkpoint RankDump with each parameter's group hyperparameters from the ZeRO files (dp 0)."""
    tp_degree = dump.dims.tp if dump.dims else 1
    groups = optimizer_groups(dump.source, dump.coords.pp * tp_degree + dump.coords.tp)
    if not groups:
        return dump
    tensors = {name: replace(meta, group=groups[meta.group_index])
               if meta.group_index is not None and meta.group_index < len(groups) else meta
               for name, meta in dump.tensors.items()}
    return replace(dump, tensors=tensors)


def slice_mappings(state: Any) -> list[dict[str, tuple[int, int]]] | None:
    """Per optimizer group: parameter name -> (start, numel) of its piece in this rank's fp32 partition."""
    groups = walk(state, (STATE, "param_slice_mappings"))
    if not isinstance(groups, list):
        return None
    result = []
    for group in groups:
        pieces = {}
        for name, address in (group or {}).items():
            field = getattr(address, "field", None)
            start = field("start", 1) if field else None
            numel = field("numel", 0) if field else None
            if isinstance(name, str) and isinstance(start, int) and isinstance(numel, int):
                pieces[name] = (start, numel)
        result.append(pieces)
    return result


def names_from_slices(folder: Path, xx: int, errors: list[str]) -> dict[str, int]:
    """Every parameter name of model-parallel rank `xx` that the optimizer files of its dp ranks hold a piece
    of -> its group index (for checkpoints without ZeRO `param_shapes`: the bf16 optimizer)."""
    names: dict[str, int] = {}
    for (_, mp), path in zero_files(folder).items():
        if mp != xx:
            continue
        try:
            groups = slice_mappings(safe_load(path, mmap=True)) or []
        except BadInput as e:
            errors.append(str(e))
            continue
        for index, pieces in enumerate(groups):
            for name in pieces:
                names.setdefault(name, index)
    return names
