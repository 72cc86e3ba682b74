"""Megatron-LM checkpoint folders (the legacy `torch` format) as RankDumps, one per (pp, tp).

Layout (NVIDIA/Megatron-LM, `megatron/training/checkpointing.py`):

    latest_checkpointed_iteration.txt                  the latest iteration, or "release"
    iter_0000002/mp_rank_TT/model_optim_rng.pt         tp rank TT, without pipeline parallelism
    iter_0000002/mp_rank_TT_PPP/model_optim_rng.pt     tp rank TT, pp rank PPP
    release/...                                        the same, for a release checkpoint

Each file is a torch.save of {"args": argparse.Namespace, "checkpoint_version", "iteration", "model": the
stage's state dict (or "model0", "model1", ... one per virtual pipeline chunk), "optimizer", "rng_state", ...}.
Names are the state dict's keys (layers numbered per stage, as Megatron saves them; chunks other than a lone
"model" are prefixed "model0.", ...). Buffers are recognised by name; `_extra_state` entries that are not
tensors are skipped. The run's dp size comes from `args.data_parallel_size`. Expert-parallel folders
(mp_rank_TT_PPP_EEE) are reported and skipped. The torch_dist format (a DCP folder per iteration) is read by
`read/mcore.py`. Masters (the float16 optimizer's fp32 copies): `read/megatron_master.py`.

Safe loading: `torch.load(weights_only=True)`, memory-mapped, with `argparse.Namespace` and numpy's array
reconstruction (the random state) read as inert stand-ins; nothing of Megatron or numpy's pickle is run.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from hangdoctor.topology import ParallelDims, RankCoords
from weightdiff.errors import BadInput
from weightdiff.read.files import read_bounded
from weightdiff.read.torch_load import safe_load
from weightdiff.read.whole import TensorDict, flatten, meta_for
from weightdiff.records import RankDump

TRACKER = "latest_checkpointed_iteration.txt"
RANK_FOLDER = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?(_\d{3})?$")
ITER_FOLDER = re.compile(r"^iter_(\d{7})$")
FILE = "model_optim_rng.pt"
MEGATRON_GLOBALS = ("argparse.Namespace", "numpy.ndarray", "numpy.dtype", "numpy.core.multiarray._reconstruct",
                    "numpy._core.multiarray._reconstruct", "_io.BytesIO")
load_megatron = partial(safe_load, mmap=True, allowed=MEGATRON_GLOBALS)


def _has_rank_folders(path: Path) -> bool:
    try:
        return any(RANK_FOLDER.match(p.name) and (p / FILE).exists() for p in path.iterdir())
    except OSError:
        return False


def is_megatron_folder(path: Path) -> bool:
    return (path / TRACKER).is_file() or _has_rank_folders(path)


def iteration_folder(path: Path, iteration: int | None) -> Path:
    """The iteration folder to read: `path` itself, iter_{N:07d} for --iteration N, else the tracker's."""
    if _has_rank_folders(path):
        return path
    if iteration is not None:
        folder = path / f"iter_{iteration:07d}"
        if not folder.is_dir():
            found = sorted(int(m[1]) for p in path.iterdir() if (m := ITER_FOLDER.match(p.name)))
            raise BadInput(f"{path}: no iteration {iteration} (iterations: {', '.join(map(str, found)) or 'none'})")
        return folder
    tracker = path / TRACKER
    if tracker.is_file():
        text = read_bounded(tracker, limit=4096, what="Megatron's tracker file").decode("utf-8", "replace").strip()
        folder = path / "release" if text == "release" else path / f"iter_{int(text):07d}" if text.isdigit() else None
        if folder is None:
            raise BadInput(f"{tracker}: neither an iteration nor 'release' ({text[:40]!r})")
        if not folder.is_dir():
            raise BadInput(f"{tracker}: names {folder.name}, which does not exist")
        return folder
    found = sorted(p for p in path.iterdir() if ITER_FOLDER.match(p.name) and _has_rank_folders(p))
    if not found:
        raise BadInput(f"{path}: no Megatron-LM iteration folder (iter_NNNNNNN/mp_rank_*/{FILE})")
    return found[-1]


