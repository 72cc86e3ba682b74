"""Every checkpoint format weightdiff reads, each made with its real library: torch.save state dicts, HF
safetensors (single, and sharded with its index), torch.distributed.checkpoint (2 processes, gloo), our dumps
with their buffers; mixed pairs; and the CLI without torch. (DeepSpeed pipeline checkpoints with buffers and
parameter-free layers: test_deepspeed.py.) For each: an identical pair exits 0, one changed element (a buffer
included) is found with its index, a damaged file is one `Error:` line and the rest is still compared."""

from __future__ import annotations

import io
import json
import pickle
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch
from rich.console import Console
from safetensors.torch import save_file
from torch import nn

from tests.support import REPO, child_env, run_bounded
from tests.weightdiff.dumpsets import make_set
from tests.weightdiff.savers import run_saver
from hangdoctor.topology import ParallelDims
from weightdiff.cli import main


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=160), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), [line for line in err.getvalue().splitlines() if line.startswith("Error: ")]


def _state() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    model.train()
    model(torch.randn(5, 6))  # running statistics away from their defaults
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_torch_save_state_dicts(tmp_path):
    sd = _state()
    torch.save(sd, tmp_path / "a.pt")
    torch.save(sd, tmp_path / "same.pt")
    code, out, errors = _cli([str(tmp_path / "a.pt"), str(tmp_path / "same.pt")])
    assert code == 0 and not errors and "SAME" in out and "9 tensors equal" in out  # 3 of them buffers
    sd["1.running_var"][2] += 5.0
    torch.save(sd, tmp_path / "b.pt")
    code, out, errors = _cli([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")])
    assert code == 1 and "1.running_var (buffer)  differs" in out and "first at index [2]" in out
    (tmp_path / "bad.pt").write_bytes((tmp_path / "b.pt").read_bytes()[:300])
    code, out, errors = _cli([str(tmp_path / "a.pt"), str(tmp_path / "bad.pt")])
    assert code == 2 and len(errors) == 1 and "bad.pt: cannot load with torch.load(weights_only=True)" in errors[0]


class Payload:
    ran = False

    def __reduce__(self):
        return (Payload._run, ())

    @staticmethod
    def _run():
        Payload.ran = True
        return "ran"


def test_a_torch_save_file_that_needs_unpickling_is_refused_and_nothing_runs(tmp_path):
    torch.save({"w": torch.ones(2), "extra": Payload()}, tmp_path / "evil.pt")
    torch.save({"w": torch.ones(2)}, tmp_path / "ok.pt")
    code, _, errors = _cli([str(tmp_path / "ok.pt"), str(tmp_path / "evil.pt")])
    assert code == 2 and len(errors) == 1 and "weights_only" in errors[0] and not Payload.ran


def _sharded(folder: Path, sd: dict[str, torch.Tensor]) -> Path:
    folder.mkdir()
    first = {k: v for k, v in sd.items() if k.startswith("0.")}
    second = {k: v for k, v in sd.items() if not k.startswith("0.")}
    save_file(first, str(folder / "model-00001-of-00002.safetensors"))
    save_file(second, str(folder / "model-00002-of-00002.safetensors"))
    weight_map = {**{k: "model-00001-of-00002.safetensors" for k in first},
                  **{k: "model-00002-of-00002.safetensors" for k in second}}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def test_hf_safetensors_single_and_sharded(tmp_path):
    sd = _state()
    (tmp_path / "single").mkdir()
    save_file(sd, str(tmp_path / "single" / "model.safetensors"))
    a = _sharded(tmp_path / "a", sd)
    same = _sharded(tmp_path / "same", sd)
    code, out, errors = _cli([str(a), str(same)])
    assert code == 0 and not errors and "9 tensors equal" in out
    code, out, errors = _cli([str(tmp_path / "single"), str(a / "model.safetensors.index.json")])
    assert code == 0 and not errors and "9 tensors equal" in out  # single file against the shards
    changed = dict(sd)
    changed["3.weight"] = sd["3.weight"].clone()
    changed["3.weight"][1, 4] -= 0.25
    changed["1.num_batches_tracked"] = sd["1.num_batches_tracked"] + 1
    b = _sharded(tmp_path / "b", changed)
    code, out, errors = _cli([str(a), str(b)])
    assert code == 1 and not errors
    assert "3.weight  differs" in out and "first at index [1, 4]" in out
    assert "1.num_batches_tracked (buffer)  differs" in out
    shard = b / "model-00001-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-7])
    code, out, errors = _cli([str(a), str(b)])
    assert code == 3 and len(errors) == 1, errors  # the damaged shard; the other shard is still compared
    assert shard.name in errors[0] and "truncated" in errors[0] and "its 2 tensors not compared" in errors[0]
    assert "3.weight  differs" in out and "2 could not be read" in out


def _bin_shards(folder: Path, sd: dict[str, torch.Tensor]) -> Path:
    """HF's sharded .bin layout (what save_pretrained(safe_serialization=False) and zero_to_fp32 with a shard
    size write): torch.save shards pytorch_model-0000K-of-0000N.bin and pytorch_model.bin.index.json."""
    folder.mkdir()
    names = {"pytorch_model-00001-of-00002.bin": [k for k in sd if k.startswith("0.")],
             "pytorch_model-00002-of-00002.bin": [k for k in sd if not k.startswith("0.")]}
    for shard, keys in names.items():
        torch.save({k: sd[k] for k in keys}, folder / shard)
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in sd.values())},
             "weight_map": {k: shard for shard, keys in names.items() for k in keys}}
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    return folder


