"""Megatron-LM's fp32 master copies (the float16 optimizer of the legacy `torch` format) as a MasterSet.

`Float16OptimizerWithFloat16Params.state_dict` (NVIDIA/Megatron-LM, `megatron/core/optimizer/optimizer.py`)
saves, in each rank file's "optimizer": the torch optimizer's state dict (its `param_groups` name no
parameters, only integer ids) and `fp32_from_fp16_params`: per optimizer group, the fp32 master of each
bf16/fp16 parameter of the group, in order. dp rank 0 saves it for its (pp, tp): the master is replicated over
dp, so its coordinates carry no dp.

The names are not saved, so they are matched by Megatron's default grouping (`_get_param_groups` in
`megatron/core/optimizer/__init__.py`): parameters in named_parameters order (the state dict's order here),
biases and 1-D parameters in a group with `wd_mult` 0 (or weight decay 0), the others in the default group,
which comes first. Each group's masters must then match the shapes of its parameters one by one; when they do
not (other grouping rules, frozen parameters), no master of that stage is placed and the check says so.
The distributed optimizer keeps its masters in `distrib_optim.pt` per dp rank; that is reported, not read.
"""

from __future__ import annotations

from weightdiff.read.masters import MasterPiece, MasterSet
from weightdiff.read.megatron import load_megatron, model_tensors
from weightdiff.read.torch_load import is_tensor, walk
from weightdiff.records import RankDump

KEY = ("optimizer", "fp32_from_fp16_params")
LOW_PRECISION = ("bfloat16", "float16")


def _no_decay(name: str, shape: tuple[int, ...]) -> bool:
    return name.endswith(".bias") or len(shape) == 1


def _group_is_no_decay(group: dict, index: int, n_groups: int) -> bool:
    if isinstance(group.get("wd_mult"), (int, float)):
        return group["wd_mult"] == 0
    decays = group.get("weight_decay")
    if isinstance(decays, (int, float)) and n_groups == 2:
        return index == 1  # the default group first, then the no-decay one (whatever weight decay was set)
    return isinstance(decays, (int, float)) and decays == 0


def _match(params: list[tuple[str, tuple[int, ...]]], groups: list, saved: list) -> list[list[str]] | str:
    """Names for each group's masters, or why they cannot be matched."""
    if len(groups) != len(saved):
        return f"{len(saved)} master groups for {len(groups)} optimizer groups"
    pools = {True: [p for p in params if _no_decay(*p)], False: [p for p in params if not _no_decay(*p)]}
    used = {True: 0, False: 0}
    names = []
    for index, (group, masters) in enumerate(zip(groups, saved)):
        kind = _group_is_no_decay(group if isinstance(group, dict) else {}, index, len(groups))
        pool = pools[kind][used[kind]:used[kind] + len(masters)]
        shapes = [tuple(m.shape) if is_tensor(m) else None for m in masters]
        if [s for _, s in pool] != shapes:
            return ("its optimizer groups are not Megatron's default grouping (biases and 1-D parameters apart), so "
                    "its fp32 masters cannot be matched to parameter names")
        used[kind] += len(masters)
        names.append([n for n, _ in pool])
    return names


def read_megatron_masters(slices: list[RankDump]) -> MasterSet | None:
    """The masters of a Megatron-LM checkpoint whose (pp, tp) files are the slices' sources; None when no rank
    file holds fp32_from_fp16_params (fp32 training, or the distributed optimizer)."""
    masters = MasterSet(kind="Megatron-LM float16 optimizer (fp32_from_fp16_params)", pieces=[], params={},
                        load=load_megatron, dp_size=1)
    distributed = False
    for s in slices:
        pp, tp = s.coords.pp, s.coords.tp
        state = load_megatron(s.source)  # already loaded once by the reader: memory-mapped, cheap
        saved = walk(state, KEY)
        if not isinstance(saved, list):
            distributed = distributed or (s.source.parent / "distrib_optim.pt").exists()
            continue
        tensors = model_tensors(state)
        params = [(n, tuple(t.shape)) for n, t in tensors.items()
                  if str(t.dtype).removeprefix("torch.") in LOW_PRECISION and not s.tensors[n].is_buffer]
        masters.params[(pp, tp)] = dict(params)
        names = _match(params, walk(state, ("optimizer", "optimizer", "param_groups")) or [], saved)
        if isinstance(names, str):
            for n, _ in params:
                masters.unplaced[(pp, tp, n)] = names
            masters.errors.append(f"{s.source}: {names}; its master copies are not checked")
            continue
        for g, (group_names, group_masters) in enumerate(zip(names, saved)):
            for i, (name, tensor) in enumerate(zip(group_names, group_masters)):
                masters.pieces.append(MasterPiece(name=name, pp=pp, tp=tp, dp=0, start=0, numel=tensor.numel(),
                                                  file=s.source, key=KEY + (g, i), offset=0))
    if not masters.params and distributed:
        masters.kind = "Megatron-LM distributed optimizer"
        masters.unread = {(s.coords.pp, s.coords.tp, 0): f"{s.source.parent / 'distrib_optim.pt'}: the distributed "
                          "optimizer's masters (per dp rank) are not read by weightdiff" for s in slices}
    return masters if masters.params or masters.unread else None
