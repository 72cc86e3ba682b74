"""The collective sequence as evidence: Flight Recorder dumps joined per process group.

Every rank numbers the collectives it issues in each process group (collective_seq_id, the same numbering on
every member). For each group: the members (torch's pg_config when it has them, else the ranks whose dumps
hold the group), each member's last issued and last completed sequence id, and the first id at which the
members part:
- "missing": some members issued it and others, whose dumps cover that far, never did;
- "op": members issued different ops under the same id (a broadcast here, an all_reduce there);
- "sizes": the same op with other tensor sizes or dtypes.
Only ids that every member's ring buffer still holds are compared (an old id may have been overwritten on one
rank and not on another). A member without a dump is named, never guessed. Point-to-point entries are numbered
per pair and are not compared; a rank's last entry of any kind says where it is.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hangdoctor.formats.flight_recorder import FrDump, FrEntry, GroupTrace
from hangdoctor.topology import ParallelDims, describe_group, fold_ranks, group_axes
from hangdoctor.topology.groups import AXIS_NAMES


@dataclass
class Parting:
    """The first sequence id at which a group's members part, and who did what there."""

    seq: int
    kind: str  # "missing", "op" or "sizes"
    time_ns: int  # when the first member issued it: the group that parted first in time is the likely root
    issued: dict[str, list[int]]  # what was issued under this id ("broadcast [4]") -> ranks
    never: list[int]  # members whose dumps cover that far but who never issued it
    last: dict[int, FrEntry | None]  # each member's last entry of any kind (where it is now)


@dataclass
class GroupSequence:
    group: str  # torch's process-group name ("0" is the default group)
    desc: str  # torch's description ("default_pg", "undefined", or the name given at creation)
    ranks: list[int]  # members
    name: str  # in coordinates: "pipeline group of dp=1 tp=0 [ranks 1,5]"
    axes: tuple[str, ...]  # the parallel axes it spans
    last_issued: dict[int, int]  # member -> highest collective sequence id issued
    last_completed: dict[int, int | None]  # member -> highest completed, when torch said
    no_dump: list[int] = field(default_factory=list)  # members without a dump
    parting: Parting | None = None


def join(dumps: list[FrDump], dims: ParallelDims | None, world: int | None = None) -> list[GroupSequence]:
    """One GroupSequence per process group seen in the dumps, the group that parted first (in time) first."""
    by_rank = {d.rank: d for d in dumps}
    members: dict[str, set[int]] = defaultdict(set)
    descs: dict[str, str] = {}
    for dump in dumps:
        for name, ranks in dump.group_ranks.items():
            members[name].update(ranks)
        for name in dump.sequences:
            if not dump.group_ranks.get(name):
                members[name].add(dump.rank)
        descs.update({k: v for k, v in dump.group_desc.items() if v})
    last_entry = {d.rank: max(d.entries, key=lambda e: e.time_ns, default=None) for d in dumps}
    groups = []
    for name, ranks in members.items():
        ranks_sorted = sorted(ranks)
        traces = {r: by_rank[r].sequences.get(name) for r in ranks_sorted if r in by_rank}
        if not any(traces.values()):
            continue
        axes = group_axes(ranks_sorted, dims) if dims else ()
        group = GroupSequence(
            group=name, desc=descs.get(name, ""), ranks=ranks_sorted,
            name=_name(ranks_sorted, dims, world, axes), axes=axes,
            last_issued={r: t.last if t else 0 for r, t in traces.items()},
            last_completed={r: by_rank[r].status.get(name, {}).get("last_completed_collective") for r in traces},
            no_dump=[r for r in ranks_sorted if r not in by_rank])
        group.parting = _first_parting(traces, last_entry)
        groups.append(group)
    named: dict[str, list[GroupSequence]] = {}
    for group in groups:
        named.setdefault(group.name, []).append(group)
    for same in (g for g in named.values() if len(g) > 1):  # new_group(all ranks) beside the world: told apart
        for group in same:
            if group.group == "0" or group.desc == "default_pg":
                continue
            label = group.desc if group.desc not in ("", "undefined") else f"group {group.group}"
            group.name = label + group.name[len("world"):] if group.name.startswith("world") else \
                f"{group.name} ({label})"
    groups.sort(key=lambda g: (g.parting is None, g.parting.time_ns if g.parting else 0, -len(g.ranks), g.group))
    return groups


