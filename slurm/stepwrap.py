"""The task that `run_step_on_each_node` starts on every node: run one command, report it in framed lines.

    python -S /path/to/slurm/stepwrap.py --timeout=8 -- py-spy dump --pid 1234     (or python -m slurm.stepwrap)

runs the command with a hard time bound (its whole process group is killed after that), captures its stdout,
stderr and exit status, and prints one record

    {"node": "<SLURMD_NODENAME>", "status": "ok|failed|timeout|not started", "returncode": ..., "stdout": "...",
     "stderr": "...", "seconds": ...}

as frame lines `HANGDOCTOR-STEP <node> <i>/<n> <part>`: the record's JSON, zlib-compressed, base64-encoded, cut in
parts of at most 800 characters. srun cuts labelled output lines at 1,024 bytes, so one long line per node would
arrive in pieces; short frames with their number come back whole, and `--label` keeps two tasks' output from
mixing within a line. A node whose frames never all arrive did not answer. Standard library only: it runs under
whatever Python (3.7+) the job's nodes have, started by its path with `-S` (no site-packages needed, and a third
of Python's start-up saved on every node).
"""

from __future__ import annotations

import binascii
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable

FRAME = "HANGDOCTOR-STEP "
PART = 800  # characters of base64 per frame line, well under srun's 1,024-byte line limit


def run_wrapped(argv: list[str], timeout: float) -> dict:
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename  # socket.gethostname(), without importing socket
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


def encode_frames(record: dict) -> list[str]:
    # binascii rather than base64 (which imports re): this runs in a fresh Python on every node
    data = binascii.b2a_base64(zlib.compress(json.dumps(record).encode(), 6), newline=False).decode("ascii")
    parts = [data[i:i + PART] for i in range(0, len(data), PART)] or [""]
    return [f"{FRAME}{record['node']} {i}/{len(parts)} {part}" for i, part in enumerate(parts, 1)]


def decode_frames(lines: Iterable[tuple[str, str]]) -> tuple[dict[str, dict], dict[str, str]]:
    """(stream, line) pairs -> ({node: record}, {node: why its record is incomplete}).

    `stream` tells the writers apart (srun's task label); other lines are ignored.
    """
    parts: dict[tuple[str, str], dict[int, str]] = {}
    totals: dict[tuple[str, str], int] = {}
    for stream, line in lines:
        if not line.startswith(FRAME):
            continue
        fields = line[len(FRAME):].split(" ")
        if len(fields) != 3 or "/" not in fields[1]:
            continue
        node, (index, total), part = fields[0], fields[1].split("/", 1), fields[2]
        if not (index.isdigit() and total.isdigit()):
            continue
        key = (stream, node)
        parts.setdefault(key, {})[int(index)] = part
        totals[key] = int(total)
    records, incomplete = {}, {}
    for key, got in parts.items():
        node, total = key[1], totals[key]
        if len(got) < total or any(i not in got for i in range(1, total + 1)):
            incomplete[node] = f"its report was cut short: {len(got)} of {total} parts arrived"
            continue
        try:
            record = json.loads(zlib.decompress(binascii.a2b_base64("".join(got[i] for i in range(1, total + 1)))))
        except (ValueError, zlib.error) as err:
            incomplete[node] = f"its report did not decode: {err}"
            continue
        records[record.get("node", node)] = record
    return records, incomplete


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
    record = run_wrapped(command, timeout)
    sys.stdout.write("".join(line + "\n" for line in encode_frames(record)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
