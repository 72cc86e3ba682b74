"""A `torch.distributed.checkpoint` (DCP) folder (`.metadata` + `__R_N.distcp` files) as one whole-model RankDump.

Names, shapes and dtypes come from `.metadata`; values are read with torch's own DCP reader into a plain state
dict (`_load_state_dict(..., planner=_EmptyStateDictLoadPlanner(keys), no_dist=True)`, as torch's
`dcp_to_torch_save` does), sharded tensors (DTensor, FSDP) reassembled. Everything the checkpoint holds is
loaded into memory at the first read.

Safe loading: torch unpickles `.metadata` with plain `pickle.load`. weightdiff reads it itself with an
unpickler that accepts only DCP's metadata classes, `torch.Size`, torch dtypes, the layout helper and path
classes, and refuses any other global in one line. Tensor data goes through torch's
`torch.load(weights_only=True)`; non-tensor entries (which torch would unpickle without restriction) are not
loaded at all.

A `.distcp` file that is missing or shorter than its entries is one error line and its tensors are counted as
unreadable; a file that fails while loading makes only the tensors stored in it unreadable (one line each file).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.files import one_line, read_bounded, require_regular_file
from weightdiff.read.whole import flatten, meta_for, whole_dump
from weightdiff.records import RankDump

METADATA = ".metadata"
MAX_METADATA_BYTES = 1 << 30
ALLOWED = {("torch", "Size"), ("torch.serialization", "_get_layout"),
           ("torch.distributed.checkpoint.filesystem", "_StorageInfo"), ("collections", "OrderedDict"),
           ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath")}


def is_dcp_folder(path: Path) -> bool:
    return (path / METADATA).is_file()


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        import torch

        is_dtype = module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        allowed = (module, name) in ALLOWED or is_dtype
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

    def __init__(self, folder: Path, files: dict[str, set[str]]):
        self.folder, self.files = folder, files
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
            try:
                self._tensors = self._load(set(self.files))
            except Exception:
                self._tensors = {}
                groups: dict[frozenset[str], set[str]] = {}
                for name, files in self.files.items():
                    groups.setdefault(frozenset(files), set()).add(name)
                for files, names in groups.items():
                    try:
                        self._tensors.update(self._load(names))
                    except Exception as e:
                        line = f"{self.folder}: cannot load {', '.join(sorted(files))} ({one_line(e)})"
                        self._problems.update({name: line for name in names})
        return self._tensors

    def names(self) -> set[str]:
        return set(self.files)

    def get(self, name: str) -> Any:
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


def read_dcp(folder: Path) -> tuple[RankDump, list[str]]:
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = read_metadata(folder)
    files = _files_of(metadata)
    damaged = _damaged_files(folder, metadata)
    metas, unreadable, readable = {}, {}, {}
    for name, entry in metadata.state_dict_metadata.items():
        if not isinstance(entry, TensorStorageMetadata):
            continue  # bytes entries (pickled objects) are not weights, and are not unpickled
        broken = sorted(files.get(name, set()) & set(damaged))
        if broken:
            unreadable[name] = damaged[broken[0]]
            continue
        metas[name] = meta_for(name, tuple(entry.size), str(entry.properties.dtype).removeprefix("torch."))
        readable[name] = files.get(name, set())
    if not metas and not unreadable:
        raise BadInput(f"{folder}: a DCP checkpoint with no tensors")
    errors = [f"{line}; the tensors stored in it are not compared" for line in damaged.values()]
    return whole_dump(folder, "dcp", metas, DcpValues(folder, readable), unreadable), errors
