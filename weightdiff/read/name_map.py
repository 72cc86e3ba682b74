"""`--name-map FILE`: rename tensors by prefix before pairing, for two formats that name the same model apart
(a DeepSpeed pipeline checkpoint's "tied_modules.embed.word_embeddings.weight" and "3.dense.weight" against
its HF export's "embed.word_embeddings.weight" and "blocks.1.dense.weight").

FILE is a JSON object {"old prefix": "new prefix", ...}. Every name on both sides that starts with an old
prefix has it replaced (the longest matching prefix, once); values are still read under the original name.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from weightdiff.errors import BadInput
from weightdiff.read.files import read_bounded
from weightdiff.read.sources import Selection
from weightdiff.read.values import Values, open_source
from weightdiff.records import RankDump, TensorMeta

MAX_MAP_BYTES = 16 << 20


def load_name_map(path: Path) -> dict[str, str]:
    raw = read_bounded(path, limit=MAX_MAP_BYTES, what="a name map")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise BadInput(f"{path}: not a JSON name map ({type(e).__name__})") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in data.items()):
        raise BadInput(f'{path}: a name map is a JSON object of prefixes, {{"old.prefix.": "new.prefix."}}')
    return data


def rename(name: str, mapping: dict[str, str]) -> str:
    matches = [old for old in mapping if name.startswith(old)]
    if not matches:
        return name
    old = max(matches, key=len)
    return mapping[old] + name[len(old):]


class RenamedValues:
    """The Values interface of one side under other names: `original` maps a name asked for to the name read."""

    def __init__(self, values: Values, original: dict[str, str]):
        self._values, self._original = values, original

    def names(self) -> set[str]:
        return set(self._original)

    def get(self, name: str) -> Any:
        return self._values.get(self._original.get(name, name))

    def rows(self, name: str, start: int, stop: int) -> Any:
        return self._values.rows(self._original.get(name, name), start, stop)

    def release(self, name: str) -> None:
        release = getattr(self._values, "release", None)
        if release is not None:
            release(self._original.get(name, name))

    def close(self) -> None:
        self._values.close()


class _RenamedSource:
    def __init__(self, source: Any, expected: dict, original: dict[str, str]):
        self._source, self._expected, self._original = source, expected, original

    def open(self) -> RenamedValues:
        return RenamedValues(open_source(self._source, self._expected), self._original)


def _rename_meta(meta: TensorMeta, mapping: dict[str, str]) -> TensorMeta:
    tie = meta.tie
    if tie is not None:  # a tied weight's other names are names too
        tie = replace(tie, key=rename(tie.key, mapping), aliases=tuple(rename(n, mapping) for n in tie.aliases))
    return replace(meta, name=rename(meta.name, mapping), tie=tie)


def _rename_dump(dump: RankDump, mapping: dict[str, str]) -> RankDump:
    original: dict[str, str] = {}
    for name in dump.tensors:
        new = rename(name, mapping)
        if new in original:  # two tensors under one name: one of them would never be compared
            raise BadInput(f"the name map renames {original[new]!r} and {name!r} both to {new!r} "
                           f"(in {dump.source}); a map must keep names apart")
        original[new] = name
    tensors = {rename(n, mapping): _rename_meta(meta, mapping) for n, meta in dump.tensors.items()}
    source = _RenamedSource(dump.tensor_source, dump.tensors, original) if dump.tensor_source is not None else None
    return replace(dump, tensors=tensors, tensor_source=source,
                   absent={rename(n, mapping): why for n, why in dump.absent.items()},
                   unreadable={rename(n, mapping): why for n, why in dump.unreadable.items()})


def apply_name_map(sel: Selection, mapping: dict[str, str]) -> Selection:
    return replace(sel, dumps={key: _rename_dump(d, mapping) for key, d in sel.dumps.items()})
