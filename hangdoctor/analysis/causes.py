"""The cause, read off the wait-for graph (waitgraph.py): the ranks the others wait for, directly or through
others, that do not themselves wait for a peer.

    1. The graph's sinks: groups of nodes that no edge leaves (possible edges aside, unless nothing else is
       found). A sink of one node that others wait for is a cause: a busy or sleeping rank, a local wait, a rank
       that did not answer, one outside any call. A rank in a call waits for someone, even unseen: never a sink.
    2. A sink of several nodes is a cycle: they wait for each other. It is broken, in this order, by
       - evidence: the doubtful edges (possible, then assumed) are dropped; if that leaves a direction, its sink
         is the cause;
       - the schedule: two pipeline phases of one step (call_semantics.py), the side in the earlier phase has
         finished this step's exchanges with the other and gone on into the next step: it never entered the call
         the other waits in;
       - a tag mismatch: a send and a receive that name each other with different tags (the default 0 on one side
         is the likely omission);
       - the end of a chain of receives (each naming its source): a rank the chain ends at, in no
         point-to-point call, waits elsewhere instead of sending;
       - a wrong peer: a receive from a rank that is itself receiving (or a send to a sender);
       - a repeat: the side whose call runs inside activation recomputation (backward re-running a checkpointed
         forward) when the others' does not;
       - program order when the source says one side left a loop the others are still in (ahead.py);
       - the odd one out: fewer ranks in one call than in the others (not for sends and receives, which pair);
         only low when the lines say another side went further;
       - program order from the lines alone, between ranks all in calls; then a side in no call;
       - else a true tie: every side stays a low suspect, and the report says what would break it.
    3. Causes of several places that are one: ranks that each wait for a lock shared between processes and for
       nothing else but each other (a lock-order inversion), and busy ranks running the same code, caught at
       different points of it (a polling loop): one cause each, one suspect.
Confidence comes from the evidence and from what the cause is doing; nothing is confident against an edge, and a
rule whose ranks the others only may wait for (possible edges: a gather's root, a stage without the topology) is low.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.analysis.waitgraph import (COMMUNICATING, DEVICE, LOCAL, OUTSIDE, RUNNING, SHARED_LOCKS, SILENT,
                                           STRENGTH, Edge, Node, WaitGraph)
from hangdoctor.analysis.ahead import compare, one_pass
from hangdoctor.analysis.call_semantics import recomputing
from hangdoctor.analysis.conditional_calls import conditional_collective
from hangdoctor.analysis.node_words import calls_of, doing_of, phase_of, ranks_of, verb_of, who_of
from hangdoctor.analysis.point_to_point import (chain_end, misnamed, passes_further, receivers_ahead, tag_mismatch,
                                                waits_back)
from hangdoctor.topology import fold_ranks

_SILENT_SURE = {"stopped": "high", "d-state": "high", "gone": "medium", "missing": "medium"}
CONFIDENCE_ORDER = {"high": 0, "medium": 1, "low": 2}
TIE_BREAKERS = ("Flight Recorder (TORCH_FR_BUFFER_SIZE=2000 in the job's environment: each rank's sequence of "
                "collectives)", "`tracing run` (each rank's calls in order)", "--native", "CUDA_LAUNCH_BLOCKING=1 "
                "(with NCCL: collectives then block where they are called)")


@dataclass
class Cause:
    nodes: list[int]  # graph node ids; several for a tie
    ranks: list[int]
    confidence: str
    rule: str  # "sink", "evidence", "schedule", "odd-one-out", "tie"
    reason: str  # one sentence
    waiting: list[int] = field(default_factory=list)  # ranks that wait for it, directly or through others
    edges: list[Edge] = field(default_factory=list)  # the edges into it
    doubt: str = ""  # why it may not be the cause, where something says so (in `reason` too, after "; but ")


def read_causes(graph: WaitGraph) -> list[Cause]:
    causes: list[Cause] = []
    everyone = set(range(len(graph.nodes)))
    for floor in ("assumed", "possible"):  # what the evidence says first; what is merely possible only if nothing
        for component in _sink_components(graph, everyone, floor):
            causes += _causes_of(graph, component, floor)
        if causes:
            break
    causes = _other_stores(graph, _one_loop(graph, _lock_order(graph, causes)))
    causes.sort(key=lambda c: (CONFIDENCE_ORDER[c.confidence], -len(c.waiting), len(c.ranks), c.rule == "tie"))
    return causes




def _lock_order(graph: WaitGraph, causes: list[Cause]) -> list[Cause]:
    """Ranks at two places or more, each waiting for a lock shared between processes (a file lock, a
    multiprocessing lock) and for nothing else but each other: each holds what another waits for (a lock-order
    inversion: A holds x and waits for y, B holds y and waits for x), or a process outside them holds both. Either
    way they are one cause, named together: the one found inside the other's `with` is no more the cause than the
    other, which waits for a lock too."""
    waiting = [n for n in graph.nodes if n.state == LOCAL and n.place is not None and n.place.wait is not None
               and n.place.wait.op in SHARED_LOCKS]
    ids = {n.id for n in waiting}
    if len(waiting) < 2 or any(e.target not in ids for n in waiting for e in graph.out.get(n.id, [])):
        return causes
    if not any(set(c.nodes) & ids for c in causes):
        return causes
    where = "; ".join(f"{who_of([n])} in {n.place.wait.op} <- "
                      f"{n.place.wait.caller.name if n.place.wait.caller else '?'}" for n in waiting)
    reason = (f"each waits for a lock shared between processes ({where}), and for nothing else: each holds what "
              f"another waits for (a lock-order inversion), or a process outside them holds them; no other rank is "
              f"seen inside either lock")
    return [_cause(graph, waiting, "medium", "lock-order", reason)] + [c for c in causes if not set(c.nodes) & ids]


def _one_loop(graph: WaitGraph, causes: list[Cause]) -> list[Cause]:
    """Busy ranks that each hold the others up and run the same Python code, caught at different points of it (one
    inside a C call of its line, one on the line: a polling loop, `while not os.path.exists(...)`), are one cause:
    their places differ only by where the sampler caught them."""
    groups: dict[tuple, list[Cause]] = {}
    for cause in causes:
        node = graph.nodes[cause.nodes[0]]
        if cause.rule == "sink" and len(cause.nodes) == 1 and node.state == RUNNING and node.place is not None:
            python = [(f.file, f.name) for f in node.place.views[0].stack if not f.native]
            groups.setdefault((cause.confidence, tuple(python)), []).append(cause)
    joint = {id(c) for group in groups.values() if len(group) > 1 for c in group}
    if not joint:
        return causes
    out = [c for c in causes if id(c) not in joint]
    for (sure, _), group in groups.items():
        if len(group) < 2:
            continue
        nodes = [graph.nodes[c.nodes[0]] for c in group]
        frame = next(f for f in nodes[0].place.views[0].stack if not f.native)
        reason = (f"busy in {frame.name} ({frame.file}), running outside any wait: {who_of(nodes)} run the same code, "
                  f"caught at different points of it ({'; '.join(who_of([n]) + ': ' + n.label for n in nodes)})")
        out.append(_cause(graph, nodes, sure, "one-loop", reason))
    return out


def _other_stores(graph: WaitGraph, causes: list[Cause]) -> list[Cause]:
    """Ranks told to reach rendezvous stores that no rank of the job serves (each its own address, as a per-rank
    free-port helper gives them) are one cause: the same mistake, whatever the addresses."""
    group = [c for c in causes if len(c.nodes) == 1 and graph.nodes[c.nodes[0]].unserved]
    if len(group) < 2:
        return causes
    nodes = [graph.nodes[c.nodes[0]] for c in group]
    served = next((v.identity.endpoint for n in graph.nodes if n.place is not None for v in n.place.views
                   if v.rank == 0), "")
    reason = (f"{verb_of(nodes, 'was', 'were')} told to reach stores that no rank of the job serves "
              f"({', '.join(n.place.store.endpoint for n in nodes)}), not rank 0's at {served}: each waits in a "
              f"store of its own")
    sure = min((c.confidence for c in group), key=lambda c: -CONFIDENCE_ORDER[c])
    return [c for c in causes if c not in group] + [_cause(graph, nodes, sure, "other-store", reason)]


def _components(graph: WaitGraph, members: set[int], weakest: str) -> list[list[int]]:
    """Strongly connected components (Tarjan, iterative) of the nodes in `members`, over the edges between them
    at least as strong as `weakest`."""
    floor = STRENGTH.index(weakest)
    succ = {n: [e.target for e in graph.out.get(n, []) if e.target in members and STRENGTH.index(e.strength) >= floor]
            for n in members}
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    result: list[list[int]] = []
    counter = 0
    for root in sorted(members):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                result.append(sorted(component))
    return result


def _sink_components(graph: WaitGraph, members: set[int], weakest: str) -> list[list[int]]:
    """Components that no edge (at least `weakest`, within `members`) leaves, and that someone waits for or that
    wait for each other."""
    floor = STRENGTH.index(weakest)
    sinks = []
    for component in _components(graph, members, weakest):
        inside = set(component)
        leaves = any(e.target in members and e.target not in inside and STRENGTH.index(e.strength) >= floor
                     for n in component for e in graph.out.get(n, []))
        waited = any(e.waiter in members and STRENGTH.index(e.strength) >= floor
                     for n in component for e in graph.into.get(n, []))
        calls = len(component) == 1 and graph.nodes[component[0]].state == COMMUNICATING and graph.out.get(component[0])
        if not leaves and waited and not calls:  # a rank in a call waits for someone, even unseen: never a sink
            sinks.append(component)
    return sinks


def _waiting(graph: WaitGraph, targets: set[int]) -> list[int]:
    """Ranks of the nodes that reach `targets` over any edge (the targets' own ranks left out)."""
    seen, todo = set(targets), list(targets)
    while todo:
        node = todo.pop()
        for edge in graph.into.get(node, []):
            if edge.waiter not in seen:
                seen.add(edge.waiter)
                todo.append(edge.waiter)
    return sorted(r for n in seen - targets for r in graph.nodes[n].ranks)


def _causes_of(graph: WaitGraph, component: list[int], floor: str) -> list[Cause]:
    if len(component) == 1:
        went_on = _went_on(graph, graph.nodes[component[0]])
        return [went_on or _single(graph, graph.nodes[component[0]], "sink")]
    members = set(component)
    for weakest in ("assumed", "semantic")[1 if floor == "assumed" else 0:]:  # drop doubtful edges: possible, assumed
        strongest = max((STRENGTH.index(e.strength) for n in component for e in graph.out.get(n, [])
                         if e.target in members), default=-1)
        if STRENGTH.index(weakest) > strongest:
            break
        inner = _sink_components(graph, members, weakest)
        if inner and all(len(c) < len(component) for c in inner):
            found = []
            for part in inner:
                found += [_single(graph, graph.nodes[n], "evidence") for n in part] if len(part) == 1 else \
                    _break_cycle(graph, part)
            return found
    return _break_cycle(graph, component)


def _one_step(graph: WaitGraph, nodes: list[Node]) -> bool:
    """Every two of the nodes are in the same call of the schedule (ahead.one_pass: no loop around it, or its
    counter alike): nobody has gone on into the next step, so the phases' order says nothing."""
    views = [n.place.views[0] for n in nodes if n.place is not None]
    return len(views) == len(nodes) and all(
        one_pass(x.stack, y.stack, graph.blocks, x.frame_locals, y.frame_locals)
        for i, x in enumerate(views) for y in views[i + 1:])


def _stranded(graph: WaitGraph, nodes: list[Node]) -> Cause | None:
    """In one call of a schedule, receives whose source (its locals) is already in a later phase: that rank has
    made every send of this call, so the receivers expect more than it sent (a stage given another number of
    micro-batches): they are out of step, and whoever waits on them waits through them."""
    phase_of_rank = {r: n for n in nodes for r in n.ranks}
    stranded: dict[int, list[int]] = {}  # node id -> its ranks that receive from a rank in a later phase
    sources: set[int] = set()
    for node in nodes:
        wait = node.place.wait if node.place is not None else None
        if wait is None or wait.kind != "p2p" or "recv" not in wait.op:
            continue
        for view in node.place.views:
            source = phase_of_rank.get(view.peer.value) if view.peer is not None and view.peer.is_global else None
            if source is not None and source.phase > node.phase:
                stranded.setdefault(node.id, []).append(view.rank)
                sources.add(source.id)
    if not stranded:
        return None
    ranks = sorted(r for found in stranded.values() for r in found)
    at = [graph.nodes[n] for n in stranded]
    senders = [graph.nodes[n] for n in sorted(sources)]
    one = len(ranks) == 1
    reason = (f"{'waits' if one else 'wait'} in {phase_of(at[0])} from {who_of(senders)}, which "
              f"{verb_of(senders, 'has', 'have')} made every send of this step and {verb_of(senders, 'waits', 'wait')} "
              f"in {phase_of(senders[0])} (the same call of {at[0].schedule}, by the source's loops): "
              f"{'it expects' if one else 'they expect'} more than was sent (a stage given another number of "
              f"micro-batches)")
    cause = _cause(graph, at, "medium", "schedule-length", reason, ranks=ranks)
    cause.edges = [e for e in cause.edges if set(e.ranks) & set(ranks)]  # not the waits for their place's others
    return cause


def _break_cycle(graph: WaitGraph, component: list[int]) -> list[Cause]:
    """Nodes that wait for each other: the schedule, a wrong peer, the odd one out, program order, a rank in no
    call, else a tie (module docstring)."""
    nodes = [graph.nodes[n] for n in component]
    scheduled = [n for n in nodes if n.phase and n.schedule == nodes[0].schedule]
    phased = len(scheduled) == len(nodes) and len({n.phase for n in nodes}) > 1
    if phased and _one_step(graph, nodes):
        stranded = _stranded(graph, nodes)
        if stranded:
            return [stranded]
    elif phased:
        first = min(n.phase for n in nodes)
        early = [n for n in nodes if n.phase == first]
        late = [n for n in nodes if n.phase != first]
        # of the early side, the ranks the late side's call waits for (Megatron's embedding all-reduce waits for
        # the last stage only, not for every stage that sits in the same receive)
        named = _waited_ranks(graph, late, early)
        # which of them the late call waits for, only the topology says (a stage, not the job): low without it
        sure = "medium" if _firmly_waited(graph, late, early) else "low"
        one = len(named) == 1
        reason = (f"never entered {phase_of(late[0])} that {who_of(late)} {verb_of(late, 'waits', 'wait')} in; "
                  f"{'it is' if one else 'they are'} already in {phase_of(early[0])} of the next step "
                  f"({nodes[0].schedule}: that comes first in a step, so {'it has' if one else 'they have'} "
                  f"finished this step's exchanges with {who_of(late)} and gone on)")
        return [_cause(graph, early, sure, "schedule", reason, ranks=named)]
    held = [e for n in component for e in graph.out.get(n, []) if e.kind.startswith("lock-holder")
            and e.target in component and graph.nodes[e.target].state == COMMUNICATING]
    exact = [e for e in held if e.kind == "lock-holder"]
    if exact:  # it holds what the others wait for, and waits in a call they cannot reach while they wait
        holders = [graph.nodes[n] for n in sorted({e.target for e in held})]
        waiters = [graph.nodes[n] for n in sorted({e.waiter for e in held})]
        inside = ("and " + verb_of(holders, "it is", "they are") + " inside another `with` over the same lock"
                  if "inside another `with" in held[0].evidence else "which " + verb_of(holders, "it is", "they are")
                  + " inside")
        reason = (f"{verb_of(holders, 'holds', 'hold')} what {who_of(waiters)} {verb_of(waiters, 'waits', 'wait')} for "
                  f"({held[0].evidence.split(' (')[0].replace('it waits to enter', 'they wait to enter')}, {inside}) "
                  f"while {verb_of(holders, 'it waits', 'they wait')} in {calls_of(holders)}, which "
                  f"{who_of(waiters)} can never reach")
        return [_cause(graph, holders, "medium", "lock-holder", reason)]
    if held:  # the same from line order alone: low
        holders = [graph.nodes[n] for n in sorted({e.target for e in held})]
        waiters = [graph.nodes[n] for n in sorted({e.waiter for e in held})]
        reason = (f"{verb_of(holders, 'is', 'are')} past the lock {who_of(waiters)} "
                  f"{verb_of(waiters, 'waits', 'wait')} for (further along in the same function) and "
                  f"{verb_of(holders, 'waits', 'wait')} in {calls_of(holders)}, which {who_of(waiters)} can never "
                  f"reach: perhaps holding it (the line order says so, not the source's blocks: attach reads them)")
        return [_cause(graph, holders, "low", "lock-holder", reason)]
    tagged = tag_mismatch(nodes)  # a send and a receive that name each other and still wait: before any other
    if tagged:                     # reading of who named whom (the rest of a pipeline waits behind that pair)
        wrong, sure, detail = tagged
        return [_cause(graph, wrong, sure, "wrong-peer", detail)]
    conditional = conditional_collective(nodes, graph.blocks, graph.into)
    if conditional:  # a whole-job collective only the ranks in a branch on the rank issue
        return [_cause(graph, [conditional[0]], "medium", "rank-branch-call", conditional[1])]
    chained = chain_end(nodes)
    if chained and receivers_ahead(nodes, chained[0], graph.blocks):
        chained = None  # the receivers are a pass further: they went past the end's call, not it past its send
    if chained:
        ends, at_ends, detail = chained
        sure = "medium" if len(ends) == 1 else "low"
        back = "" if graph.blocks else waits_back(graph, ends, at_ends)
        if back:  # a cycle: the end's collective waits for the receivers in turn, and either side may have skipped
            # (with the source, the loops' counters were read above: no receiver is a pass further)
            sure = "low"
        return [_cause(graph, ends, sure, "chain-end", detail, ranks=at_ends, doubt=back)]
    wrong_peer = misnamed(nodes)
    if wrong_peer:
        wrong, detail = wrong_peer
        return [_cause(graph, wrong, "medium", "wrong-peer", f"named the wrong peer: {detail}")]
    repeat = _recomputed(nodes)
    if repeat:
        return [_cause(graph, repeat[0], "medium", "recompute", repeat[1])]
    ahead = _ahead_of_all(nodes, graph.blocks) if all(n.place is not None for n in nodes) else None
    if ahead is not None and ahead[1].by_counter and not _fewer(ahead[0], nodes):
        ahead = None  # most ranks a pass further went on by design; the few behind took a branch they did not
    if ahead is not None and ahead[1].rank_branch and len(ahead[0].ranks) > len(ranks_of(nodes)) - len(ahead[0].ranks):
        ahead = None  # the many in a branch on the rank (`else:` of `if is_main_process:`) took it by design: the
        # few outside it are the ones off the path, and the odd one out names them (as many on each side, as in
        # `if is_last_stage(): save()` on half the ranks: the branch's side stays the one off the path)
    # Most ranks past a loop that the few are still in: either the many left it early or the few take a pass more
    # (one more batch, one more sync): the stacks cannot tell, unless the few are on the loop's own line, taking
    # one more item from its iterator that the many did not get. The odd one out names the few: low when it is a
    # guess (with the other reading), as sure as it is when they fetch a pass more.
    many_left = ahead is not None and ahead[1].left_loop and \
        len(ahead[0].ranks) > len(ranks_of(nodes)) - len(ahead[0].ranks)
    if many_left and ahead[1].fetching:
        ahead = None
    if ahead is not None and ahead[1].left_loop and not many_left:  # it left the loop the others are still in
        node, order = ahead
        others = [n for n in nodes if n is not node]
        one = len(_waited_ranks(graph, others, [node])) == 1  # the ranks of its place the others wait for
        # past the loop inside a branch on the rank (`if dp_rank == 0: save()`): a path the others never take
        went = (f"took a branch on the rank that {who_of(others)} did not, past the loop "
                f"{verb_of(others, 'it is', 'they are')} still in ({order.why})" if order.rank_branch else
                f"left the loop that {who_of(others)} {verb_of(others, 'is', 'are')} still in ({order.why})")
        reason = (f"{went}: "
                  f"{'it' if one else 'they'} never entered {calls_of(others)} and "
                  f"{'waits' if one else 'wait'} in {calls_of([node])} instead")
        sure = "medium"
        if len(node.ranks) > 1 and len(others) > 1 and _only_assumed(graph, others, [node]):
            # the others wait in two calls or more, so not all in one group with these ranks: which of them each
            # waits for (one may have gone on by right), no edge says
            sure = "low"
            reason += "; the others wait in different calls, so which of these ranks each waits for, the stacks do not say"
        return [_cause(graph, [node], sure, "program-order", reason)]
    sizes = sorted({len(n.ranks) for n in nodes})
    pairing = all(n.place is not None and n.place.wait is not None and n.place.wait.kind == "p2p" for n in nodes)
    if len(sizes) > 1 and not pairing:
        smallest = [n for n in nodes if len(n.ranks) == sizes[0]]
        others = [n for n in nodes if len(n.ranks) != sizes[0]]
        sure = "medium" if all(n.state == COMMUNICATING for n in smallest) else "low"
        if len(smallest) == 1 and smallest[0].state != COMMUNICATING:
            sure = _single(graph, smallest[0], "sink").confidence
        order = None
        if len(smallest) > 1:  # several odd ones: the one furthest along, when the stacks say; else all, low
            found = _ahead_of_all(smallest, graph.blocks) if all(n.place is not None for n in smallest) else None
            if found is None:
                sure = "low"
            else:
                others += [n for n in smallest if n is not found[0]]
                smallest, order = [found[0]], found[1]
        if not _firmly_waited(graph, others, smallest):
            sure = "low"  # the others only may wait for it (a gather's root: its members may be past the call)
        if all(n.place is not None and n.place.wait is not None and n.place.wait.kind in _RECEIVING
               for n in smallest) and not passes_further(smallest, others, graph.blocks):
            sure = "low"  # it waits for a send or a result: one of the others may have skipped it, and gone on
        others_do = (f"{verb_of(others, 'waits', 'wait')} in {calls_of(others)} and for"
                     if all(n.state == COMMUNICATING for n in others) else
                     f"{verb_of(others, 'is', 'are')} {doing_of(others)} and {verb_of(others, 'waits', 'wait')} for")
        threadless = _no_helper(smallest, others)
        reason = (f"{verb_of(smallest, 'is', 'are')} the odd one out: {who_of(others)} {others_do} "
                  f"{who_of(smallest)}, which {verb_of(smallest, 'is', 'are')} "
                  f"{doing_of(smallest)} instead" + (f", further along than the others ({order.why})" if order else "")
                  if not threadless else
                  f"{verb_of(smallest, 'is', 'are')} the odd one out: {who_of(others)} {others_do} {who_of(smallest)}, "
                  f"none of whose threads is in {threadless}, the call the others' threads wait in (a task that "
                  f"failed or never ran there: its log, or --all-threads, shows)")
        counted = passes_further(smallest, others, graph.blocks)
        if counted:
            reason += (f"; by the loop's counter in the locals {verb_of(smallest, 'it is', 'they are')} a pass "
                       f"further: past the call the others wait in")
            ahead = None  # the counter says which pass each side is in: the lines' order within a pass says no more
        if ahead is not None and ahead[0] not in smallest and ahead[1].left_loop:  # many past a loop, few in it
            sure = "low"
            reason += (f"; or {who_of([ahead[0]])} left the loop early ({ahead[1].why}): the stacks cannot tell one "
                       f"pass more on {who_of(smallest)} from one less on {who_of([ahead[0]])}; the Flight Recorder "
                       f"(each rank's count of collectives) would")
        doubt = ""
        if ahead is not None and ahead[0] not in smallest and not ahead[1].left_loop:  # program order points the
            sure = "low"  # other way: both are guesses
            doubt = (f"{who_of([ahead[0]])} may be the ones that went on ({ahead[1].why}): " +
                     ("the source's loops (attach reads them) would tell" if not graph.blocks else
                      "the source shows no loop that would tell which"))
        return [_cause(graph, smallest, sure, "odd-one-out", reason, doubt=doubt)]
    if all(n.state == COMMUNICATING for n in nodes):
        if ahead is not None:
            node, order = ahead
            others = [n for n in nodes if n is not node]
            reason = (f"never entered {calls_of(others)} that {who_of(others)} {verb_of(others, 'waits', 'wait')} in: "
                      f"{verb_of([node], 'it is', 'they are')} further along ({order.why}), in {calls_of([node])}")
            return [_cause(graph, [node], "medium" if order.sure else "low", "program-order", reason)]
    calling = [n for n in nodes if n.state == COMMUNICATING]
    apart = [n for n in nodes if n.state != COMMUNICATING]
    if calling and apart:
        reason = (f"{verb_of(apart, 'is', 'are')} {doing_of(apart)} while {who_of(calling)} "
                  f"{verb_of(calling, 'waits', 'wait')} in {calls_of(calling)}")
        return [_cause(graph, apart, _single(graph, apart[0], "sink").confidence if len(apart) == 1 else "low",
                       "not-in-call", reason)]
    reason = (f"{' and '.join(who_of([n]) + ' in ' + calls_of([n]) for n in nodes)} wait for each other, and "
              f"nothing in the stacks says which side is out of step; to break the tie: " + "; ".join(TIE_BREAKERS))
    return [_cause(graph, nodes, "low", "tie", reason)]


def _went_on(graph: WaitGraph, sink: Node) -> Cause | None:
    """A rank that waits for the sink and whose loop counter says it is a pass further through the loop both are in
    (ahead.py): it skipped the sink's call in that pass and went on, and the sink waits for it there (an edge the
    graph may hold only as assumed). Then it is the cause, not the sink."""
    if sink.place is None or sink.state != COMMUNICATING:  # a rank held up in its own wait is the cause itself
        return None
    for edge in graph.into.get(sink.id, []):
        waiter = graph.nodes[edge.waiter]
        if waiter.place is None:
            continue
        mine, theirs = waiter.place.views[0], sink.place.views[0]
        order = compare(mine.stack, theirs.stack, graph.blocks, mine.frame_locals, theirs.frame_locals)
        if order is not None and order.by_counter and order.ahead == 0 and len(waiter.ranks) < len(sink.ranks):
            reason = (f"went on past {calls_of([sink])}, where {who_of([sink])} {verb_of([sink], 'waits', 'wait')} ("
                      f"{order.why}), and {verb_of([waiter], 'waits', 'wait')} in {calls_of([waiter])} of the next "
                      f"pass")
            return _cause(graph, [waiter], "medium", "program-order", reason)
    return None


def _fewer(node: Node, nodes: list[Node]) -> bool:
    """The node holds fewer ranks than all the others together: a loop's counter names it as the one that went on
    only then (the ranks a pass further are the few that skipped a call, not the many that skip a branch by
    design: `if bar.n % 100 == 0: evaluate()` where only rank 0's bar counts)."""
    return len(node.ranks) < sum(len(n.ranks) for n in nodes if n is not node)


def _ahead_of_all(nodes: list[Node], blocks: dict | None):
    """The one node that is ahead of every other in program order (ahead.py), with the order against the first
    other, or None."""
    for node in nodes:
        orders = []
        for other in nodes:
            if other is node:
                continue
            mine, theirs = node.place.views[0], other.place.views[0]
            order = compare(mine.stack, theirs.stack, blocks, mine.frame_locals, theirs.frame_locals)
            if order is None or order.ahead != 0:
                break
            orders.append(order)
        else:
            if orders:
                return node, min(orders, key=lambda o: o.sure)
    return None


def _recomputed(nodes: list[Node]) -> tuple[list[Node], str] | None:
    """The sides whose call runs inside an activation recomputation (backward re-running a checkpointed forward),
    when the other sides' calls do not: they issued a second time a call of their forward, which the others made
    once and do not repeat."""
    inside = [n for n in nodes if n.place is not None and n.place.views and n.state == COMMUNICATING
              and all(recomputing(v.stack) for v in n.place.views)]
    if not inside or len(inside) == len(nodes):
        return None
    others = [n for n in nodes if n not in inside]
    return inside, (f"{verb_of(inside, 'waits', 'wait')} in {calls_of(inside)} inside an activation recomputation "
                    f"(backward re-running a checkpointed forward): a second issue of a call its forward already made, "
                    f"which {who_of(others)} made once and {verb_of(others, 'does', 'do')} not repeat")


def _no_helper(smallest: list[Node], others: list[Node]) -> str:
    """The call the others' own threads wait in (a comm hook's pool thread in all_reduce) where the smallest sides
    wait in the same main-thread call with no thread in any: the label of that call, else ""."""
    views = [v for n in smallest for v in (n.place.views if n.place else [])]
    theirs = [v for n in others for v in (n.place.views if n.place else [])]
    if not views or not theirs or any(v.helper is not None or v.wait is None for v in views) \
            or any(v.helper is None or v.wait is None for v in theirs):
        return ""
    if {v.wait.label for v in views} != {v.wait.label for v in theirs}:
        return ""
    return theirs[0].helper[1].label


def _single(graph: WaitGraph, node: Node, rule: str) -> Cause:
    edges = graph.into.get(node.id, [])
    strongest = max((STRENGTH.index(e.strength) for e in edges), default=-1)
    state = node.state
    if state == RUNNING:
        sure = "high"
    elif state == LOCAL:
        sure = "high" if strongest >= STRENGTH.index("assumed") else "medium"
        wait = node.place.wait if node.place is not None else None
        if wait is not None and wait.sure == "low" and strongest < STRENGTH.index("semantic"):
            sure = "medium"  # a generic wait (a socket, a queue) says little: a service process idles in one too
        if node.place.idle_untitled:
            sure = "low"
        if wait is not None and wait.op in SHARED_LOCKS and not graph.blocks and edges:
            sure = "low"  # a lock shared between processes, and no source read: a rank waiting for it may hold it
    elif state == SILENT:
        sure = _SILENT_SURE.get(node.status, "low")
        if node.status == "missing" and strongest < STRENGTH.index("assumed"):
            sure = "low"  # no dump of them: we cannot tell them from ranks nobody looked at
    elif state == OUTSIDE:
        gpu = node.place.gpu if node.place is not None else None
        sure = "medium" if gpu is False else "low"
    elif state == DEVICE:
        sure = "medium" if _host_blocking(graph, edges) else "low"
    else:  # a communicating node that waits for nobody outside it, while others wait for it
        sure = "medium"
    if rule == "evidence" and sure == "high" and strongest < STRENGTH.index("semantic"):
        sure = "medium"
    waiters = sorted({r for e in edges for r in graph.nodes[e.waiter].ranks})
    reason = (f"{len(waiters)} rank{'s' if len(waiters) != 1 else ''} wait for "
              f"{'it' if len(node.ranks) == 1 else 'them'}")
    if rule == "evidence":
        reason += " by the strongest evidence (the other way round was only assumed)"
    doubt = ""
    if state == LOCAL and sure == "low" and node.place.wait is not None and node.place.wait.op in SHARED_LOCKS:
        doubt = (f"the lock is shared between processes, and rank{'s' if len(waiters) != 1 else ''} "
                 f"{fold_ranks(waiters)} may hold it while {'they wait' if len(waiters) != 1 else 'it waits'} for "
                 f"{'it' if len(node.ranks) == 1 else 'them'} (the source's `with` blocks, which attach reads, "
                 f"would say)")
    return _cause(graph, [node], sure, rule, reason, doubt=doubt)


def _host_blocking(graph: WaitGraph, edges: list[Edge]) -> bool:
    """The ranks waiting for a GPU-bound rank block on the host in a CPU collective (gloo's work wait): its GPU
    cannot be waiting for their collective."""
    for edge in edges:
        place = graph.nodes[edge.waiter].place
        if place is None or place.wait is None:
            return False
        if not (place.wait.evidence == "native" or place.gpu is False):
            return False
    return bool(edges)


def _cause(graph: WaitGraph, nodes: list[Node], confidence: str, rule: str, reason: str,
           ranks: list[int] | None = None, doubt: str = "") -> Cause:
    """ranks: the nodes' ranks that are the cause, when the edges name only some of them (default: the ranks the
    others' edges name, not the merely possible ones: a rank that shares the nodes' place and that nobody waits
    for is not the cause; all of them when no edge names fewer)."""
    ids = {n.id for n in nodes}
    edges = [e for n in nodes for e in graph.into.get(n.id, []) if e.waiter not in ids]
    if ranks is None:
        ranks = _waited_ranks(graph, [graph.nodes[e.waiter] for e in edges], nodes)
    reason += f"; but {doubt}" if doubt else ""
    return Cause([n.id for n in nodes], ranks or ranks_of(nodes), confidence, rule, reason, _waiting(graph, ids), edges,
                  doubt)


def _waited_ranks(graph: WaitGraph, waiters: list[Node], targets: list[Node]) -> list[int]:
    """The targets' ranks that the waiters' edges name (not the merely possible ones); all of them if none."""
    ids = {n.id for n in targets}
    named = {r for n in waiters for e in graph.out.get(n.id, []) if e.target in ids and e.strength != "possible"
             for r in e.ranks}
    return sorted(named & set(ranks_of(targets))) or ranks_of(targets)


_RECEIVING = ("p2p", "work-wait")  # waits for another rank's send or result, whoever it is


def _only_assumed(graph: WaitGraph, waiters: list[Node], targets: list[Node]) -> bool:
    """Every edge from the waiters into the targets is at most assumed (the default group taken for granted)."""
    ids = {n.id for n in targets}
    return all(STRENGTH.index(e.strength) <= STRENGTH.index("assumed")
               for n in waiters for e in graph.out.get(n.id, []) if e.target in ids)


def _firmly_waited(graph: WaitGraph, waiters: list[Node], targets: list[Node]) -> bool:
    """Some edge from the waiters into the targets is more than possible."""
    ids = {n.id for n in targets}
    return any(e.target in ids and e.strength != "possible" for n in waiters for e in graph.out.get(n.id, []))


__all__ = ["Cause", "CONFIDENCE_ORDER", "read_causes"]
