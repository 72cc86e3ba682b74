"""`weightdiff.dump`: one rank writes its parameters, exactly, with everything needed to explain them later.

Call it from the training loop around each iteration, on every rank (no collective runs: each rank writes its
own two files, so a hung or dead peer cannot block it):

    weightdiff.dump(model, iteration=it, tag="before", out=run_dir / "weights", coords=dims.coords(rank),
                    param_groups=groups)            # groups = weightdiff.param_groups_by_name(model, torch_opt)

mode="full" writes `<stem>.safetensors` (exact values, no pickle) and `<stem>.json` (the sidecar: coordinates,
names, shapes, dtypes, fingerprints, ties, optimizer groups, module classes and MROs). Parameters come first,
then the persistent buffers (what `state_dict()` saves: BatchNorm's running statistics), marked
`"role": "buffer"`. mode="fingerprint"
writes only the sidecar, fingerprints included: cheap enough to leave on. The sidecar is written last, so a
sidecar on disk means the dump is complete.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from hangdoctor.topology import RankCoords
from weightdiff.fingerprint import host_contiguous, raw_bytes, sha256_hex, statistics
from weightdiff.introspect import class_path, mro_paths, owning_module, param_groups_by_name, pipeline_dims, ties
from weightdiff.naming import DumpName, check_tag
from weightdiff.records import FORMAT, HASH_NAME, VERSION, TensorMeta, meta_to_json
from weightdiff.safetensors_writer import write_safetensors

MODES = ("full", "fingerprint")
HASH_THREADS = max(1, min(4, (os.cpu_count() or 1)))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def persistent_buffers(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The buffers that `state_dict()` saves (BatchNorm's running statistics...), non-persistent ones left out."""
    found = []
    for name, buf in model.named_buffers():
        _, module = owning_module(model, name)
        if buf is not None and name.rpartition(".")[2] not in getattr(module, "_non_persistent_buffers_set", ()):
            found.append((name, buf))
    return found


def describe_buffers(model: torch.nn.Module, buffers: list[tuple[str, torch.Tensor]]) -> list[TensorMeta]:
    metas = []
    for name, buf in buffers:
        module_path, module = owning_module(model, name)
        metas.append(TensorMeta(
            name=name, shape=tuple(buf.shape), dtype=_dtype_name(buf.dtype), module_path=module_path,
            module_class=class_path(type(module)), module_mro=mro_paths(type(module)), requires_grad=False,
            role="buffer",
        ))
    return metas


def describe_parameters(model: torch.nn.Module,
                        param_groups: Mapping[str, Mapping[str, Any]] | None) -> list[TensorMeta]:
    """TensorMeta (without fingerprints) for every parameter of `model`, in `named_parameters()` order."""
    tie_of = ties(model)
    metas = []
    for name, p in model.named_parameters():
        module_path, module = owning_module(model, name)
        group = dict(param_groups[name]) if param_groups is not None and name in param_groups else None
        group_index = group.pop("group_index", None) if group is not None else None
        partitioned = getattr(p, "tensor_model_parallel", None)
        metas.append(TensorMeta(
            name=name, shape=tuple(p.shape), dtype=_dtype_name(p.dtype), module_path=module_path,
            module_class=class_path(type(module)), module_mro=mro_paths(type(module)), tie=tie_of.get(name),
            group=group, group_index=group_index,
            tp_partitioned=bool(partitioned) if partitioned is not None else None, requires_grad=p.requires_grad,
        ))
    return metas


def _finite_or_text(x: float) -> float | str:
    return x if math.isfinite(x) else repr(x)


def dump(model: torch.nn.Module, *, iteration: int, tag: str, out: str | Path, coords: RankCoords,
         param_groups: Mapping[str, Mapping[str, Any]] | None = None, optimizer: Any = None,
         mode: str = "full") -> Path:
    """Write this rank's parameters and persistent buffers under `out`; return the path of the JSON sidecar.

    `param_groups` maps a parameter name to its optimizer group's hyperparameters (see
    `param_groups_by_name`); without it, `optimizer` (a torch optimizer holding the model's parameters, or
    DeepSpeed's ZeRO-1/2 optimizer) is used to derive it. Raises ValueError on a bad argument.
    """
    if mode not in MODES:
        raise ValueError(f"dump mode {mode!r} must be one of {', '.join(MODES)}")
    check_tag(tag)
    if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
        raise ValueError(f"iteration {iteration!r} must be a non-negative integer")
    if not isinstance(coords, RankCoords):
        raise ValueError(f"coords must be a topology.RankCoords, not {type(coords).__name__}")
    notes = []
    if param_groups is None and optimizer is not None:
        param_groups = param_groups_by_name(model, optimizer)
        if not param_groups:
            notes.append(f"{type(optimizer).__name__}'s param groups hold none of the model's parameters "
                         "(ZeRO flattens them): pass param_groups computed before deepspeed.initialize")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    buffers = persistent_buffers(model)
    named = list(model.named_parameters()) + buffers
    metas = describe_parameters(model, param_groups) + describe_buffers(model, buffers)
    stem = DumpName(iteration=iteration, coords=coords, tag=tag, pid=os.getpid()).stem()

    tensor_file = None
    with torch.no_grad(), ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        # Hashing (hashlib releases the GIL) runs beside the writes and the statistics' kernels.
        pending: dict[str, Future] = {}
        in_flight: deque[Future] = deque()

        def hash_later(name: str, data: memoryview) -> None:
            while len(in_flight) >= 2 * HASH_THREADS:  # bound the host copies kept alive for hashing
                in_flight.popleft().result()
            pending[name] = pool.submit(sha256_hex, data)
            in_flight.append(pending[name])

        if mode == "full":
            tensor_file = f"{stem}.safetensors"
            write_safetensors(out / tensor_file, named,
                              metadata={"format": FORMAT, "iteration": str(iteration), "tag": tag,
                                        "rank": str(coords.rank), "sidecar": f"{stem}.json"},
                              on_bytes=hash_later)
        else:
            for name, p in named:
                hash_later(name, raw_bytes(host_contiguous(p)))
        stats = statistics([p for _, p in named])
        hashes = {name: future.result() for name, future in pending.items()}

    params = []
    for meta, (norm, absmax, mean, nonfinite) in zip(metas, stats):
        record = meta_to_json(meta)
        record["fingerprint"] = {"sha256": hashes[meta.name], "norm": _finite_or_text(norm),
                                 "absmax": _finite_or_text(absmax), "mean": _finite_or_text(mean),
                                 "nonfinite": nonfinite}
        params.append(record)
    world = torch.distributed.get_world_size() if torch.distributed.is_available() and \
        torch.distributed.is_initialized() else None
    sidecar = {
        "format": FORMAT, "version": VERSION, "mode": mode, "hash": HASH_NAME,
        "iteration": iteration, "tag": tag,
        "coords": {"rank": coords.rank, "dp": coords.dp, "pp": coords.pp, "tp": coords.tp},
        "world_size": world, "dims": pipeline_dims(model), "pid": os.getpid(), "host": socket.gethostname(),
        "created": time.time(), "model_class": class_path(type(model)), "tensor_file": tensor_file,
        "notes": notes, "params": params,
    }
    path = out / f"{stem}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(sidecar, indent=1))
    os.replace(tmp, path)
    return path

