"""Tensors a file keeps once under several names (tied weights), recorded as ties on the readers' metadata.

A model with tied input and output embeddings has one tensor under two names (`transformer.wte.weight`,
`lm_head.weight`). The formats keep that in three ways, and a diff between two of them must not call the
second name missing:
- `torch.save` (plain state dicts, HF `.bin`, DeepSpeed's non-pipeline `module`) stores the storage once and
  both names point at it: found here by comparing each tensor's storage, offset, shape, strides and dtype.
- safetensors cannot alias: `safetensors.torch.save_model` and `huggingface_hub.save_torch_state_dict` drop the
  second name and declare it in the metadata (`{"lm_head.weight": "transformer.wte.weight"}`), in the file's
  `__metadata__` or the shard index's `metadata`; the same index metadata for their sharded `.bin`.
- transformers' `save_pretrained` drops it and declares nothing (its config's `tie_word_embeddings` says so,
  for its own loader): only the other side can then tell that the name is a tied copy.

Every name of a group gets `Tie(key=first name, aliases=the group's other names)`, as weightdiff's own dumps
record parameters shared inside one module; a name declared in metadata is an alias of the tensor it names.
weightdiff.analysis.diff reads them back: a name missing on one side is compared with the tensor that side
keeps for it, or reported as stored once when the other side holds it as one tensor with a name both have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hangdoctor.clicore.inputs import InputRefused, load_json
from weightdiff.records import Tie, TensorMeta


def storage_groups(tensors: Mapping[str, Any]) -> list[list[str]]:
    """Groups of two or more names that are the very same view of one storage (torch tensors), in file order."""
    groups: dict[tuple, list[str]] = {}
    for name, t in tensors.items():
        try:
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        except (AttributeError, RuntimeError):  # not a plain tensor (a meta or sparse one): never grouped
            continue
        if key[0] != 0:  # an empty storage has no address to share
            groups.setdefault(key, []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def declared_aliases(metadata: Any, present: set[str]) -> dict[str, str]:
    """{dropped name: the name it is stored under} from safetensors or HF index metadata: the entries whose key
    is not a tensor of the file and whose value is one. Other metadata ("format": "pt", "total_size") is not."""
    if not isinstance(metadata, Mapping):
        return {}
    return {alias: kept for alias, kept in metadata.items()
            if isinstance(alias, str) and isinstance(kept, str) and alias not in present and kept in present}


OUTPUT_EMBEDDINGS = ("lm_head.weight", "output.weight", "embed_out.weight")
INPUT_EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "tok_embeddings.weight",
                    "embeddings.weight", "embed_in.weight")
MAX_CONFIG_BYTES = 4 << 20


def config_ties(folder: Path, present: set[str]) -> dict[str, str]:
    """{the output embedding's name: the input embedding's} when the folder's HF `config.json` ties them
    (`tie_word_embeddings`, true unless it says false, as transformers' default) and the export dropped the
    output one (`save_pretrained` keeps a tied weight once). Nothing when the config is absent, unreadable,
    says false, or the names are not one output and one input embedding."""
    path = folder / "config.json"
    if not path.is_file():
        return {}
    try:
        config = load_json(path, limit=MAX_CONFIG_BYTES, what="an HF config")
    except InputRefused:
        return {}
    if not isinstance(config, dict) or "model_type" not in config or \
            config.get("tie_word_embeddings", True) is not True:
        return {}
    inputs = [n for n in present if n.endswith(INPUT_EMBEDDINGS) and not n.endswith(OUTPUT_EMBEDDINGS)]
    if len(inputs) != 1 or any(n.endswith(OUTPUT_EMBEDDINGS) for n in present):
        return {}
    return {"lm_head.weight": inputs[0]}


def with_ties(metas: dict[str, TensorMeta], groups: list[list[str]],
              aliases: Mapping[str, str] | None = None) -> dict[str, TensorMeta]:
    """`metas` with a Tie on every name of each storage group, and on each kept name for its declared aliases."""
    partners: dict[str, list[str]] = {}
    for names in groups:
        for name in names:
            partners.setdefault(name, []).extend(n for n in names if n != name)
    for alias, kept in (aliases or {}).items():
        partners.setdefault(kept, []).append(alias)
    out = dict(metas)
    for name, others in partners.items():
        if name in out:
            key = next((g[0] for g in groups if name in g), name)
            out[name] = replace(out[name], tie=Tie(key=key, synced=True, aliases=tuple(dict.fromkeys(others))))
    return out
