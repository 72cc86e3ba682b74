"""Hints: what to conclude or to do next, in coordinates: the mismatch ("pp=0 waits in broadcast <- ... that
pp=1 never entered"), the peers a wait names in its locals, what a rank's DataLoader workers do, and, where
stacks cannot tell, how to see more (CUDA_LAUNCH_BLOCKING=1, the Flight Recorder, --native, NCCL_DEBUG)."""

from __future__ import annotations

from collections import defaultdict

from hangdoctor.analysis.places import Place, peer_tie, strip_outside, undecided, verb, who
from hangdoctor.analysis.ranks import UNKNOWN, RankView
from hangdoctor.analysis.wait_rule import COMM_KINDS
from hangdoctor.model import SetAside
from hangdoctor.topology import ParallelDims

SEQUENCE_HINT = ("record PyTorch's Flight Recorder (TORCH_FR_BUFFER_SIZE=2000 in the job's environment) to compare "
                 "each rank's sequence of collectives, or rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL, which checks "
                 "that every rank calls the same collective")
NCCL_HINT = "NCCL_DEBUG=INFO shows where NCCL stalls (its transport: P2P, SHM, network)"
ONE_CALL = ("the ranks do not differ in the call, so either they passed it different tensors (sizes, dtypes: a "
            "rank-dependent shape; the Flight Recorder records each rank's sizes, TORCH_DISTRIBUTED_DEBUG=DETAIL "
            "checks them), or a thread of theirs made a collective on the same group in another order "
            "(--all-threads shows every thread), or the collective itself is stuck (network, NCCL/gloo): ")
ONE_P2P = ("the ranks do not differ in the call, so either their sends and receives do not pair up (a peer "
           "computed wrong, a wrap-around at the ends of a ring or halo, a count one side expects: the Flight "
           "Recorder pairs each rank's sends with its peer's receives), or the exchange itself is stuck (network, "
           "NCCL/gloo): ")
ONE_STORE = ("they wait in the c10d store (a rendezvous, or a process group being made), where no collective runs yet to "
             "mismatch: either a rank the store waits for never arrived (the world size counts more ranks than were "
             "started, or one died first: compare WORLD_SIZE with the ranks found), or the store's host cannot be "
             "reached (the MASTER_ADDR and MASTER_PORT, or init_method URL, each rank was given: a port nobody "
             "listens on, a host name that resolves elsewhere); the ranks' logs say when a client cannot connect, "
             "and TORCH_CPP_LOG_LEVEL=INFO adds each attempt")

ONE_NEW_GROUP = ("they create a process group, which every rank of the job must do for every group, members or not, "
                 "in the same order: a rank that created one group more or fewer before (a group made on its members "
                 "only, a DeviceMesh built on some ranks) names this one otherwise and waits for the others under "
                 "another name in the store (the group_name local of _new_process_group_helper, with --locals, differs "
                 "between the ranks); if every rank names it alike, a rank the store waits for never arrived")


def _caller_lines(place: Place) -> dict[int, list[int]]:
    """line -> ranks, of the caller's line of each rank's wait (one place: the same call from the same function)."""
    lines: dict[int, list[int]] = {}
    for view in place.views:
        caller = view.wait.caller if view.wait is not None else None
        if caller is not None and caller.line:
            lines.setdefault(caller.line, []).append(view.rank)
    return {line: sorted(ranks) for line, ranks in lines.items()}


def one_place_hint(place: Place, dims: ParallelDims | None) -> str:
    """Every rank in one call of one function: from the same line, or not (then say where each is)."""
    lines = _caller_lines(place)
    if len(lines) > 1:
        split = "; ".join(f"{who(ranks, dims)} at line {line}" for line, ranks in sorted(lines.items()))
        return (f"every rank that answered waits in {place.position}, but not from the same line ({split}): two "
                f"calls of one function, which may be two collectives (one side skipped one, or is a pass further "
                f"through a loop; the loop's counter in --locals, or attach's reading of the source, says which), or "
                f"one collective called from the two branches of an if")
    if place.wait is not None and place.wait.kind == "store" and place.wait.op == "new_group":
        return f"every rank that answered waits in {place.position}: {ONE_NEW_GROUP}"
    if place.wait is not None and place.wait.kind == "store":
        return f"every rank that answered waits in {place.position}{_store_told(place)}: {ONE_STORE}"
    return f"every rank that answered waits in {place.position}: if none is missing, {one_call(place)}{NCCL_HINT}"


def _store_told(place: Place) -> str:
    """The store address every rank of the place was given (MASTER_ADDR:MASTER_PORT in its environment, where the
    collector read it, or in the locals of its store set-up), in words; a port 0 said to be one no client can
    reach."""
    told = {v.identity.endpoint for v in place.views}
    if len(told) != 1 or None in told:
        return ""
    endpoint = told.pop()
    if endpoint.rsplit(":", 1)[-1] == "0":
        return (f", every one told to reach the store at {endpoint} (its MASTER_ADDR:MASTER_PORT): "
                f"port 0 is no port a client can connect to (a launcher given an endpoint with port 0, such as "
                f"torchrun's --rdzv-endpoint=HOST:0 with the static backend, passes it on as it is)")
    return f", every one told to reach the store at {endpoint} (its MASTER_ADDR:MASTER_PORT)"


