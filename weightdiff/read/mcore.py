"""Megatron-Core `torch_dist` checkpoints (what Megatron-LM saves by default, `--ckpt-format torch_dist`) as
one whole-model RankDump.

Layout (megatron-core `dist_checkpointing.save` with the torch_dist strategy, into Megatron-LM's folders):

    latest_checkpointed_iteration.txt     the latest iteration, or "release" (Megatron-LM writes it)
    iter_0000010/.metadata                torch.distributed.checkpoint's metadata, with every rank's save plan
    iter_0000010/__R_N.distcp             the sharded tensors (each TP/PP/EP slice a chunk of its global
                                          tensor) and ShardedObjects (the rng state per (pp, tp) rank) as bytes
    iter_0000010/common.pt                a torch.save of the rest: args, iteration, checkpoint_version, ...
    iter_0000010/metadata.json            {"sharded_backend": "torch_dist", ...}

The tensors are global (Megatron-Core records each rank's piece as a chunk at its offset), so the checkpoint is
one whole model whatever TP and PP saved it, and it is read with the DCP reader (read/dcp.py), with two things
that Megatron-Core does differently from torch's own planner:
- `.metadata` also holds `all_local_plans`: torch's `SavePlan`, `WriteItem`, `WriteItemType` and
  `TensorWriteData`, which the restricted unpickler accepts by name (dcp.SAVE_PLAN), nothing else more;
- its `planner_data` is None (no nested names to rebuild): each name stands for itself.

Non-tensor state is compared like DCP's non-tensor entries (role "value"): the ShardedObjects (`rng_state/
shard_P.T_...`) and common.pt's entries under "common." (`common.args.lr`, `common.iteration`). Both are
unpickled weights-only with exactly Megatron-LM's globals (argparse.Namespace, numpy's array and dtype: the
random state) read as inert stand-ins (read/megatron.py's MEGATRON_GLOBALS): an args field is a value
("common.args.lr"), a numpy array its bytes. A missing or unreadable common.pt is one error line, its entries
not compared.
"""

from __future__ import annotations

import json
from pathlib import Path

from weightdiff.errors import BadInput
from weightdiff.read.dcp import METADATA, read_dcp
from weightdiff.read.files import read_bounded
from weightdiff.read.megatron import MEGATRON_GLOBALS, load_megatron
from weightdiff.records import RankDump

KIND = "megatron-torch-dist"
COMMON = "common.pt"
CONFIG = "metadata.json"


def is_torch_dist_folder(path: Path) -> bool:
    """A Megatron-Core iteration folder saved with the torch_dist strategy: DCP's .metadata beside
    metadata.json or common.pt (what dist_checkpointing.save writes)."""
    return (path / METADATA).is_file() and ((path / CONFIG).is_file() or (path / COMMON).is_file())


def _backend(folder: Path) -> str | None:
    try:
        config = json.loads(read_bounded(folder / CONFIG, limit=1 << 16, what="Megatron-Core's metadata.json"))
    except (BadInput, ValueError):
        return None
    return config.get("sharded_backend") if isinstance(config, dict) else None


def read_torch_dist(folder: Path) -> tuple[RankDump, list[str]]:
    """The iteration folder as one whole-model RankDump (its tensors and values), and one-line errors."""
    backend = _backend(folder) if (folder / CONFIG).is_file() else "torch_dist"
    if backend not in ("torch_dist", None):
        raise BadInput(f"{folder}: a Megatron-Core checkpoint in the {backend!r} format; only torch_dist is read")
    errors, common = [], {}
    try:
        common = {"common": load_megatron(folder / COMMON)}
    except BadInput as e:
        errors.append(f"{e}; its entries (args, iteration, ...) are not compared")
    dump, dcp_errors = read_dcp(folder, kind=KIND, value_globals=MEGATRON_GLOBALS, more_values=common)
    if not common:
        dump.unreadable["common"] = errors[0]
    return dump, errors + dcp_errors
