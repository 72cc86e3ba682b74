"""Where a local test cluster keeps everything, and the slurm.conf that describes it (pure, no processes).

One base folder holds it all, so several clusters can run side by side on one machine (each with its own ports,
munge socket, state and logs) and removing the folder removes the cluster:

    BASE/etc/slurm.conf        the configuration; clients find it through SLURM_CONF
    BASE/etc/cluster.json      this layout (ports, nodes), so `status`/`stop` from another process can find it
    BASE/munge/                munged's key, socket, pid, seed and log (owned by the munge user, mode 0755)
    BASE/state/ctld            slurmctld's StateSaveLocation
    BASE/state/slurmd/nK       each slurmd's spool folder
    BASE/run/daemons.json      pid and start time of every daemon we started
    BASE/log/                  slurmctld.log, slurmd-nK.log, and the daemons' own stdout/stderr

The configuration lines are the ones checked in /work/shared/notes/slurm-testbed.md: several slurmd on one
machine (one `NodeName` line per node, each with its own port, all at 127.0.0.1), linuxproc process tracking,
no cgroups, no accounting, `config_overrides` so that a node may declare more CPUs than the machine has.
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ClusterLayout:
    base: Path
    nodes: tuple[str, ...]  # n1, n2, ...
    ctld_port: int
    node_ports: tuple[int, ...]  # one slurmd port per node, same order as `nodes`
    hostname: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    cpus_per_node: int = 4  # declared, not real: config_overrides lets 4 nodes x 4 CPUs run on 2 cores
    partition: str = "debug"

    def __post_init__(self) -> None:
        object.__setattr__(self, "base", Path(self.base).resolve())
        if len(self.nodes) != len(self.node_ports):
            raise ValueError(f"{len(self.nodes)} nodes but {len(self.node_ports)} slurmd ports")

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    @property
    def layout_file(self) -> Path:
        return self.base / "etc" / "cluster.json"

    @property
    def munge_dir(self) -> Path:
        return self.base / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket.2"

    @property
    def munge_key(self) -> Path:
        return self.munge_dir / "munge.key"

    @property
    def ctld_state(self) -> Path:
        return self.base / "state" / "ctld"

    def slurmd_spool(self, node: str) -> Path:
        return self.base / "state" / "slurmd" / node

    @property
    def run_dir(self) -> Path:
        return self.base / "run"

    @property
    def daemons_file(self) -> Path:
        return self.run_dir / "daemons.json"

    @property
    def log_dir(self) -> Path:
        return self.base / "log"

    def client_env(self) -> dict[str, str]:
        """What a client (squeue, sbatch, srun, our helpers) needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def save(self) -> None:
        data = asdict(self)
        data["base"] = str(self.base)
        self.layout_file.write_text(json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, base: Path) -> "ClusterLayout":
        data = json.loads((Path(base) / "etc" / "cluster.json").read_text())
        data["nodes"] = tuple(data["nodes"])
        data["node_ports"] = tuple(data["node_ports"])
        data["base"] = Path(data["base"])
        return cls(**data)


def render_slurm_conf(layout: ClusterLayout) -> str:
    b = layout.base
    lines = [
        "# Written by slurm/testcluster.py: a local test cluster, all state under this base folder.",
        "ClusterName=hdtest",
        f"SlurmctldHost={layout.hostname}(127.0.0.1)",  # must be the real short hostname; "localhost" does not match
        f"SlurmctldPort={layout.ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        "CredType=cred/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SlurmdParameters=config_overrides",
        "GresTypes=gpu",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",  # start batch jobs as soon as possible
        "KillWait=2",  # seconds between SIGTERM and SIGKILL when a job is cancelled (default 30)
        "MessageTimeout=5",  # a node that never answers is given up on after 5 s (default 10)
        "InactiveLimit=0",
        "MinJobAge=300",  # finished jobs stay visible to scontrol for 5 minutes
        f"StateSaveLocation={layout.ctld_state}",
        f"SlurmdSpoolDir={b}/state/slurmd/%n",
        f"SlurmctldPidFile={b}/run/slurmctld.pid",
        f"SlurmdPidFile={b}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={b}/log/slurmctld.log",
        f"SlurmdLogFile={b}/log/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
    ]
    for node, port in zip(layout.nodes, layout.node_ports):
        lines.append(
            f"NodeName={node} NodeHostname={layout.hostname} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={layout.cpus_per_node} RealMemory=1000 State=UNKNOWN"
        )
    lines.append(f"PartitionName={layout.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"
