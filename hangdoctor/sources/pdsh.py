"""Collect over pdsh from the hosts of a hostfile (clusters without SLURM, or without srun access).

    pdsh -R ssh -w host1,host2 PYTHON -S .../hangdoctor/collector/__main__.py --chunked --match KEY=VALUE ...

Each host prints its node document as short numbered frame lines (slurm/frames.py, the codec srun's path uses
too: pdsh cuts long lines and prefixes each with "host: "). pdsh joins the remote
command into a string for ssh, so every argument we pass is checked to be free of shell metacharacters.
With `--rcmd exec` pdsh runs the command here with `%h` replaced by each host name (our tests use it; it
also serves a site whose own wrapper reaches the node, e.g. `--rcmd exec` with a command prefix).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from hangdoctor.clicore import children
from hangdoctor.clicore.inputs import InputRefused, read_text
from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from hangdoctor.model import NodeReport
from hangdoctor.sources import CollectOptions, Gathered
from hangdoctor.sources.remote import collector_argv
from slurm import frames

_SAFE = re.compile(r"^[A-Za-z0-9_./:=%+,@-]+$")


def read_hostfile(path: Path) -> list[str]:
    """DeepSpeed/pdsh hostfile: one `host [slots=N]` per line; '#' comments and blank lines ignored."""
    try:
        text = read_text(path, limit=16 << 20, what="a hostfile")
    except InputRefused as exc:
        raise CommandError(str(exc), hint="give --hostfile a file of `host slots=N` lines",
                           exit_code=EXIT_USAGE) from None
    hosts = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            host = line.split()[0]
            if not _SAFE.match(host):
                raise CommandError(f"hostfile {path}: bad host name {host!r}",
                                   hint="one `host slots=N` per line", exit_code=EXIT_USAGE)
            if host not in hosts:
                hosts.append(host)
    if not hosts:
        raise CommandError(f"hostfile {path} names no host", hint="one `host slots=N` per line",
                           exit_code=EXIT_NOT_FOUND)
    return hosts


def pdsh_argv(hosts: list[str], rcmd: str, command: list[str]) -> list[str]:
    for arg in command:
        if not _SAFE.match(arg):
            raise CommandError(f"argument {arg!r} cannot be passed safely through pdsh",
                               hint="use paths and values without spaces or shell characters", exit_code=EXIT_USAGE)
    return ["pdsh", "-R", rcmd, "-f", str(min(64, max(1, len(hosts)))), "-w", ",".join(hosts), *command]


def collect_hostfile(options: CollectOptions, hostfile: Path, *, match: dict, rcmd: str = "ssh",
                     python: str = sys.executable) -> Gathered:
    hosts = read_hostfile(hostfile)
    if shutil.which("pdsh") is None:
        raise CommandError("pdsh not found on PATH", hint="install pdsh (e.g. `apt-get install pdsh`) or use --jobid "
                           "under SLURM", exit_code=EXIT_ENVIRONMENT)
    limit = max(1.0, options.timeout - 2.0)  # the collectors stop in time to print what they have
    command = collector_argv(options, python=python, match=match, time_limit=limit,
                             node="%h" if rcmd == "exec" else None, chunked=True)
    argv = pdsh_argv(hosts, rcmd, command)
    env = dict(os.environ, PDSH_RCMD_TYPE=rcmd)
    proc = children.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          text=True, errors="replace", env=env)
    try:
        out, err = proc.communicate(timeout=options.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # pdsh and our collectors: never the job's processes
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a collector left the group and holds the pipe: stop reading
            out, err = "", ""
    except BaseException:  # Ctrl-C or SIGTERM: pdsh passes the signal on to its remote commands, then goes
        children.end(proc, grace=children.GRACE)
        raise
    children.end(proc)
    records, broken = frames.decode(out.splitlines())  # pdsh's "host: " before each frame tells hosts apart
    docs = [doc for _, doc in records]
    answered = {doc.get("node") for doc in docs}
    failed = [NodeReport(name=node, ok=False, error=f"pdsh: {why}") for node, why in broken.items()]
    for host in hosts:
        if host not in answered and host not in broken:
            said = [line.split(":", 1)[1].strip() for line in err.splitlines() if line.startswith(f"{host}:")]
            failed.append(NodeReport(name=host, ok=False, error="pdsh: " + ("; ".join(said)[:300] or "no answer")))
    if not docs and failed:
        first = failed[0].error
        raise CommandError(f"pdsh reached no host ({len(hosts)} tried): {first}",
                           hint="check that `pdsh -R RCMD -w HOST true` works from here (no sshd? try --rcmd exec)",
                           exit_code=EXIT_ENVIRONMENT)
    return Gathered(source=f"hostfile {hostfile} ({len(hosts)} hosts, pdsh -R {rcmd})", docs=docs, failed=failed)