def model_tensors(state: Any) -> dict[str, Any]:
    """The stage's tensors by name: "model", or "model0", "model1"... (virtual pipeline chunks) prefixed."""
    if not isinstance(state, dict):
        return {}
    if "model" in state:
        return flatten(state["model"])
    chunks = sorted((k for k in state if re.fullmatch(r"model\d+", str(k))), key=lambda k: int(k[5:]))
    return {name: t for k in chunks for name, t in flatten(state[k], f"{k}.").items()}


def _arg(state: dict, name: str) -> int | None:
    args = state.get("args")
    value = args.field(name) if hasattr(args, "field") else None
    return value if isinstance(value, int) and value > 0 else None


def read_megatron(folder: Path) -> tuple[list[RankDump], list[str]]:
    """One RankDump per (pp, tp) of an iteration folder (dp=0, standing for every dp rank), and one-line errors."""
    errors: list[str] = []
    found = {}
    for p in sorted(folder.iterdir()):
        m = RANK_FOLDER.match(p.name)
        if not m:
            continue
        if m[3]:
            errors.append(f"{p}: an expert-parallel rank folder; expert parallelism is not read, skipped")
            continue
        key = (int(m[2] or 0), int(m[1]))
        if key in found:  # mp_rank_00 beside mp_rank_00_000: two saves of one slice, neither chosen silently
            errors.append(f"{p}: a second folder for tp rank {key[1]} of pp stage {key[0]} (beside "
                          f"{found[key].parent.name}); both left out, not compared")
            found[key] = None
            continue
        found[key] = p / FILE
    if not found:
        raise BadInput(f"{folder}: no mp_rank_*/{FILE}: not a Megatron-LM iteration folder")
    doubled = {key for key, path in found.items() if path is None}
    found = {key: path for key, path in found.items() if path is not None}
    if not found:
        return [], errors
    states = {}
    for key, path in found.items():
        try:
            states[key] = load_megatron(path)
        except BadInput as e:
            errors.append(str(e))
    if not states:
        return [], errors
    first = next(iter(states.values()))
    tp = _arg(first, "tensor_model_parallel_size") or 1 + max(t for _, t in found)
    pp = _arg(first, "pipeline_model_parallel_size") or 1 + max(p for p, _ in found)
    dp = _arg(first, "data_parallel_size") or 1
    dims = ParallelDims(tp=tp, pp=pp, dp=dp)
    errors.extend(_slices_unaccounted(folder, {**found, **dict.fromkeys(doubled)}, dims))
    states = {key: state for key, state in states.items() if key[0] < pp and key[1] < tp}
    dumps = []
    for (pp_rank, tp_rank), state in sorted(states.items()):
        tensors = model_tensors(state)
        metas = {n: meta_for(n, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for n, t in tensors.items()}
        iteration = state.get("iteration") if isinstance(state.get("iteration"), int) else 0
        dumps.append(RankDump(
            coords=RankCoords(rank=dims.rank(dp=0, pp=pp_rank, tp=tp_rank), dp=0, pp=pp_rank, tp=tp_rank),
            iteration=iteration, tag="checkpoint", source=found[(pp_rank, tp_rank)], kind="megatron-checkpoint",
            mode="full", tensors=metas, tensor_source=TensorDict(tensors), world_size=dims.world_size,
            dims=ParallelDims(tp=tp, pp=pp, dp=dp), replicated_dp=True,
        ))
    return dumps, errors


def _slices_unaccounted(folder: Path, found: dict[tuple[int, int], Path], dims: ParallelDims) -> list[str]:
    """The (pp, tp) slices that the saved args call for and the folder lacks, and those beyond the args' sizes:
    either way, tensors that are not compared (never a SAME over half a model)."""
    sizes = f"its args say TP={dims.tp} PP={dims.pp}"
    lines = [f"{folder}: no {_folder_name(t, p, dims.pp)}/{FILE} ({sizes}): tp rank {t} of pp stage {p} not compared"
             for p in range(dims.pp) for t in range(dims.tp) if (p, t) not in found]
    lines += [f"{path}: beyond the checkpoint's sizes ({sizes}); not compared"
              for (p, t), path in sorted(found.items()) if path is not None and (p >= dims.pp or t >= dims.tp)]
    return lines


def _folder_name(tp_rank: int, pp_rank: int, pp_size: int) -> str:
    return f"mp_rank_{tp_rank:02d}" if pp_size == 1 else f"mp_rank_{tp_rank:02d}_{pp_rank:03d}"
