"""Settle every process's identity once: global rank, host, coordinates (dp, pp, tp), expected world size.

The topology comes from flags when given, else from the job itself: the ranks' argv
(`--tensor-model-parallel-size/--tp`, `--pipeline-model-parallel-size/--pp`) and WORLD_SIZE/SLURM_NTASKS
from their environment. Processes without a rank in their environment (old text dumps) get one from
their node's position and `--local_rank`, or from reading order; the collection says so in a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoctor.formats.nodefile import Found
from hangdoctor.model import RankIdentity, RankRecord
from hangdoctor.topology import DEFAULT_ORDER, ParallelDims

TP_FLAGS = ("--tensor-model-parallel-size", "--tensor_model_parallel_size", "--tp", "--tp-size",
            "--tensor-parallel-size", "--tensor_parallel_size")
PP_FLAGS = ("--pipeline-model-parallel-size", "--pipeline_model_parallel_size", "--pp", "--pp-size",
            "--pipe-parallel-size", "--pipe_parallel_size", "--pipeline-parallel-size")
LOCAL_RANK_FLAGS = ("--local_rank", "--local-rank")


@dataclass(frozen=True)
class TopologyFlags:
    """What the user said on the command line; None means "find it in the job"."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    order: str = DEFAULT_ORDER
    world_size: int | None = None
    ranks: tuple[int, ...] = ()  # --ranks: the ranks of processes that carry none, in reading order


def flag_value(argv: tuple[str, ...] | list[str], names: tuple[str, ...]) -> int | None:
    """The integer after `--name N` or in `--name=N`, for the first name present."""
    for i, arg in enumerate(argv):
        name, sep, value = arg.partition("=")
        if name in names:
            text = value if sep else (argv[i + 1] if i + 1 < len(argv) else "")
            if text.isdigit():
                return int(text)
    return None


