"""A real local SLURM cluster of N virtual nodes on one machine, for tests, CI and demos.

    python -m slurm.testcluster start  --base /tmp/hdslurm --nodes 4
    export SLURM_CONF=/tmp/hdslurm/etc/slurm.conf       # `env` prints this line
    sbatch ... ; srun ... ; squeue
    python -m slurm.testcluster status --base /tmp/hdslurm
    python -m slurm.testcluster stop   --base /tmp/hdslurm

munged runs as the munge user, then slurmctld, then one slurmd per node (`slurmd -N nK`, all at 127.0.0.1 on
their own ports); see clusterconf.py for the folder layout. Every wait is bounded. `stop` cancels the jobs,
ends the slurmd, any stray slurmstepd or job task of this cluster, slurmctld and munged, and checks that they are
gone by reading /proc/PID/stat (a zombie does not count as alive). Needs root: slurmd runs jobs as their owner.

Exit codes of the CLI: 0 ok (status: every daemon running and every node usable), 1 cluster not healthy or
could not start/stop, 2 bad usage.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from slurm.clusterconf import ClusterLayout, render_slurm_conf
from slurm.daemons import (
    Daemon, check_binaries, daemon_of, free_ports, log_tail, munge_roundtrip, read_daemons, record_daemons,
    session_leftovers, spawn, stray_processes, unreachable_ancestor, wait_for, write_munge_key,
)
from slurm.errors import ClusterError, SlurmError
from slurm.process import is_running, run_command, start_time, terminate

USABLE_NODE_STATES = ("idle", "mixed", "allocated", "completing")


@dataclass(frozen=True)
class ClusterStatus:
    daemons: list[Daemon]
    nodes: dict[str, str]  # node -> sinfo state, e.g. "idle", "down*", "unreachable" when slurmctld is not answering

    @property
    def healthy(self) -> bool:
        return (
            bool(self.daemons)
            and all(d.running for d in self.daemons)
            and bool(self.nodes)
            and all(state in USABLE_NODE_STATES for state in self.nodes.values())
        )


@dataclass
class LocalCluster:
    base: Path
    nodes: int = 4
    cpus_per_node: int = 4
    remove_base_on_stop: bool = False
    layout: ClusterLayout | None = None
    _children: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.base = Path(self.base).resolve()
        if self.layout is None and (self.base / "etc" / "cluster.json").exists():
            self.layout = ClusterLayout.load(self.base)
            self.nodes = len(self.layout.nodes)

    # ---- what clients need ----
    @property
    def conf(self) -> Path:
        return self._require_layout().conf

    @property
    def node_names(self) -> list[str]:
        return list(self._require_layout().nodes)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """os.environ (or `base`) plus SLURM_CONF: pass it to every sbatch/srun/squeue aimed at this cluster."""
        env = dict(os.environ if base is None else base)
        env.update(self._require_layout().client_env())
        return env

    def _require_layout(self) -> ClusterLayout:
        if self.layout is None:
            raise ClusterError(f"no cluster in {self.base}", "start it first: python -m slurm.testcluster start --base ...")
        return self.layout

    # ---- lifecycle ----
    def start(self, *, timeout: float = 30.0) -> "LocalCluster":
        if os.geteuid() != 0:
            raise ClusterError("the local test cluster needs root (slurmd runs each job as its owner)", "run as root")
        bins = check_binaries()
        if self.layout is not None and any(d.running for d in read_daemons(self.layout)):
            raise ClusterError(f"a cluster is already running in {self.base}", "stop it first, or use another --base")
        self.base.mkdir(parents=True, exist_ok=True)
        blocked = unreachable_ancestor(self.base)
        if blocked is not None:
            raise ClusterError(
                f"munged cannot reach {self.base}: {blocked} is not traversable by other users",
                f"choose a base folder under a world-traversable one such as /tmp (or chmod o+x {blocked})",
            )
        ports = free_ports(self.nodes + 1)
        self.layout = layout = ClusterLayout(
            base=self.base, nodes=tuple(f"n{i}" for i in range(1, self.nodes + 1)), ctld_port=ports[0],
            node_ports=tuple(ports[1:]), cpus_per_node=self.cpus_per_node,
        )
        for folder in (layout.conf.parent, layout.ctld_state, layout.run_dir, layout.log_dir,
                       *(layout.slurmd_spool(n) for n in layout.nodes)):
            folder.mkdir(parents=True, exist_ok=True)
        layout.conf.write_text(render_slurm_conf(layout))
        layout.save()
        record_daemons(layout, [])
        deadline = time.monotonic() + timeout
        left = lambda: max(0.5, deadline - time.monotonic())  # noqa: E731
        try:
            self._start_munged(bins, left())
            self._start_slurmctld(bins, left())
            self._start_slurmds(bins, left())
        except BaseException:
            self.stop(timeout=20)
            raise
        return self

    def _spawn(self, name: str, argv: list[str], user: str | None = None) -> None:
        proc = spawn(self.layout, name, argv, user=user)
        self._children[name] = proc
        record_daemons(self.layout, read_daemons(self.layout) + [daemon_of(name, proc)])

    def _died(self, *names: str):
        def check() -> None:
            for name in names:
                if self._children[name].poll() is not None:
                    raise ClusterError(f"{name} exited at start-up: {log_tail(self.layout, name)}")
        return check

    def _start_munged(self, bins: dict[str, str], timeout: float) -> None:
        lay = self.layout
        write_munge_key(lay)
        self._spawn("munged", [
            bins["munged"], "--foreground", f"--socket={lay.munge_socket}", f"--key-file={lay.munge_key}",
            f"--pid-file={lay.munge_dir / 'munged.pid'}", f"--log-file={lay.munge_dir / 'munged.log'}",
            f"--seed-file={lay.munge_dir / 'munged.seed'}",
        ], user="munge")
        wait_for("munged to answer", lambda: munge_roundtrip(lay, bins), timeout=timeout, alive=self._died("munged"))

    def _start_slurmctld(self, bins: dict[str, str], timeout: float) -> None:
        self._spawn("slurmctld", [bins["slurmctld"], "-D", "-c", "-f", str(self.layout.conf)])
        env = self.env()
        wait_for(
            "slurmctld to answer `scontrol ping`",
            lambda: "is UP" in run_command([bins["scontrol"], "ping"], timeout=5, env=env).stdout,
            timeout=timeout, alive=self._died("slurmctld"), interval=0.1,
        )

    def _start_slurmds(self, bins: dict[str, str], timeout: float) -> None:
        names = [f"slurmd-{node}" for node in self.layout.nodes]
        for node, name in zip(self.layout.nodes, names):
            self._spawn(name, [bins["slurmd"], "-D", "-f", str(self.layout.conf), "-N", node])
        wait_for(
            f"{len(names)} nodes to be idle", lambda: self._nodes_usable(), timeout=timeout,
            alive=self._died("slurmctld", *names), interval=0.1,
        )

    def _nodes_usable(self) -> bool:
        states = self.node_states()
        return set(states) == set(self.layout.nodes) and all(s in USABLE_NODE_STATES for s in states.values())

    def node_states(self, *, timeout: float = 5.0) -> dict[str, str]:
        result = run_command(["sinfo", "--noheader", "--Node", "--format=%N %T"], timeout=timeout, env=self.env())
        if not result.ok:
            return {node: "unreachable" for node in self._require_layout().nodes}
        return {line.split()[0]: line.split()[-1].lower() for line in result.stdout.splitlines() if line.strip()}

    def status(self) -> ClusterStatus:
        layout = self._require_layout()
        daemons = [d for d in read_daemons(layout) if d.name != "watchdog"]
        ctld = next((d for d in daemons if d.name == "slurmctld"), None)
        nodes = self.node_states() if ctld and ctld.running else {n: "unreachable" for n in layout.nodes}
        return ClusterStatus(daemons=daemons, nodes=nodes)

    def stop(self, *, timeout: float = 30.0) -> list[Daemon]:
        """Cancel all jobs, end every process of this cluster, reap our children; return what would not die."""
        if self.layout is None or not self.layout.layout_file.exists():
            return []
        layout = self.layout
        daemons = read_daemons(layout)
        by_name = {d.name: d for d in daemons}
        deadline = time.monotonic() + timeout
        if by_name.get("slurmctld") and by_name["slurmctld"].running:
            self._cancel_all_jobs(min(2.0, timeout / 3))  # leftovers are killed below in any case
        grace = lambda: max(1.0, min(5.0, deadline - time.monotonic()))  # noqa: E731
        slurmds = {d.pid: d.started for d in daemons if d.name.startswith("slurmd-")}
        survivors = terminate(slurmds, grace=grace())
        survivors.update(terminate(stray_processes(layout), grace=1.0, sig=signal.SIGKILL))
        for name in ("slurmctld", "munged"):
            if name in by_name:
                survivors.update(terminate({by_name[name].pid: by_name[name].started}, grace=grace()))
        survivors.update(terminate(session_leftovers(daemons), grace=1.0, sig=signal.SIGKILL))
        watchdog = by_name.get("watchdog")
        if watchdog and watchdog.pid != os.getpid():
            terminate({watchdog.pid: watchdog.started}, grace=1.0)
        for proc in self._children.values():  # reap our own children so that no zombie is left behind
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        self._children.clear()
        left = [d for d in daemons if d.pid in survivors]
        record_daemons(layout, left)
        if not left and self.remove_base_on_stop:
            shutil.rmtree(self.base, ignore_errors=True)
        return left

    def _cancel_all_jobs(self, timeout: float) -> None:
        env = self.env()
        listed = run_command(["squeue", "--noheader", "--format=%i"], timeout=5, env=env)
        ids = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
        if not ids:
            return
        run_command(["scancel", *ids], timeout=5, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not run_command(["squeue", "--noheader", "--format=%i"], timeout=5, env=env).stdout.strip():
                return
            time.sleep(0.1)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def start_watchdog(cluster: LocalCluster, owner_pid: int) -> None:
    """A detached process that stops the cluster if `owner_pid` dies first (a killed test session leaks nothing)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "slurm.testcluster", "watch", "--base", str(cluster.base), "--owner", str(owner_pid),
         "--owner-started", str(start_time(owner_pid)), *(["--remove-base"] if cluster.remove_base_on_stop else [])],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    record_daemons(cluster.layout, read_daemons(cluster.layout) + [daemon_of("watchdog", proc)])
    cluster._children["watchdog"] = proc