def one_call(place: Place) -> str:
    """What to suspect when every rank waits in one call: a point-to-point exchange pairs, a collective matches."""
    return ONE_P2P if place.wait is not None and place.wait.kind == "p2p" else ONE_CALL


GPU_HINT = ("to see where they really wait, rerun with CUDA_LAUNCH_BLOCKING=1 (collectives then block where they "
            "are called: that is how BigScience's 200B hang showed its frames), or record PyTorch's Flight Recorder "
            "(TORCH_FR_BUFFER_SIZE=2000 in the job's environment) to compare each rank's last collective; "
            "`attach --native` shows the CUDA and NCCL frames")


def mismatch_hints(anchor: Place, others: list[Place], dims: ParallelDims | None, views: list[RankView],
                   native: bool, decided: frozenset[int] = frozenset(),
                   waited: set[int] | None = None) -> list[str]:
    """decided: the ranks the wait-for graph names as out of step (causes.py); when they are exactly the ranks
    out of step with the anchor, their suspect says who never entered what, and the hints do not repeat it.
    waited: the ranks the anchor waits for, by the graph's edges; None when there is no graph."""
    hints = []
    waits = verb(anchor.ranks, "waits", "wait")
    stuck = [p for p in others if not p.moving]
    said = bool(decided) and decided == {r for p in stuck for r in p.ranks}
    entered = [p for p in stuck if waited is None or set(p.ranks) & waited]  # "never entered": the anchor's peers
    if anchor.in_collective and entered and not said:
        stuck_before, stuck = stuck, entered
        ranks = sorted(r for p in stuck for r in p.ranks)
        detail = "; ".join(f"{who(p.ranks, dims)} {verb(p.ranks, 'waits', 'wait')} in {p.position}"
                           if p.wait is not None else f"{who(p.ranks, dims)} {verb(p.ranks, 'is', 'are')} {p.position}"
                           for p in stuck)
        hints.append(f"{who(anchor.ranks, dims)} {waits} in {anchor.position} that {who(ranks, dims)} never "
                     f"entered ({detail})")
        stuck = stuck_before
    elif not anchor.in_collective and stuck:
        inside = [p for p in stuck if p.in_collective]
        if inside:
            hints.append(f"{who(anchor.ranks, dims)} {verb(anchor.ranks, 'shows', 'show')} no communication frame "
                         f"({strip_outside(anchor.position)}) while " + "; ".join(
                             f"{who(p.ranks, dims)} {verb(p.ranks, 'is', 'are')} still in {p.position}" for p in inside)
                         + ": with NCCL a collective returns before it completes, so ranks that issued it are found "
                         "later at a GPU synchronisation (.item(), .cpu(), torch.cuda.synchronize); the ranks still "
                         "inside the call are the ones to look at")
    for place in (p for p in others if p.moving):
        hints.append(f"{who(anchor.ranks, dims)} {waits if anchor.in_collective else 'sit'} in {anchor.position} "
                     f"for {who(place.ranks, dims)}, still progressing (a straggler, or a rank retrying in a loop: "
                     f"not stuck itself, the job is stuck on it)")
    if not others and anchor.in_collective:
        hints.append(one_place_hint(anchor, dims))
    elif anchor.in_collective and not said and any(p.in_collective and undecided(p, anchor) and
                                                      not peer_tie(p, anchor) for p in stuck):
        hints.append(f"the ranks wait in calls that do not match, and nothing in their stacks says which side is "
                     f"out of step: {SEQUENCE_HINT}")
    hints += _peer_hints(anchor, views, dims)
    for place in [anchor, *stuck]:
        helped = [v for v in place.views if v.helper is not None]
        if helped:
            name, wait = helped[0].helper
            ranks = sorted(v.rank for v in helped)
            main = "backward" if place.activity == "ddp-reducer" else place.views[0].wait.label \
                if place.views[0].wait is not None else strip_outside(place.position).removeprefix("in ")
            hints.append(f"{who(ranks, dims)} {verb(ranks, 'sits', 'sit')} in {main} while another thread "
                         f"({name!r}) waits in {wait.label}: that is the communication "
                         f"{'backward' if place.activity == 'ddp-reducer' else 'it'} waits for")
    gpu_places = [p for p in [anchor, *stuck] if p.activity == "device-sync" or (
        p.activity == UNKNOWN and p.gpu is not False and any(q.in_collective for q in [anchor, *stuck]))]
    if gpu_places:
        ranks = sorted(r for p in gpu_places for r in p.ranks)
        # nothing in py-spy's own dumps says whether a GPU is in use (attach's collector does): said, not assumed
        unsure = all(p.gpu is None and p.activity != "device-sync" for p in gpu_places)
        hints.append(f"{'if the job runs on GPUs, ' if unsure else ''}{who(ranks, dims)} may be waiting on the GPU "
                     f"for an asynchronous collective: {GPU_HINT}")
    elif not native and any(p.activity == UNKNOWN for p in [anchor, *stuck]):
        hints.append("add --native to see waits inside C++/CUDA calls of the ranks outside any known wait")
    return hints


