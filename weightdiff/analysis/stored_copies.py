"""Tied copies that a checkpoint does not store, checked against the copy it does store.

DeepSpeed writes a tied module only on the stage that runs the module's own forward (the first); at load the
other stages receive its tied attributes by broadcast from that stage. A dumped copy that the checkpoint
lacks (e.g. the head's on pp=last) is therefore compared with the checkpoint's stored copy of the same name
and tp rank on another stage:
- dump before the save vs checkpoint: a difference means the copies had drifted apart and the load will
  silently replace this one (the seed's tied-embedding mismatch across a restart);
- checkpoint vs dump after the load: a difference means this copy was not restored (the seed's embedding
  norm back at its defaults on the last stage).
"""

from __future__ import annotations

import threading

from weightdiff.read.values import Values, open_values
from weightdiff.records import RankDump


class StoredCopies:
    """(tp, name) -> the checkpoint slice (lowest pp) that stores `name`; values opened once per pair."""

    def __init__(self, dumps: list[RankDump]):
        self._index: dict[tuple[int, str], RankDump] = {}
        for dump in sorted((d for d in dumps if d.replicated_dp), key=lambda d: d.coords.pp):
            for name in dump.tensors:
                self._index.setdefault((dump.coords.tp, name), dump)
        self._open: dict[int, tuple[object, Values]] = {}
        self._lock = threading.Lock()

    def find(self, name: str, tp: int) -> RankDump | None:
        return self._index.get((tp, name))

    def values(self, dump: RankDump) -> Values:
        with self._lock:  # a pair's tensors may be compared in several threads
            if id(dump) not in self._open:
                manager = open_values(dump)
                self._open[id(dump)] = (manager, manager.__enter__())
            return self._open[id(dump)][1]

    def close(self) -> None:
        for manager, _ in self._open.values():
            manager.__exit__(None, None, None)
        self._open.clear()
