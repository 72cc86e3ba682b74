"""What DeepSpeed's own tools make of a checkpoint, read by weightdiff: zero_to_fp32's consolidated state dict
(torch.save and safetensors, fp32 and bf16) and ds_to_universal's universal checkpoint, each made by the real
tool from the real checkpoints of ds_scenarios.py and compared with the checkpoint it came from.

zero_to_fp32 runs both ways: as its function (max_shard_size=None: one file) and as the script users run
(`python zero_to_fp32.py CKPT OUT --max_shard_size 2KB`), whose sharding goes through huggingface_hub and
writes HF's sharded layout (model-0000N-of-0000M.safetensors or pytorch_model-*.bin with an index.json)."""

from __future__ import annotations

import io
import json
import shutil
import sys

import pytest
import torch
from rich.console import Console

from tests.support import REPO, child_env, run_bounded
from weightdiff.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=200), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), [line for line in err.getvalue().splitlines() if line.startswith("Error: ")]


@pytest.fixture(scope="module")
def exports(ds_runs, tmp_path_factory):
    from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_state_dict

    out = tmp_path_factory.mktemp("exports")
    ckpt = str(ds_runs / "zero2" / "ckpt")
    convert_zero_checkpoint_to_state_dict(ckpt, str(out / "fp32_bin"), max_shard_size=None)
    convert_zero_checkpoint_to_state_dict(ckpt, str(out / "fp32_st"), max_shard_size=None, safe_serialization=True)
    convert_zero_checkpoint_to_state_dict(ckpt, str(out / "bf16_bin"), dtype="bfloat16", max_shard_size=None)
    for name, flags in (("script_st", ["--safe_serialization"]), ("script_bin", [])):
        done = run_bounded([sys.executable, "-m", "deepspeed.utils.zero_to_fp32", ckpt, str(out / name),
                            "--max_shard_size", "2KB", *flags], timeout=240, env=child_env(DS_ACCELERATOR="cpu"),
                           cwd=REPO)
        assert done.returncode == 0 and len(list((out / name).glob("*.index.json"))) == 1, done.output[-4000:]
    for name, source in (("uni_zero2", "zero2"), ("uni_healthy", "healthy")):
        done = run_bounded([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                            str(ds_runs / source / "ckpt" / "global_step2"), "--output_folder", str(out / name),
                            "--inject_missing_state", "--num_extract_workers", "1", "--num_merge_workers", "1"],
                           timeout=240, env=child_env(DS_ACCELERATOR="cpu"), cwd=REPO)
        assert done.returncode == 0 and (out / name / "zero").is_dir(), done.output[-4000:]
    return out


def test_zero_to_fp32_output_is_the_checkpoints_master(ds_runs, exports):
    ckpt = ds_runs / "zero2" / "ckpt"
    code, out, errors = _cli([str(ckpt), str(exports / "fp32_bin")])  # bf16 weights against fp32 masters
    assert code == 1 and not errors and "dtype bfloat16 -> float32" in out
    for export in ("fp32_bin", "fp32_st"):
        code, out, errors = _cli([str(ckpt), str(exports / export), "--round"])
        assert code == 0 and not errors and "6 tensors equal" in out and "SAME" in out, out
    code, out, errors = _cli([str(ckpt), str(exports / "bf16_bin")])  # rounded by zero_to_fp32 itself
    assert code == 0 and not errors and "6 tensors equal" in out


def test_the_zero_to_fp32_scripts_sharded_output(ds_runs, exports, tmp_path):
    """The script's HF-style shards (several files and an index) read as one model, in both serialisations."""
    ckpt = ds_runs / "zero2" / "ckpt"
    for export, pattern in (("script_st", "model-*-of-*.safetensors"), ("script_bin", "pytorch_model-*-of-*.bin")):
        assert len(list((exports / export).glob(pattern))) > 1, sorted(p.name for p in (exports / export).iterdir())
        code, out, errors = _cli([str(ckpt), str(exports / export), "--round"])
        assert code == 0 and not errors and "6 tensors equal" in out and "SAME" in out, out
    changed = tmp_path / "script_bin"
    shutil.copytree(exports / "script_bin", changed)
    index = json.loads(next(changed.glob("*.index.json")).read_text())
    shard = changed / index["weight_map"]["1.weight"]
    state = torch.load(shard, weights_only=True)
    with torch.no_grad():
        state["1.weight"][17] += 0.5
    torch.save(state, shard)
    code, out, errors = _cli([str(ckpt), str(changed), "--round"])
    assert code == 1 and not errors and "1.weight  differs" in out and "first at index [17]" in out


def test_one_element_of_a_zero_to_fp32_export_changed(ds_runs, exports, tmp_path):
    state = torch.load(exports / "fp32_bin" / "pytorch_model.bin", weights_only=True)
    with torch.no_grad():
        state["1.weight"][17] += 0.5  # the LayerNorm's weight
    torch.save(state, tmp_path / "pytorch_model.bin")
    code, out, errors = _cli([str(ds_runs / "zero2" / "ckpt"), str(tmp_path), "--round"])
    assert code == 1 and not errors
    assert "1.weight  differs" in out and "first at index [17]" in out and "5 tensors equal" in out


def test_universal_checkpoints_hold_the_masters(ds_runs, exports):
    code, out, errors = _cli([str(ds_runs / "healthy" / "ckpt"), str(exports / "uni_healthy")])  # fp32: exact
    assert code == 0 and not errors and "universal checkpoint" in out and "19 tensors equal" in out
    code, out, errors = _cli([str(ds_runs / "zero2" / "ckpt"), str(exports / "uni_zero2"), "--round"])
    assert code == 0 and not errors and "6 tensors equal" in out


def test_universal_checkpoint_one_element_changed_and_a_damaged_file(ds_runs, exports, tmp_path):
    changed = tmp_path / "uni"
    shutil.copytree(exports / "uni_healthy", changed)
    path = changed / "zero" / "3.dense.weight" / "fp32.pt"
    state = torch.load(path, weights_only=True)
    with torch.no_grad():
        state["param"][5, 9] -= 0.25
    torch.save(state, path)
    code, out, errors = _cli([str(ds_runs / "healthy" / "ckpt"), str(changed)])
    assert code == 1 and not errors
    assert "3.dense.weight  differs on pp=1" in out and "first at index [5, 9]" in out
    damaged = changed / "zero" / "1.dense.bias" / "fp32.pt"
    damaged.write_bytes(damaged.read_bytes()[:50])
    code, out, errors = _cli([str(ds_runs / "healthy" / "ckpt"), str(changed)])
    assert code == 3 and len(errors) == 1 and "1.dense.bias/fp32.pt" in errors[0]
    assert "3.dense.weight  differs" in out and "1 could not be read" in out