def test_sharded_bin_checkpoints(tmp_path):
    sd = _state()
    a = _bin_shards(tmp_path / "a", sd)
    torch.save(sd, tmp_path / "single.pt")
    code, out, errors = _cli([str(a), str(tmp_path / "single.pt")])
    assert code == 0 and not errors and "9 tensors equal" in out
    changed = {k: v.clone() for k, v in sd.items()}
    changed["1.running_mean"][6] -= 2.0
    b = _bin_shards(tmp_path / "b", changed)
    code, out, errors = _cli([str(a), str(b / "pytorch_model.bin.index.json")])
    assert code == 1 and not errors
    assert "1.running_mean (buffer)  differs" in out and "first at index [6]" in out and "8 tensors equal" in out
    shard = b / "pytorch_model-00001-of-00002.bin"
    shard.write_bytes(shard.read_bytes()[:100])
    code, out, errors = _cli([str(a), str(b)])
    assert code == 3 and len(errors) == 1 and shard.name in errors[0] and "its 2 tensors not compared" in errors[0]
    assert "1.running_mean (buffer)  differs" in out and "2 could not be read" in out


def test_mixed_pair_and_name_map(tmp_path):
    sd = _state()
    torch.save({"model": sd}, tmp_path / "nested.pt")  # flattened as model.0.weight ...
    (tmp_path / "hf").mkdir()
    save_file({f"encoder.{k}": v for k, v in sd.items()}, str(tmp_path / "hf" / "model.safetensors"))
    names = tmp_path / "names.json"
    names.write_text(json.dumps({"model.": "", "encoder.": ""}))
    code, out, errors = _cli([str(tmp_path / "nested.pt"), str(tmp_path / "hf"), "--name-map", str(names)])
    assert code == 0 and not errors and "9 tensors equal" in out
    code, out, _ = _cli([str(tmp_path / "nested.pt"), str(tmp_path / "hf")])
    assert code == 1 and "missing in" in out
    names.write_text("[1, 2]")
    code, _, errors = _cli([str(tmp_path / "nested.pt"), str(tmp_path / "hf"), "--name-map", str(names)])
    assert code == 2 and len(errors) == 1 and "a name map is a JSON object" in errors[0]


def test_a_name_map_that_merges_two_names_is_refused_never_same(tmp_path):
    """{"0.": "x.", "1.": "x."} would put 0.weight and 1.weight under one name: the one that differs would be
    dropped and the rest called SAME (sweep round 2)."""
    sd = _state()
    torch.save(sd, tmp_path / "a.pt")
    changed = {k: v.clone() for k, v in sd.items()}
    changed["1.weight"][0] += 1
    torch.save(changed, tmp_path / "b.pt")
    names = tmp_path / "names.json"
    names.write_text(json.dumps({"0.": "x.", "1.": "x."}))
    code, out, errors = _cli([str(tmp_path / "a.pt"), str(tmp_path / "b.pt"), "--name-map", str(names)])
    assert code == 2 and "SAME" not in out, out
    assert len(errors) == 1 and "renames '0.weight' and '1.weight' both to 'x.weight'" in errors[0], errors


@pytest.fixture(scope="module")
def dcp_dir(tmp_path_factory):
    return run_saver("dcp_save.py", tmp_path_factory.mktemp("dcp"), timeout=180)


def test_torch_distributed_checkpoint_folders(dcp_dir, tmp_path):
    code, out, errors = _cli([str(dcp_dir / "a"), str(dcp_dir / "a2")])
    assert code == 0 and not errors and "7 tensors equal" in out
    code, out, errors = _cli([str(dcp_dir / "a"), str(dcp_dir / "full.pt")])  # against the gathered state dict
    assert code == 0 and not errors and "7 tensors equal" in out
    code, out, errors = _cli([str(dcp_dir / "a"), str(dcp_dir / "b")])
    assert code == 1 and not errors
    assert "w  differs" in out and "first at index [5, 2]" in out  # in rank 1's shard of the DTensor
    assert "bn.running_mean (buffer)  differs" in out and "first at index [3]" in out
    damaged = tmp_path / "damaged"
    shutil.copytree(dcp_dir / "b", damaged)
    shard = damaged / "__0_0.distcp"  # rank 0's half of w
    shard.write_bytes(shard.read_bytes()[:40])
    code, out, errors = _cli([str(dcp_dir / "a"), str(damaged)])
    assert code == 3 and len(errors) == 1 and "__0_0.distcp: truncated" in errors[0]
    assert "bn.running_mean (buffer)  differs" in out and "1 could not be read" in out


