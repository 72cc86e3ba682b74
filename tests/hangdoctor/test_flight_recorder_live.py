"""The Flight Recorder joined with the stacks on a live hang: fixtures/fr_job.py skip-allreduce (4 gloo ranks under
torchrun, tp groups 0-1 and 2-3; rank 1 skips one all_reduce of its tp group and waits in a world barrier).

- attach fetches each rank's trace from torch's debug worker server (the job calls start_debug_server) while the
  job hangs, with no setting on our side, and `analyze` of attach's folder tells the same;
- attach --fr-dir joins the dumps the job wrote itself (each rank dumps a second after it blocked): each node's
  collector reads and reduces its ranks' files.
Each attach is asked once, after every rank wrote that it is about to block."""

import json
import socket
import subprocess
import time

import pytest

from tests.hangdoctor.livejobs import kill_group
from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded

pytestmark = pytest.mark.slow
FIXTURE = REPO / "tests" / "hangdoctor" / "fixtures" / "fr_job.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hung_job(tmp_path, *extra: str) -> tuple[subprocess.Popen, list]:
    ready = tmp_path / "ready"
    ready.mkdir()
    env = child_env(FR_DIR=str(tmp_path / "fr"), HD_READY=str(ready), HD_DEBUG_PORT=str(free_port()),
                    TORCH_FR_BUFFER_SIZE="2000", HD_FR_TEST=tmp_path.name)
    proc = subprocess.Popen([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4", str(FIXTURE),
                             "skip-allreduce", "--timeout", "150", "--lifetime", "150", *extra],
                            stdout=open(tmp_path / "job.log", "w"), stderr=subprocess.STDOUT, env=env, cwd=REPO,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while len(list(ready.glob("rank*[0-9]"))) < 4:
        if proc.poll() is not None or time.monotonic() > deadline:
            kill_tree(proc.pid)
            raise AssertionError((tmp_path / "job.log").read_text()[-3000:])
        time.sleep(0.2)
    time.sleep(1.0)  # from the marker into the blocking call
    if "--dump-after" in extra:  # the job writes its own dumps while it hangs: wait for all 4 (both forms)
        while len([p for p in (tmp_path / "fr").glob("fr_rank_*") if p.suffix != ".tmp"]) < 8:
            assert time.monotonic() < deadline, "the job did not write its dumps"
            time.sleep(0.2)
    return proc, [int(p.read_text()) for p in ready.glob("rank*[0-9]")]


def attach(tmp_path, pids, *extra: str) -> dict:
    done = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", *map(str, pids), "--tp", "2", "--json",
                        "--out", str(tmp_path / "out"), *extra], timeout=120, env=child_env())
    assert done.returncode in (0, 1), done.output[-3000:]
    return json.loads(done.stdout)


def stop(proc, pids):
    kill_tree(proc.pid)
    kill_group(proc)
    for pid in pids:
        subprocess.run(["kill", "-9", str(pid)], capture_output=True)


def check(verdict: dict) -> None:
    assert verdict["flight_recorder"]["ranks"]["folded"] == "0-3"
    assert verdict["hints"][0] == ("tensor-parallel group of dp=0 [ranks 0-1]: dp=0 tp=0 [rank 0] waits in "
                                   "all_reduce #3; dp=0 tp=1 [rank 1] never issued #3 and is at barrier #1 in group 0")
    first = verdict["suspects"][0]
    assert (first["folded"], first["kind"], first["confidence"]) == ("1", "never-issued", "high")
    # the stacks alone would make rank 0 (alone in an all_reduce, the rest in a barrier) look odd: the recorder
    # shows it waiting for rank 1
    stack_suspect = next(s for s in verdict["suspects"] if s["folded"] == "0")
    assert stack_suspect["confidence"] == "low" and "Flight Recorder shows it waiting" in stack_suspect["reason"]


def test_attach_fetches_traces_from_the_debug_worker_servers(tmp_path):
    proc, pids = hung_job(tmp_path, "--debug-server")
    try:
        verdict = attach(tmp_path, pids)
    finally:
        stop(proc, pids)
    check(verdict)
    again = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(tmp_path / "out"), "--tp", "2", "--json"],
                        timeout=60, env=child_env())
    check(json.loads(again.stdout))  # the traces are in attach's node files


def test_attach_joins_the_dumps_a_job_wrote_with_fr_dir(tmp_path):
    proc, pids = hung_job(tmp_path, "--dump-after", "0.5")
    try:
        verdict = attach(tmp_path, pids, "--fr-dir", str(tmp_path / "fr"), "--no-flight-recorder")
    finally:
        stop(proc, pids)
    check(verdict)
    # each rank's dump was read and reduced by the collector, on the node: the node file carries the summaries
    [doc] = [json.loads(p.read_text()) for p in (tmp_path / "out" / "nodes").glob("*.json")]
    read = {p["rank"]: p["flight_recorder"] for p in doc["processes"]}
    assert sorted(read) == list(range(4)) and all(r["file"].endswith(f"fr_rank_{k}") for k, r in read.items())
    assert all(r["summary"]["format"] == "hangdoctor-fr-summary/1" for r in read.values())
    again = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(tmp_path / "out"), "--tp", "2", "--json"],
                        timeout=60, env=child_env())
    check(json.loads(again.stdout))
