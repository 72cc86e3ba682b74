"""Point-to-point waits in a cycle, read from the stacks and their locals (causes.py asks): where a chain of
receives naming their sources ends, a receive or send that names the wrong peer, a send and a receive that name
each other with different tags, and which ranks are a pass further by a loop's counter."""

from __future__ import annotations

from hangdoctor.analysis.ahead import pass_further
from hangdoctor.analysis.node_words import calls_of
from hangdoctor.analysis.waitgraph import COMMUNICATING, Node, WaitGraph
from hangdoctor.topology import fold_ranks


def direction_of(op: str) -> str:
    """"recv", "send", or "" for an op that names neither or both (a batch of sends and receives)."""
    receives, sends = "recv" in op, "send" in op
    return "" if receives == sends else "recv" if receives else "send"


def chain_end(nodes: list[Node]) -> tuple[list[Node], list[int], str] | None:
    """Receives whose locals name their source, followed from rank to rank (a pipeline's back-pressure: stage 0
    receives from stage 1, which receives from stage 2): where every chain ends at a rank in no point-to-point
    call (a barrier, a collective, outside any call), that rank is what they all wait for: it waits elsewhere
    instead of sending. Not where the rank at the end waits in a collective rooted at a rank of the chain (a
    broadcast from the receiving stage: both wait for the other), nor where more ranks end the chains than wait in
    them (counting, for receives inside a pipeline schedule, every rank of the places at the ends: then the
    receivers are the odd ones out, one stage entered a schedule the others skipped), nor
    where a chain loops or ends at a send (a wrong peer: misnamed), nor where a source is not among the ranks
    seen."""
    views = {v.rank: (n, v) for n in nodes if n.place is not None for v in n.place.views}
    ends: dict[int, Node] = {}
    paths: list[list[int]] = []
    for node, view in views.values():
        if view.wait is None or direction_of(view.wait.op) != "recv" or view.peer is None or not view.peer.is_global:
            continue
        path, at = [view.rank], view.peer.value
        while True:
            entry = views.get(at)
            if entry is None or at in path:
                return None
            other = entry[1]
            if other.wait is None or not direction_of(other.wait.op):
                break
            if direction_of(other.wait.op) != "recv" or other.peer is None or not other.peer.is_global:
                return None
            path.append(at)
            at = other.peer.value
        end_node, end = views[at]
        if end.peer is not None and end.peer.is_global and end.peer.value in path:
            return None
        ends[end_node.id] = end_node
        paths.append(path + [at])
    if any(_unmatched_send(view, views) for _, view in views.values()):
        return None  # a send blocked toward a rank that receives nothing from it: the ranks in point-to-point calls
        # named peers that do not pair up (a stage index taken for a rank), and the end is one of those peers
    waiting = sorted({r for path in paths for r in path[:-1]})
    at_ends = sorted({path[-1] for path in paths})
    # A receive inside a pipeline schedule (call_semantics' rows) waits for a neighbour that runs the same
    # schedule: where the chain ends with the rest of the job outside it, the receivers entered a schedule the
    # others skipped (`if stage.is_last: schedule.eval()`), and their whole places count. A plain receive of the
    # program waits for the one rank it names: only the ranks the chains end at count (a stage that skipped the
    # send it owed and went on to the job's final barrier, beside ranks that are not involved).
    scheduled = any(views[r][0].schedule for r in waiting)
    counted = sum(len(n.ranks) for n in ends.values()) if scheduled else len(at_ends)
    if not ends or counted > len(waiting):
        return None  # more ranks at the end than in the chains: the receivers are the odd ones out
    found = sorted(ends.values(), key=lambda n: min(n.ranks))
    pairs = sorted({(a, b) for path in paths for a, b in zip(path, path[1:])})
    steps = ", ".join(f"rank {a} from rank {b}" for a, b in pairs[:4]) + (", ..." if len(pairs) > 4 else "")
    who = f"rank{'s' if len(waiting) > 1 else ''} {fold_ranks(waiting)} wait{'' if len(waiting) > 1 else 's'}"
    return found, at_ends, (f"the end of a chain of receives: {who} to receive ({steps}), and rank"
                            f"{'s' if len(at_ends) > 1 else ''} {fold_ranks(at_ends)} "
                            f"{'wait' if len(at_ends) > 1 else 'waits'} in {calls_of(found)} instead of sending")


def waits_back(graph: WaitGraph, ends: list[Node], at_ends: list[int]) -> str:
    """Where the collective the chain ends in waits for the receivers in turn (its group holds them: the whole
    job, by default), the words that say so, else "". Then the two sides wait for each other: the end may have
    skipped its send, or the receivers the collective (and gone on to the next step's receive); which one, only
    the order of their steps tells (a loop's counter, read with the source: without it, this is asked)."""
    ids = {n.id for n in ends}
    back = sorted({r for n in ends for e in graph.out.get(n.id, []) if e.target not in ids
                   and graph.nodes[e.target].state == COMMUNICATING for r in e.ranks})
    if not back:
        return ""
    return (f"{calls_of(ends)} waits for rank{'s' if len(back) > 1 else ''} {fold_ranks(back)} in turn: "
            f"either rank{'s' if len(at_ends) > 1 else ''} {fold_ranks(at_ends)} skipped the send or rank"
            f"{'s' if len(back) > 1 else ''} {fold_ranks(back)} the collective (and went on to the next receive): "
            f"the steps' counters (read with the source) would tell")


