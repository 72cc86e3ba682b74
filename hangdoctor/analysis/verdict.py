"""`diagnose(collection) -> Verdict`: who is stuck where, the suspects and why, who did not respond.

Everything the renderers show (terminal, JSON, HTML) is in the Verdict; they add nothing of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.analysis.classes import RankClass, build_classes, where
from hangdoctor.analysis.odd_locals import odd_local_suspects
from hangdoctor.analysis.odd_paths import odd_path_suspects
from hangdoctor.analysis.odd_threads import odd_thread_suspects
from hangdoctor.analysis.p2p_pairs import Crossed, P2pGap, pair_p2p
from hangdoctor.analysis.rendezvous import rendezvous_wait
from hangdoctor.analysis.places import Place, build_places, who
from hangdoctor.analysis.ranks import PROGRESSING, STUCK, RankView, view_rank
from hangdoctor.analysis.roles import assign_roles
from hangdoctor.analysis.fr_cycles import find_cycle
from hangdoctor.analysis.sequence import GroupSequence, join, merge_alike, statement, suspects_from
from hangdoctor.analysis.call_semantics import phase_of
from hangdoctor.analysis.causes import CONFIDENCE_ORDER, Cause, read_causes
from hangdoctor.analysis.self_lock import held_by_own_thread
from hangdoctor.analysis.suspects import Suspect, apply_causes, find_suspects
from hangdoctor.analysis.tree import TreeNode, build_tree, thread_frame
from hangdoctor.analysis.waitgraph import WaitGraph, build_graph
from hangdoctor.analysis.waits import WaitTable, default_table
from hangdoctor.collector.document import DEADLINE
from hangdoctor.model import NO_FR_DUMP, OK, PTRACE_DENIED, Collection, NodeReport, SetAside, Stack
from hangdoctor.topology import ParallelDims, fold_ranks


@dataclass
class Verdict:
    headline: str
    hung: bool | None  # None: one sample cannot tell stuck from slow
    expected: int  # ranks expected (world size, else ranks found)
    responded: list[int]
    unresponsive: dict[str, list[int]]  # status -> ranks (found but did not answer)
    missing: list[int]  # expected ranks no collector found
    places: list[Place]  # who is stuck where, largest first
    classes: list[RankClass]
    suspects: list[Suspect]
    hints: list[str]
    tree: TreeNode
    views: dict[int, RankView]
    dims: ParallelDims | None
    dims_source: str
    nodes: list[NodeReport]
    source: str
    samples: int
    interval: float
    warnings: list[str] = field(default_factory=list)
    all_threads: bool = False  # the tree holds every thread of each rank (the rest of the verdict: main threads)
    set_aside: list[SetAside] = field(default_factory=list)  # launchers and workers: not ranks
    partial: list[str] = field(default_factory=list)  # why the input is incomplete, beyond silent ranks
    native: bool = False  # native frames were asked for or seen
    sequences: list[GroupSequence] = field(default_factory=list)  # Flight Recorder: per process group, parting first
    flight_recorder_ranks: list[int] = field(default_factory=list)  # ranks whose Flight Recorder dump was read
    errors: list[str] = field(default_factory=list)  # input files that could not be read
    roles: dict[int, str] = field(default_factory=dict)  # rank -> role (analysis/roles.py), computed once
    graph: WaitGraph | None = None  # who waits for whom (waitgraph.py)
    causes: list[Cause] = field(default_factory=list)  # read off the graph (causes.py), the likeliest first


def _say_self_held_locks(suspects: list[Suspect], views: dict, collection: Collection) -> None:
    """A suspect whose thread waits for a lock its own outer frames hold: said once, in its reason."""
    for suspect in suspects:
        view = views.get(suspect.ranks[0]) if suspect.ranks else None
        if view is None or view.wait is None or view.wait.kind != "lock":
            continue
        said = held_by_own_thread(view.stack, collection.source_blocks, collection.source_lines)
        if said:
            suspect.reason += f"; {said}"


def diagnose(collection: Collection, *, all_threads: bool = False, table: WaitTable | None = None) -> Verdict:
    """all_threads: the merged tree holds every thread of each rank, under one `thread NAME` node per thread
    name; places, classes, waits and suspects stay those of the main threads (where training loops wait).
    table: the wait rules (default: the built-in rows after the user's, see wait_rules.py)."""
    dims = collection.dims
    table = table or default_table()
    waits: dict = {}
    views = {record.rank: view_rank(record, table, waits, collection.source_lines) for record in collection.records}
    phases: dict[int, str] = {}
    for view in views.values():  # a schedule's phases are places of their own (a forward and a backward recv)
        if view.wait is not None and view.wait.communicates:
            key = id(view.stack)
            if key not in phases:
                start = view.stack.index(view.wait.call) if view.wait.call in view.stack else 0
                phases[key] = phase_of(view.stack, start, collection.source_lines, table.call_rows)
            view.phase = phases[key]
    whole = collection.whole_job and collection.world_size
    fr_ranks = sorted(d.rank for d in collection.flight_recorder)
    fr_only = bool(fr_ranks) and not views  # Flight Recorder dumps alone: who is missing is who has no dump
    unread = collection.flight_recorder_unread
    expected = collection.world_size if whole else len(views or set(fr_ranks) | set(unread))
    missing = [r for r in range(expected) if r not in views] if whole and not fr_only else []
    responded = sorted(r for r, v in views.items() if v.responded)
    unresponsive: dict[str, list[int]] = {}
    for rank, view in sorted(views.items()):
        if not view.responded:
            unresponsive.setdefault(view.status, []).append(rank)
    places = build_places(list(views.values()), dims)
    classes = build_classes(list(views.values()), dims)
    silent_ranks = {status: ranks for status, ranks in unresponsive.items() if status != PTRACE_DENIED}
    if missing:
        silent_ranks["missing"] = missing
    graph = build_graph(places, silent_ranks, dims, collection.source_lines, collection.source_blocks,
                        table.call_rows)
    causes = read_causes(graph)
    decided = frozenset(r for c in causes if c.rule != "tie" and c.confidence != "low" for r in c.ranks)
    suspects, hints = find_suspects(list(views.values()), places, dims, missing, native=collection.native,
                                    set_aside=collection.set_aside, decided=decided, graph=graph)
    suspects = apply_causes(suspects, causes, graph, dims)
    suspects = _beyond_world(suspects, collection.world_size)
    _say_self_held_locks(suspects, views, collection)
    answered = {r for r, v in views.items() if v.responded}
    if not suspects or all(set(s.ranks) >= answered for s in suspects):  # no rank told apart by where they are:
        # how they came there may tell,
        suspects = odd_path_suspects(views, places, collection.source_blocks) or \
            odd_local_suspects(views, places, collection.source_blocks) or suspects  # or what they carry there
    if not suspects:  # or their other threads
        suspects = odd_thread_suspects(collection.records, views, table)
    # a low suspect that holds every rank that answered ("apart from the others", "waits on the GPU") tells no rank
    # apart: what else is suspected comes first (ranks that exited before the dumps, which they may all wait for)
    suspects.sort(key=lambda s: s.confidence == "low" and set(s.ranks) >= answered)
    sequences = join(collection.flight_recorder, dims, collection.world_size) if collection.flight_recorder else []
    if sequences:
        suspects, hints = with_sequence(sequences, suspects, hints, dims, unread, views, collection.source_blocks)
    gaps, crossed = pair_p2p(collection.flight_recorder) if collection.flight_recorder else ([], [])
    if gaps or crossed:
        suspects, hints = with_p2p(gaps, suspects, hints, dims, crossed)
    stacks = {rank: view.stack for rank, view in views.items() if view.stack}
    silent = {status: [r for r in ranks if not views[r].stack] for status, ranks in unresponsive.items()}
    if missing:
        silent["missing"] = missing
    if all_threads:
        stacks, others = thread_stacks(collection)
        tree = build_tree(stacks, silent, others=others)
    else:
        tree = build_tree(stacks, silent)
    warnings = list(collection.warnings)
    if PTRACE_DENIED in unresponsive:
        warnings.append(ptrace_hint(len(unresponsive[PTRACE_DENIED])))
    partial = list(collection.partial)
    empty = [rank for rank in responded if not views[rank].stack]
    if empty:  # answered, yet nothing to look at: never a complete verdict
        partial.append(f"rank{'s' if len(empty) > 1 else ''} {fold_ranks(empty)} answered with no Python stack "
                       "(an empty dump): not looked at")
    for node in collection.nodes:
        if DEADLINE in node.error:  # cut short: fewer samples than asked, so the answer is partial (exit 1)
            partial.append(f"node {node.name}: {node.error}")
        elif not node.ok or node.error:
            warnings.append(f"node {node.name}: {node.error or 'failed'}")
    hung = hung_or_not(views, places, collection.samples)
    waiting_agents = rendezvous_wait(collection.set_aside) if not views else ""
    if waiting_agents:
        hints.insert(0, waiting_agents)
    if not fr_only:
        title = headline(hung, views, places, expected, len(responded), missing, unresponsive)
        if waiting_agents:
            title = "No rank started: " + waiting_agents.split(": ", 1)[1].split(";", 1)[0]
    else:
        no_dump = [r for r in range(expected) if r not in fr_ranks] if whole else sorted(unread)
        missing, responded = [], fr_ranks
        if no_dump:  # no collector looked for them: what is absent is their dump
            unresponsive[NO_FR_DUMP] = no_dump
        title = f"Flight Recorder dumps of {len(fr_ranks)}/{expected} ranks"
        first = next(iter(merge_alike(sequences, dims)), None)
        if first:
            title += f"; first parting at #{first.parting.seq} of the {first.name}"
        elif not any(d.count for d in collection.flight_recorder):
            title += "; the dumps hold no collectives: nothing to compare"
        elif unread:
            title += f"; no parting among the dumps read (rank {fold_ranks(unread)}: unreadable)"
        else:
            title += "; every group's members issued the same collectives"
    if partial:
        title += "; partial: " + partial_reason(partial, len(empty))
    return Verdict(
        headline=title,
        hung=hung, expected=expected, responded=responded, unresponsive=unresponsive, missing=missing,
        places=places, classes=classes, suspects=suspects, hints=hints, tree=tree, views=views, dims=dims,
        dims_source=collection.dims_source, nodes=collection.nodes, source=collection.source,
        samples=collection.samples, interval=collection.interval, warnings=warnings + partial, all_threads=all_threads,
        set_aside=list(collection.set_aside), partial=partial, native=collection.native,
        sequences=sequences, flight_recorder_ranks=fr_ranks, errors=list(collection.errors),
        roles=assign_roles(suspects, unresponsive, missing, views), graph=graph, causes=causes,
    )


def partial_reason(partial: list[str], empty: int) -> str:
    """The headline's few words for why the verdict is partial, the first reason that applies."""
    cut = sum(1 for p in partial if "is cut off" in p)
    if cut:
        return f"{cut} dump{'s' if cut > 1 else ''} cut off"
    if any(DEADLINE in p for p in partial):
        return "the collection's deadline came before every sample was taken"
    if empty:
        return f"{empty} rank{'s' if empty > 1 else ''} with no Python stack"
    return partial[0].split(":", 1)[0]


def with_sequence(groups: list[GroupSequence], suspects: list[Suspect], hints: list[str],
                  dims: ParallelDims | None, unread: list[int] = (),
                  views: dict[int, RankView] | None = None,
                  blocks: dict | None = None) -> tuple[list[Suspect], list[str]]:
    """The Flight Recorder's evidence before the stacks': its suspects first (a stack suspect of the same ranks
    takes its evidence and becomes certain), its partings first among the hints. Ranks that "never issued" a
    collective while their stacks wait on the store (`new_group`, a store barrier, a rendezvous: calls the
    recorder does not hold) are waiting for the ranks that went past that call, not late: the ranks that issued
    it are then the suspects."""
    everyone, groups = groups, merge_alike(groups, dims)
    merged = groups
    found = []
    cycle = find_cycle(groups, views or {}, blocks)
    if cycle is not None:  # the two partings point at each other: the stacks say who went on (fr_cycles.py)
        hints = [cycle.reason, *hints]
        groups = [g for g in merged if g.group not in cycle.groups]
        if cycle.ranks:
            same = next((s for s in suspects if s.ranks == cycle.ranks), None)
            if same is not None:
                suspects.remove(same)
            found.append(Suspect(cycle.ranks, same.where if same else where(cycle.ranks, dims), cycle.reason,
                                 "went-past", cycle.confidence, [{"type": "flight-recorder", "text": cycle.reason}]))
        for suspect in suspects:  # a stack suspect that mixes the cycle's sides is read through it
            if set(suspect.ranks) & cycle.sides and suspect.kind != "unresponsive" and suspect.confidence != "low":
                suspect.confidence = "low"
                suspect.reason += ("; the Flight Recorder shows a cycle between process groups" +
                                   (f" that names rank{'s' if len(cycle.ranks) > 1 else ''} {fold_ranks(cycle.ranks)}"
                                    if cycle.ranks else " the stacks cannot order (see the hints)"))
    for ranks, kind, sure, reason in suspects_from(groups):
        ahead = _past_a_store_wait(ranks, kind, groups, views or {})
        if ahead is not None:
            ranks, kind, sure, reason = ahead
        evidence = {"type": "flight-recorder", "text": reason}
        same = next((s for s in suspects if s.ranks == ranks), None)
        if same is not None:
            suspects.remove(same)
            found.append(Suspect(ranks, same.where, f"{reason}; {same.reason}", kind, sure, [evidence, *same.evidence]))
        else:
            found.append(Suspect(ranks, where(ranks, dims), reason, kind, sure, [evidence]))
    for group in groups:  # stack suspects the recorder shows waiting for late ranks are explained by it
        parting = group.parting
        if parting.kind != "missing":
            continue
        waiting = {r for ranks in parting.issued.values() for r in ranks}
        for suspect in suspects:
            if set(suspect.ranks) <= waiting and suspect.kind not in ("unresponsive",):
                suspect.confidence = "low"
                suspect.reason += (f"; the Flight Recorder shows {'it' if len(suspect.ranks) == 1 else 'them'} waiting "
                                   f"in #{parting.seq} of the {group.name} for rank{'s' if len(parting.never) > 1 else ''}"
                                   f" {fold_ranks(parting.never)}, which never issued it")
    parted = [statement(g, lambda ranks: who(sorted(ranks), dims)) for g in merged][:4]
    if not parted and everyone:
        last = max((max(g.last_issued.values(), default=0), g.name) for g in everyone)
        if unread:  # the rank that parted may be one whose dump was not read: never "the collective is stuck"
            parted = [f"Flight Recorder: among the dumps read, every process group's members issued the same "
                      f"collectives (the {last[1]} up to #{last[0]}); the dump of rank {fold_ranks(unread)} could not "
                      "be read, and the parting may be there"]
        else:
            parted = [f"Flight Recorder: in every process group the members issued the same collectives (the "
                      f"{last[1]} up to #{last[0]}): no rank skipped or reordered one; if ranks still wait, the "
                      "collective itself (network, NCCL/gloo) is stuck"]
    return found + suspects, parted + hints


def _past_a_store_wait(never: list[int], kind: str, groups: list[GroupSequence],
                       views: dict[int, RankView]) -> tuple[list[int], str, str, str] | None:
    """(ranks, kind, confidence, reason) naming the ranks that issued the collective, where every rank said to
    have never issued it waits on the store (a wait no recorder entry stands for) and none of the issuers does."""
    if kind != "never-issued":
        return None
    waits = [views[r].wait for r in never if r in views]
    if len(waits) != len(never) or any(w is None or w.kind != "store" for w in waits):
        return None
    parting = next((g.parting for g in groups if g.parting is not None and g.parting.kind == "missing"
                    and sorted(g.parting.never) == never), None)
    if parting is None:
        return None
    issued = sorted(r for ranks in parting.issued.values() for r in ranks)
    if any(views[r].wait is not None and views[r].wait.kind == "store" for r in issued if r in views):
        return None
    label = waits[0].label if len({w.label for w in waits}) == 1 else "store waits"
    return (issued, "went-past", "medium",
            f"issued #{parting.seq} (Flight Recorder) while rank{'s' if len(never) > 1 else ''} {fold_ranks(never)} "
            f"wait{'' if len(never) > 1 else 's'} on the store in {label}, a call the recorder does not hold: "
            f"{'they' if len(issued) > 1 else 'it'} went past a call the others wait in (a set-up or group creation "
            f"called by some ranks only)")


def with_p2p(gaps: list[P2pGap], suspects: list[Suspect], hints: list[str],
             dims: ParallelDims | None, crossed: list[Crossed] = ()) -> tuple[list[Suspect], list[str]]:
    """Point-to-point calls paired across ranks (p2p_pairs.py): an exchange posted on two communicators first (its
    receiver, blocked there, posts nothing after it: the gaps it leaves are not its own), then the rank that never
    posted its side; stack suspects among the ranks waiting for it become low; "every group issued the same
    collectives" is no longer the whole story."""
    found, said, posters = [], [], []
    blocked = {c.receiver for c in crossed} | {c.sender for c in crossed}
    gaps = [g for g in gaps if g.late not in blocked]
    for cross in crossed:
        sure = "medium" if len(cross.off) == 1 else "low"
        for suspect in [s for s in suspects if s.ranks == cross.off]:
            suspects.remove(suspect)
        evidence = [{"type": "flight-recorder", "text": cross.sentence}]
        found.append(Suspect(cross.off, where(cross.off, dims), cross.sentence, "crossed-groups", sure, evidence))
    for late in sorted({g.late for g in gaps}):
        mine = [g for g in gaps if g.late == late]
        reason = "; ".join([g.sentence for g in mine] + sorted({g.doubt for g in mine} - {""}))
        evidence = {"type": "flight-recorder", "text": reason}
        same = next((s for s in suspects if s.ranks == [late]), None)
        if same is not None:
            suspects.remove(same)
        sure = "high" if any(g.history for g in mine) else "low"  # no history: or the poster named the wrong peer
        found.append(Suspect([late], same.where if same else where([late], dims), reason, "never-issued", sure,
                             [evidence, *(same.evidence if same else [])]))
        said += [f"rank {late} {g.sentence}" for g in mine]
        if sure == "low":
            posters += mine
    for poster in sorted({g.poster for g in posters} - {g.late for g in gaps}):
        peers = sorted({g.late for g in posters if g.poster == poster})
        reason = (f"posted a send or recv to rank{'s' if len(peers) > 1 else ''} {fold_ranks(peers)}, which "
                  f"posted nothing at all to or from it (Flight Recorder): it may have named a peer that is not its "
                  f"partner")
        same = next((s for s in suspects if s.ranks == [poster]), None)
        if same is not None:
            suspects.remove(same)
        found.append(Suspect([poster], same.where if same else where([poster], dims), reason, "wrong-peer", "low",
                             [{"type": "flight-recorder", "text": reason}, *(same.evidence if same else [])]))
    waiting = {g.poster for g in gaps} | {r for c in crossed for r in {c.sender, c.receiver} - set(c.off)}
    for suspect in suspects:
        if set(suspect.ranks) <= waiting and suspect.kind != "unresponsive" and suspect.kind != "never-issued":
            suspect.confidence = "low"
            suspect.reason += "; the Flight Recorder shows it waiting for a point-to-point call its peer never posted"
    hints = [h for h in hints if not h.startswith("Flight Recorder: in every process group")]
    return found + suspects, said[:4] + hints


def thread_stacks(collection: Collection) -> tuple[dict[int, Stack], list[tuple[int, Stack]]]:
    """Every thread of every rank, from the sample its main-thread view uses (the last that answered, else the
    last read at all), each stack ending (outermost) in its thread's marker frame: ({rank: main thread's},
    [(rank, another thread's), ...]). Stacks are interned: one thread in one place on many ranks is one object."""
    interned: dict[tuple[int, str], Stack] = {}

    def marked(thread) -> Stack:
        key = (id(thread.frames), thread.name or "")
        if key not in interned:
            interned[key] = thread.frames + (thread_frame(thread.name),)
        return interned[key]

    main_stacks, others = {}, []
    for record in collection.records:
        answered = [s for s in record.samples if s.status == OK]
        readable = answered or [s for s in record.samples if s.threads]
        if not readable:
            continue
        main = readable[-1].main_thread(record.identity.pid)
        for thread in readable[-1].threads:
            if thread.frames and thread is main:
                main_stacks[record.rank] = marked(thread)
            elif thread.frames:
                others.append((record.rank, marked(thread)))
    return main_stacks, others


def ptrace_hint(count: int) -> str:
    return (f"py-spy was refused access to {count} process{'es' if count > 1 else ''} (ptrace): run as the job's "
            f"user, or as root, or give py-spy CAP_SYS_PTRACE (`setcap cap_sys_ptrace+ep $(which py-spy)`), or "
            f"allow it with `sysctl kernel.yama.ptrace_scope=0`; in a container start it with --cap-add SYS_PTRACE")


def hung_or_not(views: dict[int, RankView], places: list[Place], samples: int) -> bool | None:
    """True: a rank that answered kept the same stack across samples. False: every rank answered and moved.
    None: cannot tell (one sample, or nobody answered)."""
    answered = [v for v in views.values() if v.responded]
    if samples < 2 or not answered:
        return None
    if any(v.progress == STUCK for v in answered):
        return True
    if len(answered) == len(views) and all(v.progress == PROGRESSING for v in answered):
        return False
    return None


def _beyond_world(suspects: list, world: int | None) -> list:
    """A suspect whose every rank is numbered at or beyond the world size the launcher gave is a process more than
    the job has ranks (a child a rank forked, a helper numbered in reading order): at most low, after the others."""
    if not world:
        return suspects
    beyond = set()
    for suspect in suspects:
        if suspect.ranks and min(suspect.ranks) >= world:
            beyond.add(id(suspect))
            if suspect.confidence != "low":
                suspect.confidence = "low"
                suspect.reason += (f"; numbered beyond the world size {world}: perhaps no rank at all (a process a "
                                   f"rank started, such as a forked child)")
    return sorted(suspects, key=lambda s: (CONFIDENCE_ORDER[s.confidence], id(s) in beyond))


def headline(hung: bool | None, views: dict[int, RankView], places: list[Place], expected: int, answered: int,
             missing: list[int], unresponsive: dict[str, list[int]]) -> str:
    silent = sum(len(r) for r in unresponsive.values()) + len(missing)
    if not views:
        return f"No rank found: 0/{expected} responded"
    if answered == 0:
        return f"No rank answered: {silent} did not respond (0/{expected} responded)"
    stuck = sum(1 for v in views.values() if v.responded and v.progress == STUCK)
    moving = sum(1 for v in views.values() if v.responded and v.progress == PROGRESSING)
    in_calls = {p.position for p in places if p.in_collective}
    waiting = sum(len(p.ranks) for p in places if p.in_collective)
    parts = []
    if hung is None:
        parts.append(f"{answered} rank{'s' if answered != 1 else ''} in {len(places)} "
                     f"place{'s' if len(places) != 1 else ''}, "
                     f"{waiting} waiting in {len(in_calls)} call{'s' if len(in_calls) != 1 else ''} (one sample)")
    elif hung:
        parts.append(f"HUNG: {stuck} rank{'s' if stuck != 1 else ''} stuck"
                     + (f", {waiting} in {len(in_calls)} call{'s' if len(in_calls) != 1 else ''}" if in_calls else ""))
        if moving:
            parts.append(f"{moving} progressing")
    else:
        parts.append(f"Not hung: all {answered} answering ranks progressed between samples")
    if silent:
        parts.append(f"{silent} did not respond")
    return "; ".join(parts) + f" ({answered}/{expected} responded)"
