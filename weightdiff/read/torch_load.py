"""torch.load for checkpoints weightdiff did not write: `weights_only=True` always, memory-mapped, and a few
named objects that frameworks pickle beside their tensors replaced by an inert stand-in.

`torch.load(weights_only=True)` refuses every global outside its allowlist. DeepSpeed's optimizer files pickle
three small objects, Megatron-LM's `model_optim_rng.pt` its argparse `Namespace` and numpy's random state.
Each reader names exactly the globals it accepts; they are mapped to `Opaque`, a class of ours that keeps its
arguments and state as plain data, so neither the framework nor any code named in the file is imported or
run. Any other global is a one-line `BadInput`.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.files import one_line, require_regular_file

DEEPSPEED_GLOBALS = (
    "deepspeed.utils.tensor_fragment.fragment_address",
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.zero.config.ZeroStageEnum",
)


_LOAD = threading.Lock()  # torch's safe_globals() is process-wide state: one unpickling at a time
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Opaque:
    """Inert stand-in for a framework's object in a checkpoint: keeps its arguments and state as data."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs = args, kwargs
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def field_dict(self) -> dict | None:
        """The fields of its pickled state when they are a dict (an argparse.Namespace's), else None."""
        state = self.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = {**(state[0] or {}), **state[1]}
        return state if isinstance(state, dict) else None

    def field(self, name: str, position: int | None = None) -> Any:
        """A field of the original object: from its pickled state (a dict, or (dict, slots)) or its
        constructor arguments."""
        state = self.field_dict()
        if state is not None and name in state:
            return state[name]
        if name in self.kwargs:
            return self.kwargs[name]
        if position is not None and position < len(self.args):
            return self.args[position]
        return None


def is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def safe_load(path: Path, *, mmap: bool = False, allowed: Iterable[str] = DEEPSPEED_GLOBALS) -> Any:
    """torch.load(path, weights_only=True) with the globals `allowed` mapped to `Opaque`; BadInput on failure."""
    require_regular_file(path)  # a FIFO would block torch.load forever
    if path.stat().st_size == 0:
        raise BadInput(f"{path}: an empty file (0 bytes), not a torch.save file")
    import torch

    try:
        with _LOAD, torch.serialization.safe_globals([(Opaque, name) for name in allowed]):
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
            except RuntimeError as e:
                if not mmap or ("mmap" not in str(e) and "zipfile" not in str(e)):
                    raise
                return torch.load(path, map_location="cpu", weights_only=True)  # the legacy (non-zip) format
    except Exception as e:
        raise BadInput(f"{path}: cannot load with torch.load(weights_only=True) ({_why(e)})") from None


def load_bytes(raw: bytes, *, allowed: Iterable[str] = (), what: str) -> Any:
    """torch.load of bytes in memory (weights_only=True, the globals `allowed` mapped to `Opaque`); BadInput naming
    `what` on failure."""
    import io

    import torch

    try:
        with _LOAD, torch.serialization.safe_globals([(Opaque, name) for name in allowed]):
            return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:
        raise BadInput(f"{what} cannot be loaded safely ({_why(e)})") from None


def _why(e: Exception) -> str:
    """torch's refusal as its one informative line, the refused global named ("Unsupported global: GLOBAL
    os.system", "unsupported GLOBAL posix.system whose module posix is blocked"), no colours, never its advice
    to load with weights_only=False (which would run the file's code)."""
    text = _ANSI.sub("", str(e))
    found = re.search(r"[Uu]nsupported (?:global: )?GLOBAL ([\w.]+)", text)
    if found:
        return (f"it refers to {found.group(1)}, which a weights-only load refuses to construct or call: only "
                "tensors and plain data are read, never a file's code")
    if "Weights only load failed" in text:  # torch's preamble, then the reason on a later line
        reason = next((line.strip() for line in text.splitlines()[1:] if line.strip()
                       and not line.startswith(("Check the documentation", "Weights only"))), "")
        return one_line(Exception(reason)) if reason else "torch refused it in a weights-only load"
    return one_line(Exception(text)) if text.strip() else f"{type(e).__name__}: empty or truncated?"


def walk(state: Any, key: tuple) -> Any:
    """state[key[0]][key[1]]... (dict keys and list indices), or None where the path does not exist."""
    for part in key:
        try:
            state = state[part]
        except (KeyError, IndexError, TypeError):
            return None
    return state
