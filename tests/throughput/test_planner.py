"""Topology rules and the planner, on the seeds' own topology searches (seeds/000 and seeds/002)."""

import io
import json

import pytest
from rich.console import Console

from hangdoctor.throughput.model_size import ModelShape
from hangdoctor.throughput.planner import PlanRequest, plan_topologies
from hangdoctor.throughput.render import plan_to_dict, render_plan
from hangdoctor.throughput.validity import check_topology

M181B = ModelShape(layers=72, hidden=14336, heads=64, vocab=250880, seq_length=2048)  # seeds/002 "48 node contenders"


def rules(findings):
    return [f.rule for f in findings]


def test_gbs_192_does_not_divide_over_128_data_parallel_ranks():
    """seeds/000: with 128 GPUs, TP=1 PP=1 used GBS 256 "instead of 192": 192 % (MBS 2 x DP 128) != 0."""
    shape = ModelShape(layers=24, hidden=2048, heads=16, vocab=50257, seq_length=2048)
    bad = check_topology(shape, gpus=128, tp=1, pp=1, micro_batch_size=2, global_batch_size=192)
    assert bad[0].rule == "gbs-divisible" and bad[0].message == "GBS 192 is not divisible by MBS x DP = 2 x 128"
    ok = check_topology(shape, gpus=128, tp=1, pp=1, micro_batch_size=2, global_batch_size=256)
    assert not [f for f in ok if f.is_error]


# seeds/000's table: nGPUs -> rows of (GBS, MBS) for TP=1 PP=1, TP=2 PP=1, TP=1 PP=2, TP=2 PP=2
JEAN_ZAY_TABLE = {
    8: [(512, 2, 512, 4, 512, 2, 512, 4), (192, 3, 192, 4, 192, 2, 192, 6)],
    16: [(512, 2, 512, 4, 512, 4, 512, 4), (192, 3, 192, 4, 192, 4, 192, 6)],
    32: [(512, 2, 512, 4, 512, 4, 512, 4), (192, 3, 192, 4, 192, 4, 192, 6)],
    64: [(512, 2, 512, 4, 512, 4, 512, 4), (192, 3, 192, 4, 192, 4, 192, 6)],
    128: [(512, 2, 512, 4, 512, 4, 512, 4), (256, 2, 192, 3, 192, 4, 192, 6)],
}


def test_the_jean_zay_table_against_its_own_divisibility_rule():
    """seeds/000 states `GBS % (MBS * nGPUs / PP / TP) == 0`; 37 of its 40 entries obey it. Three do not (GBS 192
    with MBS 4 over DP 32 or 64): Megatron would refuse them, so those cells cannot be what actually ran."""
    shape = ModelShape(layers=24, hidden=2048, heads=16, vocab=50257, seq_length=2048)
    broken = []
    for gpus, rows in JEAN_ZAY_TABLE.items():
        for row in rows:
            for i, (tp, pp) in enumerate([(1, 1), (2, 1), (1, 2), (2, 2)]):
                gbs, mbs = row[2 * i], row[2 * i + 1]
                findings = check_topology(shape, gpus=gpus, tp=tp, pp=pp, micro_batch_size=mbs, global_batch_size=gbs,
                                          gpus_per_node=4)
                errors = [f.rule for f in findings if f.is_error]
                assert errors in ([], ["gbs-divisible"])
                if errors:
                    broken.append((gpus, tp, pp, gbs, mbs))
    assert broken == [(64, 2, 1, 192, 4), (64, 1, 2, 192, 4), (128, 1, 2, 192, 4)]


def test_layers_must_divide_over_pp_unless_uneven_is_accepted():
    # seeds/002 "Re-do": "78/12=6.5 - so the last stage has 1 block ... not optimal"
    shape = ModelShape(layers=78, hidden=13824, heads=96, vocab=250880, seq_length=2048)
    findings = check_topology(shape, gpus=384, tp=4, pp=12, micro_batch_size=2, global_batch_size=2048)
    assert rules(findings) == ["layers-divisible"]


def test_embeddings_as_layers_need_layers_plus_2_divisible():
    # seeds/002: "the constraint won't be Layers % PP = 0 but Layers+2 % PP = 0 ... So probably should do 94 layers"
    for layers, errors in ((94, []), (96, ["layers-divisible"])):
        shape = ModelShape(layers=layers, hidden=13312, heads=128, vocab=150257, seq_length=2048)
        findings = check_topology(shape, gpus=96, tp=4, pp=24, micro_batch_size=1, global_batch_size=2048,
                                  embedding_as_layer=True)
        assert [f.rule for f in findings if f.is_error] == errors


