"""Where py-spy cannot read the ranks (ptrace denied: a container without SYS_PTRACE), `attach` asks each rank's
own torch debug worker server for its Python threads (/handler/dump_traceback) and still gives the verdict.

Real: two gloo ranks under torchrun that run torch.distributed.debug.start_debug_server (fixtures/
debug_server_job.py: rank 0 in barrier, rank 1 sleeping in slow_step), the real collector and analysis. Stand-in:
py-spy itself (fixtures/denied_pyspy.sh refuses every dump with py-spy's own permission error), since this test
runs as root and ptrace would be allowed; pystack, which would then read them (test_pystack_reader.py), is turned
off: where ptrace is denied it is denied to pystack too."""

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hangdoctor.collector import flight
from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).parent / "fixtures"
DENIED = FIXTURES / "denied_pyspy.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served_job(tmp_path):
    ready = tmp_path / "ready"
    ready.mkdir()
    env = child_env(HD_READY=str(ready), HD_DEBUG_PORT=str(free_port()))
    proc = subprocess.Popen([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                             str(FIXTURES / "debug_server_job.py"), "--lifetime", "120"],
                            stdout=open(tmp_path / "job.log", "w"), stderr=subprocess.STDOUT, env=env, cwd=REPO,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        pids: dict[int, int] = {}
        while len(pids) < 2:  # evidence, read by the test: each rank's own server shows it in its blocking call
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "job.log").read_text()[-3000:]
            for marker in ready.glob("rank*[0-9]"):
                pid = int(marker.read_text())
                text = flight.fetch_traceback(pid, {}) or ""
                if (" in barrier" if marker.name == "rank0" else " in slow_step") in text:
                    pids[int(marker.name[4:])] = pid
            time.sleep(0.2)
        yield pids
    finally:
        kill_tree(proc.pid)
        proc.wait(timeout=30)


def test_stacks_come_from_the_ranks_debug_servers_when_ptrace_is_denied(served_job, tmp_path):
    pids = [served_job[0], served_job[1]]
    done = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", *map(str, pids), "--py-spy", str(DENIED),
                        "--no-pystack", "--samples", "1", "--json", "--out", str(tmp_path / "out")], timeout=120,
                       env=child_env())
    assert done.returncode in (0, 1), done.output[-3000:]
    data = json.loads(done.stdout)
    ranks = {r["rank"]: r for r in data["ranks"]}
    assert ranks[0]["status"] == ranks[1]["status"] == "ok", ranks
    assert ranks[0]["position"].startswith("barrier"), ranks[0]
    assert "slow_step" in ranks[1]["position"], ranks[1]
    assert all("debug server" in r["error"] for r in ranks.values())  # what py-spy said is kept, and where from
    doc = json.loads(next((tmp_path / "out" / "nodes").glob("*.json")).read_text())
    assert all(p["samples"][-1]["source"] == "torch debug server (dump_traceback)" for p in doc["processes"])


def test_without_the_servers_the_same_denial_is_said(served_job, tmp_path):
    pids = [served_job[0], served_job[1]]
    done = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", *map(str, pids), "--py-spy", str(DENIED),
                        "--no-pystack", "--samples", "1", "--no-flight-recorder", "--out", str(tmp_path / "out")],
                       timeout=120, env=child_env())
    assert done.returncode == 4 and "ptrace denied for all 2 ranks" in done.stderr, done.output[-3000:]
