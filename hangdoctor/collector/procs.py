"""Find a job's ranks on this node through /proc, and read each one's state and CPU time. Stdlib only.

A process belongs to the job when its environment (/proc/PID/environ, as it was at exec) carries the job's
key, e.g. SLURM_JOB_ID=1234 or TORCHELASTIC_RUN_ID=...; `grep python` is never used. Its rank comes from its
launcher's variables, read as everywhere else (topology.launcher: RANK, else SLURM_PROCID, then the MPI
launchers'). Launchers are set aside: shells, srun, torchrun agents (no RANK while their workers have one) and
forked children that share their parent's rank (data-loader workers).
"""

from __future__ import annotations

import os

from hangdoctor.topology.launcher import LOCAL_RANK_VARS, PROCESS_STARTERS, RANK_VARS, WORLD_SIZE_VARS, launched_rank

# Only these variables are copied into the output: environments may hold secrets.
KEPT_ENV = RANK_VARS + LOCAL_RANK_VARS + WORLD_SIZE_VARS + (
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURMD_NODENAME", "SLURM_NODEID", "TORCHELASTIC_RUN_ID",
    "GROUP_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_environ(pid: int) -> dict | None:
    """The environment the process was started with, or None when unreadable (gone, another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def read_stat(pid: int) -> dict | None:
    """State letter, parent pid and CPU ticks (user + system, all threads) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    # The command name sits in parentheses and may itself contain spaces or parentheses.
    fields = raw[raw.rfind(")") + 2:].split()
    try:
        return {"state": fields[0], "ppid": int(fields[1]), "ticks": int(fields[11]) + int(fields[12])}
    except (IndexError, ValueError):
        return None


def read_text(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def read_cmdline(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def read_exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def read_uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def all_pids() -> list:
    return sorted(int(name) for name in os.listdir("/proc") if name.isdigit())


def parents() -> dict[int, int]:
    """{pid: its parent's pid} of every process now (one pass over /proc; a process gone meanwhile is left out)."""
    found = {}
    for pid in all_pids():
        stat = read_stat(pid)
        if stat is not None:
            found[pid] = stat["ppid"]
    return found


def left_out_siblings(pids: list[int]) -> list[int]:
    """The processes that run the same command line as a given one beside it (its parent's other children), not
    given themselves: `attach --pid` of some of a launcher's ranks, not all of them."""
    given, parent_of = set(pids), parents()
    wanted = {(parent_of[pid], tuple(read_cmdline(pid))) for pid in pids if pid in parent_of}
    wanted_parents = {parent for parent, _ in wanted}
    return [pid for pid, parent in parent_of.items() if pid not in given and parent in wanted_parents
            and (parent, tuple(read_cmdline(pid))) in wanted]


def ancestors(pid: int) -> set:
    """pid and every process above it, up to init."""
    seen = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        stat = read_stat(pid)
        if stat is None:
            break
        pid = stat["ppid"]
    return seen


def describe_process(pid: int, env: dict | None = None) -> dict | None:
    """Identity fields of one process, as the collector reports them (rank may be None)."""
    env = read_environ(pid) if env is None else env
    stat = read_stat(pid)
    if stat is None:
        return None
    env = env or {}
    launched = launched_rank(env)
    return {
        "pid": pid,
        "ppid": stat["ppid"],
        "uid": read_uid(pid),
        "exe": read_exe(pid),
        "cmdline": read_cmdline(pid),
        "rank": launched.rank,
        "rank_key": launched.rank_var,
        "local_rank": launched.local_rank,
        "world_size": launched.world_size,
        "env": {key: env[key] for key in KEPT_ENV if key in env},
    }


GPU_RUNTIMES = (b"libcuda.so", b"libamdhip64.so", b"libhsa-runtime64.so", b"libze_loader.so")


def gpu_loaded(pid: int) -> bool | None:
    """Whether a GPU runtime is mapped into the process (it uses a GPU: NCCL collectives are asynchronous
    there); None when its maps cannot be read."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as handle:
            maps = handle.read()
    except OSError:
        return None
    return any(name in maps for name in GPU_RUNTIMES)


def env_matches(env: dict, match: dict) -> bool:
    """Every key of `match` is set; where a value is given it must be equal."""
    for key, value in match.items():
        if key not in env or (value is not None and env[key] != value):
            return False
    return True


def find_ranks(match: dict, node_name: str | None = None, *, own_pid: int | None = None,
               among: list | None = None) -> tuple:
    """Processes of this node whose environment matches, minus launchers. Returns (ranks, skipped).

    ranks: list of describe_process() dicts; skipped: list of "pid P (name): why" strings.
    Our own process tree and our own srun step are left out. `among` limits the search to these pids
    (a caller that already scanned /proc).
    """
    own_pid = os.getpid() if own_pid is None else own_pid
    own_env = read_environ(own_pid) or {}
    exclude = ancestors(own_pid)
    candidates, skipped = [], []
    for pid in (all_pids() if among is None else sorted(among)):
        if pid in exclude:
            continue
        env = read_environ(pid)
        if not env or not env_matches(env, match):
            continue
        if own_env.get("SLURM_STEP_ID") and env.get("SLURM_STEP_ID") == own_env["SLURM_STEP_ID"] \
                and env.get("SLURM_JOB_ID") == own_env.get("SLURM_JOB_ID"):
            continue  # our own extra step
        if node_name and env.get("SLURMD_NODENAME", node_name) != node_name:
            continue  # another slurmd's process on the same host (several nodes on one machine)
        info = describe_process(pid, env)
        if info is None:
            continue
        candidates.append(info)
    kept = []
    for info in candidates:
        name = os.path.basename(info["exe"]) or (os.path.basename(info["cmdline"][0]) if info["cmdline"] else "?")
        if name in PROCESS_STARTERS:
            skipped.append(f"pid {info['pid']} ({name}): launcher")
        elif info["rank"] is None:
            skipped.append(f"pid {info['pid']} ({name}): no rank in its environment")
        else:
            kept.append(info)
    if any(info["rank_key"] == "RANK" for info in kept):
        # torchrun/deepspeed agents under srun carry SLURM_PROCID (the node's index) but no RANK.
        for info in [i for i in kept if i["rank_key"] != "RANK"]:
            skipped.append(f"pid {info['pid']}: launcher (no RANK while its workers have one)")
        kept = [i for i in kept if i["rank_key"] == "RANK"]
    by_pid = {info["pid"]: info for info in kept}
    ranks = []
    for info in kept:
        parent = by_pid.get(info["ppid"])
        if parent is not None and parent["rank"] == info["rank"]:
            skipped.append(f"pid {info['pid']}: child of rank {info['rank']} (pid {parent['pid']}), e.g. a data-loader worker")
        else:
            ranks.append(info)
    ranks.sort(key=lambda i: (i["rank"], i["pid"]))
    return ranks, skipped
