"""`hangdoctor attach` on a real hung torch.distributed (gloo) job under torchrun: 8 ranks (tp=2 pp=2 dp=2),
pp=0 in a pipeline broadcast, pp=1 in a world all_reduce, rank 2 SIGSTOPped, rank 7 a straggler."""

import json

import pytest

from tests.hangdoctor.livejobs import GlooJob, proc_state
from tests.support import PYTHON, child_env, run_bounded

ATTACH = [PYTHON, "-m", "hangdoctor", "attach"]


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory):
    job = GlooJob(tmp_path_factory.mktemp("gloo")).start()
    yield job
    job.stop()


def attach(*args, timeout=120):
    return run_bounded([*ATTACH, *args], timeout=timeout, env=child_env(COLUMNS="110"))


def test_local_job_verdict_names_ranks_coordinates_frames_stopped_and_straggler(gloo_job, tmp_path):
    out = tmp_path / "out"
    result = attach("--local", "--run-id", gloo_job.run_id, "--samples", "3", "--interval", "0.5", "--json",
                    "--out", str(out))
    assert result.returncode == 1, result.output[-3000:]  # partial: rank 2 did not respond
    data = json.loads(result.stdout)
    assert data["topology"]["tp"] == 2 and data["topology"]["pp"] == 2 and data["expected"] == 8
    places = {p["folded"]: p for p in data["places"]}
    assert places["0-1,3"]["wait"]["label"] == "broadcast <- _aggregate_total_loss (tests/hangdoctor/fixtures/hung_gloo.py)"
    assert places["0-1,3"]["progress"] == {"stuck": 3}
    assert places["4-6"]["wait"]["op"] == "all_reduce" and places["4-6"]["wait"]["caller"]["name"] == "train_step"
    assert places["7"]["progress"] == {"progressing": 1} and places["7"]["where"] == "pp=1 dp=1 tp=1"
    assert data["unresponsive"]["stopped"]["ranks"] == [2]
    assert data["responded"]["count"] == 7 and data["headline"].endswith("(7/8 responded)")
    suspects = {s["folded"]: s["kind"] for s in data["suspects"]}
    assert suspects == {"4-6": "other-call", "7": "straggler", "2": "unresponsive"}
    assert any("never entered" in h and h.startswith("pp=0") for h in data["hints"])
    assert {p.name for p in out.iterdir()} == {"nodes", "report.json", "report.html"}
    node = json.loads(next((out / "nodes").glob("*.json")).read_text())
    assert len(node["processes"]) == 8 and all(len(p["samples"]) == 3 for p in node["processes"])
    assert proc_state(gloo_job.pids[2]) == "T", "still stopped: hangdoctor sends no signal"


def test_pid_mode_text_report(gloo_job, tmp_path):
    pids = gloo_job.pids
    result = attach("--pid", str(pids[0]), f"{pids[4]},{pids[7]}", "--out", str(tmp_path / "o"))
    assert result.returncode == 0, result.output[-3000:]  # the three given processes all answered
    text = result.stdout
    assert "(3/3 responded)" in text, "picked processes: the others are not counted as missing"
    assert "rank 0  pp=0 dp=0 tp=0  waits in broadcast <- _aggregate_total_loss" in text
    assert "rank 4  pp=1 dp=0 tp=0  waits in all_reduce <- train_step" in text
    assert "rank 7  pp=1 dp=1 tp=1  is outside any collective, in slow_forward" in text
    assert f"Raw outputs and reports: {tmp_path / 'o'}/" in result.stderr


def test_unknown_run_id_lists_the_running_jobs(gloo_job):
    result = attach("--local", "--run-id", "no-such-run")
    assert result.returncode == 3
    assert result.stderr.startswith("Error: no torchrun job with run id no-such-run") and gloo_job.run_id in result.stderr


def test_nonblocking_and_native_options(gloo_job, tmp_path):
    result = attach("--pid", str(gloo_job.pids[0]), "--native", "--json", "--out", str(tmp_path / "n"))
    data = json.loads(result.stdout)
    frames = [n["frame"]["name"] for n in data["tree"] if n["frame"]]
    assert "c10d::Work::wait" in frames and data["places"][0]["wait"]["op"] == "broadcast"
    result = attach("--pid", str(gloo_job.pids[4]), "--nonblocking", "--json", "--out", str(tmp_path / "b"))
    data = json.loads(result.stdout)
    assert data["ranks"][0]["status"] == "ok" and data["places"][0]["wait"]["op"] == "all_reduce"


def test_all_threads_puts_every_thread_of_the_ranks_in_the_tree(gloo_job, tmp_path):
    pids = gloo_job.pids
    result = attach("--pid", str(pids[0]), str(pids[7]), "--all-threads", "--json", "--out", str(tmp_path / "t"))
    assert result.returncode == 0, result.output[-3000:]
    data = json.loads(result.stdout)
    threads = {n["frame"]["name"]: n for n in data["tree"] if n["frame"] and n["frame"]["name"].startswith("thread ")}
    assert set(threads) == {"thread MainThread", "thread watchdog"}  # the fixture's ranks run a watchdog thread
    assert all(n["ranks"] == "0,7" and n["parent"] == 0 for n in threads.values())
    assert data["threads"] == "all" and data["tree"][0]["count"] == 2
    assert [p["folded"] for p in data["places"]] == ["0", "7"]  # the verdict is still the main threads'