def test_dcp_metadata_is_never_unpickled_with_foreign_globals(dcp_dir, tmp_path):
    import os

    evil = tmp_path / "evil"
    shutil.copytree(dcp_dir / "a", evil)
    (evil / ".metadata").write_bytes(pickle.dumps(os.getcwd))
    code, _, errors = _cli([str(dcp_dir / "a"), str(evil)])
    assert code == 2 and len(errors) == 1 and "not DCP metadata" in errors[0] and "getcwd" in errors[0]


class BNStage(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.dense = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("scratch", torch.zeros(2), persistent=False)  # not in state_dict: not dumped


def test_dump_writes_buffers_and_check_compares_their_replicas(tmp_path):
    dims = ParallelDims(dp=2)

    def build(coords):
        return BNStage()

    def diverge(coords, model):
        if coords.dp == 1:
            model.bn.running_mean[1] += 5.0

    a = make_set(tmp_path / "a", dims, build=build, groups=False)
    sidecar = json.loads(next(a.glob("*.json")).read_text())
    roles = {p["name"]: p.get("role") for p in sidecar["params"]}
    assert roles == {"dense.weight": "parameter", "dense.bias": "parameter", "bn.weight": "parameter",
                     "bn.bias": "parameter", "bn.running_mean": "buffer", "bn.running_var": "buffer",
                     "bn.num_batches_tracked": "buffer"}
    b = make_set(tmp_path / "b", dims, build=build, mutate=diverge, groups=False)
    code, out, _ = _cli([str(a), str(b)])
    assert code == 1 and "bn.running_mean (buffer)  differs on dp=1" in out and "first at index [1]" in out
    code, out, _ = _cli(["check", str(b)])
    assert code == 1 and "[dp replicas] bn.running_mean (buffer) on dp=1" in out
    code, out, _ = _cli(["check", str(a)])
    assert code == 0 and "dp replicas   ok    7 checked" in out


NO_TORCH = """
import sys
from weightdiff.cli import main
codes = [main(["--help"]), main(["--bogus"]), main(["check", "--atol", "nan", "x"])] + [main(a) for a in ARGS]
print(codes, "torch" in sys.modules)
"""


def test_help_usage_errors_and_safetensors_diffs_run_without_torch(tmp_path):
    sd = _state()
    _sharded(tmp_path / "hf_a", sd)
    _sharded(tmp_path / "hf_b", sd)
    dumps = make_set(tmp_path / "dumps", ParallelDims(dp=2), build=lambda c: BNStage(), groups=False)
    args = [[str(tmp_path / "hf_a"), str(tmp_path / "hf_b")], [str(dumps), str(dumps), "--a-iteration", "5",
                                                              "--b-iteration", "5"], ["check", str(dumps)]]
    done = run_bounded([sys.executable, "-c", NO_TORCH.replace("ARGS", repr(args))], timeout=120, env=child_env(),
                       cwd=REPO)
    assert done.returncode == 0, done.output
    assert done.stdout.strip().splitlines()[-1] == "[0, 2, 2, 0, 0, 0] False", done.output


def test_nan_is_said_even_when_both_sides_hold_the_same_one(tmp_path):
    """Two files with the same NaN are equal bit for bit (SAME), but a model holding NaN is broken: a warning
    names the tensor and counts; a NaN against a number is named in the difference, not left as 'inf'."""
    w = torch.ones(4)
    w[1] = float("nan")
    torch.save({"w": w, "v": torch.zeros(3)}, tmp_path / "a.pt")
    torch.save({"w": w.clone(), "v": torch.zeros(3)}, tmp_path / "b.pt")
    fixed = w.clone()
    fixed[1] = 2.0
    torch.save({"w": fixed, "v": torch.zeros(3)}, tmp_path / "c.pt")
    code, out, err = _cli_with_err([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")])
    assert code == 0 and "SAME" in out
    assert "Warning: w holds NaN or inf: 1 element(s) in a, 1 in b (of 4)" in err
    code, out, err = _cli_with_err([str(tmp_path / "a.pt"), str(tmp_path / "c.pt")])
    assert code == 1 and "NaN or inf in 1 element(s) of a and 0 of b" in out
    assert "v holds" not in err
    big = torch.rand(1000, 600).to(torch.bfloat16)  # every element differs: counted from the gaps' sums
    big[3, 5], big[7, 7] = float("nan"), float("inf")
    torch.save({"w": big}, tmp_path / "d.pt")
    torch.save({"w": big + 1}, tmp_path / "e.pt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = _cli_with_err([str(tmp_path / "d.pt"), str(tmp_path / "e.pt")])
    assert code == 1 and "Warning: w holds NaN or inf: 2 element(s) in a, 2 in b (of 600,000)" in err
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], "numpy's inf - inf warning leaked"


def _cli_with_err(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=300), err=Console(file=err, width=400))
    return code, out.getvalue(), err.getvalue()
