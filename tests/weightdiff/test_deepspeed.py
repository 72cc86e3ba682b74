"""weightdiff on real DeepSpeed runs (PP=2 x DP=2, ZeRO-1, gloo, torchrun; see ds_scenarios.py): the seed's
embedding-norm reset across a restart, tied-copy drift, a diverged replica, and checkpoint folders read with
torch.load(weights_only=True)."""

from __future__ import annotations

import io
import json
import shutil

import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file

from hangdoctor.topology import ParallelDims
from weightdiff.cli import main
from weightdiff.read.checkpoint import OPAQUE_GLOBALS, safe_load

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # one torchrun launch in the session's fixture


@pytest.fixture
def runs(ds_runs):
    return ds_runs  # one launch per session: tests/weightdiff/conftest.py


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=120), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def test_seed_bug_the_embedding_norm_on_the_last_stage_is_back_at_its_defaults(runs):
    code, out, err = _cli([str(runs / "seedbug" / "run1"), str(runs / "seedbug" / "run2")])
    assert code == 1, out + err
    assert "all 2 differences are on pp=1 (all dp): tied_modules.embed.norm.weight" in out
    assert "now all ones: back at a default initialisation" in out
    assert "torch.nn.modules.normalization.LayerNorm" in out


def test_healthy_save_and_resume_is_clean(runs):
    code, out, err = _cli([str(runs / "healthy" / "run1"), str(runs / "healthy" / "run2")])
    assert code == 0 and "SAME: no differences in 4 rank pairs" in out and err == ""
    code, out, _ = _cli(["check", str(runs / "healthy" / "run2")])
    assert code == 0 and "FAIL" not in out


def test_tied_copies_drift_without_the_tied_gradient_reduction(runs):
    code, out, _ = _cli(["check", str(runs / "desync"), "--json"])
    assert code == 1
    report = json.loads(out)
    found = {(f["kind"], f["name"]): f for f in report["findings"]}
    tied = found[("tied copies", "tied_modules.embed.word_embeddings.weight")]
    assert tied["where"] == "pp=1 (all dp)" and tied["fraction"] > 0.5
    # the reported size equals a direct computation on the dumped tensors
    expected = 0.0
    for dp, (first, last) in enumerate([(0, 2), (1, 3)]):
        a = load_file(str(next((runs / "desync").glob(f"debug-2-pp0-tp0-dp{dp}-global{first}-after-*.safetensors"))))
        b = load_file(str(next((runs / "desync").glob(f"debug-2-pp1-tp0-dp{dp}-global{last}-after-*.safetensors"))))
        name = "tied_modules.embed.word_embeddings.weight"
        expected = max(expected, float((a[name].double() - b[name].double()).abs().max()))
    assert tied["max_abs"] == pytest.approx(expected, rel=1e-12) and expected > 0
    replica = found[("dp replicas", "1.dense.weight")]
    assert replica["where"] == "pp=0 dp=1" and replica["fraction"] == 1 / 256


def test_checkpoint_files_load_with_weights_only_given_three_inert_stand_ins(runs):
    folder = runs / "healthy" / "ckpt" / "global_step2"
    zero_files = sorted(folder.glob("zero_pp_rank_*_optim_states.pt"))
    model_files = sorted(folder.glob("*model_states.pt"))
    assert len(zero_files) == 4 and len(model_files) == 2 + 5  # 2 mp_rank files, 5 layer files (no head file)
    for path in model_files:
        torch.load(path, weights_only=True, map_location="cpu")  # as they are
    for path in zero_files:
        assert set(torch.serialization.get_unsafe_globals_in_checkpoint(str(path))) == set(OPAQUE_GLOBALS)
        with pytest.raises(Exception, match="Weights only load failed"):
            torch.load(path, weights_only=True, map_location="cpu")
        state = safe_load(path)
        assert state["optimizer_state_dict"]["base_optimizer_state"]["param_groups"][0]["weight_decay"] == 0.1


def test_dumps_against_their_own_checkpoint(runs):
    code, out, _ = _cli([str(runs / "healthy" / "run1"), str(runs / "healthy" / "ckpt")])
    assert code == 0 and "SAME" in out
    assert "tied_modules.embed.word_embeddings.weight on pp=1 (all dp): restored by load" in out
    code, out, _ = _cli([str(runs / "seedbug" / "run1"), str(runs / "seedbug" / "ckpt")])
    assert code == 1
    assert "tied_modules.embed.norm.weight  not saved on pp=1 (all dp)" in out
    assert "after a load it keeps its initial values" in out


