"""Nothing hangdoctor starts outlives it (clicore/children.py), through the real commands (sweep round 2):
- SIGTERM or Ctrl-C to `attach` while py-spy is reading: attach ends within seconds, and no py-spy (nor what a
  `--py-spy` wrapper started) is left sampling the job until --timeout;
- a wrapper whose py-spy child hangs: each dump's whole process group is ended at its bound, not one orphan per
  sample; its `--version` probe that never answers is bounded too;
- SIGTERM to `watch` while its attach runs: the attach and its py-spys end, and the stall is still written to
  watch.jsonl.

The py-spy here is a wrapper script that starts a child carrying a unique token and waits for it, the shape of a
site's `py-spy` wrapper (module loads, sudo) whose real py-spy hangs on a process in D state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from slurm.process import is_running
from tests.support import PYTHON, REPO, child_env, kill_tree


def _processes_with(token: str, *, exact: bool = False) -> list[int]:
    """Live processes with `token` in an argument (exact: as a whole argument)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(token.encode() == a if exact else token.encode() in a for a in argv) and is_running(int(entry.name)):
            found.append(int(entry.name))
    return found


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.fixture
def hanging_pyspy(tmp_path):
    """bin/py-spy: `--version` answers (or hangs, when VERSION_HANGS exists); a dump starts a child that sleeps
    with the token in its command line, and waits for it."""
    token = f"hangdoctor-orphan-{uuid.uuid4().hex[:12]}"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "py-spy"
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ] && [ ! -e {tmp_path}/VERSION_HANGS ]; then echo "py-spy 0.4.3"; exit 0; fi
{sys.executable} -c "import time; time.sleep(600)" {token} &
wait
""")
    wrapper.chmod(0o755)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              env={**child_env(), "HANGDOCTOR_ORPHAN_TOKEN": token, "RANK": "0", "WORLD_SIZE": "1"})
    env = child_env()
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    yield token, wrapper, target, env
    kill_tree(target.pid)
    for pid in _processes_with(token):
        os.kill(pid, signal.SIGKILL)


def _attach(target: subprocess.Popen, env: dict, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "-m", "hangdoctor", "attach", "--pid", str(target.pid), "--out", str(out),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                            start_new_session=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_attach_ends_its_pyspys(hanging_pyspy, tmp_path, sig):
    token, _, target, env = hanging_pyspy
    attach = _attach(target, env, tmp_path / "out", "--samples", "1", "--timeout", "120", "--dump-timeout", "100")
    try:
        assert _wait_for(lambda: _processes_with(token), 30), "the wrapper's py-spy child never started"
        os.kill(attach.pid, sig)
        attach.wait(timeout=20)  # not the 100 s of --dump-timeout
        _, err = attach.communicate(timeout=10)
    finally:
        kill_tree(attach.pid)
    assert attach.returncode == 130 and "Error: interrupted" in err and "Traceback" not in err, err
    assert _wait_for(lambda: not _processes_with(token), 5), "py-spy left running after attach ended"


def test_sigterm_to_attach_over_pdsh_ends_pdsh_and_its_collectors(hanging_pyspy, tmp_path):
    """--hostfile: pdsh (-R exec, this machine as the host) runs a collector whose py-spy hangs; SIGTERM to attach
    ends pdsh, the collector and the py-spy (pdsh passes the signal on; its group goes after the grace)."""
    token, wrapper, target, env = hanging_pyspy
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=1\n")
    attach = subprocess.Popen([PYTHON, "-m", "hangdoctor", "attach", "--hostfile", str(hostfile), "--rcmd", "exec",
                               "--match", f"HANGDOCTOR_ORPHAN_TOKEN={token}", "--py-spy", str(wrapper), "--samples",
                               "1", "--timeout", "120", "--dump-timeout", "100", "--out", str(tmp_path / "out")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                              start_new_session=True)
    try:
        assert _wait_for(lambda: _processes_with(token, exact=True), 60), "the collector's py-spy never started"
        os.kill(attach.pid, signal.SIGTERM)
        attach.wait(timeout=30)
        _, err = attach.communicate(timeout=10)
    finally:
        kill_tree(attach.pid)
    assert attach.returncode == 130 and "Traceback" not in err, err
    assert _wait_for(lambda: not _processes_with(token, exact=True), 10), "py-spy left running after attach ended"
    assert _wait_for(lambda: not _processes_with(str(hostfile)), 10), "pdsh left running after attach ended"


def test_a_hung_wrapper_child_is_ended_with_each_dump(hanging_pyspy, tmp_path):
    token, _, target, env = hanging_pyspy
    attach = _attach(target, env, tmp_path / "out", "--samples", "2", "--interval", "1", "--timeout", "30",
                     "--dump-timeout", "2")
    try:
        attach.wait(timeout=60)
        _, err = attach.communicate(timeout=10)
    finally:
        kill_tree(attach.pid)
    assert "Traceback" not in err, err
    assert not _processes_with(token), "a dump's py-spy outlived its bound"


def test_a_version_probe_that_never_answers_is_bounded(hanging_pyspy, tmp_path):
    token, wrapper, target, env = hanging_pyspy
    (tmp_path / "VERSION_HANGS").touch()
    attach = _attach(target, env, tmp_path / "out", "--samples", "1", "--timeout", "30", "--dump-timeout", "2",
                     "--py-spy", str(wrapper))
    try:
        attach.wait(timeout=60)
        _, err = attach.communicate(timeout=10)
    finally:
        kill_tree(attach.pid)
    assert "Traceback" not in err, err
    assert not _processes_with(token)


def test_sigterm_to_watch_during_its_attach_records_the_stall_and_leaves_nothing(hanging_pyspy, tmp_path):
    token, _, target, env = hanging_pyspy
    log = tmp_path / "train.log"
    log.write_text("")
    out = tmp_path / "watch"
    watch = subprocess.Popen([PYTHON, "-m", "hangdoctor", "watch", "--pid", str(target.pid), "--log", str(log),
                              "--startup", "1", "--poll", "0.2", "--samples", "1", "--timeout", "100",
                              "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, cwd=REPO, start_new_session=True)
    try:
        assert _wait_for(lambda: _processes_with(token), 60), "the watch's attach never reached py-spy"
        os.kill(watch.pid, signal.SIGTERM)
        watch.wait(timeout=30)
        said = watch.communicate(timeout=10)[0]
    finally:
        kill_tree(watch.pid)
    assert "Traceback" not in said, said
    events = [json.loads(line) for line in (out / "watch.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["stall"], events
    assert "the watch was stopped before its verdict was taken" in events[0]["text"]
    assert _wait_for(lambda: not _processes_with(token), 5), "the attach's py-spy outlived the watch"
    assert not _processes_with(str(out)), "the watch's attach outlived it"  # attach --out lies under out



def test_a_daemon_a_wrapper_starts_in_its_own_session_ends_with_attach(tmp_path):
    """`setsid cmd &` in a --py-spy wrapper escapes every process group; attach, run as a program, is the child
    subreaper of its descendants, so the daemon becomes its child when the wrapper exits, and is ended (third
    sweep: AT05)."""
    token = f"hangdoctor-daemon-{uuid.uuid4().hex[:12]}"
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "py-spy 0.4.3"; exit 0; fi
setsid {sys.executable} -c "import time; time.sleep(600)" {token} >/dev/null 2>&1 < /dev/null &
sleep 0.5  # the daemon is in its own session before the wrapper answers (as when a real py-spy runs next)
echo "Process 1: python"
echo "Thread 0x1 (idle): \\"MainThread\\""
echo "    sleep (x.py:1)"
""")
    wrapper.chmod(0o755)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        time.sleep(0.3)
        done = subprocess.run([PYTHON, "-m", "hangdoctor", "attach", "--pid", str(target.pid), "--py-spy", str(wrapper),
                               "--samples", "1", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                              env=child_env(), cwd=REPO, timeout=60)
    finally:
        kill_tree(target.pid)
        leftover = _processes_with(token, exact=True)
        for pid in leftover:
            os.kill(pid, signal.SIGKILL)
    assert "Traceback" not in done.stderr, done.stderr
    assert not leftover, "the wrapper's setsid daemon outlived attach"
