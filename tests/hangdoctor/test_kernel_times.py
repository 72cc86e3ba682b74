"""A slow GPU rank named from the Flight Recorder's NCCL kernel times (analysis/kernel_times.py), on recordings of a
real NCCL job on an H200 (data/gpu_kernel_times_h200/README.md: rank 1's GPU made slower, or nobody's); the CPU
sampler alone names nobody in the same recordings. A gloo job's recorder has no kernel times: nothing is compared."""

import json
import subprocess
from pathlib import Path

import pytest

from hangdoctor.analysis.kernel_times import compare_kernel_times
from hangdoctor.collector import fr_summary
from hangdoctor.formats.flight_recorder import read_fr
from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded

DATA = Path(__file__).parent / "data" / "gpu_kernel_times_h200"


def profile(*paths) -> dict:
    done = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", "--profile", "--json", *map(str, paths)], timeout=60,
                       env=child_env())
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("variant", ["slow20", "slow1"])
def test_the_rank_whose_gpu_was_made_slower_is_named_from_the_dumps_the_job_wrote(variant):
    report = profile(DATA / "files" / variant / "nodes", DATA / "files" / variant / "fr")
    assert [s["ranks"] for s in report["stragglers"]] == [[1]]
    assert "kernel times" in report["stragglers"][0]["evidence"]
    assert report["kernel_times"][0]["last_counts"]["0"] == 0


@pytest.mark.parametrize("variant", ["slow20", "slow1"])
def test_the_sampled_profile_alone_names_nobody_in_the_same_recording(variant):
    assert profile(DATA / "files" / variant / "nodes")["stragglers"] == []


def test_two_equal_ranks_that_take_turns_are_no_straggler():
    report = profile(DATA / "files" / "healthy" / "nodes", DATA / "files" / "healthy" / "fr")
    assert report["stragglers"] == []
    counts = report["kernel_times"][0]["last_counts"]
    assert min(counts.values()) > 0.3 * report["kernel_times"][0]["compared"]
    assert report["headline"].startswith("NO STRAGGLER")


@pytest.mark.parametrize("variant", ["slow20", "slow1"])
def test_the_kernel_times_attach_fetched_live_from_the_nccl_recorder_name_it(variant):
    """The node files attach wrote on the GPU machine hold the NCCL recorder's summaries, fetched from torch's
    debug server while the profile ran: analysing them again gives what attach printed there."""
    report = profile(DATA / "live" / variant / "nodes")
    assert [s["ranks"] for s in report["stragglers"]] == [[1]]
    printed = json.loads((DATA / "live" / variant / "profile.json").read_text())
    assert [s["ranks"] for s in printed["stragglers"]] == [[1]]


def test_the_summary_keeps_the_last_kernel_times_and_the_dump_reads_them_back():
    raw = fr_summary.decode((DATA / "files" / "slow20" / "fr" / "fr_rank_1").read_bytes())
    summary = fr_summary.summarize(raw)["groups"]["0"]
    timed = {e["collective_seq_id"]: e["duration_ms"] for e in raw["entries"] if e.get("duration_ms") is not None}
    kept = fr_summary.durations_of(summary["durations_first"], summary["durations"])
    assert 0 < len(kept) <= fr_summary.KEPT_DURATIONS and max(kept) == max(timed)
    assert all(abs(kept[seq] - timed[seq]) < 1e-3 for seq in kept)
    dump = read_fr(DATA / "files" / "slow20" / "fr" / "fr_rank_1")
    assert dump.sequences["0"].kernel_times() == kept


def test_a_gloo_recorder_has_no_kernel_times_and_nothing_is_compared(tmp_path):
    """A real gloo job with TORCH_NCCL_ENABLE_TIMING=1: its entries carry no duration (gloo has no CUDA events)."""
    script = tmp_path / "job.py"
    script.write_text(
        "import os, time, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "rank = dist.get_rank()\n"
        "t = torch.ones(8)\n"
        "for i in range(30):\n"
        "    if rank == 1: time.sleep(0.01)\n"
        "    dist.all_reduce(t)\n"
        "data = torch._C._distributed_c10d._dump_fr_trace(includeCollectives=True)\n"
        f"open(os.path.join({str(tmp_path)!r}, f'fr_rank_{{rank}}'), 'wb').write(data)\n"
        "dist.destroy_process_group()\n")
    env = child_env(TORCH_FR_BUFFER_SIZE="200", TORCH_NCCL_ENABLE_TIMING="1")
    proc = subprocess.Popen([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)],
                            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        proc.wait(timeout=120)
    finally:
        kill_tree(proc.pid)
    dumps = [read_fr(tmp_path / f"fr_rank_{rank}") for rank in (0, 1)]
    assert all(d.sequences["0"].last >= 30 for d in dumps)
    assert compare_kernel_times(dumps) == []


def test_a_damaged_kernel_time_in_a_node_file_is_said_and_not_compared(tmp_path):
    node = json.loads(next((DATA / "live" / "slow1" / "nodes").glob("*.json")).read_text())
    fetched = next(p["flight_recorder"] for p in node["processes"] if p.get("flight_recorder"))
    group = next(iter(fetched["summary"]["groups"].values()))
    group["durations"] = "1.5 x 2.0"
    path = tmp_path / "nodes" / "vm.json"
    path.parent.mkdir()
    path.write_text(json.dumps(node))
    done = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", "--profile", "--json", str(path.parent)], timeout=60,
                       env=child_env())
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 0 and "Traceback" not in done.stdout
    notes = json.loads(done.stdout)["notes"]
    assert any("could not be read" in note for note in notes), notes