def local_cluster_for_tests(tmp_base: Path | None = None, *, nodes: int = 4, cpus_per_node: int = 8) -> LocalCluster:
    """Start a cluster for a test session; stop it with `.stop()` (a watchdog stops it if the session dies).

    pytest's temporary folders live under a 0700 folder that munged cannot traverse; then the cluster goes to a
    fresh folder under the system temporary folder, removed when it stops cleanly.
    """
    if tmp_base is not None and unreachable_ancestor(Path(tmp_base).resolve()) is None:
        cluster = LocalCluster(Path(tmp_base) / "slurm-cluster", nodes=nodes, cpus_per_node=cpus_per_node)
    else:
        base = Path(tempfile.mkdtemp(prefix="hangdoctor-slurm-"))
        os.chmod(base, 0o755)
        cluster = LocalCluster(base, nodes=nodes, cpus_per_node=cpus_per_node, remove_base_on_stop=True)
    try:
        cluster.start()
    except ClusterError as err:  # another cluster took a port between our pick and the daemon's bind: once more
        if "Address already in use" not in err.message:
            raise
        cluster.start()
    start_watchdog(cluster, os.getpid())
    atexit.register(cluster.stop)
    return cluster


def _watch(base: Path, owner: int, owner_started: int | None, remove_base: bool) -> int:
    while is_running(owner, owner_started):
        time.sleep(1.0)
    LocalCluster(base, remove_base_on_stop=remove_base).stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurm.testcluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "status", "stop", "env", "watch"])
    parser.add_argument("--base", type=Path, required=True, help="folder that holds all of the cluster's state")
    parser.add_argument("--nodes", type=int, default=4, help="number of virtual nodes (start only; default 4)")
    parser.add_argument("--timeout", type=float, default=30.0, help="bound for start/stop in seconds (default 30)")
    parser.add_argument("--owner", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--owner-started", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--remove-base", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    cluster = LocalCluster(args.base, nodes=args.nodes)
    try:
        if args.action == "start":
            cluster.start(timeout=args.timeout)
            print(f"started {cluster.nodes} nodes ({', '.join(cluster.node_names)}); export SLURM_CONF={cluster.conf}")
        elif args.action == "env":
            print(f"export SLURM_CONF={cluster.conf}")
        elif args.action == "watch":
            return _watch(cluster.base, args.owner, args.owner_started, args.remove_base)
        elif args.action == "status":
            status = cluster.status()
            for d in status.daemons:
                print(f"{d.name:<12} pid {d.pid:<8} {d.state}")
            for node, state in status.nodes.items():
                print(f"{node:<12} {state}")
            return 0 if status.healthy else 1
        else:
            left = cluster.stop(timeout=args.timeout)
            if left:
                raise ClusterError(f"still running after stop: {', '.join(f'{d.name} ({d.pid})' for d in left)}")
            print(f"stopped the cluster in {cluster.base}")
    except SlurmError as err:
        print(f"Error: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"Hint: {err.hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
