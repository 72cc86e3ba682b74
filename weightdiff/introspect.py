"""What a live model says about its parameters: owning module and its MRO, ties, and optimizer groups.

Ties come from two places:
- DeepSpeed's `PipelineModule` (anywhere in the module tree): every parameter of `tied_modules[key]` is a copy
  of the same module on another pipeline stage; only its `tied_weight_attrs[key]` are all-reduced and broadcast
  by DeepSpeed (`tied_comms[key]["ranks"]` names the global ranks). Any other parameter of a tied module is
  recorded with `synced=False`: nothing keeps those copies equal, and DeepSpeed does not checkpoint them on
  stages where the tied layer has a `forward_fn`.
- Plain modules: one Parameter object reachable under several names (`named_parameters(remove_duplicate=False)`).

Optimizer groups are matched by parameter identity, which is why `param_groups_by_name` must run on the torch
optimizer before `deepspeed.initialize`: ZeRO replaces its groups with flat partitions. DeepSpeed's ZeRO-1/2
optimizer still lists the model's parameters per group (`bit16_groups`), so it is understood too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from weightdiff.records import Tie


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def mro_paths(cls: type) -> tuple[str, ...]:
    return tuple(class_path(c) for c in cls.__mro__ if c is not object)


def owning_module(model: torch.nn.Module, name: str) -> tuple[str, torch.nn.Module]:
    """("3.attention.dense", <Linear>) for "3.attention.dense.weight"."""
    path = name.rpartition(".")[0]
    return path, (model.get_submodule(path) if path else model)


def _jsonable(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def _groups_with_params(optimizer: Any) -> list[tuple[dict[str, Any], list[torch.Tensor]]]:
    """(hyperparameters, parameters) per group, for a torch optimizer or DeepSpeed's ZeRO-1/2 wrapper."""
    for attr in ("bit16_groups", "bf16_groups", "fp16_groups"):
        flat_groups = getattr(optimizer, attr, None)
        inner = getattr(optimizer, "optimizer", None)
        if flat_groups and inner is not None and len(inner.param_groups) == len(flat_groups):
            return [({k: v for k, v in g.items() if k != "params"}, list(ps))
                    for g, ps in zip(inner.param_groups, flat_groups)]
    groups = getattr(optimizer, "param_groups", None)
    if groups is None:
        raise ValueError(f"{type(optimizer).__name__} has no param_groups: pass a torch optimizer")
    return [({k: v for k, v in g.items() if k != "params"}, list(g["params"])) for g in groups]


def param_groups_by_name(model: torch.nn.Module, optimizer: Any) -> dict[str, dict[str, Any]]:
    """Each parameter name of `model` -> its optimizer group's hyperparameters, plus "group_index".

    Matched by parameter identity, so every alias of a shared parameter gets its group. Parameters in no group
    (frozen, or an optimizer built over other tensors) are left out. JSON-safe values only (tensors -> floats).
    """
    by_id: dict[int, dict[str, Any]] = {}
    for index, (hyper, params) in enumerate(_groups_with_params(optimizer)):
        entry = {**{str(k): _jsonable(v) for k, v in hyper.items()}, "group_index": index}
        for p in params:
            by_id.setdefault(id(p), entry)
    result = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in by_id:
            result[name] = dict(by_id[id(p)])
    return result


def _pipeline_modules(model: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Module]]:
    for prefix, module in model.named_modules():
        if hasattr(module, "tied_modules") and hasattr(module, "tied_weight_attrs"):
            yield (prefix + "." if prefix else ""), module


def ties(model: torch.nn.Module) -> dict[str, Tie]:
    """Parameter name -> its Tie, for every parameter that is a copy of, or an alias of, another."""
    result: dict[str, Tie] = {}
    for prefix, pipe in _pipeline_modules(model):
        comms = getattr(pipe, "tied_comms", None) or {}
        for key, module in pipe.tied_modules.items():
            attrs = set(pipe.tied_weight_attrs.get(key, ()))
            ranks = tuple(int(r) for r in comms.get(key, {}).get("ranks", ()))
            for pname, _ in module.named_parameters():
                result[f"{prefix}tied_modules.{key}.{pname}"] = Tie(key=key, synced=pname in attrs, ranks=ranks)
    names_by_id: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names_by_id.setdefault(id(p), []).append(name)
    for names in names_by_id.values():
        if len(names) > 1:
            first, others = names[0], tuple(names[1:])
            old = result.get(first)
            result[first] = Tie(key=old.key if old else first, synced=old.synced if old else True,
                                ranks=old.ranks if old else (), aliases=others)
    return result


def pipeline_dims(model: torch.nn.Module) -> dict[str, int] | None:
    """{"tp", "pp", "dp"} from a DeepSpeed PipelineModule's grid, when the model has one."""
    for _, pipe in _pipeline_modules(model):
        grid = getattr(pipe, "_grid", None)
        if grid is None:
            continue
        try:
            return {"tp": int(grid.get_slice_parallel_world_size()), "pp": int(grid.pipe_parallel_size),
                    "dp": int(grid.data_parallel_size)}
        except AttributeError:
            return None
    return None
