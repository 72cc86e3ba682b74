"""DeepSpeed checkpoint folders as RankDumps, so that two checkpoints (or a checkpoint and a dump) compare
with no dump code in the training run.

Layout (deepspeed 0.19.8, pipeline engine; `latest` names the tag folder):

    latest                                           "global_step2"
    global_step2/layer_NN[-model_TT]-model_states.pt  one state dict per pipeline layer (and TP rank TT);
                                                     written by dp rank 0 only; NN is the global layer index
    global_step2/mp_rank_XX_model_states.pt          per (pp, tp): XX = pp * tp_degree + tp; holds
                                                     `param_shapes` (ZeRO: names per optimizer group, in
                                                     order), global_steps, dp_world_size, parallel degrees;
                                                     `module` is the whole state dict when not pipelined
    global_step2/zero_pp_rank_D_mp_rank_XX_optim_states.pt   ZeRO: dp rank D's optimizer partition,
                                                     with the groups' hyperparameters

A layer file's keys are local ("word_embeddings.weight"); the full names ("tied_modules.embed.word_embeddings
.weight", "3.dense.weight") and the stage that owns each layer come from `param_shapes`. Keys that
`param_shapes` does not list are buffers (BatchNorm's running statistics) and are read too (role "buffer"). A
layer with neither (ReLU, dropout) has an empty file, which is skipped. A tied layer with a
`forward_fn` (the output head on the last stage) has no file: its names are recorded in `RankDump.absent`.
The bf16 optimizer (ZeRO-0 with bf16, BLOOM's setup) saves no `param_shapes`; with pipeline parallelism the
stage names come from its optimizer files' slice mappings instead (`weightdiff.read.zero_files`).

Safe loading: every file goes through `torch.load(weights_only=True)` (`weightdiff.read.torch_load`). Layer
and mp_rank files load as they are; optimizer files need three DeepSpeed objects, read as inert stand-ins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangdoctor.topology import ParallelDims, RankCoords
from weightdiff.errors import BadInput
from weightdiff.read.files import read_bounded
from weightdiff.read.shared_tensors import storage_groups, with_ties
from weightdiff.read.torch_load import DEEPSPEED_GLOBALS, is_tensor, safe_load
from weightdiff.read.zero3 import MODEL_FILE as ZERO3_MODEL_FILE
from weightdiff.read.zero3 import is_zero3_folder, read_zero3_checkpoint
from weightdiff.read.zero_files import names_from_slices
from weightdiff.records import RankDump, TensorMeta

LAYER_FILE = re.compile(r"^layer_(\d+)(?:-model_(\d+))?-model_states\.pt$")
MP_FILE = re.compile(r"^mp_rank_(\d+)_model_states\.pt$")
OPAQUE_GLOBALS = DEEPSPEED_GLOBALS
BUFFER_LEAVES = {"running_mean", "running_var", "num_batches_tracked"}  # buffers by name, where nothing else says


def is_checkpoint_folder(path: Path) -> bool:
    return (path / "latest").is_file() or _has_model_files(path)


def _has_model_files(path: Path) -> bool:
    try:
        return any(MP_FILE.match(p.name) or LAYER_FILE.match(p.name) or ZERO3_MODEL_FILE.match(p.name)
                   for p in path.iterdir() if p.is_file())
    except OSError:  # a subfolder that cannot be listed holds no checkpoint we can read
        return False


def tag_folders(path: Path) -> list[Path]:
    """The tag folders (e.g. global_step2/) under a checkpoint folder, oldest step first; or [path] itself."""
    if _has_model_files(path):
        return [path]
    found = [p for p in path.iterdir() if p.is_dir() and _has_model_files(p)]
    return sorted(found, key=lambda p: (_step_number(p.name), p.name))


def _step_number(name: str) -> int:
    digits = re.findall(r"\d+", name)
    return int(digits[-1]) if digits else -1


def latest_tag_folder(path: Path) -> Path:
    if _has_model_files(path):
        return path
    latest = path / "latest"
    if latest.is_file():
        raw = read_bounded(latest, limit=4096, what="a DeepSpeed 'latest' file")
        tag = raw.decode("utf-8", errors="replace").strip()
        if not tag or "/" in tag or "\0" in tag:
            raise BadInput(f"{latest}: does not name a tag folder ({tag[:60]!r})")
        if not (path / tag).is_dir():
            raise BadInput(f"{latest}: names tag {tag!r}, but {path / tag} does not exist")
        return path / tag
    folders = tag_folders(path)
    if not folders:
        raise BadInput(f"{path}: no DeepSpeed checkpoint (no 'latest', no mp_rank_*/layer_* files)")
    return folders[-1]


@dataclass
class CheckpointValues:
    """Where each full parameter name's values are: (file, key in that file's state dict)."""

    locations: dict[str, tuple[Path, str]]

    def open(self) -> "_OpenCheckpoint":
        return _OpenCheckpoint(self.locations)


class _OpenCheckpoint:
    def __init__(self, locations: dict[str, tuple[Path, str]]):
        self.locations = locations
        self._loaded: dict[Path, dict] = {}

    def names(self) -> set[str]:
        return set(self.locations)

    def get(self, name: str) -> Any:
        path, key = self.locations[name]
        if path not in self._loaded:
            state = safe_load(path, mmap=True)
            if MP_FILE.match(path.name):
                state = state.get("module") or {}
            self._loaded[path] = state
        value = self._loaded[path].get(key)
        if not is_tensor(value):
            raise BadInput(f"{path}: no tensor {key!r}")
        return value

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self.get(name)[start:stop]

    def close(self) -> None:
        self._loaded.clear()


@dataclass
class _Stage:
    pp: int
    tp: int
    mp_file: Path
    state: dict
    names: dict[str, int]  # full parameter name -> optimizer group index (ZeRO's param_shapes order)
    shapes: dict[str, tuple[int, ...]]

    def layer_range(self) -> tuple[int, int] | None:
        numbers = [int(n.split(".", 1)[0]) for n in self.names if n.split(".", 1)[0].isdigit()]
        return (min(numbers), max(numbers)) if numbers else None


def stage_names(state: dict) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """From an mp_rank file's state: parameter name -> optimizer group index (-1: frozen), and -> shape."""
    names, shapes = {}, {}
    for index, group in enumerate(state.get("param_shapes") or []):
        for name, shape in group.items():
            names[name], shapes[name] = index, tuple(int(s) for s in shape)
    for name, shape in (state.get("frozen_param_shapes") or {}).items():
        names.setdefault(name, -1)
        shapes[name] = tuple(int(s) for s in shape)
    return names, shapes