def test_two_checkpoints_compare_with_no_dump_code(runs):
    code, out, _ = _cli([str(runs / "healthy" / "ckpt"), str(runs / "healthy" / "ckpt2")])
    assert code == 1 and "DIFFERENT: all 19 differences are on all ranks" in out
    code, out, _ = _cli([str(runs / "healthy" / "ckpt"), str(runs / "healthy" / "ckpt" / "global_step2")])
    assert code == 0 and "SAME" in out


def test_a_checkpoint_missing_one_layer_file_is_never_same(runs, tmp_path):
    partial = tmp_path / "global_step2"
    shutil.copytree(runs / "healthy" / "ckpt" / "global_step2", partial)
    layer = sorted(partial.glob("layer_*-model_states.pt"))[1]
    layer.unlink()
    code, out, err = _cli([str(runs / "healthy" / "ckpt" / "global_step2"), str(partial)])
    assert code == 3 and "SAME" not in out, out + err  # its tensors missing in b, and the file named (sweep WD16)
    assert f"no {layer.name}" in err, err


def test_a_zero_checkpoint_without_its_optimizer_files_says_the_masters_were_not_checked(runs, tmp_path):
    """ZeRO always saves the fp32 masters in its optimizer files: a tag folder without them lost them, and
    `check` said the master check "does not apply", exit 0 (third sweep: WD19)."""
    partial = tmp_path / "global_step2"
    shutil.copytree(runs / "healthy" / "ckpt" / "global_step2", partial)
    for optim in partial.glob("*zero_pp_rank_*_optim_states.pt"):
        optim.unlink()
    code, out, err = _cli(["check", str(partial)])
    assert code == 2, out + err
    assert "its ds_config says ZeRO stage 1, yet it holds no optimizer files" in err


def test_a_checkpoint_missing_one_stage_file_is_incomplete_never_same(runs, tmp_path):
    partial = tmp_path / "global_step2"
    shutil.copytree(runs / "healthy" / "ckpt" / "global_step2", partial)
    (partial / "mp_rank_01_model_states.pt").unlink()
    code, out, err = _cli([str(runs / "healthy" / "ckpt" / "global_step2"), str(partial)])
    assert code == 2 and "SAME" not in out and "INCOMPLETE" in out, out + err
    assert "no mp_rank_01_model_states.pt (the checkpoint says TP=1 PP=2): pp stage 1, tp rank 0 not compared" in err


def test_checkpoint_audit_uses_the_zero_optimizer_groups(runs):
    code, out, _ = _cli(["check", str(runs / "seedbug" / "ckpt")])
    assert code == 1 and "[param groups] tied_modules.embed.norm.weight on pp=0" in out
    assert "weight_decay=0.1" in out
    code, out, _ = _cli(["check", str(runs / "healthy" / "ckpt")])
    assert code == 0


def test_param_groups_by_name_understands_deepspeeds_zero_optimizer(runs):
    for rank in range(4):
        data = json.loads((runs / f"groups-rank{rank}.json").read_text())
        assert data["deepspeed"] and data["deepspeed"] == data["torch"]


def test_drift_of_the_tied_embedding_over_iterations(runs, tmp_path):
    name = "tied_modules.embed.word_embeddings.weight"
    png = tmp_path / "drift.png"
    code, out, _ = _cli(["drift", str(runs / "desync"), name, "--json", "--png", str(png)])
    report = json.loads(out)
    assert code == 1 and [p["iteration"] for p in report["points"]] == [1, 2]
    gaps = [p["max_abs"] for p in report["points"]]
    assert all(p["copies"] == 4 and p["distinct"] >= 2 for p in report["points"])
    assert 0 < gaps[0] < gaps[1]  # the copies keep drifting apart
    assert png.read_bytes()[:4] == b"\x89PNG"
    code, out, _ = _cli(["drift", str(runs / "healthy" / "run1"), name])
    assert code == 0 and "copies equal at every iteration" in out


def test_pipeline_module_ties_are_recorded_with_their_ranks_and_sync(runs):
    from weightdiff.read.sidecar import read_sidecar

    last = read_sidecar(next((runs / "seedbug" / "run1").glob("debug-1-pp1-tp0-dp1-global3-after-*.json")))
    word = last.tensors["tied_modules.embed.word_embeddings.weight"]
    norm = last.tensors["tied_modules.embed.norm.weight"]
    assert word.tie.key == "embed" and word.tie.synced and word.tie.ranks == (1, 3)
    assert norm.tie.key == "embed" and not norm.tie.synced  # the seed's setup: the norm is not a tied attribute
    assert last.dims == ParallelDims(tp=1, pp=2, dp=2) and last.world_size == 4
    assert "deepspeed.runtime.pipe.module.PipelineModule" not in word.module_mro  # the owning module's MRO
    assert word.module_class == "torch.nn.modules.sparse.Embedding"


