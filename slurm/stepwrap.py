"""The task that `run_step_on_each_node` starts on every node: run one command, report it in framed lines.

    python -S /path/to/slurm/stepwrap.py --timeout=8 -- py-spy dump --pid 1234     (or python -m slurm.stepwrap)

runs the command with a hard time bound (its whole process group is killed after that), captures its stdout,
stderr and exit status, and prints one record

    {"node": "<SLURMD_NODENAME>", "status": "ok|failed|timeout|not started", "returncode": ..., "stdout": "...",
     "stderr": "...", "seconds": ...}

as frame lines (slurm.frames, the one codec of both ways back from the nodes: the record's JSON, zlib-compressed,
base64-encoded, in numbered parts of at most 800 characters). srun cuts labelled output lines at 1,024 bytes, so
one long line per node would arrive in pieces; short frames with their number come back whole, and `--label`
keeps two tasks' output from mixing within a line. A node whose frames never all arrive did not answer. Standard
library only: it runs under
whatever Python (3.7+) the job's nodes have, started by its path with `-S` (no site-packages needed, and a third
of Python's start-up saved on every node).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

if __package__ in (None, ""):  # started by file path on a node: make `slurm` and `clicore` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hangdoctor.clicore import children  # noqa: E402
from slurm import frames  # noqa: E402


def run_wrapped(argv: list[str], timeout: float) -> dict:
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename  # socket.gethostname(), without importing socket
    start = time.monotonic()
    try:
        proc = children.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    except OSError as err:
        return {"node": node, "status": "not started", "returncode": None, "stdout": "",
                "stderr": f"{argv[0]}: {err.strerror}", "seconds": 0.0}
    try:
        out, err = proc.communicate(timeout=timeout)
        status = "ok" if proc.returncode == 0 else "failed"
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
            out, err = b"", b""
        status, returncode = "timeout", None
    children.end(proc)  # whatever it left in its group
    return {
        "node": node, "status": status, "returncode": returncode,
        "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace"),
        "seconds": round(time.monotonic() - start, 3),
    }


def parse_args(argv: list[str]) -> tuple[float, list[str]]:
    """(timeout, command). The form run_step_on_each_node uses, `--timeout=T -- COMMAND...`, is read directly:
    this runs once per node and per step, and argparse's import alone costs a third of a bare Python start."""
    if len(argv) >= 3 and argv[0].startswith("--timeout=") and argv[1] == "--":
        try:
            return float(argv[0][len("--timeout="):]), argv[2:]
        except ValueError:
            pass  # argparse says what is wrong
    import argparse

    parser = argparse.ArgumentParser(prog="python -m slurm.stepwrap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, required=True, help="seconds before the command is killed")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    return args.timeout, command


def main(argv: list[str] | None = None) -> int:
    timeout, command = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        with children.owned():  # the step cancelled (SIGTERM from slurmstepd): the command's group goes too
            record = run_wrapped(command, timeout)
    except KeyboardInterrupt:
        return 130
    sys.stdout.write("".join(line + "\n" for line in frames.encode(record, record["node"])))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