_PROCESS_START = ("multiprocessing/process.py", "multiprocess/process.py", "multiprocessing/popen_fork.py")


def relaunch_hints(views: list[RankView], dims: ParallelDims | None) -> list[str]:
    """Ranks whose parent is another rank running the same command line: the script was started again for them
    (Lightning's DDP launcher starts the other local ranks so), and whatever it did before the launch it does again
    in each of them: a lock taken around the launch, a download, a file written by "the first process". A child
    that multiprocessing forked or spawned (its bootstrap in the stack) goes on from the fork: no relaunch."""
    ranks = {(v.identity.host, v.identity.pid): v for v in views}
    children: dict[int, list[int]] = defaultdict(list)
    for view in views:
        parent = ranks.get((view.identity.host, view.identity.ppid)) if view.identity.ppid else None
        if parent is not None and parent.identity.cmdline and view.identity.cmdline == parent.identity.cmdline \
                and not any(f.file.endswith(_PROCESS_START) for f in view.stack if not f.native):
            children[parent.rank].append(view.rank)
    return [f"{who(sorted(kids), dims)} {verb(kids, 'was', 'were')} started by rank {parent} running its own command "
            f"line again (a framework's script relaunch, as Lightning's DDP launcher starts the other local ranks): "
            f"what the script does before the launch (a lock taken around it, a download, a file written by the "
            f"first process) runs again in {'it' if len(kids) == 1 else 'each of them'}"
            for parent, kids in sorted(children.items())]


def worker_hints(places: list[Place], set_aside: list[SetAside], dims: ParallelDims | None) -> list[str]:
    """A rank waiting for its DataLoader: what its workers are doing (the busy or blocked ones)."""
    hints = []
    for place in (p for p in places if p.activity == "dataloader"):
        pids = {v.identity.pid: v for v in place.views}
        hosts = {v.identity.host for v in place.views}
        workers = [a for a in set_aside if a.role == "worker" and a.host in hosts and (a.ppid in pids or a.ppid is None)]
        working = [a for a in workers if not a.idle]
        if working:
            hints.append(f"{who(place.ranks, dims)} {verb(place.ranks, 'waits', 'wait')} for a batch from its "
                         f"DataLoader workers; " + "; ".join(
                             f"worker pid {a.pid}" + (f" (of rank {pids[a.ppid].rank})" if a.ppid in pids else "")
                             + f" is in {a.where}" for a in working[:4]))
        elif workers:
            hints.append(f"{who(place.ranks, dims)} {verb(place.ranks, 'waits', 'wait')} for a batch, but its "
                         f"DataLoader workers all wait for work: a worker may have died (check the job's log)")
        else:
            hints.append(f"{who(place.ranks, dims)} {verb(place.ranks, 'waits', 'wait')} for a batch from its "
                         f"DataLoader workers: dump them too (py-spy dump --pid <worker>) to see what they do")
    return hints


def lone_hints(places: list[Place], dims: ParallelDims | None, native: bool) -> list[str]:
    if not places:
        return []
    if len(places) == 1 and places[0].activity in COMM_KINDS | {"device-sync"} and not places[0].moving:
        return [one_place_hint(places[0], dims)]
    if any(p.activity == UNKNOWN for p in places) and not native:
        return ["no rank waits in a recognised call: compare the places above (add --native to see waits inside "
                "C++/CUDA calls)"]
    return []


def _peer_hints(anchor: Place, views: list[RankView], dims: ParallelDims | None) -> list[str]:
    """"ranks 2-3 wait in broadcast from rank 6; rank 6 is in recv <- ..." from the anchor's locals."""
    by_rank = {v.rank: v for v in views}
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for view in anchor.views:
        if view.peer is not None and view.peer.is_global:
            groups[(view.peer.name, view.peer.value)].append(view.rank)
    hints = []
    for (name, peer), ranks in sorted(groups.items(), key=lambda item: item[0][1]):
        direction = "from" if "src" in name else "to" if "dst" in name else "with"
        other = by_rank.get(peer)
        if other is None:
            state = "no dump of it"
        elif not other.responded:
            state = f"it did not respond ({other.status})"
        elif other.position == anchor.position:
            continue
        else:
            state = f"rank {peer} is {'in ' + other.position if other.wait else other.position}"
        hints.append(f"{who(sorted(ranks), dims)} {verb(ranks, 'waits', 'wait')} in {anchor.wait.op if anchor.wait else 'a call'} "
                     f"{direction} rank {peer} ({name}); {state}")
    return hints


