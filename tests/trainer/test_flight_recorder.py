"""`--flight-recorder DIR`: when a hang ends in the process-group timeout, each rank dumps torch's Flight Recorder.

The dumps are unpickled here because the test wrote them itself, a moment ago; never unpickle a stranger's file.
"""

import json
import pickle

import pytest

from tests.support import PYTHON, child_env, run_bounded

ONE_RANK_FAILS = """
import sys
from trainer import flight_recorder

folder = sys.argv[1]
flight_recorder.enable(folder, rank=0)  # before the process group, or torch records nothing
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
try:
    with flight_recorder.dump_on_error(folder, rank=0):
        dist.all_reduce(torch.ones(3))
        raise RuntimeError("the original error")
except RuntimeError as err:
    print(f"propagated: {err}")
"""


def _load(folder, rank):
    with open(folder / f"fr_rank_{rank}", "rb") as fh:
        return pickle.load(fh), json.loads((folder / f"fr_rank_{rank}.json").read_text())


def test_an_error_dumps_the_recorded_collectives_and_propagates_unchanged(tmp_path):
    result = run_bounded([PYTHON, "-c", ONE_RANK_FAILS, str(tmp_path)], timeout=60, env=child_env())
    assert result.returncode == 0, result.output[-3000:]
    assert "propagated: the original error" in result.stdout
    dump, as_json = _load(tmp_path, 0)
    assert [(e["profiling_name"], e["input_sizes"]) for e in dump["entries"]] == [("gloo:all_reduce", [[3]])]
    assert len(as_json["entries"]) == 1
    assert not list(tmp_path.glob(".*tmp")), "temporary files are renamed into place"


@pytest.mark.slow
def test_every_rank_dumps_both_forms_when_the_hang_times_out(trainer_runs):
    run = trainer_runs.get("hang_pp2")
    assert run.result.returncode != 0 and "Timed out waiting 10000ms" in run.result.stderr, "the error is unchanged"
    assert "Warning:" not in run.result.stderr, run.result.stderr[-3000:]
    names = sorted(p.name for p in run.flight_recorder.iterdir())
    assert names == ["fr_rank_0", "fr_rank_0.json", "fr_rank_1", "fr_rank_1.json"]
    for rank in range(2):
        dump, as_json = _load(run.flight_recorder, rank)
        assert dump["entries"] and all(isinstance(e["collective_seq_id"], int) for e in dump["entries"])
        assert len(as_json["entries"]) == len(dump["entries"])
        assert [e["record_id"] for e in as_json["entries"]] == [e["record_id"] for e in dump["entries"]]


@pytest.mark.slow
def test_the_first_stage_dump_ends_in_the_broadcast_the_last_stage_skipped(trainer_runs):
    folder = trainer_runs.get("hang_pp2").flight_recorder
    first, _ = _load(folder, 0)  # pp=0
    last, _ = _load(folder, 1)  # pp=1, which skipped its loss broadcast at iteration 2
    hung = first["entries"][-1]
    assert hung["profiling_name"] == "gloo:broadcast"
    assert "_aggregate_total_loss" in [frame["name"] for frame in hung["frames"]]
    group, seq = hung["process_group"][0], hung["collective_seq_id"]
    peer = [e["collective_seq_id"] for e in last["entries"] if e["process_group"][0] == group]
    assert peer and seq not in peer and max(peer) == seq - 1, (group, seq, peer)


@pytest.mark.slow
def test_hangdoctor_names_the_broadcast_the_last_stage_never_issued(trainer_runs):
    folder = trainer_runs.get("hang_pp2").flight_recorder
    result = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(folder), "--pp", "2", "--json"], timeout=60,
                         env=child_env())
    assert result.returncode == 0, result.output[-3000:]
    import json

    verdict = json.loads(result.stdout)
    first = verdict["suspects"][0]
    assert (first["folded"], first["kind"], first["confidence"]) == ("1", "never-issued", "high")
    group = verdict["flight_recorder"]["groups"][0]
    assert group["parting"]["kind"] == "missing" and group["parting"]["never"] == [1]
    # the pipeline group holds both ranks, as the world does: named by its own id ("group 5 [ranks 0-1]")
    assert group["name"] == f"group {group['group']} [ranks 0-1]", group["name"]
    assert verdict["hints"][0].startswith(f"{group['name']}: pp=0 [rank 0] waits in broadcast #{group['parting']['seq']}")
