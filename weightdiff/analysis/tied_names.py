"""A name that one side keeps once under another name (a tied weight), so that a diff does not call it missing.

Two cases, from the ties the readers record (weightdiff.read.shared_tensors, weightdiff.dump):
- the side without the name says which tensor it keeps for it (a dump's shared parameter, a safetensors
  file's metadata): the name is compared with that tensor, and a difference says so ("b keeps it once, as
  transformer.wte.weight");
- the side with the name holds it as one tensor with another name that both sides have (a torch.save state
  dict against a transformers export, which drops `lm_head.weight` and declares nothing): nothing is missing,
  since that tensor is compared under its other name. It is reported for information, never as a difference.
Anything else is missing, as before.
"""

from __future__ import annotations

from typing import Any

from weightdiff.records import RankDump, TensorMeta


def kept_as(dump: RankDump, name: str) -> str | None:
    """The tensor `dump` keeps for `name`, which it does not hold under that name, or None."""
    return dump.kept_names.get(name)


def held_as_one_with(present: TensorMeta, other: RankDump) -> str | None:
    """A name that `present` is one tensor with on its own side and that `other` holds, or None."""
    if present.tie is None:
        return None
    partners = (present.tie.key, *present.tie.aliases)
    return next((n for n in partners if n != present.name and n in other.tensors), None)


class Renamed:
    """The Values interface of one side, reading `kept` wherever `name` is asked for."""

    def __init__(self, values: Any, name: str, kept: str):
        self.values, self.name, self.kept = values, name, kept

    def _real(self, name: str) -> str:
        return self.kept if name == self.name else name

    def get(self, name: str) -> Any:
        return self.values.get(self._real(name))

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self.values.rows(self._real(name), start, stop)

    def release(self, name: str) -> None:
        release = getattr(self.values, "release", None)
        if release is not None:
            release(self._real(name))

    def names(self) -> set[str]:
        return self.values.names()

    def close(self) -> None:
        pass