def _name(ranks: list[int], dims: ParallelDims | None, world: int | None, axes: tuple[str, ...]) -> str:
    if dims is None and world and ranks == list(range(world)):
        return f"world [ranks {fold_ranks(ranks)}]"
    return describe_group(ranks, dims, axes if dims else None)


def _first_parting(traces: dict[int, GroupTrace | None], last_entry: dict[int, FrEntry | None]) -> Parting | None:
    """Members that issued the same sequence are compared once, as one: at 16k ranks a group holds a handful of
    distinct sequences. A member with a dump but no entry in the group issued nothing in it."""
    if len(traces) < 2:
        return None
    alike: dict[tuple[int, str], tuple[GroupTrace, list[int]]] = {}
    empty = []
    for rank, trace in traces.items():
        if trace is None:
            empty.append(rank)
        else:
            alike.setdefault(trace.key, (trace, []))[1].append(rank)
    if not alike or (len(alike) == 1 and not empty):
        return None
    start = max(trace.first for trace, _ in alike.values())  # every buffer still holds ids from here on
    end = max(trace.last for trace, _ in alike.values())
    for seq in range(start, end + 1):
        issued: dict[str, list[int]] = defaultdict(list)
        never = list(empty) if seq > 0 else []
        for trace, ranks in alike.values():
            by_seq, last = trace.seqs()
            found = by_seq.get(seq)
            if found is None:
                if last < seq:
                    never += ranks
                continue
            issued[trace.whats[found]] += ranks
        if not (never and issued) and len(issued) < 2:
            continue
        for ranks in issued.values():
            ranks.sort()
        when = min((traces[r].time_of(seq) for ranks in issued.values() for r in ranks), default=0)
        last = {r: last_entry.get(r) for r in traces}
        if never and issued:
            return Parting(seq, "missing", when, dict(issued), sorted(never), last)
        ops = {what.split(" [", 1)[0] for what in issued}
        if len(ops) == 1 and ops <= UNEVEN_OPS:
            continue  # an all_to_all's inputs differ by rank by design (each rank's split sizes): no parting
        return Parting(seq, "op" if len(ops) > 1 else "sizes", when, dict(issued), [], last)
    return None


UNEVEN_OPS = frozenset({"all_to_all", "all_to_all_single", "alltoall", "alltoall_base", "all_to_allv"})


