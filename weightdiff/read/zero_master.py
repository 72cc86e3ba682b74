"""DeepSpeed's fp32 master copies in a checkpoint (ZeRO stages 1 and 2, and the bf16 optimizer), as a MasterSet.

Each dp rank D of model-parallel rank XX writes `[bf16_]zero_pp_rank_D_mp_rank_XX_optim_states.pt`
(`weightdiff.read.zero_files`) with its flat fp32 partition of each optimizer group
(`single_partition_of_fp32_groups`, padding at the end cut) and `param_slice_mappings`: per group, each
parameter with a piece in this partition -> (start in the partition, numel). deepspeed 0.19.8 builds these in
`runtime/zero/stage_1_and_2.py` and `runtime/bf16_optimizer.py` (`get_hp_fragment_mapping` in
`utils/tensor_fragment.py`): the group's parameters are laid end to end in one flat buffer, split into equal
partitions by dp rank. So a parameter's pieces lie on consecutive dp ranks, in order, and a piece's first
element within the parameter is the total size of the parameter's pieces on lower dp ranks. Where a lower dp
rank's file cannot be read, a piece that starts its partition cannot be placed (it may continue the parameter)
and is reported as such.

Which parameters should have a master: ZeRO's `param_shapes` in the mp_rank files; without them (the bf16
optimizer) the names of the slice mappings, with the shapes of the module weights. ZeRO-3 keeps its masters
another way (`fp32_flat_groups`); it is reported as not checked.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from weightdiff.errors import BadInput
from weightdiff.read.masters import MasterPiece, MasterSet
from weightdiff.read.checkpoint import stage_names
from weightdiff.read.torch_load import safe_load, walk
from weightdiff.read.zero_files import STATE, slice_mappings, zero_files
from weightdiff.records import RankDump

FP32_KEY = (STATE, "single_partition_of_fp32_groups")


def _stage(state) -> int | None:
    stage = walk(state, (STATE, "zero_stage"))
    value = stage.field("value", 0) if hasattr(stage, "field") else stage
    return value if isinstance(value, int) else None


def _kind(folder: Path, stages: set[int]) -> str:
    if any(p.name.startswith("bf16_") for p in folder.iterdir()) and not stages:
        return "DeepSpeed bf16 optimizer (ZeRO-0 with bf16)"
    return "DeepSpeed ZeRO stage " + "/".join(str(s) for s in sorted(stages)) if stages else "DeepSpeed ZeRO"


def read_zero_masters(slices: list[RankDump]) -> MasterSet | None:
    """The master pieces of the DeepSpeed checkpoint whose (pp, tp) slices are `slices`; None when its folder
    has no optimizer files (ZeRO-0 in fp32: the module weights are what the optimizer updates)."""
    folder = slices[0].source
    files = zero_files(folder)
    if not files:
        return None
    dims = slices[0].dims
    tp_degree, dp_size = (dims.tp, dims.dp) if dims else (1, 1)
    load = partial(safe_load, mmap=True)
    masters = MasterSet(kind="", pieces=[], params={}, load=load, dp_size=dp_size)
    mapped: dict[tuple[int, int], dict[int, list[dict[str, tuple[int, int]]]]] = {}
    stages: set[int] = set()
    for (dp, xx), path in sorted(files.items()):
        pp, tp = divmod(xx, tp_degree)
        try:
            state = load(path)
        except BadInput as e:
            masters.unread[(pp, tp, dp)] = str(e)
            masters.errors.append(str(e))
            continue
        stage, groups = _stage(state), slice_mappings(state)
        if stage is not None:
            stages.add(stage)
        if stage == 3 or groups is None:
            why = ("ZeRO stage 3 keeps its masters in fp32_flat_groups, which weightdiff does not read" if stage == 3
                   else "no param_slice_mappings (a DeepSpeed older than 0.8?)")
            masters.unread[(pp, tp, dp)] = f"{path}: {why}"
            continue
        mapped.setdefault((pp, tp), {})[dp] = groups
    masters.kind = _kind(folder, stages)
    for s in slices:
        key = (s.coords.pp, s.coords.tp)
        masters.params[key] = _expected(s, mapped.get(key, {}), tp_degree, masters.errors)
    for (pp, tp), by_dp in mapped.items():
        _place(masters, pp, tp, by_dp, files, tp_degree)
    masters.dp_size = max(dp_size, 1 + max((dp for dp, _ in files), default=0))
    for (dp, xx) in _missing(files, masters.dp_size, [(s.coords.pp * tp_degree + s.coords.tp) for s in slices]):
        pp, tp = divmod(xx, tp_degree)
        masters.unread[(pp, tp, dp)] = f"{folder}: no optimizer file for dp rank {dp} of mp_rank {xx:02d}"
        masters.errors.append(masters.unread[(pp, tp, dp)])
    return masters


def _missing(files: dict[tuple[int, int], Path], dp_size: int, mp_ranks: list[int]) -> list[tuple[int, int]]:
    """(dp, mp rank) pairs whose optimizer file should be there and is not (ZeRO-1/2 and the bf16 optimizer
    partition over dp; the files of one mp rank are dp 0..dp_size-1)."""
    return [(dp, xx) for xx in mp_ranks for dp in range(dp_size) if (dp, xx) not in files]


def _expected(dump: RankDump, by_dp: dict[int, list[dict]], tp_degree: int, errors: list[str]
              ) -> dict[str, tuple[int, ...] | None]:
    """Every parameter of this (pp, tp) that the optimizer keeps a master of -> its shape (None: unknown, take
    the module weight's). From ZeRO's param_shapes; without them (the bf16 optimizer) the names its slices hold."""
    xx = dump.coords.pp * tp_degree + dump.coords.tp
    try:
        names, shapes = stage_names(safe_load(dump.source / f"mp_rank_{xx:02d}_model_states.pt", mmap=True))
    except BadInput as e:
        errors.append(str(e))
        names, shapes = {}, {}
    expected: dict[str, tuple[int, ...] | None] = {n: shapes.get(n) for n, group in names.items() if group >= 0}
    if not expected:
        held = {name for groups in by_dp.values() for pieces in groups for name in pieces}
        expected = {name: (dump.tensors[name].shape if name in dump.tensors else None) for name in sorted(held)}
    return expected


def _place(masters: MasterSet, pp: int, tp: int, by_dp: dict[int, list[dict[str, tuple[int, int]]]],
           files: dict[tuple[int, int], Path], tp_degree: int) -> None:
    """Turn each dp rank's slice mappings into pieces placed in their parameters. A piece that does not start
    its partition starts its parameter; one that does continues the parameter's piece on the rank below, if
    that rank holds one: known only when that rank's mappings were read."""
    xx = pp * tp_degree + tp
    placed: dict[str, int | None] = {}  # name -> elements placed on lower dp ranks (None: unknown)
    below: set[str] | None = set()  # names held by the dp rank below (None: its file could not be read)
    for dp in range(1 + max(by_dp)):
        groups = by_dp.get(dp)
        if groups is None:
            below = None
            continue
        held = set()
        for index, pieces in enumerate(groups):
            for name, (offset, numel) in pieces.items():
                held.add(name)
                if offset > 0 or (below is not None and name not in below):
                    start: int | None = 0
                elif below is None:
                    start = None
                else:
                    start = placed.get(name)
                if start is None:
                    masters.unplaced[(pp, tp, name)] = (
                        f"its piece on dp={dp} starts that rank's partition and may continue a piece of a lower dp "
                        "rank, whose file could not be read")
                    placed[name] = None
                    continue
                masters.pieces.append(MasterPiece(name=name, pp=pp, tp=tp, dp=dp, start=start, numel=numel,
                                                  file=files[(dp, xx)], key=FP32_KEY + (index,), offset=offset))
                placed[name] = start + numel
        below = held
