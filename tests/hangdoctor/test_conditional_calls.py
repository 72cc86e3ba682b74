"""A whole-job collective issued inside a branch on the rank (analysis/conditional_calls.py), read from recorded
corpus cases: the last pipeline stage's world all_reduce inside `if ... is_last:` while stage 0 waits in its send
to it (pytorch/torchtitan#550's shape: named), and accelerate's `else: wait_for_everyone()` that the main process
skipped on its way into the next epoch (the one that went on is named, not the ranks in the branch)."""

from pathlib import Path

from hangdoctor.analysis.verdict import diagnose
from hangdoctor.formats.load import load_paths
from hangdoctor.identity import TopologyFlags

CORPUS = Path(__file__).parent / "corpus"


def _first(case: str, form: str = "attach"):
    return diagnose(load_paths([CORPUS / case / form], TopologyFlags())).suspects[0]


def test_the_side_in_a_world_collective_under_is_last_is_named_where_the_others_send_to_it():
    first = _first("fep_titan_pp_last_stage_world_loss_mean")
    assert (first.ranks, first.confidence) == ([2, 3], "medium")
    assert "inside `if step % LOG_EVERY == 0 and is_last:`" in first.reason and "default one" in first.reason


def test_a_rank_that_went_on_past_an_else_barrier_stays_the_one_named():
    first = _first("fdf_accel_save_else_wait")
    assert first.ranks == [0] and "inside `if" not in first.reason


def test_without_the_source_branches_nothing_is_read():
    first = _first("fep_titan_pp_last_stage_world_loss_mean", "locals")
    assert "inside `if" not in first.reason
