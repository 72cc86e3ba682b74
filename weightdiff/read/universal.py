"""A DeepSpeed universal checkpoint (what `ds_to_universal` writes) as one whole-model RankDump of fp32 masters.

Layout (deepspeed 0.19.8, `deepspeed/checkpoint/ds_to_universal.py`):

    OUT/zero/<parameter name>/fp32.pt        {"param": the whole fp32 master (tp slices merged), "cat_dim": ...}
    OUT/zero/<parameter name>/exp_avg.pt, exp_avg_sq.pt, step.pt     the optimizer state, the same way
    OUT/zero/optimizer_state.pt              the optimizer's other state
    OUT/mp_rank_XX_model_states.pt           copies of the source checkpoint's files

Loading a universal checkpoint sets every parameter from its `fp32.pt` (`load_hp_checkpoint_state_from_
checkpoint_dir`), so these are the values compared, under their folder names ("3.dense.weight"): against the
source checkpoint they are the masters against the module weights (`--round` for bf16 weights). Only
`fp32.pt` is read, each with `torch.load(weights_only=True)` (memory-mapped), at most one at a time when the
values are compared. `OUT` may also be the folder holding a `latest_universal` file that names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.files import read_bounded
from weightdiff.read.torch_load import is_tensor, safe_load
from weightdiff.read.whole import meta_for, whole_dump
from weightdiff.records import RankDump

LATEST = "latest_universal"


def universal_folder(path: Path) -> Path | None:
    """The universal checkpoint folder at `path` (or named by its latest_universal file), or None."""
    if (path / "zero").is_dir() and any((p / "fp32.pt").is_file() for p in (path / "zero").iterdir() if p.is_dir()):
        return path
    latest = path / LATEST
    if latest.is_file():
        tag = read_bounded(latest, limit=4096, what="a latest_universal file").decode("utf-8", "replace").strip()
        if tag and "/" not in tag and "\0" not in tag and (path / tag).is_dir():
            return universal_folder(path / tag)
    return None


class UniversalValues:
    """name -> `zero/<name>/fp32.pt`'s "param", loaded when asked for and kept until the next name."""

    def __init__(self, files: dict[str, Path]):
        self.files = files
        self._name: str | None = None
        self._tensor: Any = None

    def open(self) -> "UniversalValues":
        return UniversalValues(self.files)

    def names(self) -> set[str]:
        return set(self.files)

    def get(self, name: str) -> Any:
        if name != self._name:
            self._name, self._tensor = name, _param(self.files[name])
        return self._tensor

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self.get(name)[start:stop]

    def close(self) -> None:
        self._name, self._tensor = None, None


def _param(path: Path) -> Any:
    state = safe_load(path, mmap=True, allowed=())
    param = state.get("param") if isinstance(state, dict) else None
    if not is_tensor(param):
        raise BadInput(f"{path}: no tensor under 'param' (not a universal checkpoint's fp32.pt)")
    return param


def read_universal(folder: Path) -> tuple[RankDump, list[str]]:
    """One whole-model RankDump of `folder/zero/*/fp32.pt`, and one-line errors (a file that cannot be read:
    its tensor is counted as unreadable, the others are compared)."""
    files, metas, unreadable, errors = {}, {}, {}, []
    for sub in sorted((folder / "zero").iterdir()):
        path = sub / "fp32.pt"
        if not sub.is_dir() or not path.exists():
            continue
        try:
            param = _param(path)
        except BadInput as e:
            errors.append(str(e))
            unreadable[sub.name] = str(e)
            continue
        files[sub.name] = path
        metas[sub.name] = meta_for(sub.name, tuple(param.shape), str(param.dtype).removeprefix("torch."))
    if not files and not unreadable:
        raise BadInput(f"{folder}: no zero/*/fp32.pt: not a universal checkpoint")
    return whole_dump(folder, "universal", metas, UniversalValues(files), unreadable), errors
