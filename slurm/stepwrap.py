"""The task that `run_step_on_each_node` starts on every node: run one command, report it as one framed line.

    python -m slurm.stepwrap --timeout 8 -- py-spy dump --pid 1234

runs the command with a hard time bound (its whole process group is killed after that), captures its stdout,
stderr and exit status, and prints exactly one line:

    HANGDOCTOR-STEP {"node": "<SLURMD_NODENAME>", "status": "ok|failed|timeout|not started", "returncode": ...,
                     "stdout": "...", "stderr": "...", "seconds": ...}

One JSON line per node keeps the nodes apart in srun's merged stdout (with `--label` srun never interleaves
within a line), and a node whose line never arrives is known to have not answered. Standard library only: it runs
under whatever Python the job's nodes have.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

FRAME = "HANGDOCTOR-STEP "


def run_wrapped(argv: list[str], timeout: float) -> dict:
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
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
    return {
        "node": node, "status": status, "returncode": returncode,
        "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace"),
        "seconds": round(time.monotonic() - start, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurm.stepwrap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, required=True, help="seconds before the command is killed")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    record = run_wrapped(command, args.timeout)
    sys.stdout.write(FRAME + json.dumps(record) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
