"""Run `py-spy dump` on many processes at once, each under a hard timeout, and classify every outcome.

Up to `parallel` py-spy processes run at once and one selector loop reads their pipes (no thread per
process: on a busy node, starting threads costs more than the dumps). Commands are argument lists, never shell strings.
On timeout our own py-spy is killed: the kernel then detaches it from its target, which carries on.
Nothing here signals the job's processes. Stdlib only.
"""

from __future__ import annotations

import json
import os
import re
import select
import selectors
import subprocess
import time

from hangdoctor.clicore import children

MAX_OUTPUT = 256 << 20  # bytes of one dump's output: a thousand threads with locals is a few MB
OK, TIMEOUT, PTRACE_DENIED, NOT_PYTHON, GONE, ERROR = "ok", "timeout", "ptrace-denied", "not-python", "gone", "error"
STOPPED = "stopped"

_DUMP_TEXT = re.compile(r"^\s*Thread (?:0x)?[0-9a-fA-F]+ ", re.M)  # py-spy's text: one line per thread
_DENIED = ("permission denied", "operation not permitted", "eperm")
_NOT_PYTHON = ("failed to find python version", "failed to find a python interpreter", "not a python")
_GONE = ("no such process", "failed to get process executable name", "no such file or directory",
         "check that the process is running")


def pyspy_command(pyspy: str, pid: int, *, json_out: bool, native: bool, nonblocking: bool,
                  local_vars: bool = False) -> list:
    cmd = [pyspy, "dump", "--pid", str(pid)]
    if json_out:
        cmd.append("--json")
    if local_vars:
        cmd.append("--locals")
    if native and not nonblocking:  # py-spy refuses --native with --nonblocking
        cmd.append("--native")
    if nonblocking:
        cmd.append("--nonblocking")
    return cmd


def error_line(text: str) -> str:
    """py-spy's own message: the "Error: ..." line and its numbered causes, without the backtrace."""
    picked = []
    for line in (raw.strip() for raw in text.splitlines()):
        if line.lower().startswith("stack backtrace"):
            break
        if line.startswith(("Error:", "Permission Denied")) or (picked and line.split(":", 1)[0].isdigit()):
            picked.append(line)
    if not picked:
        picked = [line.strip() for line in text.splitlines() if line.strip()][:2]
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


def outcome(pid: int, returncode: int, out: bytes, err: bytes, *, json_out: bool) -> dict:
    """The result of one finished py-spy: status, and its output (parsed JSON or text) or its error line."""
    text_out, text_err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if returncode != 0:
        both = text_err + "\n" + text_out
        return {"status": classify_failure(both, pid), "error": error_line(both) or f"py-spy exited with {returncode}"}
    if not _DUMP_TEXT.search(text_out) and not text_out.lstrip().startswith("["):
        # neither py-spy's JSON nor its text (no `Thread 0x... ` line): a wrapper's or a broken py-spy's output
        return {"status": ERROR, "error": f"py-spy's output is not a dump ({len(out):,} bytes, no thread in it)"}
    if not json_out:
        return {"status": OK, "error": "", "pyspy_text": text_out}
    try:
        return {"status": OK, "error": "", "pyspy_json": json.loads(text_out)}
    except ValueError:
        return {"status": OK, "error": "py-spy's output is not JSON; kept as text", "pyspy_text": text_out}


class _Running:
    def __init__(self, pid: int, proc: subprocess.Popen, started: float, timeout: float, hard_end: float | None):
        self.pid, self.proc, self.started = pid, proc, started
        self.deadline = started + timeout if hard_end is None else min(started + timeout, hard_end)
        self.out, self.err, self.open = [], [], 2
        self.size, self.too_much = 0, False  # bytes read from it; whether it passed MAX_OUTPUT


def default_parallel() -> int:
    """Dumps at a time: twice the CPUs (py-spy --native spends ~0.7 s of CPU on libtorch's unwind tables;
    sixteen at once on two cores would each take ten times longer), at least 4 so that a few stuck py-spys
    do not hold up the rest."""
    return max(4, 2 * (os.cpu_count() or 1))


