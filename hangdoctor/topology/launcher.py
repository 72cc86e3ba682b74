"""Which rank a process is, as its launcher said, and which processes are launchers: the one table of launchers,
read by the trainer, by tracing (in the traced process: is this a launcher, which rank am I), by hangdoctor's
collector (from /proc/PID/environ and the executable of another process) and by hangdoctor's analysis (from a
command line in a dump).

    torchrun (and DeepSpeed's launcher)   RANK          LOCAL_RANK                  WORLD_SIZE
    srun                                  SLURM_PROCID  SLURM_LOCALID               SLURM_NTASKS
    MPICH / Intel MPI (PMI)               PMI_RANK      MPI_LOCALRANKID             PMI_SIZE
    Open MPI                              OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE
    PMIx launchers (prterun, srun --mpi=pmix)   PMIX_RANK

The first variable present wins, in this order: a torchrun started by srun leaves SLURM_PROCID (the node's
index) in its workers' environment, and their RANK is the one that counts. Only whole numbers count: a value
such as "" or "-1" is as if absent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RANK_VARS = ("RANK", "SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")
WORLD_SIZE_VARS = ("WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
LAUNCHER_OF = {"RANK": "torchrun", "SLURM_PROCID": "srun", "PMI_RANK": "mpi", "OMPI_COMM_WORLD_RANK": "mpi",
               "PMIX_RANK": "mpi"}

# Python launchers that start ranks and are not ranks: as `python -m MODULE`, or as their console script
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "deepspeed.launcher.launch",
                    "deepspeed.launcher.runner", "accelerate.commands.launch", "accelerate.commands.accelerate_cli")
LAUNCHER_PROGRAMS = ("torchrun", "deepspeed", "ds", "accelerate")  # accelerate only as `accelerate launch`
# executables that start or wrap the ranks' processes (shells, SLURM, MPI, pdsh, the collector's own py-spy)
PROCESS_STARTERS = frozenset({
    "srun", "slurmstepd", "salloc", "sbatch", "sh", "bash", "dash", "zsh", "ksh", "env", "timeout", "py-spy",
    "sleep", "tee", "mpirun", "mpiexec", "orted", "hydra_pmi_proxy", "pdsh",
})


def launcher_in_command(argv: Sequence[str], extra_modules: Sequence[str] = ()) -> str:
    """The Python launcher a command line runs (a module of LAUNCHER_MODULES or extra_modules, or a program of
    LAUNCHER_PROGRAMS), or "". Read as Python reads its own command line: the interpreter (or the console script
    itself), its options, then `-m MODULE`, `-c CODE` or the script."""
    if not argv:
        return ""
    first = os.path.basename(argv[0])
    if first in LAUNCHER_PROGRAMS:
        return _program(first, argv[1:2])
    args, i = list(argv[1:]), 0
    while i < len(args):
        token = args[i]
        if token == "-m":
            module = args[i + 1] if i + 1 < len(args) else ""
            return module if module in LAUNCHER_MODULES or module in extra_modules else ""
        if token in ("-X", "-W"):
            i += 2
            continue
        if token.startswith("-"):
            if token == "-c":
                return ""
            i += 1
            continue
        program = os.path.basename(token)
        return _program(program, args[i + 1:i + 2]) if program in LAUNCHER_PROGRAMS else ""
    return ""


# how many processes a launcher's command line says it starts: (per-node flags, node-count flags, whether the
# per-node count is the whole job's)
_STARTS = {
    "torchrun": (("--nproc_per_node", "--nproc-per-node"), ("--nnodes",), False),
    "torch.distributed.run": (("--nproc_per_node", "--nproc-per-node"), ("--nnodes",), False),
    "torch.distributed.launch": (("--nproc_per_node", "--nproc-per-node"), ("--nnodes",), False),
    "deepspeed": (("--num_gpus", "--num-gpus"), ("--num_nodes", "--num-nodes"), False),
    "deepspeed.launcher.runner": (("--num_gpus", "--num-gpus"), ("--num_nodes", "--num-nodes"), False),
    "accelerate": (("--num_processes", "--num-processes"), (), True),
    "accelerate.commands.launch": (("--num_processes", "--num-processes"), (), True),
    "accelerate.commands.accelerate_cli": (("--num_processes", "--num-processes"), (), True),
}


@dataclass(frozen=True)
class Started:
    """What a launcher's command line says it starts."""

    per_node: int  # processes on its node (the whole job's count where `whole_job`)
    nodes: int | None  # --nnodes, where it states one number (a range "1:4" states none)
    whole_job: bool  # accelerate's --num_processes counts every node's


def workers_started(argv: Sequence[str]) -> Started | None:
    """How many ranks a launcher's command line starts (`torchrun --nproc_per_node 4 --nnodes 2`), or None when
    it is no launcher or does not say (`--nproc_per_node gpu`, a launcher's default)."""
    launcher = launcher_in_command(argv)
    if launcher not in _STARTS:
        return None
    per_node_flags, node_flags, whole_job = _STARTS[launcher]
    script = next((i for i, arg in enumerate(argv) if i and arg.endswith(".py") and "/bin/" not in arg), len(argv))
    argv = argv[:script]  # the training script's own arguments are not the launcher's
    per_node = flag_number(argv, per_node_flags)
    if not per_node:
        return None
    nodes = flag_number(argv, node_flags) if node_flags else None
    return Started(per_node=per_node, nodes=nodes or None, whole_job=whole_job)


def flag_number(argv: Sequence[str], names: tuple[str, ...], *, least: bool = False) -> int | None:
    """The whole number after `--name N` or in `--name=N`, else None. A range "MIN:MAX" (torchrun's elastic
    `--nnodes`) counts where its ends agree, or as its MIN with `least`."""
    for i, arg in enumerate(argv):
        name, sep, value = arg.partition("=")
        if name in names:
            text = value if sep else (argv[i + 1] if i + 1 < len(argv) else "")
            low, _, high = text.partition(":")
            if low.isdigit() and (not high or high == low or least):
                return int(low)
            return None
    return None


def _program(program: str, following: Sequence[str]) -> str:
    return "" if program == "accelerate" and list(following) != ["launch"] else program


@dataclass(frozen=True)
class LaunchedRank:
    rank: int | None  # None: no launcher variable names one
    local_rank: int | None
    world_size: int | None
    rank_var: str = ""  # the variable the rank came from, e.g. "RANK" or "SLURM_PROCID"; "" when none

    @property
    def launcher(self) -> str:
        """"torchrun", "srun", "mpi", or "none" for a process started by hand."""
        return LAUNCHER_OF.get(self.rank_var, "none")


def first_whole_number(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[int | None, str]:
    """(value, name) of the first of `names` that holds a whole number, or (None, "")."""
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value), name
    return None, ""


def launched_rank(environ: Mapping[str, str]) -> LaunchedRank:
    rank, rank_var = first_whole_number(environ, RANK_VARS)
    local_rank, _ = first_whole_number(environ, LOCAL_RANK_VARS)
    world_size, _ = first_whole_number(environ, WORLD_SIZE_VARS)
    return LaunchedRank(rank, local_rank, world_size, rank_var)
