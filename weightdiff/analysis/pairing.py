"""Which rank dumps of two selections are compared with which: by (pp, tp, dp) coordinates.

A checkpoint slice (one copy per (pp, tp)) stands for every dp rank of its (pp, tp); a whole-model record (a
state dict, safetensors, DCP, a universal checkpoint) is paired with every rank of the other side, which it
covers by name (`weightdiff.analysis.diff` compares only the names that rank holds).
"""

from __future__ import annotations

from weightdiff.read.sources import Selection
from weightdiff.records import RankDump


def single_whole(sel: Selection) -> RankDump | None:
    dumps = list(sel.dumps.values())
    return dumps[0] if len(dumps) == 1 and dumps[0].whole else None


def pair_keys(a: Selection, b: Selection) -> tuple[list[tuple[RankDump, RankDump]], list[RankDump], list[RankDump]]:
    """(pairs, only in a, only in b). A checkpoint side matches every dp rank of its (pp, tp); a whole-model
    side (a state dict) matches every rank of the other side, which it covers by name."""
    wa, wb = single_whole(a), single_whole(b)
    if (wa is None) != (wb is None):
        whole, other = (wa, b) if wa is not None else (wb, a)
        ranks = sorted(other.dumps.values(), key=lambda d: d.key)
        return [(whole, d) if wa is not None else (d, whole) for d in ranks], [], []
    a_repl = any(d.replicated_dp for d in a.dumps.values())
    b_repl = any(d.replicated_dp for d in b.dumps.values())
    by_slice = a_repl or b_repl

    def key(dump: RankDump) -> tuple:
        return (dump.coords.pp, dump.coords.tp) if by_slice else dump.key

    if a_repl and not b_repl:  # one checkpoint slice of a for every dp rank of b
        a_index = {key(d): d for d in a.dumps.values()}
        pairs = [(a_index[key(db)], db) for db in sorted(b.dumps.values(), key=lambda d: d.key)
                 if key(db) in a_index]
        only_b = [db for db in sorted(b.dumps.values(), key=lambda d: d.key) if key(db) not in a_index]
        used = {id(da) for da, _ in pairs}
        return pairs, [d for d in a.dumps.values() if id(d) not in used], only_b
    b_index = {key(d): d for d in b.dumps.values()}
    pairs, only_a, used = [], [], set()
    for da in sorted(a.dumps.values(), key=lambda d: d.key):
        db = b_index.get(key(da))
        if db is None:
            only_a.append(da)
        else:
            pairs.append((da, db))
            used.add(id(db))
    only_b = [d for d in b.dumps.values() if id(d) not in used]
    return pairs, only_a, sorted(only_b, key=lambda d: d.key)