def test_tile_and_wave_quantization_hints():
    # seeds/002 "tile and wave quantization": 13824 = 108 x 128 has neither; 14336 misses the 108 SMs; 14400 both
    def hints(hidden):
        shape = ModelShape(layers=80, hidden=hidden, heads=64, vocab=250880, seq_length=2048)
        return rules(check_topology(shape, gpus=320, tp=8, pp=10, micro_batch_size=4, global_batch_size=2048))
    assert hints(13824) == []
    assert hints(14336) == ["wave-quantization"]
    assert hints(14400) == ["tile-quantization", "wave-quantization"]


def test_heads_tp_and_fused_softmax():
    # seeds/002: "NHEADS=108 breaks constraints for invoking optimized fused softmax kernel" ((108/4) x 2 % 4 != 0)
    shape = ModelShape(layers=72, hidden=13824, heads=108, vocab=250880, seq_length=2048)
    assert rules(check_topology(shape, gpus=384, tp=4, pp=12, micro_batch_size=2, global_batch_size=2048)) == [
        "fused-softmax"]
    assert rules(check_topology(shape, gpus=384, tp=8, pp=12, micro_batch_size=2, global_batch_size=2048))[0] == \
        "heads-divisible"


def test_tp_stays_within_a_node_and_gpus_are_whole_nodes():
    found = check_topology(M181B, gpus=384, tp=8, pp=12, micro_batch_size=1, global_batch_size=2048, gpus_per_node=4)
    assert "tp-in-node" in rules(found)
    found = check_topology(M181B, gpus=36, tp=2, pp=6, micro_batch_size=1, global_batch_size=48, gpus_per_node=8)
    assert "whole-nodes" in rules(found)
    found = check_topology(M181B, gpus=100, tp=8, pp=12, micro_batch_size=1, global_batch_size=2048)
    assert found[0].message == "100 GPUs are not divisible by TP x PP = 96: DP would be 1.04167"


def plan(**kw):
    request = dict(shape=M181B, gpus=384, gpus_per_node=8, global_batch_size=2048, gpu_memory_gb=80)
    request.update(kw)
    return plan_topologies(PlanRequest(**request))


def test_planner_lists_the_seeds_contenders_and_keeps_tp_within_a_node():
    p = plan()
    found = {(r.tp, r.pp, r.dp, r.mbs): r for r in p.rows}
    # seeds/002 "48 node contenders": "DP=4, PP=12, MBS=4" and "DP=8, PP=06, MBS=4", both TP=8
    assert (8, 12, 4, 4) in found and (8, 6, 8, 4) in found
    assert all(r.tp <= 8 and 8 % r.tp == 0 for r in p.rows)
    assert all(2048 % (r.mbs * r.dp) == 0 and 72 % r.pp == 0 for r in p.rows)
    assert found[(8, 12, 4, 4)].micro_batches == 128 and found[(8, 12, 4, 4)].bubble == pytest.approx(11 / 128)
    assert p.candidates == 208 and p.rejected_count == 208 - len(p.rows) == 144
    # every rule a candidate breaks is counted: PP=16 of 72 layers breaks only one, PP=96 breaks three
    assert p.rejected == {"gbs-divisible": 104, "layers-divisible": 80, "block-per-stage": 28}
    assert p.tps == (1, 2, 4, 8) and p.blockers == ()


def test_gpus_that_are_not_whole_nodes_block_every_topology_and_say_so():
    """12 GPUs on nodes of 8: every candidate breaks the whole-nodes rule, whatever else it breaks."""
    p = plan(gpus=12, global_batch_size=48, gpu_memory_gb=None)
    assert p.rows == () and p.tps == (1, 2, 4)  # TP 8 does not divide 12 GPUs: not a candidate
    assert p.rejected["whole-nodes"] == p.candidates == p.rejected_count == (6 + 4 + 2) * 4  # PP divides 12, 6, 3
    assert [f.rule for f in p.blockers] == ["whole-nodes"]
    text = rendered(p)
    assert "every topology is rejected: 12 GPUs are not whole nodes of 8 (ask for 8 or 16 GPUs" in text
    assert f"rejected {p.candidates} of {p.candidates}: GPUs not a whole number of nodes ({p.candidates})" in text
    assert "searched: TP 1,2,4 (within a node of 8, dividing 12 GPUs)" in text
    data = plan_to_dict(p)
    assert data["blockers"] == [{"rule": "whole-nodes", "message": "12 GPUs are not whole nodes of 8"}]
    assert data["rejected_candidates"] == data["candidates"] == p.candidates and data["searched"]["tp"] == [1, 2, 4]
    assert plan(gpus=16, global_batch_size=48, gpu_memory_gb=None).blockers == ()


def rendered(p, width=100, **kw) -> str:
    console = Console(file=io.StringIO(), width=width)
    render_plan(p, console, **kw)
    return console.file.getvalue()


