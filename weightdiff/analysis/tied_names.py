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
