"""Start, record, find and stop the daemons of a local test cluster (munged, slurmctld, slurmd per node).

Every daemon runs in the foreground (`-F`/`-D`) as our child, in its own session, with its stdout/stderr in
BASE/log. Its pid and start time go to BASE/run/daemons.json as soon as it exists, so a `stop` from another
process (or the watchdog, when the owner died) can end exactly what was started, and nothing else.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from slurm.clusterconf import ClusterLayout
from slurm.errors import ClusterError
from slurm.process import (
    all_pids, environ_of, is_running, parent_pid, process_state, run_command, session_id, start_time,
)

# Every daemon (and so every slurmstepd, which slurmd forks) carries this in its environment: `stop` finds
# stray step daemons by it.
MARKER = "HANGDOCTOR_TESTCLUSTER"
BINARIES = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "scontrol", "sinfo", "squeue", "scancel")
INSTALL_HINT = "install them with `bash scripts/system-packages.sh` (apt-get install slurmctld slurmd slurm-client munge)"


@dataclass(frozen=True)
class Daemon:
    name: str  # "munged", "slurmctld", "slurmd-n1", "watchdog"
    pid: int
    started: int | None  # /proc start time, guards against a recycled pid

    @property
    def running(self) -> bool:
        return is_running(self.pid, self.started)

    @property
    def state(self) -> str:
        """running, stopped (SIGSTOP), disk-wait, zombie (exited, not yet reaped) or gone."""
        st = process_state(self.pid)
        if st is None or (self.started is not None and start_time(self.pid) != self.started):
            return "gone"
        return {"Z": "zombie", "X": "gone", "T": "stopped", "t": "stopped", "D": "disk-wait"}.get(st, "running")


def find_binary(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)


def check_binaries() -> dict[str, str]:
    found = {name: find_binary(name) for name in BINARIES}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise ClusterError(f"SLURM/munge programs missing: {', '.join(missing)}", INSTALL_HINT)
    return found  # type: ignore[return-value]


def free_ports(count: int) -> list[int]:
    """Ports the kernel considers free right now (bound then released; a clash is reported by the daemon's log)."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


def unreachable_ancestor(path: Path) -> Path | None:
    """The first folder on the way to `path` that other users cannot traverse (munged needs o+x on all)."""
    for folder in [*reversed(path.parents), path]:
        if folder.exists() and not os.stat(folder).st_mode & 0o001:
            return folder
    return None


def write_munge_key(layout: ClusterLayout) -> None:
    munge_user = pwd.getpwnam("munge")
    layout.munge_dir.mkdir(parents=True, exist_ok=True)
    os.chown(layout.munge_dir, munge_user.pw_uid, munge_user.pw_gid)
    os.chmod(layout.munge_dir, 0o755)  # munged insists: "execute permissions for all required" on the socket dir
    key = layout.munge_key
    if key.exists():
        key.unlink()
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as fh:
        fh.write(os.urandom(1024))
    os.chown(key, munge_user.pw_uid, munge_user.pw_gid)


def read_daemons(layout: ClusterLayout) -> list[Daemon]:
    try:
        return [Daemon(**d) for d in json.loads(layout.daemons_file.read_text())]
    except FileNotFoundError:
        return []


def record_daemons(layout: ClusterLayout, daemons: list[Daemon]) -> None:
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    tmp = layout.daemons_file.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(d) for d in daemons], indent=2) + "\n")
    tmp.replace(layout.daemons_file)


def spawn(layout: ClusterLayout, name: str, argv: list[str], *, user: str | None = None) -> subprocess.Popen:
    """Start one daemon in the foreground, in its own session, output to BASE/log/<name>.out."""
    layout.log_dir.mkdir(parents=True, exist_ok=True)
    out = open(layout.log_dir / f"{name}.out", "ab")
    env = dict(os.environ)
    env[MARKER] = str(layout.base)
    env.pop("SLURM_CONF", None)
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=layout.base,
            start_new_session=True, user=user, group=user,
        )
    finally:
        out.close()


def daemon_of(name: str, proc: subprocess.Popen) -> Daemon:
    return Daemon(name=name, pid=proc.pid, started=start_time(proc.pid))


def log_tail(layout: ClusterLayout, name: str, lines: int = 6) -> str:
    """The last lines a daemon logged, for an error message (its own log file first, then its stdout)."""
    candidates = {
        "slurmctld": [layout.log_dir / "slurmctld.log"],
        "munged": [layout.munge_dir / "munged.log"],
    }.get(name, [layout.log_dir / f"{name}.log"]) + [layout.log_dir / f"{name}.out"]
    for path in candidates:
        try:
            text = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        except FileNotFoundError:
            continue
        if text:
            return " | ".join(line.strip() for line in text[-lines:])
    return "(no log)"


def wait_for(what: str, check, *, timeout: float, alive=lambda: None, interval: float = 0.05):
    """Poll `check()` until it returns a truthy value; `alive()` raises if a daemon died; bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        alive()
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")


def munge_roundtrip(layout: ClusterLayout, bins: dict[str, str]) -> bool:
    if not layout.munge_socket.exists():
        return False
    cred = run_command([bins["munge"], "-S", layout.munge_socket, "-n"], timeout=5)
    if not cred.ok:
        return False
    return run_command([bins["unmunge"], "-S", layout.munge_socket], timeout=5, input=cred.stdout).ok


def stray_processes(layout: ClusterLayout) -> dict[int, int | None]:
    """{pid: start time} of this cluster's slurmstepd and job tasks: SLURM_CONF names our configuration in their
    environment (slurmd hands it to slurmstepd; a job inherits it from the sbatch/srun that submitted it).

    Never this process or its ancestors: a shell that exported SLURM_CONF is not a job task.
    """
    keep, pid = set(), os.getpid()
    while pid and pid not in keep:
        keep.add(pid)
        pid = parent_pid(pid) or 0
    found = {}
    for pid in all_pids():
        if pid in keep or not is_running(pid):
            continue
        env = environ_of(pid)
        ours = env.get(MARKER) == str(layout.base) or env.get("SLURM_CONF") == str(layout.conf)
        if ours and ("SLURM_JOB_ID" in env or _command_name(pid) == "slurmstepd"):
            found[pid] = start_time(pid)
    return found


def session_leftovers(daemons: list[Daemon]) -> dict[int, int | None]:
    """Processes a daemon left in its session, e.g. slurmctld's slurmscriptd (which ignores SIGTERM)."""
    sessions = {d.pid for d in daemons if d.name != "watchdog"}
    return {pid: start_time(pid) for pid in all_pids() if session_id(pid) in sessions and is_running(pid)}


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
