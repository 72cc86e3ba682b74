"""A `torch.distributed.checkpoint` (DCP) folder (`.metadata` + `__R_N.distcp` files) as one whole-model RankDump.

Names, shapes and dtypes come from `.metadata`; values are read with torch's own DCP reader into a plain state
dict (`_load_state_dict(..., planner=_EmptyStateDictLoadPlanner(keys), no_dist=True)`, as torch's
`dcp_to_torch_save` does), sharded tensors (DTensor, FSDP) reassembled. Everything the checkpoint holds is
loaded into memory at the first read.

Safe loading: torch unpickles `.metadata` with plain `pickle.load`. weightdiff reads it itself with an
unpickler that accepts only DCP's metadata classes, `torch.Size`, torch dtypes, the layout helper and path
classes, and refuses any other global in one line. Tensor data goes through torch's
`torch.load(weights_only=True)`.

Non-tensor entries (an optimizer's learning rates, betas and step counts, a scheduler's state, a step number:
`get_state_dict(model, optimizer)` writes hundreds) are compared too: each is its bytes in a `.distcp` file, a
`torch.save` of the value, which torch would unpickle without restriction; weightdiff reads those bytes itself
and loads them with `torch.load(weights_only=True)`. Each leaf becomes a small tensor under its dotted name
(role "value": a number as a 0-d float64 or int64 tensor, a list of ints or of floats as one vector, a bool as
an int64 0/1, a string as its UTF-8 bytes, None as an empty tensor), so that a changed learning rate is a
difference like any other. An entry that needs any other global is unreadable (named), never skipped in silence.

A `.distcp` file that is missing or shorter than its entries is one error line and its tensors are counted as
unreadable; a file that fails while loading makes only the tensors stored in it unreadable (one line each file).
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.files import one_line, open_regular, read_at, read_bounded, require_regular_file
from weightdiff.read.torch_load import Opaque, load_bytes
from weightdiff.read.whole import flatten, meta_for, whole_dump
from weightdiff.records import RankDump, TensorMeta

METADATA = ".metadata"
MAX_METADATA_BYTES = 1 << 30
ALLOWED = {("torch", "Size"), ("torch.serialization", "_get_layout"),
           ("torch.distributed.checkpoint.filesystem", "_StorageInfo"), ("collections", "OrderedDict"),
           ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath")}
# Megatron-Core's torch_dist keeps every rank's save plan in `.metadata` (`all_local_plans`, for reuse at the next
# save): torch's own plain dataclasses and enum, named one by one (read/mcore.py)
SAVE_PLAN = {("torch.distributed.checkpoint.planner", name)
             for name in ("SavePlan", "WriteItem", "WriteItemType", "TensorWriteData")}


def is_dcp_folder(path: Path) -> bool:
    return (path / METADATA).is_file()


_STEP = re.compile(r"^(?:step|global_step|checkpoint|iter)[-_]?(\d+)$")


def newest_step_folder(path: Path) -> Path | None:
    """torchtitan's checkpoint folder (`step-N/` inside, each a DCP checkpoint), or one like it: the DCP folder of
    the highest step, or None. Also HF's `HuggingFaceStorageWriter` layout (`sharded/` beside the consolidated)."""
    try:
        steps = [(int(m[1]), p) for p in path.iterdir() if (m := _STEP.match(p.name)) and is_dcp_folder(p)]
    except OSError:
        return None
    if steps:
        return max(steps)[1]
    return path / "sharded" if is_dcp_folder(path / "sharded") else None


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        import torch

        is_dtype = module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        allowed = (module, name) in ALLOWED or (module, name) in SAVE_PLAN or is_dtype
        if module == "torch.distributed.checkpoint.metadata":
            import torch.distributed.checkpoint.metadata as md

            value = getattr(md, name, None)
            allowed = isinstance(value, type) and value.__module__ == module
        if not allowed:
            raise pickle.UnpicklingError(f"global {module}.{name} is not one of DCP's metadata types")
        return super().find_class(module, name)


def read_metadata(folder: Path) -> Any:
    path = folder / METADATA
    raw = read_bounded(path, limit=MAX_METADATA_BYTES, what="DCP metadata")
    try:
        metadata = _MetadataUnpickler(io.BytesIO(raw)).load()
        metadata.state_dict_metadata.items()
    except Exception as e:
        raise BadInput(f"{path}: not DCP metadata ({type(e).__name__}: {one_line(e)})") from None
    return metadata


