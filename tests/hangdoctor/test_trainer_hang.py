"""The reference trainer's skip-loss-broadcast fault under torchrun (PP=2 DP=2, 4 ranks): attach names the
ranks, coordinates and DeepSpeed frames; the seed's own method (a serial py-spy loop over `ps | grep python`,
concatenated text) analysed offline tells the same story."""

import json
import shutil
import subprocess
import time

import pytest

from tests.hangdoctor.livejobs import kill_group, kill_torchrun_workers, torchrun_run_id
from tests.support import PYTHON, REPO, child_env, run_bounded
from tests.trainer_runs import MODEL, torchrun_command

pytestmark = pytest.mark.slow
ENGINE = "deepspeed/runtime/pipe/engine.py"
BROADCAST = f"broadcast <- PipelineEngine._aggregate_total_loss ({ENGINE})"
RECV = f"recv <- PipelineEngine._exec_recv_activations ({ENGINE})"


@pytest.fixture(scope="module")
def hung_trainer(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("hung-trainer") / "run"
    args = ["--pp", "2", "--train-iters", "4", "--pg-timeout", "400", *MODEL,
            "--fault", "skip-loss-broadcast:iteration=2"]
    log_path = run_dir.parent / "torchrun.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(torchrun_command(4, run_dir, args), stdout=log, stderr=subprocess.STDOUT,
                                env=child_env(), cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        metrics = run_dir / "metrics.jsonl"
        while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.5)
        run_id = torchrun_run_id(str(run_dir))
        yield run_dir
    finally:
        kill_group(proc)
        if "run_id" in locals():
            kill_torchrun_workers(run_id)


def attach_until_settled(run_id: str, out) -> dict:
    """Right after iteration 2 the last stage may not have reached its recv yet: attach until both stages wait."""
    deadline = time.monotonic() + 90
    while True:
        shutil.rmtree(out, ignore_errors=True)  # attach never writes over a report: each attempt starts afresh
        result = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--local", "--run-id", run_id, "--samples", "2",
                              "--interval", "0.5", "--json", "--out", str(out)], timeout=120, env=child_env())
        assert result.returncode == 0, result.output[-3000:]
        data = json.loads(result.stdout)
        if [p["position"] for p in data["places"]] == [BROADCAST, RECV]:
            return data
        assert time.monotonic() < deadline, f"never settled: {data['places']}"
        time.sleep(2)


def test_attach_names_the_stages_ranks_and_deepspeed_frames(hung_trainer, tmp_path):
    data = attach_until_settled(torchrun_run_id(str(hung_trainer)), tmp_path / "out")
    assert data["hung"] is True and data["headline"] == "HUNG: 4 ranks stuck, 4 in 2 calls (4/4 responded)"
    first, last = data["places"]
    assert (first["folded"], first["where"], first["progress"]) == ("0-1", "pp=0 (all dp)", {"stuck": 2})
    assert (last["folded"], last["where"]) == ("2-3", "pp=1 (all dp)")
    assert first["wait"]["call"] == {"name": "broadcast", "file": "deepspeed/comm/comm.py",
                                     "line": first["wait"]["call"]["line"], "native": False}
    assert [s["folded"] for s in data["suspects"]] == ["2-3"]
    # py-spy --locals (attach's default): each first-stage rank waits for its own last-stage peer, which is in recv
    peers = {r["rank"]: (r["peer"] or {}).get("rank") for r in data["ranks"]}
    assert peers == {0: 2, 1: 3, 2: 0, 3: 1}
    assert data["suspects"][0]["confidence"] == "high" and "which are in recv" in data["suspects"][0]["reason"]
    assert any(h.startswith("pp=0 dp=0 [rank 0] waits in broadcast from rank 2 (src); rank 2 is in recv")
               for h in data["hints"])
    assert data["hints"][0] == (f"pp=0 (all dp) [ranks 0-1] wait in {BROADCAST} that pp=1 (all dp) [ranks 2-3] never "
                                f"entered (pp=1 (all dp) [ranks 2-3] wait in {RECV})")
    coords = {r["rank"]: (r["coords"]["pp"], r["coords"]["dp"]) for r in data["ranks"]}
    assert coords == {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)}


def test_the_seeds_method_analysed_offline_tells_the_same_story(hung_trainer, tmp_path):
    attach_until_settled(torchrun_run_id(str(hung_trainer)), tmp_path / "settle")
    trace = tmp_path / "trace-localhost.out"
    # The seed's command, with `grep <run dir>` in place of `grep whoami` (other jobs share this machine).
    seed = (f"ps aux | grep python | egrep -v 'grep|srun' | grep {hung_trainer} | awk '{{print $2}}' "
            f"| xargs -I {{}} {REPO}/.venv/bin/py-spy dump --native --pid {{}} > {trace} 2>&1")
    run_bounded(["sh", "-c", seed], timeout=120, env=child_env())
    result = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(trace), "--json"], timeout=60, env=child_env())
    data = json.loads(result.stdout)
    assert [(p["folded"], p["where"], p["position"]) for p in data["places"]] == [
        ("0-1", "pp=0 (all dp)", BROADCAST), ("2-3", "pp=1 (all dp)", RECV)]
    launchers = [a for a in data["set_aside"] if a["role"] == "launcher"]
    assert len(launchers) == 1 and "torchrun" in launchers[0]["why"], "torchrun's agent matched `grep python` too"
