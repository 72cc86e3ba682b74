"""DeepSpeed/pdsh hostfiles (`node slots=N` per line), like the seed's `makehostfile` shell function:

    perl -e '$slots=split /,/, $ENV{"SLURM_STEP_GPUS"}; $slots=8 if $slots==0;
             @nodes = split /\\n/, qx[scontrol show hostnames $ENV{"SLURM_JOB_NODELIST"}];
             print map { "$b$_ slots=$slots\\n" } @nodes'

    python -m slurm.hostfile > hostfile            # inside a job: nodes from SLURM_JOB_NODELIST
    python -m slurm.hostfile --nodes 'gpu[1-4]' --slots 8

Slots are the GPUs of the step (SLURM_STEP_GPUS, else SLURM_JOB_GPUS), else `default_slots` (the seed's "8 gpu
machines" workaround). Node names come from the pure expander, so no scontrol is needed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from slurm.nodelist import expand_nodelist


def make_hostfile(nodes: list[str], slots: int) -> str:
    if slots < 1:
        raise ValueError(f"slots={slots}: a host needs at least one slot")
    if not nodes:
        raise ValueError("no nodes for the hostfile")
    return "".join(f"{node} slots={slots}\n" for node in nodes)


def slots_from_env(environ: Mapping[str, str], default_slots: int = 8) -> int:
    """Number of GPU ids in SLURM_STEP_GPUS (or SLURM_JOB_GPUS), e.g. "0,1,2,3" -> 4; default when unset/empty."""
    gpus = environ.get("SLURM_STEP_GPUS") or environ.get("SLURM_JOB_GPUS") or ""
    count = len([g for g in gpus.split(",") if g.strip()])
    return count or default_slots


def hostfile_from_env(environ: Mapping[str, str] | None = None, *, default_slots: int = 8) -> str:
    env = os.environ if environ is None else environ
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise ValueError("SLURM_JOB_NODELIST is not set: run inside a SLURM job, or pass --nodes")
    return make_hostfile(expand_nodelist(nodelist), slots_from_env(env, default_slots))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurm.hostfile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", help="a node list such as 'gpu[1-4]' (default: SLURM_JOB_NODELIST)")
    parser.add_argument("--slots", type=int, help="slots per node (default: GPUs of the step, else 8)")
    args = parser.parse_args(argv)
    nodelist = args.nodes or os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    try:
        if not nodelist:
            raise ValueError("SLURM_JOB_NODELIST is not set: run inside a SLURM job, or pass --nodes")
        text = make_hostfile(expand_nodelist(nodelist), args.slots or slots_from_env(os.environ))
    except ValueError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
