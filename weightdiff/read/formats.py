"""Which format a path given on the command line is (other than a folder of our dumps), and its selection.

    a DeepSpeed universal checkpoint (zero/*/fp32.pt, or latest_universal)   whole model   read/universal.py
    a DeepSpeed checkpoint (latest, global_stepN/, mp_rank_*/layer_* files)  per (pp, tp)  read/checkpoint.py
    a Megatron-Core torch_dist checkpoint (iter_*/ with .metadata, common.pt) whole model  read/mcore.py
    a Megatron-LM checkpoint (latest_checkpointed_iteration.txt, iter_*/)   per (pp, tp)  read/megatron.py
    a DCP folder (.metadata)                                                 whole model   read/dcp.py
    model.safetensors or *.safetensors.index.json (the file or its folder)   whole model   read/hf_safetensors.py
    pytorch_model.bin.index.json (the file or its folder)                    whole model   read/hf_bin.py
    any other file, or pytorch_model.bin in a folder: a torch.save state dict whole model  read/whole.py

The universal test comes before DeepSpeed's: `ds_to_universal` copies the mp_rank files beside `zero/`.
Megatron-LM's top folder (its tracker file) is one format or the other by what its iteration folder holds.
DeepSpeed's `zero_to_fp32` writes pytorch_model.bin, model.safetensors or their sharded forms: read as such.
Modules are imported only for the format found (no torch for safetensors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.selection import Selection



def whole_format(path: Path) -> tuple[str, Path]:
    """(kind, the path its reader takes) of a file given on the command line: safetensors (a file or an index),
    or else torch.save (a state dict, or an index of .bin shards)."""
    from weightdiff.read.hf_safetensors import INDEX_SUFFIX

    if path.name.endswith((".safetensors", INDEX_SUFFIX)):
        return "safetensors", path
    return "torch-save", path


def folder_format(path: Path) -> str | tuple[str, Path] | None:
    """"deepspeed-checkpoint", "megatron-checkpoint", (whole-model kind, the path its reader takes) or None."""
    from weightdiff.read.checkpoint import is_checkpoint_folder
    from weightdiff.read.dcp import is_dcp_folder, newest_step_folder
    from weightdiff.read.hf_safetensors import find_safetensors
    from weightdiff.read.mcore import is_torch_dist_folder
    from weightdiff.read.megatron import is_megatron_folder
    from weightdiff.read.universal import universal_folder

    universal = universal_folder(path)
    if universal is not None:
        return "universal", universal
    if is_checkpoint_folder(path):
        return "deepspeed-checkpoint"
    if is_megatron_folder(path):  # torch_dist or not: select_megatron reads the tracker's iteration folder
        return "megatron-checkpoint"
    if is_torch_dist_folder(path):
        return "megatron-torch-dist", path
    if is_dcp_folder(path):
        return "dcp", path
    newest = newest_step_folder(path)
    if newest is not None:  # the reader says which one (select_whole)
        return ("megatron-torch-dist" if is_torch_dist_folder(newest) else "dcp"), newest
    found = find_safetensors(path)
    if found is not None:
        return "safetensors", found
    index = path / "pytorch_model.bin.index.json"
    if index.exists():
        return "torch-save", index
    if (path / "pytorch_model.bin").exists():
        return "torch-save", path / "pytorch_model.bin"
    return None


def _whole_reader(kind: str, path: Path) -> tuple[Any, list[str]]:
    if kind == "dcp":
        from weightdiff.read.dcp import read_dcp

        return read_dcp(path)
    if kind == "megatron-torch-dist":
        from weightdiff.read.mcore import read_torch_dist

        return read_torch_dist(path)
    if kind == "safetensors":
        from weightdiff.read.hf_safetensors import read_safetensors

        return read_safetensors(path)
    if kind == "universal":
        from weightdiff.read.universal import read_universal

        return read_universal(path)
    from weightdiff.read.hf_bin import BIN_INDEX

    if path.name.endswith(BIN_INDEX):
        from weightdiff.read.hf_bin import read_bin_shards

        return read_bin_shards(path)
    from weightdiff.read.whole import read_torch_save

    return read_torch_save(path), []


def select_whole(kind: str, path: Path, given: Path, iteration: int | None, tag: str | None):
    """The Selection of one whole-model record."""
    if iteration is not None or tag is not None:
        raise BadInput(f"{given}: a {kind} file holds one moment: --iteration and --tag do not apply to it")
    dump, errors = _whole_reader(kind, path)
    warnings = [] if path == given or path.parent == given and path.name.endswith((".json", ".bin", ".safetensors")) \
        else [f"{given}: read {path.relative_to(given) if path.is_relative_to(given) else path}, the newest checkpoint in it"]
    return Selection(path=given, kind=kind, iteration=None, tag=None, dumps={dump.key: dump}, errors=errors,
                     warnings=warnings)


def select_megatron(path: Path, iteration: int | None, tag: str | None):
    """The Selection of one iteration of a Megatron-LM checkpoint folder (legacy per-rank files, or torch_dist)."""
    from weightdiff.read.mcore import KIND, is_torch_dist_folder, read_torch_dist
    from weightdiff.read.megatron import iteration_folder, read_megatron
    if tag is not None:
        raise BadInput(f"{path}: a Megatron-LM checkpoint has no dump tags: --tag does not apply to it")
    folder = iteration_folder(path, iteration)
    if is_torch_dist_folder(folder):
        dump, errors = read_torch_dist(folder)
        which = f"iteration {iteration}" if iteration is not None else "the iteration its tracker names"
        return Selection(path=path, kind=KIND, iteration=None, tag=None, dumps={dump.key: dump}, errors=errors,
                         warnings=[f"{path}: read {folder.name}, {which}"] if folder != path else [])
    dumps, errors = read_megatron(folder)
    if not dumps:
        raise BadInput(errors[0] if errors else f"{folder}: no readable rank files")
    return Selection(path=path, kind="megatron-checkpoint", iteration=dumps[0].iteration, tag="checkpoint",
                     dumps={d.key: d for d in dumps}, errors=errors)