def _distance(idx: int, span: tuple[int, int] | None) -> int:
    if span is None:
        return 10**9
    lo, hi = span
    return 0 if lo <= idx <= hi else (lo - idx if idx < lo else idx - hi)


def _map_layer(idx: int, keys: list[str], stages: list[_Stage]) -> tuple[_Stage, str] | None:
    """The stage owning layer file `idx` and the prefix that turns its keys into full names."""
    numbered = [s for s in stages if any(n.startswith(f"{idx}.") for n in s.names)]
    if numbered:
        return numbered[0], f"{idx}."
    candidates = []
    for s in stages:
        tied_keys = {n.split(".")[1] for n in s.names if n.startswith("tied_modules.")}
        for key in sorted(tied_keys):
            prefix = f"tied_modules.{key}."
            if keys and any(prefix + k in s.names for k in keys):
                candidates.append((_distance(idx, s.layer_range()), s.pp, s, prefix))
    if not candidates:
        return None
    _, _, stage, prefix = min(candidates, key=lambda c: (c[0], c[1]))
    return stage, prefix


def read_checkpoint(folder: Path) -> tuple[list[RankDump], list[str]]:
    """One RankDump per (pp, tp) of a tag folder (dp=0, standing for every dp rank), and one-line errors."""
    errors: list[str] = []
    mp_files = sorted((int(m[1]), p) for p in folder.iterdir() if (m := MP_FILE.match(p.name)))
    layer_files = sorted((int(m[1]), int(m[2] or 0), p) for p in folder.iterdir() if (m := LAYER_FILE.match(p.name)))
    if not mp_files and is_zero3_folder(folder):
        return read_zero3_checkpoint(folder)
    if not mp_files:
        raise BadInput(f"{folder}: no mp_rank_*_model_states.pt: not a DeepSpeed checkpoint tag folder")
    states = {}
    for xx, path in mp_files:
        try:
            states[xx] = safe_load(path, mmap=True)
        except BadInput as e:
            errors.append(str(e))
    if not states:
        return [], errors
    first = next(iter(states.values()))
    degrees = first.get("checkpoint_parallel_dimensions") or {}
    tp_degree = int(degrees.get("tp_degree") or (max((t for _, t, _ in layer_files), default=0) + 1))
    pp_degree = int(degrees.get("pp_degree") or max(1, len(mp_files) // tp_degree))
    dp_degree = int(first.get("dp_world_size") or 1)
    dims = ParallelDims(tp=tp_degree, pp=pp_degree, dp=dp_degree)
    iteration = int(first.get("global_steps") or 0)
    present = {xx for xx, _ in mp_files}
    errors += [f"{folder}: no mp_rank_{xx:02d}_model_states.pt (the checkpoint says TP={tp_degree} PP={pp_degree}): "
               f"pp stage {xx // tp_degree}, tp rank {xx % tp_degree} not compared"
               for xx in range(tp_degree * pp_degree) if xx not in present]
    stages = []
    for xx, state in states.items():
        pp, tp = divmod(xx, tp_degree)
        names, shapes = stage_names(state)
        if not names and pp_degree > 1:  # the bf16 optimizer (ZeRO-0) saves no param_shapes: its slices name them
            names = names_from_slices(folder, xx, errors)
        stages.append(_Stage(pp=pp, tp=tp, mp_file=folder / f"mp_rank_{xx:02d}_model_states.pt", state=state,
                             names=names, shapes=shapes))

    locations: dict[tuple[int, int], dict[str, tuple[Path, str]]] = {(s.pp, s.tp): {} for s in stages}
    metas: dict[tuple[int, int], dict[str, TensorMeta]] = {(s.pp, s.tp): {} for s in stages}
    for stage in stages:
        module = stage.state.get("module")
        if isinstance(module, dict):  # not pipelined: the whole model is in the mp_rank file
            buffers = set(stage.state.get("buffer_names") or [])
            for key, value in module.items():
                if is_tensor(value):
                    role = "buffer" if key in buffers or (stage.names and key not in stage.names) else "parameter"
                    _add(metas, locations, stage, key, value, stage.mp_file, key, role)
            tensors = {k: v for k, v in module.items() if is_tensor(v)}  # tied weights: one storage, two names
            metas[(stage.pp, stage.tp)] = with_ties(metas[(stage.pp, stage.tp)], storage_groups(tensors))
    for idx, tp, path in layer_files:
        try:
            state = safe_load(path, mmap=True)
        except BadInput as e:
            errors.append(str(e))
            continue
        if not isinstance(state, dict) or not any(is_tensor(v) for v in state.values()):
            continue  # a layer without parameters or buffers (ReLU, dropout): DeepSpeed writes an empty file
        same_tp = [s for s in stages if s.tp == tp]
        mapped = _map_layer(idx, list(state), same_tp) if any(s.names for s in same_tp) else None
        if mapped is None and pp_degree == 1 and same_tp:
            mapped = (same_tp[0], f"{idx}.")
        if mapped is None:
            errors.append(f"{path}: cannot tell which pipeline stage owns layer {idx} "
                          "(no ZeRO param_shapes naming it); skipped")
            continue
        stage, prefix = mapped
        for key, value in state.items():
            name = prefix + key
            if is_tensor(value):  # ZeRO's param_shapes list the parameters: the other tensors are buffers
                role = "buffer" if (stage.names and name not in stage.names) or (
                    not stage.names and key.rsplit(".", 1)[-1] in BUFFER_LEAVES) else "parameter"
                _add(metas, locations, stage, name, value, path, key, role)

    dumps = []
    present_layers = {(idx, tp) for idx, tp, _ in layer_files}
    for stage in stages:
        key = (stage.pp, stage.tp)
        absent = {n: "listed in this stage's ZeRO param_shapes but in none of its checkpoint files "
                     "(DeepSpeed saves no file for a tied layer with a forward_fn)"
                  for n in stage.names if n not in metas[key]}
        lost: dict[int, int] = {}  # a numbered layer whose file is gone: an input error, not a tied layer
        for n in absent:
            head = n.split(".", 1)[0]
            if head.isdigit() and (int(head), stage.tp) not in present_layers:
                lost[int(head)] = lost.get(int(head), 0) + 1
        with_tp = any("-model_" in p.name.removesuffix("-model_states.pt") for _, _, p in layer_files)
        errors += [f"{folder}: no layer_{idx:02d}{f'-model_{stage.tp:02d}' if with_tp else ''}-model_states.pt, "
                   f"though pp stage {stage.pp}'s "
                   f"param_shapes lists {count} parameter{'s' if count > 1 else ''} of layer {idx}: not compared"
                   for idx, count in sorted(lost.items())]
        ordered = dict(sorted(metas[key].items(), key=lambda kv: _name_order(kv[0])))
        dumps.append(RankDump(
            coords=RankCoords(rank=dims.rank(dp=0, pp=stage.pp, tp=stage.tp), dp=0, pp=stage.pp, tp=stage.tp),
            iteration=iteration, tag="checkpoint", source=folder, kind="deepspeed-checkpoint", mode="full",
            tensors=ordered, tensor_source=CheckpointValues(locations[key]), world_size=dims.world_size,
            dims=ParallelDims(tp=tp_degree, pp=pp_degree, dp=dp_degree), replicated_dp=True, absent=absent,
        ))
    return dumps, errors


def _name_order(name: str) -> tuple:
    head = name.split(".", 1)[0]
    return (0, "", name) if name.startswith("tied_modules.") else (1, int(head) if head.isdigit() else 10**9, name)


def _add(metas, locations, stage: _Stage, name: str, value: Any, path: Path, key: str, role: str) -> None:
    metas[(stage.pp, stage.tp)][name] = TensorMeta(
        name=name, shape=tuple(value.shape), dtype=str(value.dtype).removeprefix("torch."),
        group_index=stage.names.get(name) if stage.names.get(name, -1) >= 0 else None,
        role=role, requires_grad=role != "buffer",
    )
    locations[(stage.pp, stage.tp)][name] = (path, key)
