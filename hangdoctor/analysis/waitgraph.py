"""The wait-for graph: who waits for whom, and the evidence for each edge.

Nodes are places (ranks that answered and sit in the same call, places.py) and the ranks that did not answer
(one node per status) or were never found. An edge "A waits for B" names the ranks of B that A waits for and why
we think so, from the strongest evidence to the weakest:

    explicit   a local of the wait names the peer (src=3, src_stage=0 with the topology), or the Flight Recorder
    semantic   the call's meaning (call_semantics.py) placed in the topology: DeepSpeed's recv_activations
               receives from the previous stage, its loss broadcast comes from the last stage, ZeRO's collectives
               span the data-parallel group
    assumed    a collective whose group we cannot see: the default group, every rank not in the same call
    possible   a rank waiting on its GPU may wait for an asynchronous collective that others have not issued;
               a rank inside a collective of a GPU job may already be matched by ranks past it (NCCL returns
               before it completes)

Ranks in the same place as the waiter are with it, never waited for. Local waits (a lock, a batch, a sleep, I/O),
busy ranks and ranks that did not answer wait for no peer. The graph is built per place, never per pair of ranks:
a rank's group along an axis is found through its coordinates, so that 100k ranks cost one pass.
causes.py reads the cause off the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.analysis.call_semantics import ROWS, CallMeaning, meaning
from hangdoctor.analysis.group_names import named_group_members
from hangdoctor.analysis.places import Place
from hangdoctor.analysis.ranks import BUSY, STUCK, RankView
from hangdoctor.analysis.stores import CONNECTING
from hangdoctor.analysis.wait_rule import LOCAL_KINDS
from hangdoctor.model import MISSING
from hangdoctor.topology import ParallelDims, fold_ranks

STRENGTH = ("possible", "assumed", "semantic", "explicit")  # weakest first
COMMUNICATING, DEVICE, LOCAL, RUNNING, OUTSIDE, SILENT = "communicating", "device", "local", "running", "outside", "silent"


@dataclass
class Node:
    id: int
    ranks: list[int]
    state: str  # COMMUNICATING, DEVICE (waits on the GPU), LOCAL, RUNNING (busy or progressing), OUTSIDE, SILENT
    label: str  # the place's position, or the silent ranks' status
    place: Place | None = None
    status: str = ""  # for SILENT: stopped, d-state, gone, missing, timeout, ...
    peers: str = ""  # whom it waits for, in words ("the previous stage", "the default group (assumed)")
    schedule: str = ""  # the schedule whose phase it is in, and the phase's order (call_semantics.py)
    phase: int = 0
    phase_says: str = ""
    unserved: bool = False  # its ranks were told a rendezvous store that no rank of the job serves

    @property
    def waits_for_peers(self) -> bool:
        return self.state in (COMMUNICATING, DEVICE)


@dataclass
class Edge:
    waiter: int  # node id
    target: int  # node id
    ranks: list[int]  # the target's ranks that the waiter waits for
    strength: str  # one of STRENGTH
    evidence: str  # in words
    kind: str = ""  # "lock-holder": the target is inside a `with` block the waiter waits to enter


@dataclass
class WaitGraph:
    nodes: list[Node]
    edges: list[Edge]
    gpu_job: bool  # some rank uses a GPU: a rank past a call may have issued it (NCCL)
    blocks: dict | None = None  # {(file, line): loops and conditions around the line}, from the source (ahead.py)
    out: dict[int, list[Edge]] = field(default_factory=dict)
    into: dict[int, list[Edge]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for edge in self.edges:
            self.out.setdefault(edge.waiter, []).append(edge)
            self.into.setdefault(edge.target, []).append(edge)


def _node_state(place: Place) -> str:
    if place.moving or place.activity == BUSY:
        return RUNNING
    if place.in_collective or _via_thread(place) is not None:
        return COMMUNICATING
    if place.activity == "device-sync":
        return DEVICE
    if place.activity in LOCAL_KINDS:
        return LOCAL
    return OUTSIDE


def _via_thread(place: Place):
    """The communication wait of another thread that every rank of the place waits on (its main thread waits for
    a lock that thread holds, a future it completes, its join): (thread name, wait), or None."""
    if place.in_collective or not place.views or any(v.helper is None for v in place.views):
        return None
    return place.views[0].helper


def build_graph(places: list[Place], silent: dict[str, list[int]], dims: ParallelDims | None,
                source: dict | None = None, blocks: dict | None = None, rows: tuple | None = None) -> WaitGraph:
    """silent: status -> ranks that did not answer (missing ones under MISSING)."""
    nodes: list[Node] = []
    for place in places:
        nodes.append(Node(len(nodes), place.ranks, _node_state(place), place.position, place))
    for status, ranks in sorted(silent.items()):
        if ranks:
            nodes.append(Node(len(nodes), sorted(ranks), SILENT, status, status=status))
    node_of: dict[int, int] = {}
    for node in nodes:
        for rank in node.ranks:
            node_of[rank] = node.id
    gpu_job = any(p.gpu or _stuck_on_device(p) for p in places)
    edges: list[Edge] = []
    for node in nodes:
        if node.state == COMMUNICATING:
            edges += _comm_edges(node, nodes, node_of, dims, source, gpu_job, rows or ROWS)
    edges += _holder_edges(nodes, blocks)
    for node in nodes:  # after the calls' edges: a GPU wait is read against who waits for it
        if node.state == DEVICE:
            edges += _device_edges(node, nodes, edges)
        elif node.state == OUTSIDE:
            edges += [Edge(node.id, other.id, other.ranks, "assumed",
                           "it is idle outside any wait we know: perhaps blocked in a call we cannot see (a work "
                           "handle, a GPU synchronisation) that waits for these ranks")
                      for other in nodes if other.state == COMMUNICATING]
    return WaitGraph(nodes, _by_elimination([_unseen(e, nodes) for e in edges], nodes), gpu_job, blocks)


def _holder_edges(nodes: list[Node], blocks: dict | None) -> list[Edge]:
    """A rank in a local wait to enter a `with` statement (its lock's __enter__ or acquire below the frame at the
    statement's line: a file lock, a process-shared lock) while other ranks are inside that block, in the same
    function of the same file: they hold what it waits for. Read from the blocks collectors parse (attach)."""
    edges = []
    for node in nodes:
        if node.state != LOCAL or node.place is None or not node.place.views:
            continue
        view = node.place.views[0]
        before = len(edges)
        edges += _shared_lock_holders(node, nodes, blocks or {})
        if len(edges) > before:
            continue
        entering = _entering_with(view.stack, blocks or {})
        exact = entering is not None
        if entering is None and view.wait is not None and view.wait.kind == "lock":
            entering = _entering_by_order(view.stack)
        if entering is None:
            continue
        frame, first, last = entering
        for other in nodes:
            if other is node or other.place is None:
                continue
            holders = [v.rank for v in other.place.views
                       if any(f.file == frame.file and f.name == frame.name and first < f.line <= last
                              for f in v.stack if not f.native)]
            if holders and exact:
                edges.append(Edge(node.id, other.id, holders, "semantic",
                                  f"it waits to enter the `with` at {frame.file}:{first} ({frame.name}), inside "
                                  f"which rank{'s' if len(holders) > 1 else ''} {fold_ranks(holders)} "
                                  f"{'are' if len(holders) > 1 else 'is'}: what it waits for is held there",
                                  kind="lock-holder"))
            # from the line order alone, and only one rank further along: a lock has one holder (several ranks
            # past it are past it, not holding it)
            elif len(holders) == 1 and other.state == COMMUNICATING:
                edges.append(Edge(node.id, other.id, holders, "semantic",
                                  f"it waits for a lock at {frame.file}:{first} ({frame.name}), and rank"
                                  f"{'s' if len(holders) > 1 else ''} {fold_ranks(holders)} "
                                  f"{'are' if len(holders) > 1 else 'is'} further along in that function, in a call: "
                                  f"past the lock, perhaps holding it (line order only: attach reads the source's "
                                  f"blocks, which say)", kind="lock-holder-order"))
    return edges


SHARED_LOCKS = ("file lock", "FileBaton", "multiprocessing lock")  # the ops of locks held across processes


def _shared_lock_holders(node: Node, nodes: list[Node], blocks: dict) -> list[Edge]:
    """Ranks waiting to take a lock shared between processes (a multiprocessing Lock, a file lock): its holder is
    another process, perhaps another rank. With the source's blocks, a rank inside a `with` of the same function
    over the same expression (`with lock:` in the branch the waiters did not take) holds it. Without them nothing
    is said: the holder is as often a process outside the ranks (a child that died in the locked section, a stale
    lock file) as another rank, and the stacks look the same."""
    view = node.place.views[0]
    wait = view.wait
    if wait is None or wait.op not in SHARED_LOCKS or wait.caller is None:
        return []
    caller = wait.caller
    items = next((set(i[2]) for i in (blocks.get((caller.file, caller.line)) or {}).get("with_items") or ()
                  if i[0] == caller.line), set())
    others = [o for o in nodes if o is not node and o.place is not None and o.state != SILENT
              and not (o.place.wait is not None and o.place.wait.op in SHARED_LOCKS)]
    edges = []
    for other in others:
        holders = [v.rank for v in other.place.views if items and any(
            f.file == caller.file and f.name == caller.name and any(
                i[0] <= f.line <= i[1] and items & set(i[2])
                for i in (blocks.get((f.file, f.line)) or {}).get("with_items") or ())
            for f in v.stack if not f.native)]
        if holders:
            edges.append(Edge(node.id, other.id, holders, "semantic",
                              f"it waits to enter `with {sorted(items)[0]}:` at {caller.file}:{caller.line} "
                              f"({caller.name}), a lock shared between processes, and rank"
                              f"{'s' if len(holders) > 1 else ''} {fold_ranks(holders)} "
                              f"{'are' if len(holders) > 1 else 'is'} inside another `with {sorted(items)[0]}:` of "
                              f"that function: what it waits for is held there", kind="lock-holder"))
    return edges


def _entering_by_order(stack):
    """Without the source: (frame, line, a bound) of the frame that called the lock's acquire or __enter__; ranks
    further along in that function (a later line) have passed it."""
    entering = False
    for frame in stack:
        if frame.native:
            continue
        if frame.name.endswith(("__enter__", "__aenter__", "acquire")):
            entering = True
            continue
        if entering and frame.line:
            return frame, frame.line, 1 << 30
    return None


def _entering_with(stack, blocks: dict):
    """(frame, first, last) of the innermost `with` statement this stack waits to enter, or None."""
    entering = False
    for frame in stack:  # innermost first
        if frame.native:
            continue
        if frame.name.endswith(("__enter__", "__aenter__", "acquire")):
            entering = True
            continue
        known = blocks.get((frame.file, frame.line))
        if entering and known:
            found = next(((first, last) for first, last in known.get("withs") or () if first == frame.line), None)
            if found is not None:
                return frame, found[0], found[1]
    return None


def _by_elimination(edges: list[Edge], nodes: list[Node]) -> list[Edge]:
    """A collective whose group we assumed, with one other place its missing members can be in: they are there.
    (A rank alone in an all_reduce waits for members that are somewhere; with one other place, that is it.)"""
    assumed: dict[int, list[Edge]] = {}
    for edge in edges:
        if edge.strength in ("assumed", "possible") and nodes[edge.waiter].state == COMMUNICATING:
            assumed.setdefault(edge.waiter, []).append(edge)
    sure = {id(found[0]) for found in assumed.values()
            if len(found) == 1 and found[0].strength == "assumed"
            and nodes[found[0].target].state not in (OUTSIDE, DEVICE)  # those may be past the call, unseen
            and not any(
                e.waiter == found[0].waiter and e.strength not in ("assumed", "possible") for e in edges)}
    return [Edge(e.waiter, e.target, e.ranks, "semantic", "the only other ranks its call can be waiting for")
            if id(e) in sure else e for e in edges]


def _stuck_on_device(place: Place) -> bool:
    """Ranks whose GPU use nobody knows (a py-spy dump without native frames) found at one synchronising line
    (`.item()`, read from its source) in every one of two samples or more: on a CPU tensor such a call returns at
    once, so they wait on a device, and the job's collectives are a GPU's (NCCL returns before they complete)."""
    return (place.gpu is None and place.wait is not None and place.wait.kind == "device-sync"
            and place.progress.get(STUCK, 0) == len(place.ranks) and all(v.answered >= 2 for v in place.views))


def _device_edges(node: Node, nodes: list[Node], edges: list[Edge]) -> list[Edge]:
    """A rank waiting on its GPU waits for the asynchronous collectives it issued, which need every member to
    issue them too: a rank that is out of the job's calls (idle in a task loop, a local wait, gone) is the likely
    one; a rank inside a call that does not wait for this one may not have issued it yet. Ranks that wait for this
    one are past that point."""
    waiting_for_it = {e.waiter for e in edges if e.target == node.id and e.strength != "possible"}
    found = []
    for other in nodes:
        if other.id == node.id or other.id in waiting_for_it:
            continue
        if _idle_majority(other, node):
            continue
        if other.state in (LOCAL, SILENT):
            found.append(Edge(node.id, other.id, other.ranks, "assumed", "it waits on its GPU, likely for an "
                              "asynchronous collective that these ranks, out of the job's calls, never issued"))
        elif other.state == COMMUNICATING:
            found.append(Edge(node.id, other.id, other.ranks, "possible", "it waits on its GPU, perhaps for an "
                              "asynchronous collective these ranks have not issued"))
    return found


def _idle_majority(other: Node, node: Node) -> bool:
    """More workers idle in their task loop than ranks waiting on their GPU: the job is where the idle ones are
    (their tasks returned), and the GPU waiters more likely issued a call of their own than the idle ones all
    skipped one: no edge (the GPU waiters are then the odd ones out)."""
    wait = other.place.wait if other.place is not None else None
    return wait is not None and wait.idle and len(other.ranks) > len(node.ranks)


def _unseen(edge: Edge, nodes: list[Node]) -> Edge:
    """An edge into ranks nobody dumped is only possible: we cannot tell them from ranks we did not look at."""
    if nodes[edge.target].status == MISSING and edge.strength != "possible":
        return Edge(edge.waiter, edge.target, edge.ranks, "possible", edge.evidence + " (no dump of these ranks)")
    return edge


def _comm_edges(node: Node, nodes: list[Node], node_of: dict[int, int], dims: ParallelDims | None,
                source: dict | None, gpu_job: bool, rows: tuple) -> list[Edge]:
    place = node.place
    via = _via_thread(place)
    found = _meaning(place.views[0], source, rows) if via is None else None
    if found is not None:
        node.schedule, node.phase, node.phase_says = found.row.schedule, found.row.phase, found.row.says
    stores = _store_edges(node, nodes)
    if stores is not None:
        return stores
    targets, evidence = _explicit_targets(place, dims)
    if targets is not None:
        node.peers = evidence
        return _edges_to(node, targets, nodes, node_of, "explicit", evidence)
    named = _named_group_targets(place, nodes) if via is None else None
    if named is not None:
        node.peers = named[1]
        return _edges_to(node, named[0], nodes, node_of, "semantic", named[1])
    if found is not None and dims is not None:
        evidence = f"{found.row.says}: {PEER_WORDS[found.row.peers]}, placed in the topology"
        node.peers = evidence
        if found.row.peers.startswith("group:"):
            return _group_edges(node, found.row.peers[6:], nodes, dims, evidence)
        targets = _stage_targets(place, found.row.peers, dims)
        if targets:  # none: the topology has no such stage (a first stage receiving?): read it like any call
            return _edges_to(node, targets, nodes, node_of, "semantic", evidence)
    # no local and no meaning: the default group, everyone not in this call
    node.peers = "every rank not in this call (the default group, assumed)" + (
        f", through its thread {via[0]!r} in {via[1].label}" if via else "")
    edges = []
    for other in nodes:
        if other.id == node.id:
            continue
        strength, why = "assumed", "a collective whose group the stacks do not show: assumed to be the default group"
        if (via[1] if via else place.wait).kind == "p2p":
            strength, why = "possible", "a point-to-point call whose peer the stacks do not show (add --locals)"
        elif place.wait is not None and place.wait.op == "gather" and other.state != SILENT and via is None:
            # a gather's other members send their part and return: a rank in another call may be past it
            strength, why = "possible", ("a gather's members other than its root send their part and return: a "
                                         "rank elsewhere may be past it, and the root's own missing part is unseen "
                                         "(add --locals: dst)")
        elif found is not None and found.row.peers in _STAGE_PEERS and len(other.ranks) > 1:
            # the call's meaning names a few stages, not the job: without the topology we cannot tell which ranks
            # of a place hold the stage it waits for (a place of one rank: that rank, as for any collective)
            strength, why = "possible", (f"{found.row.says} waits for {PEER_WORDS[found.row.peers]} only, which the "
                                         "topology would place (unknown: pass --tp and --pp)")
        elif (gpu_job and other.state in (DEVICE, OUTSIDE)) or (
                other.state == DEVICE and other.place is not None and other.place.gpu is not False):
            # a rank waiting on a device (or one whose GPU nobody knows, at `.item()`) may be past the call
            strength, why = "possible", ("a rank past the call may have issued it already (NCCL returns before "
                                         "it completes)")
        edges.append(Edge(node.id, other.id, other.ranks, strength, why))
    return edges


def _store_edges(node: Node, nodes: list[Node]) -> list[Edge] | None:
    """A rank in the rendezvous store waits for the ranks that were told to reach another store (stores.py): they
    never arrive in its own. The job's store is rank 0's (env:// makes rank 0 its server, or the launcher rank 0
    shares); ranks told another address wait in a store that no rank of the job serves, for nobody the job can
    give them: a sink. Without the addresses, a rank hosting the store waits for the ranks still connecting to
    one (native frames), which wait for an address where nobody listens. None where this does not apply."""
    place = node.place
    if place.wait is None or place.wait.kind != "store" or place.store is None or _via_thread(place) is not None:
        return None
    if place.store.role:
        return _connect_edges(node, nodes)
    mine = place.store.endpoint
    told = {v.rank: v.identity.endpoint for n in nodes if n.place is not None for v in n.place.views
            if v.identity.endpoint}
    served = told.get(0)
    if served is None:
        return None
    if mine != served:
        node.peers = f"a store at {mine} that no rank of the job serves (rank 0's is at {served})"
        node.unserved = True
        return []
    node.peers = f"the ranks told to reach another store than this one, at {mine}"
    edges = []
    for other in nodes:
        elsewhere = sorted(v.rank for v in (other.place.views if other.place is not None else [])
                           if told.get(v.rank) not in (None, mine))
        if other.id != node.id and elsewhere:
            where = sorted({told[r] for r in elsewhere})
            edges.append(Edge(node.id, other.id, elsewhere, "explicit",
                              f"rank{'s' if len(elsewhere) > 1 else ''} {fold_ranks(elsewhere)} "
                              f"{'were' if len(elsewhere) > 1 else 'was'} told to reach the store at "
                              f"{', '.join(where)}, not {mine}: never in this one"))
    return edges


def _connect_edges(node: Node, nodes: list[Node]) -> list[Edge]:
    """The host of the store waits for the ranks still connecting; those wait for an address nobody listens at."""
    if node.place.store.role == CONNECTING:
        node.peers = "a store address where nobody listens (the store's host waits for its workers at its own)"
        return []
    node.peers = "the ranks still connecting to the store"
    edges = []
    for other in nodes:
        store = other.place.store if other.place is not None else None
        if store is not None and store.role == CONNECTING:
            edges.append(Edge(node.id, other.id, other.ranks, "semantic",
                              f"rank{'s' if len(other.ranks) > 1 else ''} {fold_ranks(other.ranks)} "
                              f"{'are' if len(other.ranks) > 1 else 'is'} still connecting to the store, retrying "
                              f"(TCPClient::connect): never arrived in the one this rank hosts"))
    return edges


_STAGE_PEERS = ("prev-stage", "next-stage", "neighbour-stage", "last-stage")
PEER_WORDS = {"prev-stage": "the previous pipeline stage", "next-stage": "the next pipeline stage",
              "neighbour-stage": "a neighbouring pipeline stage", "last-stage": "the last stage of its pipeline",
              "group:dp": "its data-parallel group", "group:tp": "its tensor-parallel group",
              "group:pp": "its pipeline group", "workers": "its own workers", "threads": "its own threads"}


def _meaning(view: RankView, source: dict | None, rows: tuple) -> CallMeaning | None:
    stack, start = view.stack, 0
    if view.wait is not None and view.wait.call in stack:
        start = stack.index(view.wait.call)
    return meaning(stack, start, source, rows)


def _explicit_targets(place: Place, dims: ParallelDims | None) -> tuple[set[int] | None, str]:
    """The peers that locals name: global ranks (src, dst), or stages placed by the topology."""
    targets: set[int] = set()
    names = set()
    seen = set()
    here = set(place.ranks)
    for view in place.views:
        peer = view.peer
        # the source of its own broadcast waits for the others; a gather's root is waited for by every member, but
        # a member waits for the others too; a root in this place too waits for the call's other members: none of
        # these says whom
        if peer is None or peer.value == view.rank or peer.root or (peer.is_global and peer.value in here):
            continue
        if peer.is_global:
            targets.add(peer.value)
        elif peer.name in ("src_stage", "dst_stage", "dest_stage") and dims is not None and view.identity.coords:
            c = view.identity.coords
            if not 0 <= peer.value < dims.pp:
                continue
            targets.add(dims.rank(dp=c.dp, pp=peer.value, tp=c.tp))
        else:
            continue
        names.add(f"{peer.name}={peer.value}")
        seen.add(peer.seen)
    if not targets:
        return None, ""
    shown = sorted(names)
    where = "in the locals of its wait" if seen == {"locals"} else (
        "in its call's source line" if seen == {"source"} else "in the locals or the source line of its wait")
    return targets, f"{', '.join(shown[:3])}{' ...' if len(shown) > 3 else ''} {where}"


def _named_group_targets(place: Place, nodes: list[Node]) -> tuple[set[int], str] | None:
    """The members of the subgroup every rank of the place calls on, read from the names its frames keep the
    group and their coordinates under (group_names.py), the place's own ranks left out; None where any of its
    ranks does not say."""
    views = [v for other in nodes if other.place is not None for v in other.place.views if v.responded]
    targets: set[int] = set()
    said = ""
    for view in place.views:
        found = named_group_members(view, views)
        if found is None:
            return None
        targets |= found[0]
        said = said or found[1]
    targets -= set(place.ranks)
    return (targets, said) if targets else None


def _stage_targets(place: Place, peers: str, dims: ParallelDims) -> set[int]:
    """The pipeline neighbours each rank of the place waits for."""
    targets: set[int] = set()
    last = dims.pp - 1
    for view in place.views:
        c = view.identity.coords or _coords(view.rank, dims)
        if c is None:
            continue
        if peers in ("prev-stage", "neighbour-stage") and c.pp > 0:
            targets.add(dims.rank(dp=c.dp, pp=c.pp - 1, tp=c.tp))
        if peers in ("next-stage", "neighbour-stage") and c.pp < last:
            targets.add(dims.rank(dp=c.dp, pp=c.pp + 1, tp=c.tp))
        if peers == "last-stage":
            if c.pp < last:
                targets.add(dims.rank(dp=c.dp, pp=last, tp=c.tp))
            else:
                targets.update(dims.rank(dp=c.dp, pp=stage, tp=c.tp) for stage in range(last))
    return targets


def _coords(rank: int, dims: ParallelDims):
    try:
        return dims.coords(rank)
    except ValueError:
        return None


def _key(rank: int, axis: str, dims: ParallelDims):
    """What the members of one group along `axis` share: every other coordinate."""
    c = _coords(rank, dims)
    if c is None:
        return None
    return (c.pp, c.tp) if axis == "dp" else (c.pp, c.dp) if axis == "tp" else (c.dp, c.tp)


def _group_edges(node: Node, axis: str, nodes: list[Node], dims: ParallelDims, evidence: str) -> list[Edge]:
    """Edges to the other nodes' ranks that share a group along `axis` with a rank of this node: one pass over
    the ranks, never a list of each rank's group."""
    keys = {_key(rank, axis, dims) for rank in node.ranks}
    edges = []
    for other in nodes:
        if other.id != node.id:
            hit = [rank for rank in other.ranks if _key(rank, axis, dims) in keys]
            if hit:
                edges.append(Edge(node.id, other.id, hit, "semantic", evidence))
    return edges


def _edges_to(node: Node, targets: set[int], nodes: list[Node], node_of: dict[int, int], strength: str,
              evidence: str) -> list[Edge]:
    by_node: dict[int, list[int]] = {}
    for rank in sorted(targets):
        target = node_of.get(rank)
        if target is not None and target != node.id:
            by_node.setdefault(target, []).append(rank)
    return [Edge(node.id, target, ranks, strength, evidence) for target, ranks in by_node.items()]


def describe(graph: WaitGraph, edge: Edge) -> str:
    """"ranks 0,2 wait for rank 3 (assumed: ...)"."""
    waiting = graph.nodes[edge.waiter].ranks
    one = len(waiting) == 1
    return (f"rank{'' if one else 's'} {fold_ranks(waiting)} wait{'s' if one else ''} for rank"
            f"{'' if len(edge.ranks) == 1 else 's'} {fold_ranks(edge.ranks)} ({edge.strength}: {edge.evidence})")


__all__ = ["COMMUNICATING", "DEVICE", "Edge", "LOCAL", "Node", "OUTSIDE", "RUNNING", "SILENT", "STRENGTH", "WaitGraph",
           "build_graph", "describe"]
