"""Run `py-spy dump` on one process under a hard timeout and classify the outcome. Stdlib only.

The command is an argument list (never a shell string). On timeout our own py-spy child is killed: the
kernel then detaches it from the target, which carries on. Nothing here signals the job's processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

OK, TIMEOUT, PTRACE_DENIED, NOT_PYTHON, GONE, ERROR = "ok", "timeout", "ptrace-denied", "not-python", "gone", "error"
STOPPED = "stopped"

_DENIED = ("permission denied", "operation not permitted", "eperm")
_NOT_PYTHON = ("failed to find python version", "failed to find a python interpreter", "not a python")
_GONE = ("no such process", "failed to get process executable name", "no such file or directory",
         "check that the process is running")


def pyspy_command(pyspy: str, pid: int, *, json_out: bool, native: bool, nonblocking: bool) -> list:
    cmd = [pyspy, "dump", "--pid", str(pid)]
    if json_out:
        cmd.append("--json")
    if native and not nonblocking:  # py-spy refuses --native with --nonblocking
        cmd.append("--native")
    if nonblocking:
        cmd.append("--nonblocking")
    return cmd


def error_line(text: str) -> str:
    """py-spy's own message: the "Error: ..." line and its "Caused by" reasons, without the backtrace."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    picked = []
    for i, line in enumerate(lines):
        if line.lower().startswith("stack backtrace"):
            break
        if line.startswith("Error:") or line.startswith("Permission Denied") or (picked and line[:2].rstrip(":").isdigit()):
            picked.append(line)
        elif line == "Caused by:":
            continue
    if not picked:
        picked = [line for line in lines if not line.lower().startswith("stack backtrace")][:2]
    return " ".join(picked)[:500]


def classify_failure(text: str, pid: int, *, live: bool = True) -> str:
    """A status from py-spy's error text; `live` also checks whether the process still exists."""
    low = text.lower()
    if any(word in low for word in _DENIED):
        return PTRACE_DENIED
    if "failed to suspend process" in low and "sigstop" in low:
        return STOPPED  # py-spy met a process in group-stop (SIGSTOP)
    if (live and not os.path.exists(f"/proc/{pid}")) or any(word in low for word in _GONE):
        return GONE
    if any(word in low for word in _NOT_PYTHON):
        return NOT_PYTHON
    return ERROR


def pyspy_env() -> dict:
    env = dict(os.environ)
    env["RUST_BACKTRACE"] = "0"  # keep py-spy's errors to their message
    env["RUST_LIB_BACKTRACE"] = "0"
    return env


def dump_process(pyspy: str, pid: int, *, timeout: float, json_out: bool = True, native: bool = False,
                 nonblocking: bool = False) -> dict:
    """Dump one process. Returns {"status", "seconds", "pyspy_json" | "pyspy_text", "error", "nonblocking"}."""
    cmd = pyspy_command(pyspy, pid, json_out=json_out, native=native, nonblocking=nonblocking)
    result = {"status": ERROR, "seconds": 0.0, "error": "", "nonblocking": nonblocking,
              "native": native and not nonblocking}
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=pyspy_env())
    except OSError as exc:
        result["error"] = f"cannot run {pyspy}: {exc.strerror or exc}"
        return result
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # our py-spy, never the target
        try:
            proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            pass  # a py-spy stuck in the kernel: abandon it rather than wait
        result.update(status=TIMEOUT, seconds=time.monotonic() - start,
                      error=f"py-spy did not answer within {timeout:g}s")
        return result
    result["seconds"] = time.monotonic() - start
    text_out = out.decode("utf-8", "replace")
    text_err = err.decode("utf-8", "replace")
    if proc.returncode != 0:
        result["status"] = classify_failure(text_err + "\n" + text_out, pid)
        result["error"] = error_line(text_err + "\n" + text_out) or f"py-spy exited with {proc.returncode}"
        return result
    if json_out:
        try:
            result["pyspy_json"] = json.loads(text_out)
        except ValueError:
            result["pyspy_text"] = text_out
            result["error"] = "py-spy's output is not JSON; kept as text"
    else:
        result["pyspy_text"] = text_out
    result["status"] = OK
    return result


def pyspy_version(pyspy: str) -> str:
    """"0.4.3", or "" when py-spy cannot be run."""
    try:
        done = subprocess.run([pyspy, "--version"], capture_output=True, timeout=10, env=pyspy_env())
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode("utf-8", "replace").strip().replace("py-spy ", "")
