"""The reference trainer's skip-loss-broadcast fault under torchrun (PP=2 DP=2, 4 ranks): attach names the
ranks, coordinates and DeepSpeed frames; the seed's own method (a serial py-spy loop over `ps | grep python`,
concatenated text) analysed offline tells the same story.

The job is declared hung by evidence the test reads itself (every rank's main-thread stack the same in two py-spy
samples), then attach is asked once and its first answer is the one asserted. Its counterpart: a job asked while
a rank still computes (the gloo fixture's straggler) is called progressing there, and nobody else is blamed.
"""

import json
import subprocess

import pytest

from tests.hangdoctor.livejobs import (GlooJob, innermost, kill_group, kill_torchrun_workers, torchrun_ranks,
                                       torchrun_run_id, wait_until, wait_until_stacks_hold)
from tests.support import PYTHON, REPO, child_env, run_bounded
from tests.trainer_runs import MODEL, torchrun_command

pytestmark = pytest.mark.slow
ENGINE = "deepspeed/runtime/pipe/engine.py"
BROADCAST = f"broadcast <- PipelineEngine._aggregate_total_loss ({ENGINE})"
RECV = f"recv <- PipelineEngine._exec_recv_activations ({ENGINE})"


@pytest.fixture(scope="module")
def hung_trainer(tmp_path_factory):
    """(run dir, {rank: main-thread stack}) once the 4 ranks' stacks hold still in two py-spy samples."""
    run_dir = tmp_path_factory.mktemp("hung-trainer") / "run"
    args = ["--pp", "2", "--train-iters", "4", "--pg-timeout", "400", *MODEL,
            "--fault", "skip-loss-broadcast:iteration=2"]
    log_path = run_dir.parent / "torchrun.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(torchrun_command(4, run_dir, args), stdout=log, stderr=subprocess.STDOUT,
                                env=child_env(), cwd=REPO, start_new_session=True)
    run_id = None
    try:
        metrics = run_dir / "metrics.jsonl"
        try:
            wait_until(lambda: proc.poll() is not None or (metrics.exists() and
                                                           len(metrics.read_text().splitlines()) >= 2),
                       timeout=240, what="the trainer's iteration 2 in metrics.jsonl")
            assert proc.poll() is None, "torchrun ended instead of hanging"
            run_id = torchrun_run_id(str(run_dir))
            wait_until(lambda: len(torchrun_ranks(run_id)) == 4, timeout=30, what="4 torchrun workers")
            stacks = wait_until_stacks_hold(torchrun_ranks(run_id), timeout=180)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{log_path.read_text()[-3000:]}") from None
        yield run_dir, stacks
    finally:
        kill_group(proc)
        if run_id:
            kill_torchrun_workers(run_id)


def attach_once(args: list[str], out, stacks: dict) -> dict:
    """hangdoctor attach, asked once: its first answer is the one the test asserts (every rank answers: exit 0)."""
    result = run_bounded([PYTHON, "-m", "hangdoctor", "attach", *args, "--json", "--out", str(out)], timeout=120,
                         env=child_env())
    assert result.returncode == 0, result.output[-3000:]
    data = json.loads(result.stdout)
    data["test_saw"] = "; ".join(f"rank {r}: {innermost(stack)}" for r, stack in sorted(stacks.items()))
    return data


def test_attach_names_the_stages_ranks_and_deepspeed_frames(hung_trainer, tmp_path):
    run_dir, stacks = hung_trainer
    data = attach_once(["--local", "--run-id", torchrun_run_id(str(run_dir)), "--samples", "2", "--interval", "0.5"],
                       tmp_path / "out", stacks)
    assert [p["position"] for p in data["places"]] == [BROADCAST, RECV], data["test_saw"]
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
    # each side's locals name the other (a cycle); the schedule's phase order says the last stage went on
    first = data["suspects"][0]
    assert first["confidence"] == "medium" and first["reason"].startswith(
        "never entered the broadcast of the loss from the last stage that ranks 0-1 wait in")
    assert any(h.startswith("pp=0 dp=0 [rank 0] waits in broadcast from rank 2 (src); rank 2 is in recv")
               for h in data["hints"])
    [cause] = data["wait_graph"]["causes"]
    assert (cause["folded"], cause["rule"], cause["waiting"]) == ("2-3", "schedule", "0-1")
    assert {e["strength"] for e in data["wait_graph"]["edges"]} == {"explicit"}
    coords = {r["rank"]: (r["coords"]["pp"], r["coords"]["dp"]) for r in data["ranks"]}
    assert coords == {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)}


def test_the_seeds_method_analysed_offline_tells_the_same_story(hung_trainer, tmp_path):
    hung_trainer, _ = hung_trainer
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


@pytest.fixture
def gloo_pair(tmp_path):
    """Start a 2-rank gloo fixture (pp=2: rank 0 waits in a broadcast from rank 1) with the given flags."""
    jobs = []

    def start(*flags: str) -> GlooJob:
        folder = tmp_path / f"job{len(jobs)}"
        folder.mkdir()
        jobs.append(GlooJob(folder, nproc=2, extra=["--pp", "2", *flags], lifetime=180))
        return jobs[-1].start()

    yield start
    for job in jobs:
        job.stop()


def test_a_rank_still_computing_is_progressing_and_the_rank_waiting_for_it_is_not_blamed(gloo_pair, tmp_path):
    """Not settled: rank 1 never reaches the broadcast rank 0 waits in; it keeps computing (its stack changes).
    Asked once, attach calls rank 1 progressing and rank 0 stuck, and names rank 1 alone, as a straggler."""
    job = gloo_pair("--straggler-rank", "1")
    data = attach_once(["--local", "--run-id", job.run_id, "--samples", "2", "--interval", "0.5"], tmp_path / "o",
                       job.stacks)
    progress = {r["rank"]: r["progress"] for r in data["ranks"]}
    assert progress == {0: "stuck", 1: "progressing"}, data["test_saw"]
    assert [(s["folded"], s["kind"]) for s in data["suspects"]] == [("1", "straggler")]
    assert data["hung"] is True and data["headline"].endswith("1 progressing (2/2 responded)")


def test_a_job_asked_while_every_rank_still_computes_is_not_hung_and_blames_nobody(gloo_pair, tmp_path):
    """Not settled at all: both ranks keep computing. Asked once, attach says not hung, both ranks progressing,
    and blames no rank: nobody waits for anybody, so nobody is a straggler."""
    job = gloo_pair("--straggler-rank", "0", "--straggler-rank", "1")
    data = attach_once(["--local", "--run-id", job.run_id, "--samples", "2", "--interval", "0.5"], tmp_path / "o",
                       job.stacks)
    assert {r["rank"]: r["progress"] for r in data["ranks"]} == {0: "progressing", 1: "progressing"}
    assert data["hung"] is False
    assert data["headline"] == "Not hung: all 2 answering ranks progressed between samples (2/2 responded)"
    assert data["suspects"] == []