def _reader(folder: Path):
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            metadata = read_metadata(folder)
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            if metadata.planner_data is None:  # Megatron-Core's planner writes none: each name is its own path
                metadata.planner_data = {name: (name,) for name in metadata.state_dict_metadata}
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(str(folder))


def _files_of(metadata: Any) -> dict[str, set[str]]:
    """Tensor name -> the .distcp files holding its chunks."""
    files: dict[str, set[str]] = {}
    for index, info in (metadata.storage_data or {}).items():
        files.setdefault(index.fqn, set()).add(info.relative_path)
    return files


def _damaged_files(folder: Path, metadata: Any) -> dict[str, str]:
    """File -> one line, for each .distcp file that is missing or shorter than the chunks it should hold."""
    needed: dict[str, int] = {}
    for info in (metadata.storage_data or {}).values():
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), int(info.offset) + int(info.length))
    damaged = {}
    for name, size in needed.items():
        try:
            st = require_regular_file(folder / name)
        except BadInput as e:
            damaged[name] = str(e)
            continue
        if st.st_size < size:
            damaged[name] = f"{folder / name}: truncated ({st.st_size:,} bytes, its chunks need {size:,})"
    return damaged


class DcpValues:
    """Loads the readable tensors at the first read: all at once, or file group by file group when that fails."""

    def __init__(self, folder: Path, files: dict[str, set[str]], values: dict[str, Any] | None = None):
        self.folder, self.files, self.values = folder, files, dict(values or {})
        self._tensors: dict[str, Any] | None = None
        self._problems: dict[str, str] = {}

    def open(self) -> "DcpValues":
        return self

    def _load(self, keys: set[str]) -> dict[str, Any]:
        from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
        from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

        state: dict[str, Any] = {}
        _load_state_dict(state, storage_reader=_reader(self.folder), planner=_EmptyStateDictLoadPlanner(keys=keys),
                         no_dist=True)
        return flatten(state)

    def _ensure(self) -> dict[str, Any]:
        if self._tensors is None:
            from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

            try:
                self._tensors = self._load(set(self.files))
            except (Exception, CheckpointException):
                self._tensors = {}
                groups: dict[frozenset[str], set[str]] = {}
                for name, files in self.files.items():
                    groups.setdefault(frozenset(files), set()).add(name)
                for files, names in groups.items():
                    try:
                        self._tensors.update(self._load(names))
                    except (Exception, CheckpointException) as e:
                        line = f"{self.folder}: cannot load {', '.join(sorted(files))} ({one_line(e)})"
                        self._problems.update({name: line for name in names})
        return self._tensors

    def names(self) -> set[str]:
        return set(self.files) | set(self.values)

    def get(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        tensors = self._ensure()
        if name in self._problems:
            raise BadInput(self._problems[name])
        if name not in tensors:
            raise BadInput(f"{self.folder}: no tensor {name} after loading")
        return tensors[name]

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self.get(name)[start:stop]

    def close(self) -> None:
        pass  # kept for the next pair: the folder is loaded once


def read_dcp(folder: Path, *, kind: str = "dcp", value_globals: tuple[str, ...] = (),
             more_values: dict[str, Any] | None = None) -> tuple[RankDump, list[str]]:
    """The DCP folder as one whole-model RankDump, and one-line errors. `value_globals`: the globals (beyond
    torch.load's weights-only set) that non-tensor entries may name, read as inert stand-ins (torch_load.Opaque);
    `more_values`: values kept beside the folder (Megatron-Core's common.pt), compared like its entries."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = read_metadata(folder)
    files = _files_of(metadata)
    damaged = _damaged_files(folder, metadata)
    metas, unreadable, readable, values = {}, {}, {}, {}
    for name, value in (more_values or {}).items():
        _add_values(name, value, metas, values, unreadable)
    for name, entry in metadata.state_dict_metadata.items():
        if not isinstance(entry, TensorStorageMetadata):
            try:
                value = _load_bytes_entry(folder, metadata, name, damaged, value_globals)
            except BadInput as e:
                unreadable[name] = str(e)
                continue
            _add_values(name, value, metas, values, unreadable)
            continue
        broken = sorted(files.get(name, set()) & set(damaged))
        if broken:
            unreadable[name] = damaged[broken[0]]
            continue
        metas[name] = meta_for(name, tuple(entry.size), str(entry.properties.dtype).removeprefix("torch."))
        readable[name] = files.get(name, set())
    if not metas and not unreadable:
        raise BadInput(f"{folder}: a DCP checkpoint with no tensors")
    errors = [f"{line}; the tensors stored in it are not compared" for line in damaged.values()]
    errors += [f"{line}; not compared" for name, line in unreadable.items() if line not in damaged.values()]
    return whole_dump(folder, kind, metas, DcpValues(folder, readable, values), unreadable), errors


def _add_values(name: str, value: Any, metas: dict, values: dict, unreadable: dict) -> None:
    """A non-tensor value's leaves as "value" records (or the reason it cannot be compared)."""
    try:
        leaves = _value_leaves(name, value)
    except BadInput as e:
        unreadable[name] = str(e)
        return
    for leaf, tensor in leaves.items():
        values[leaf] = tensor
        metas[leaf] = TensorMeta(name=leaf, shape=tuple(tensor.shape), dtype=str(tensor.dtype).removeprefix(
            "torch."), module_path=leaf.rpartition(".")[0], role="value", requires_grad=False)


MAX_VALUE_BYTES = 64 << 20  # one non-tensor entry: a scheduler's state is kilobytes


def _load_bytes_entry(folder: Path, metadata: Any, name: str, damaged: dict[str, str],
                      value_globals: tuple[str, ...] = ()) -> Any:
    """A non-tensor entry's value, loaded from its bytes with torch.load(weights_only=True); BadInput otherwise."""
    info = next((info for index, info in (metadata.storage_data or {}).items() if index.fqn == name), None)
    if info is None:
        raise BadInput(f"{folder}: no storage for the entry {name!r} in .metadata")
    if info.relative_path in damaged:
        raise BadInput(damaged[info.relative_path])
    if getattr(info, "transform_descriptors", None):
        raise BadInput(f"{folder}: the entry {name!r} is stored transformed ({info.transform_descriptors}): not read")
    if int(info.length) > MAX_VALUE_BYTES:
        raise BadInput(f"{folder}: the entry {name!r} is {int(info.length):,} bytes, more than a value holds")
    with open_regular(folder / info.relative_path) as f:
        raw = read_at(f, folder / info.relative_path, int(info.offset), int(info.length))
    return load_bytes(raw, allowed=value_globals, what=f"{folder}: the entry {name!r}")


def _value_leaves(name: str, value: Any, depth: int = 0) -> dict[str, Any]:
    """A non-tensor value as small tensors by dotted name (see the module's docstring)."""
    import torch

    if depth > 20:
        raise BadInput(f"the entry {name!r} is nested more than 20 deep")
    if isinstance(value, torch.Tensor):
        return {name: value}
    if isinstance(value, Opaque):  # a stand-in (value_globals): an argparse.Namespace, a numpy array
        value = _plain(value)
    if isinstance(value, bool) or value is None:
        return {name: torch.tensor([] if value is None else int(value), dtype=torch.int64)}
    if isinstance(value, int):
        return {name: torch.tensor(value, dtype=torch.int64)} if -2**63 <= value < 2**63 else \
            {name: torch.tensor(list(str(value).encode()), dtype=torch.uint8)}
    if isinstance(value, float):
        return {name: torch.tensor(value, dtype=torch.float64)}
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):  # a string's UTF-8, or raw bytes (a numpy array's data)
        return {name: torch.frombuffer(bytearray(value), dtype=torch.uint8) if value else
                torch.tensor([], dtype=torch.uint8)}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)) and _numbers(value):  # betas, a random state: one vector, not 625 leaves
        return {name: torch.tensor(value, dtype=_numbers(value))}
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        raise BadInput(f"the entry {name!r} is a {type(value).__name__}, not a value weightdiff compares")
    leaves: dict[str, Any] = {}
    for key, item in items:
        leaves.update(_value_leaves(f"{name}.{key}", item, depth + 1))
    return leaves or {name: torch.tensor([], dtype=torch.int64)}


def _plain(value: Opaque) -> Any:
    """A stand-in's data: an object's fields (argparse.Namespace); a numpy array's bytes (its pickled state is
    (version, shape, dtype, is_fortran, data)); else its arguments and state, classes left out."""
    fields = value.field_dict()
    if fields is not None:
        return fields
    state = value.state
    if isinstance(state, tuple) and len(state) == 5 and isinstance(state[4], (bytes, bytearray)):
        return state[4]
    return {"args": [a for a in value.args if not isinstance(a, type)], "kwargs": value.kwargs, "state": state}


def _numbers(values: list | tuple) -> Any:
    """torch.int64 when every item is an int (no bool) that fits it, torch.float64 when every one is a float, else
    None."""
    import torch

    if values and all(type(v) is int and -2**63 <= v < 2**63 for v in values):
        return torch.int64
    if values and all(type(v) is float for v in values):
        return torch.float64
    return None