def merge_alike(groups: list[GroupSequence], dims: ParallelDims | None) -> list[GroupSequence]:
    """Groups of the same axes that parted alike (same id, same ops, the same kind of place for the late ranks),
    as one: the pipeline groups of every tp rank of dp=1 tell one story, "pipeline groups of dp=1 [ranks 2-3,6-7]".
    Order kept (the earliest parting first); groups without a parting are left out."""
    merged: dict[tuple, GroupSequence] = {}
    alike: dict[tuple, GroupSequence] = {}  # the merged copies, by key
    for group in groups:
        parting = group.parting
        if parting is None:
            continue
        late = frozenset(e.op if e else "" for r, e in parting.last.items() if r in parting.never)
        key = (group.axes, parting.seq, parting.kind, frozenset(parting.issued), late)
        if not group.axes or key not in merged:
            merged[key if group.axes else (id(group),)] = group
            continue
        first = merged[key]
        if first is not alike.get(key):  # the first of its kind: start a merged group from a copy
            first = merged[key] = alike[key] = GroupSequence(
                group=first.group, desc=first.desc, ranks=list(first.ranks), name=first.name, axes=first.axes,
                last_issued=dict(first.last_issued), last_completed=dict(first.last_completed),
                no_dump=list(first.no_dump), parting=Parting(
                    first.parting.seq, first.parting.kind, first.parting.time_ns,
                    {what: list(r) for what, r in first.parting.issued.items()}, list(first.parting.never),
                    dict(first.parting.last)))
        first.group += f"+{group.group}"
        first.ranks += group.ranks
        first.last_issued.update(group.last_issued)
        first.last_completed.update(group.last_completed)
        first.no_dump += group.no_dump
        first.parting.time_ns = min(first.parting.time_ns, parting.time_ns)
        for what, ranks in parting.issued.items():
            first.parting.issued.setdefault(what, []).extend(ranks)
        first.parting.never += parting.never
        first.parting.last.update(parting.last)
    for key, group in alike.items():  # named once all are in (naming reads every rank's coordinates)
        group.ranks.sort()
        group.parting.never.sort()
        for ranks in group.parting.issued.values():
            ranks.sort()
        group.name = _plural_name(group.ranks, group.axes, dims)
    return list(merged.values())


def _plural_name(ranks: list[int], axes: tuple[str, ...], dims: ParallelDims | None) -> str:
    kind = " x ".join(AXIS_NAMES[a] for a in axes)
    if dims is None:
        return f"{kind} groups [ranks {fold_ranks(ranks)}]"
    coords = [dims.coords(r) for r in ranks]
    fixed = " ".join(f"{axis}={getattr(coords[0], axis)}" for axis in ("pp", "dp", "tp") if axis not in axes
                     and getattr(dims, axis) > 1 and len({getattr(c, axis) for c in coords}) == 1)
    return f"{kind} groups{' of ' + fixed if fixed else ''} [ranks {fold_ranks(ranks)}]"


def statement(group: GroupSequence, describe) -> str:
    """The parting in words, ranks named by `describe(ranks)` (coordinates), e.g. "pipeline group of dp=1 tp=0
    [ranks 1,5]: rank 1 waits in broadcast #41; rank 5 never issued #41 and is at recv #7 (p2p)"."""
    parting = group.parting
    assert parting is not None
    parts = []
    for what, ranks in sorted(parting.issued.items(), key=lambda item: item[1][0]):
        op = what.split(" [", 1)[0]
        verb = "issued" if parting.kind != "missing" else ("waits in" if len(ranks) == 1 else "wait in")
        parts.append(f"{describe(ranks)} {verb} {op} #{parting.seq}"
                     + (f" ({what.split(' ', 1)[1]})" if parting.kind == "sizes" else ""))
    if parting.never:
        heres: dict[str, list[int]] = defaultdict(list)
        groups_at: dict[str, set[str]] = defaultdict(set)
        for rank in parting.never:
            last = parting.last.get(rank)
            here = _where(last)
            heres[here].append(rank)
            if last is not None and last.group not in group.group.split("+"):
                groups_at[here].add(last.group)
        for here, ranks in heres.items():
            elsewhere = f" in group{'s' if len(groups_at[here]) > 1 else ''} {', '.join(sorted(groups_at[here]))}" \
                if groups_at[here] else ""
            parts.append(f"{describe(ranks)} never issued #{parting.seq} and {'is' if len(ranks) == 1 else 'are'} at "
                         f"{here}{elsewhere}" if here else f"{describe(ranks)} never issued #{parting.seq}")
    text = f"{group.name}: " + "; ".join(parts)
    if group.no_dump:
        text += f" (no dump of rank{'s' if len(group.no_dump) > 1 else ''} {fold_ranks(group.no_dump)})"
    return text