def split_cmdline(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def natural_key(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def guess_topology(found: list[Found], flags: TopologyFlags) -> tuple[ParallelDims | None, str, int | None, list[str]]:
    """(dims, where they came from, expected world size, warnings)."""
    warnings: list[str] = []
    tp, pp, source = flags.tp, flags.pp, "flags" if (flags.tp or flags.pp or flags.dp) else ""
    if tp is None or pp is None:
        seen = {}
        firsts: dict[tuple[str, ...], Found] = {}
        for f in found:  # thousands of ranks share a handful of command lines
            firsts.setdefault(f.cmdline, f)
        for cmdline, f in firsts.items():
            got = (flag_value(cmdline, TP_FLAGS), flag_value(cmdline, PP_FLAGS))
            if got != (None, None):
                seen.setdefault(got, f)
        if len(seen) > 1:
            warnings.append("ranks disagree on --tp/--pp in their argv: " + ", ".join(
                f"tp={t} pp={p} (rank {f.rank}, pid {f.pid})" for (t, p), f in seen.items()))
        if seen:
            (arg_tp, arg_pp), first = next(iter(seen.items()))
            tp = tp if tp is not None else arg_tp
            pp = pp if pp is not None else arg_pp
            source = source + (" + " if source else "") + f"argv of pid {first.pid} on {first.host}"
    world = flags.world_size
    if world is None and flags.dp and (tp or 1) and (pp or 1):
        world = flags.dp * (tp or 1) * (pp or 1)
    if world is None:
        sizes = {f.world_size for f in found if f.world_size}
        if len(sizes) > 1:
            warnings.append(f"ranks disagree on WORLD_SIZE: {sorted(sizes)}; using the largest")
        world = max(sizes) if sizes else None
    if tp is None and pp is None and not flags.dp:
        if found:
            warnings.append("topology unknown (no --tp/--pp in the ranks' argv): pass --tp and --pp to see coordinates")
        return None, "", world, warnings
    tp, pp = tp or 1, pp or 1
    if world is None:
        ranks = sorted({f.rank for f in found if f.rank is not None})
        if ranks and ranks == list(range(len(ranks))) and len(ranks) % (tp * pp) == 0:
            world = len(ranks)
            warnings.append(f"world size unknown: assuming the {world} ranks found are all (pass --world-size)")
        else:
            warnings.append(f"world size unknown (tp={tp} pp={pp}): pass --world-size to see coordinates")
            return None, source, None, warnings
    try:
        dims = ParallelDims.from_world(world, tp=tp, pp=pp, order=flags.order)
        if flags.dp and dims.dp != flags.dp:
            raise ValueError(f"--dp {flags.dp} does not match world size {world} / (tp={tp} x pp={pp})")
    except ValueError as exc:
        warnings.append(f"topology ignored: {exc}")
        return None, source, world, warnings
    return dims, source or "flags", world, warnings


def assign_missing_ranks(found: list[Found], named: tuple[int, ...] = ()) -> list[str]:
    """Give a rank to processes whose environment did not carry one (text and bare py-spy JSON dumps): the
    user's --ranks in reading order, else node order and --local_rank, else reading order."""
    unknown = [f for f in found if f.rank is None]
    if not unknown:
        return []
    if named:
        hosts = sorted({f.host for f in unknown}, key=natural_key)
        in_order = [f for h in hosts for f in unknown if f.host == h]
        for f, rank in zip(in_order, named):
            f.rank, f.rank_source = rank, "--ranks"
        if len(named) == len(in_order):
            return []
        more = "ranks than processes" if len(named) > len(in_order) else "processes than ranks"
        rest = assign_missing_ranks(found)
        return [f"--ranks names {len(named)} ranks for {len(in_order)} processes without one: more {more}"] + rest
    said = _ranks_from_locals(unknown)
    unknown = [f for f in unknown if f.rank is None]
    if not unknown:
        return said
    for f in unknown:
        if f.local_rank is None:
            f.local_rank = flag_value(f.cmdline, LOCAL_RANK_FLAGS)
    hosts = sorted({f.host for f in found}, key=natural_key)
    by_host = {h: [f for f in unknown if f.host == h] for h in hosts}
    known_local = [f for f in unknown if f.local_rank is not None]
    if known_local and len(known_local) >= len(unknown) - sum(1 for f in unknown if f.pid == 0):
        per_node = max(max(f.local_rank for f in known_local) + 1, max(len(v) for v in by_host.values()))
        for index, host in enumerate(hosts):
            procs = by_host[host]
            taken = {f.local_rank for f in procs if f.local_rank is not None}
            free = iter(sorted(set(range(per_node)) - taken))
            for f in procs:
                if f.local_rank is None:  # a dump that failed before naming its process
                    f.local_rank = next(free, per_node + len(taken))
                    taken.add(f.local_rank)
                f.rank, f.rank_source = index * per_node + f.local_rank, "node order + local rank"
        return said + [f"{len(unknown)} processes carry no rank (text or bare py-spy dumps): ranks assumed from node "
                f"order ({', '.join(hosts[:3])}{', ...' if len(hosts) > 3 else ''}) and --local_rank, "
                f"{per_node} per node"]
    next_rank = max((f.rank for f in found if f.rank is not None), default=-1) + 1
    for host in hosts:
        for f in by_host[host]:
            f.rank, f.rank_source = next_rank, "order"
            next_rank += 1
    one = len(unknown) == 1
    return said + [f"{len(unknown)} process{'' if one else 'es'} carr{'ies' if one else 'y'} no rank: numbered in "
                   "reading order (node, then order in its file)"]


def _ranks_from_locals(unknown: list[Found]) -> list[str]:
    """A process without RANK in its environment (mp.spawn passes it as an argument) that sits in torch.distributed's
    set-up says its rank and world size in the locals of that call (`init_process_group(..., world_size=6, rank=2)`,
    py-spy --locals): taken when both are whole numbers (env:// leaves them at -1)."""
    found = 0
    for f in unknown:
        for sample in reversed(f.samples):
            numbers = next((n for thread in sample.threads for n in _rank_locals(thread)), None)
            if numbers is not None:
                f.rank, f.world_size = numbers
                f.rank_source = "locals of torch.distributed's set-up"
                found += 1
                break
    return [f"{found} process{'es' if found > 1 else ''} without RANK in the environment: rank and world size read "
            f"from the locals of torch.distributed's set-up (init_process_group)"] if found else []


_SET_UP = re.compile(r"^(init_process_group|_\w*rendezvous\w*|rendezvous|_create_c10d_store)$")


def _rank_locals(thread):
    for frame, names in zip(thread.frames, thread.locals or ()):
        if not names or not frame.file.startswith("torch/distributed/") or not _SET_UP.match(frame.name):
            continue  # other calls' rank and world_size are a subgroup's
        rank, world = names.get("rank", "").strip(), names.get("world_size", "").strip()
        if rank.isdigit() and world.isdigit() and int(rank) < int(world):
            yield int(rank), int(world)


_STORE_CALLS = {"_create_c10d_store": ("hostname", "port"), "_env_rendezvous_handler": ("master_addr", "master_port")}


def _endpoint_from_locals(found: Found) -> str | None:
    """The store address a process is connecting to, where it waits in torch.distributed's store set-up and its
    locals were dumped (`_create_c10d_store(hostname, port, ...)`, py-spy --locals): "host:port", else None."""
    for sample in reversed(found.samples):
        for thread in sample.threads:
            for frame, names in zip(thread.frames, thread.locals or ()):
                keys = _STORE_CALLS.get(frame.name) if frame.file.startswith("torch/distributed/") else None
                if keys and names:
                    host, port = (str(names.get(k, "")).strip().strip("'\"") for k in keys)
                    if host and port.isdigit():
                        return f"{host[:200]}:{port}"
    return None


def build_records(found: list[Found], dims: ParallelDims | None) -> tuple[list[RankRecord], list[str]]:
    warnings = []
    records: dict[int, RankRecord] = {}
    hosts = {host: natural_key(host) for host in {f.host for f in found}}
    for f in sorted(found, key=lambda f: (f.rank, hosts[f.host], f.pid)):
        if f.rank in records:
            other = records[f.rank].identity
            warnings.append(f"rank {f.rank} found twice: pid {other.pid} on {other.host} and pid {f.pid} on {f.host}; "
                            f"keeping the first (two jobs matched?)")
            continue
        coords = dims.coords(f.rank) if dims is not None and 0 <= f.rank < dims.world_size else None
        if dims is not None and coords is None:
            warnings.append(f"rank {f.rank} (pid {f.pid} on {f.host}) is outside the topology {dims.describe()}")
        identity = RankIdentity(rank=f.rank, host=f.host, pid=f.pid, local_rank=f.local_rank, world_size=f.world_size,
                                coords=coords, rank_source=f.rank_source, cmdline=f.cmdline, ppid=f.ppid, gpu=f.gpu,
                                endpoint=f.endpoint or _endpoint_from_locals(f))
        records[f.rank] = RankRecord(identity, f.samples, f.profile)
    return list(records.values()), warnings