def test_the_table_folds_into_80_columns_and_no_figure_is_cut():
    """At 80 columns the table folds (two-line headers, no inner rules) and every line fits; no figure is cut."""
    p = plan()
    text = rendered(p, width=80, limit=5)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["TP", "PP", "DP"])
    assert lines[header - 1].split() == ["micro-", "params", "states", "act", "total", "fits"]
    assert lines[header].split() == ["TP", "PP", "DP", "MBS", "batches", "bubble", "/GPU", "GB", "GB", "GB", "80GB",
                                     "hints"]
    assert lines[header + 2].split() == ["8", "3", "16", "1", "128", "2%", "7,849M", "53.0", "4.8", "57.8", "yes"]
    assert " ".join(text.split()).startswith("64 valid topologies of 208 for 384 GPUs (8 per node), GBS 2048, "
                                             "ZeRO-1: Model size: 181B, ratio=199")
    wide = rendered(p, width=200, limit=5)  # with room, one header line and the figures alike
    table = [line for line in wide.splitlines() if line[:1] in "┏┃┡│└"]
    assert len({len(line) for line in table}) == 1 and "params/GPU" in wide and "fits 80GB" in wide
    assert [c.strip() for c in table[3].split("│")[1:-2]] == lines[header + 2].split()


def test_a_small_models_figures_are_not_rounded_to_zero():
    small = ModelShape(layers=4, hidden=64, heads=4, vocab=1024, seq_length=128)
    p = plan(shape=small, gpus=16, global_batch_size=64, gpu_memory_gb=None)
    text = rendered(p, width=200)
    assert "Model size: 274K, ratio=16" in text
    first = next(line for line in text.splitlines() if line.startswith("│"))
    cells = [c.strip() for c in first.split("│")[1:-1]]
    assert cells[6] == "265K" and all(c not in ("0M", "0.0") for c in cells[7:10]), cells


def test_planner_marks_the_seeds_oom_runs_as_not_fitting_and_the_comfortable_ones_as_fitting():
    """seeds/002 "Tweaking TP" and "GBS Variations" (02-25, 181B, 80GB A100s): OOM for TP=2 PP=6 DP=32 at
    MBS 1 and 2 and for TP=8 PP=1 DP=48 (GBS 2016); runs measured at 60GB or less fit."""
    fits = {(r.tp, r.pp, r.dp, r.mbs): r.fits for r in plan().rows}
    assert fits[(2, 6, 32, 1)] is False and fits[(2, 6, 32, 2)] is False
    assert {(r.tp, r.pp, r.dp, r.mbs): r.fits for r in plan(global_batch_size=2016).rows}[(8, 1, 48, 1)] is False
    for ran in [(4, 12, 8, 4), (4, 12, 8, 2), (4, 6, 16, 2), (2, 24, 8, 1), (2, 24, 8, 2), (8, 12, 4, 4),
                (8, 6, 8, 4), (8, 12, 4, 1)]:
        assert fits[ran] is True, ran


def test_planner_orders_fitting_rows_first_then_smallest_model_parallel():
    rows = plan().rows
    fitting = [r for r in rows if r.fits]
    assert rows[: len(fitting)] == tuple(fitting)
    assert [r.model_parallel for r in fitting] == sorted(r.model_parallel for r in fitting)


def test_renderer_and_json_show_the_same_rows():
    p = plan(micro_batch_sizes=(2, 4))
    console = Console(file=io.StringIO(), width=160)
    render_plan(p, console, limit=5)
    text = console.file.getvalue()
    data = json.loads(json.dumps(plan_to_dict(p)))
    assert "Model size: 181B, ratio=199" in text and f"{len(p.rows)} valid topologies" in text
    assert "hint: hidden 14336 % 108 SMs = 80" in text
    assert f"... {len(p.rows) - 5} more" in text and "of 104: GBS not divisible by MBS x DP (" in text
    first = data["rows"][0]
    assert (first["tp"], first["pp"], first["dp"], first["mbs"]) == (p.rows[0].tp, p.rows[0].pp, p.rows[0].dp,
                                                                    p.rows[0].mbs)
    line = next(l for l in text.splitlines() if l.startswith("│") and f"{first['total_bytes'] / 1e9:.1f}" in l)
    assert f"{first['state_bytes'] / 1e9:.1f}" in line
    assert data["model"]["params"] == M181B.params and data["rejected"] == p.rejected


def test_bad_requests_are_value_errors():
    with pytest.raises(ValueError, match="gpus=0"):
        plan(gpus=0)
    with pytest.raises(ValueError, match="ZeRO stage 5"):
        plan(zero_stage=5)
    with pytest.raises(ValueError, match="micro batch sizes"):
        plan(micro_batch_sizes=(0,))


def test_fewer_gpus_than_a_node_is_one_partial_node_not_a_rejection():
    found = check_topology(M181B, gpus=4, tp=4, pp=1, micro_batch_size=1, global_batch_size=2048, gpus_per_node=8)
    assert "whole-nodes" not in rules(found)