def _edit_layer_file(path, key, index, delta):
    state = torch.load(path, weights_only=True, map_location="cpu")
    state[key] = state[key].clone()
    state[key][index] += delta
    torch.save(state, path)


def test_buffers_and_parameter_free_layers_in_a_pipeline_checkpoint(runs, tmp_path):
    import shutil

    ckpt = runs / "bn" / "ckpt"
    step = ckpt / "global_step1"
    assert torch.load(step / "layer_01-model_states.pt", weights_only=True) == {}  # ReLU: an empty file
    code, out, err = _cli([str(ckpt), str(ckpt)])
    assert code == 0 and err == "" and "SAME" in out and "11 tensors equal" in out  # 3 of them BatchNorm buffers
    code, out, _ = _cli([str(runs / "bn" / "run"), str(ckpt)])  # dumps hold the buffers too
    assert code == 0 and "22 tensors equal" in out
    code, out, _ = _cli(["check", str(ckpt)])
    assert code == 0 and "TP=1 PP=2 DP=2" in out  # the run's dp size, from the mp_rank files

    changed = tmp_path / "changed"
    shutil.copytree(ckpt, changed)
    _edit_layer_file(changed / "global_step1" / "layer_02-model_states.pt", "running_mean", 5, 5.0)
    code, out, err = _cli([str(ckpt), str(changed)])
    assert code == 1 and err == "", out + err
    assert "2.running_mean (buffer)  differs on pp=0" in out and "first at index [5]" in out
    assert "max |a-b| 5" in out

    damaged = tmp_path / "damaged"
    shutil.copytree(changed, damaged)
    layer = damaged / "global_step1" / "layer_05-model_states.pt"
    layer.write_bytes(layer.read_bytes()[:100])
    code, out, err = _cli([str(ckpt), str(damaged)])
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert code == 3 and len(errors) == 1 and "layer_05-model_states.pt" in errors[0]
    assert "2.running_mean (buffer)  differs" in out  # the rest is still compared


def test_a_checkpoint_against_its_safetensors_export_with_a_name_map(runs, tmp_path):
    from safetensors.torch import save_file

    step = runs / "bn" / "ckpt" / "global_step1"
    export = {}
    for index in (0, 2, 3, 5):
        for key, value in torch.load(step / f"layer_{index:02d}-model_states.pt", weights_only=True).items():
            export[f"model.layers.{index}.{key}"] = value.clone()
    save_file(export, str(tmp_path / "model.safetensors"))
    name_map = tmp_path / "names.json"
    name_map.write_text(json.dumps({f"{i}.": f"model.layers.{i}." for i in range(6)}))
    code, out, err = _cli([str(runs / "bn" / "ckpt"), str(tmp_path), "--name-map", str(name_map)])
    assert code == 0 and err == "" and "11 tensors equal" in out, out + err
    code, out, _ = _cli([str(runs / "bn" / "ckpt"), str(tmp_path)])  # names differ: nothing pairs up
    assert code == 1 and "missing in b" in out
    export["model.layers.2.running_var"][7] = 0.5
    save_file(export, str(tmp_path / "model.safetensors"))
    code, out, _ = _cli([str(runs / "bn" / "ckpt"), str(tmp_path / "model.safetensors"), "--name-map", str(name_map)])
    assert code == 1 and "model.layers.2.running_var (buffer)  differs on pp=0" in out and "[7]" in out


def test_a_tied_module_checkpoint_against_its_state_dict_and_its_hub_export(runs):
    """A non-pipeline module with its head tied to its embedding: DeepSpeed's `module` state dict has both names
    on one storage, huggingface_hub's export drops one and declares it. All three are the same model."""
    tied = runs / "tied"
    for a, b in ((tied / "ckpt", tied / "state.pt"), (tied / "ckpt", tied / "hub"), (tied / "hub", tied / "ckpt")):
        code, out, err = _cli([str(a), str(b), "--json"])
        report = json.loads(out)
        assert code == 0 and report["verdict"] == "same" and report["params"] == [], (a, b, err)
        assert report["compared_tensors"] == 4  # embed.weight, norm.weight, norm.bias, and head.weight (tied)
    code, out, err = _cli(["check", str(tied / "ckpt"), "--json"])
    assert code == 0, out + err