def _stuck_before(group: GroupSequence, parting: Parting, waiting: list[int]) -> list[int]:
    """Members that never issued the parting id because they are still inside the id before it, which every
    waiting member completed (torch's pg_status says so): held in a call the others got through, not a skip. A
    member whose last entry is a later call elsewhere (a barrier in the world) got past the id before on its own
    side: its completion record only lags (gloo marks work completed when someone asks), and it skipped."""
    prev = parting.seq - 1
    groups = group.group.split("+")

    def held_there(rank: int) -> bool:
        last = parting.last.get(rank)
        return last is None or (last.group in groups and not last.p2p and last.seq == prev)

    def completed(rank: int) -> int:
        done = group.last_completed.get(rank)
        return -1 if done is None else done

    if prev < 1 or any(completed(r) < prev for r in waiting):
        return []
    return [r for r in parting.never if group.last_issued.get(r) == prev
            and group.last_completed.get(r) is not None and completed(r) < prev and held_there(r)]


def _where(entry: FrEntry | None) -> str:
    if entry is None:
        return ""
    return f"{entry.op}{' ' + entry.detail if entry.detail else ''} #{entry.seq}{' (p2p)' if entry.p2p else ''}"


def suspects_from(groups: list[GroupSequence]) -> list[tuple[list[int], str, str, str]]:
    """(ranks, kind, confidence, reason) from the partings, the earliest first: members that never issued a
    collective the others wait in ("never-issued", high: the recorder saw it) unless they are still inside the one
    before it, which the others completed ("incomplete", low: held there, not a skip), and members that issued another
    op or other sizes under the same id ("other-op", high when they are fewer than the rest). A rank is named
    once, in the earliest parting it takes part in: the later ones are what followed."""
    out, named = [], set()
    for group in groups:
        parting = group.parting
        if parting is None:
            continue
        involved = set(parting.never) | {r for ranks in parting.issued.values() for r in ranks}
        if involved & named:  # explained by an earlier parting: its waiting ranks wait here too
            continue
        named |= involved
        if parting.kind == "missing":
            waiting = sorted(r for ranks in parting.issued.values() for r in ranks)
            ops = "/".join(sorted({w.split(" [", 1)[0] for w in parting.issued}))
            stuck = _stuck_before(group, parting, waiting)
            skipped = sorted(r for r in parting.never if r not in stuck)
            if skipped:
                out.append((skipped, "never-issued", "high",
                            f"never issued {ops} #{parting.seq} of the {group.name}, which rank"
                            f"{'s' if len(waiting) > 1 else ''} {fold_ranks(waiting)} issued (Flight Recorder)"))
            if stuck:
                prev = parting.seq - 1
                where = {_where(parting.last.get(r)) for r in stuck} - {""}
                call = where.pop() if len(where) == 1 else f"#{prev}"
                one = len(stuck) == 1
                out.append((stuck, "incomplete", "low",
                            f"{'is' if one else 'are'} still inside {call} of the {group.name}, which rank"
                            f"{'s' if len(waiting) > 1 else ''} {fold_ranks(waiting)} completed (Flight Recorder): "
                            f"#{prev} did not complete for {'it' if one else 'them'} alone, so "
                            f"{'it' if one else 'they'} never reached #{parting.seq}; the ranks disagree on #{prev} "
                            f"(an all_to_all's split sizes, a count one side expects) or a peer never sent what "
                            f"{'it waits' if one else 'they wait'} for: not {'its' if one else 'their'} own skip"))
            continue
        largest = max(parting.issued.values(), key=len)
        for what, ranks in parting.issued.items():
            if ranks is largest:
                continue
            sure = "high" if len(ranks) < len(largest) else "low"  # as many each way: either may be the odd one
            out.append((sorted(ranks), "other-op", sure,
                        f"issued {what} as #{parting.seq} of the {group.name}, where rank"
                        f"{'s' if len(largest) > 1 else ''} {fold_ranks(largest)} issued "
                        f"{next(w for w, r in parting.issued.items() if r is largest)} (Flight Recorder)"))
    return out