def dump_many(pyspy: str, requests: list, *, timeout: float, json_out: bool = True, native: bool = False,
              on_done=None, parallel: int | None = None, deadline: float | None = None,
              local_vars: bool = False, command=None, outcome=None, name: str = "py-spy") -> dict:
    """requests: [(pid, nonblocking), ...]. Returns {pid: result}; every result has status, seconds, error,
    nonblocking, native. Each py-spy gets `timeout` seconds from its own start, and all end by `deadline`
    (time.monotonic()); `on_done(pid)` is called as each finishes. Another reader (pystack.py) passes its own
    `command(pid, nonblocking) -> argv`, `outcome(pid, returncode, out, err) -> result` and `name`."""
    results: dict = {}
    waiting = list(reversed(requests))
    running: list = []
    selector = selectors.DefaultSelector()
    env = pyspy_env()
    parallel = parallel or default_parallel()
    while waiting or running:
        while waiting and len(running) < parallel:
            pid, nonblocking = waiting.pop()
            results[pid] = {"seconds": 0.0, "nonblocking": nonblocking, "native": native and not nonblocking}
            if deadline is not None and time.monotonic() >= deadline - 0.1:
                results[pid].update(status=TIMEOUT, error="not dumped: the collection's time bound was reached")
                if on_done is not None:
                    on_done(pid)
                continue
            argv = (command(pid, nonblocking) if command is not None else
                    pyspy_command(pyspy, pid, json_out=json_out, native=native, nonblocking=nonblocking,
                                  local_vars=local_vars))
            try:
                proc = children.spawn(argv,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
            except OSError as exc:
                results[pid].update(status=ERROR, error=f"cannot run {pyspy}: {exc.strerror or exc}")
                if on_done is not None:
                    on_done(pid)
                continue
            job = _Running(pid, proc, time.monotonic(), timeout, deadline)
            selector.register(proc.stdout, selectors.EVENT_READ, (job, job.out))
            selector.register(proc.stderr, selectors.EVENT_READ, (job, job.err))
            running.append(job)
        if not running:
            continue
        nearest = min(job.deadline for job in running)
        for key, _ in selector.select(timeout=max(0.0, min(0.2, nearest - time.monotonic()))):
            job, sink = key.data
            chunk = os.read(key.fd, 1 << 16)
            if chunk:
                sink.append(chunk)
                job.size += len(chunk)
            else:
                selector.unregister(key.fileobj)
                key.fileobj.close()
                job.open -= 1
        now = time.monotonic()
        for job in [j for j in running if j.size > MAX_OUTPUT]:  # not a dump (a wrapper printing forever)
            job.deadline, job.too_much = now, True
        for job in [j for j in running if j.open == 0 or now >= j.deadline]:
            running.remove(job)
            _finish(job, results[job.pid], selector, now, timeout, json_out, outcome, name)
            if on_done is not None:
                on_done(job.pid)
    selector.close()
    return results


def _finish(job: _Running, result: dict, selector, now: float, timeout: float, json_out: bool, read=None,
            name: str = "py-spy") -> None:
    if job.open:
        for stream in (job.proc.stdout, job.proc.stderr):
            if not stream.closed:
                selector.unregister(stream)
                stream.close()
        if job.too_much:
            result.update(status=ERROR, error=f"{name} printed more than {MAX_OUTPUT >> 20} MiB: not a dump")
        else:
            result.update(status=TIMEOUT, error=f"{name} did not answer within {timeout:g}s")
    # Our py-spy's process group, never the target: also a wrapper's py-spy child. None: stuck in the kernel,
    # abandoned rather than waited for.
    returncode = children.end(job.proc)
    if not job.open:
        code, out, err = -9 if returncode is None else returncode, b"".join(job.out), b"".join(job.err)
        result.update(read(job.pid, code, out, err) if read is not None else
                      outcome(job.pid, code, out, err, json_out=json_out))
    result["seconds"] = round(now - job.started, 4)


def dump_process(pyspy: str, pid: int, *, timeout: float, json_out: bool = True, native: bool = False,
                 nonblocking: bool = False) -> dict:
    """One process: dump_many with a single request."""
    return dump_many(pyspy, [(pid, nonblocking)], timeout=timeout, json_out=json_out, native=native)[pid]


def pyspy_version(pyspy: str) -> str:
    """"0.4.3", or "" when py-spy cannot be run."""
    try:
        proc = children.spawn([pyspy, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, env=pyspy_env())
    except OSError:
        return ""
    return version_answer(proc, timeout=10)


VERSION_BYTES = 4096  # what a version line can take: a wrapper that prints more is not answering the question


def version_answer(proc: subprocess.Popen, *, timeout: float) -> str:
    """The version a started `py-spy --version` prints, "" when it says nothing within `timeout` (a wrapper
    whose child hangs: the group is ended and the pipe never waited on again). At most VERSION_BYTES are read: a
    wrapper that prints endlessly (`yes`) is ended at that, never buffered."""
    out = b""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno() if proc.stdout is not None else None
    while fd is not None and len(out) <= VERSION_BYTES:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        piece = os.read(fd, VERSION_BYTES + 1 - len(out))
        if not piece:
            break
        out += piece
    children.end(proc)
    if proc.stdout is not None:
        proc.stdout.close()
    if len(out) > VERSION_BYTES:
        return ""
    return out.decode("utf-8", "replace").strip().replace("py-spy ", "")