def _unmatched_send(view, views: dict) -> bool:
    """A rank waiting in a send whose global destination is seen and is in no receive naming it back."""
    if view.wait is None or direction_of(view.wait.op) != "send" or view.peer is None or not view.peer.is_global:
        return False
    target = views.get(view.peer.value)
    if target is None:
        return False
    other = target[1]
    return not (other.wait is not None and direction_of(other.wait.op) == "recv" and
                (other.peer is None or other.peer.value == view.rank))


def passes_further(nodes: list[Node], others: list[Node], blocks: dict | None) -> bool:
    """Every rank of `nodes` is a pass further than every rank of `others` by a loop's counter in the locals."""
    return all(a.place is not None and b.place is not None and pass_further(
        a.place.views[0].stack, b.place.views[0].stack, blocks, a.place.views[0].frame_locals,
        b.place.views[0].frame_locals) == 0 for a in nodes for b in others)


def receivers_ahead(nodes: list[Node], ends: list[Node], blocks: dict | None) -> bool:
    """Some receiver of the chain is a pass further than the ranks it ends at, by a loop's counter in the locals:
    it went past the call the end waits in (a collective it skipped) and waits for a send the end makes only after
    it; the end did not skip a send."""
    receivers = [n for n in nodes if n not in ends and n.place is not None and n.place.wait is not None
                 and direction_of(n.place.wait.op) == "recv"]
    return any(passes_further([receiver], ends, blocks) for receiver in receivers)


def misnamed(nodes: list[Node]) -> tuple[list[Node], str] | None:
    """Point-to-point calls whose locals name their peer: a receive from a rank that is itself receiving (or a
    send to a rank that is itself sending) can never complete; the nodes with the most such calls named the
    wrong peer. None when no node stands out. Not a call of a schedule (call_semantics.py: DeepSpeed's
    pipeline, Megatron's, torch.distributed.pipelining's), whose peer the engine computes from the topology: a
    receive there waits for its stage's neighbour by design, and a neighbour in the wrong phase is not a wrong peer."""
    views = {v.rank: v for n in nodes if n.place is not None for v in n.place.views}
    counts: dict[int, list[str]] = {}
    for node in nodes:
        if node.place is None or node.schedule:
            continue
        for view in node.place.views:
            if view.wait is None or view.peer is None or not view.peer.is_global:
                continue
            mine, peer = direction_of(view.wait.op), views.get(view.peer.value)
            if not mine or peer is None or peer.wait is None or direction_of(peer.wait.op) != mine:
                continue
            if _flows_on(views, view.rank, mine):
                continue  # a pipeline's relay: its peer waits to pass on what this rank waits for
            counts.setdefault(node.id, []).append(
                f"rank {view.rank} {mine}s with {view.peer.name}={view.peer.value}, and rank {view.peer.value} is "
                f"itself in {peer.wait.op}")
    if not counts:
        return None
    most = max(len(v) for v in counts.values())
    top = [n for n in nodes if len(counts.get(n.id, [])) == most]
    if len(top) != 1:
        return None
    return top, "; ".join(counts[top[0].id][:3])


def _flows_on(views: dict, start: int, direction: str) -> bool:
    """Whether the chain of calls in one direction that starts at rank `start` (its peer in the same direction,
    that one's peer, ...) ends at a rank in the opposite call with the last link of the chain: a receive from a
    rank that is itself receiving from a rank that sends to it is a pipeline relaying, not a wrong peer (the hang
    is where that pair should have matched and did not: the stacks alone cannot see why). A chain that loops back,
    or ends elsewhere, is not one."""
    path, at = [start], views[start].peer.value
    while True:
        view = views.get(at)
        if view is None or at in path or view.wait is None:
            return False
        here = direction_of(view.wait.op)
        if view.peer is None or not view.peer.is_global or not here:
            return False
        if here != direction:
            return view.peer.value == path[-1]
        path.append(at)
        at = view.peer.value


def tag_mismatch(nodes: list[Node]) -> tuple[list[Node], str, str] | None:
    """A send and a receive that name each other (src/dst in their locals) and were both entered, with different
    tags: they can never match. The side whose tag is the default (0) while the other's is not most likely left it
    out (medium); two explicit tags that differ: both sides, low."""
    views = {v.rank: (n, v) for n in nodes if n.place is not None for v in n.place.views}
    for node, view in views.values():
        if view.wait is None or view.peer is None or not view.peer.is_global or direction_of(view.wait.op) != "send":
            continue
        other = views.get(view.peer.value)
        if other is None:
            continue
        peer_node, peer = other
        if peer.wait is None or peer.peer is None or direction_of(peer.wait.op) != "recv" \
                or not peer.peer.is_global or peer.peer.value != view.rank:
            continue
        sent, wanted = view.peer.tag, peer.peer.tag
        if sent is None or wanted is None or sent == wanted:
            continue
        detail = (f"rank {view.rank} sends to rank {peer.rank} with tag={sent}, and rank {peer.rank} receives from "
                  f"rank {view.rank} with tag={wanted}: the two can never match")
        if wanted == 0:
            return [peer_node], "medium", f"receives without the sender's tag (tag=0, the default): {detail}"
        if sent == 0:
            return [node], "medium", f"sends without the receiver's tag (tag=0, the default): {detail}"
        return [node, peer_node] if node is not peer_node else [node], "low", f"tags differ: {detail}"
    return None
