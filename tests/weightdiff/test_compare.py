"""Element-wise comparison: the single changed element the seed's repr dumps miss, tolerances, NaN/-0.0,
streaming in row blocks, dtype changes, default-init detection."""

from __future__ import annotations

import io
import json

import pytest
import torch
from rich.console import Console
from torch import nn

import weightdiff
import weightdiff.read.values as values_module
from hangdoctor.topology import ParallelDims
from weightdiff.analysis.compare import Tolerance, compare_tensor
from weightdiff.cli import main


class Big(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.weight = nn.Parameter(torch.randn(1000, 1000).to(torch.bfloat16))


class DictValues:
    def __init__(self, tensors):
        self.tensors = tensors

    def names(self):
        return set(self.tensors)

    def get(self, name):
        return self.tensors[name]

    def rows(self, name, start, stop):
        return self.tensors[name][start:stop]

    def close(self):
        pass


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=100), err=Console(file=err, width=200))
    return code, out.getvalue(), err.getvalue()


def test_one_changed_element_in_the_middle_is_found_where_the_seeds_repr_sees_nothing(tmp_path):
    coords = ParallelDims().coords(0)
    model = Big()
    weightdiff.dump(model, iteration=805, tag="after", out=tmp_path / "a", coords=coords)
    before_repr = f"weight={model.weight}"
    with torch.no_grad():
        model.weight[500, 500] += 0.5
    assert f"weight={model.weight}" == before_repr  # the seed's text dump: identical, the change is invisible
    weightdiff.dump(model, iteration=806, tag="before", out=tmp_path / "b", coords=coords)

    code, out, err = _cli([str(tmp_path / "a"), str(tmp_path / "b")])
    assert code == 1, out + err
    assert "DIFFERENT" in out and "weight  differs on all ranks" in out
    assert "first at index [500, 500]" in out and "of elements differ" in out
    code, out, _ = _cli([str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    import json

    assert json.loads(out)["format"] == "weightdiff-diff/1"
    entry = json.loads(out)["params"][0]
    assert entry["n_differ"] == 1 and entry["example"]["first_index"] == [500, 500]
    assert entry["max_abs"] == pytest.approx(0.5, abs=0.02)


def test_tolerance_accepts_small_differences_and_exact_mode_does_not():
    a = torch.linspace(0, 1, 100)
    b = a.clone()
    b[10] += 1e-6
    va, vb = DictValues({"x": a}), DictValues({"x": b})
    assert compare_tensor(va, vb, "x", (100,), Tolerance()).n_differ == 1
    assert compare_tensor(va, vb, "x", (100,), Tolerance(atol=1e-5)).n_differ == 0
    assert compare_tensor(va, vb, "x", (100,), Tolerance(rtol=1e-7)).n_differ == 1


def test_exact_means_bitwise_nan_equals_nan_and_negative_zero_differs():
    a = torch.tensor([float("nan"), 0.0, 1.0])
    b = torch.tensor([float("nan"), -0.0, 1.0])
    vd = compare_tensor(DictValues({"x": a}), DictValues({"x": b}), "x", (3,), Tolerance())
    assert vd.n_differ == 1 and vd.first_index == (1,) and vd.max_abs == 0.0
    c = torch.tensor([float("nan"), 0.0, 2.0])
    vd = compare_tensor(DictValues({"x": a}), DictValues({"x": c}), "x", (3,), Tolerance(atol=1e-3))
    assert vd.n_differ == 1 and vd.max_abs == 1.0


def test_nan_against_a_number_is_an_infinite_difference():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("nan")])
    vd = compare_tensor(DictValues({"x": a}), DictValues({"x": b}), "x", (2,), Tolerance())
    assert vd.n_differ == 1 and vd.max_abs == float("inf")


def test_streaming_in_row_blocks_gives_the_same_answer(monkeypatch):
    torch.manual_seed(1)
    a = torch.randn(64, 33)
    b = a.clone()
    b[0, 5] += 1
    b[40, 7] -= 3
    b[63, 32] += 2
    whole = compare_tensor(DictValues({"x": a}), DictValues({"x": b}), "x", (64, 33), Tolerance())
    monkeypatch.setattr(values_module, "BLOCK_BYTES", 33 * 4 * 5)  # five rows per block -> 13 blocks
    assert values_module.row_blocks((64, 33), 4) is not None
    streamed = compare_tensor(DictValues({"x": a}), DictValues({"x": b}), "x", (64, 33), Tolerance())
    assert (streamed.n_differ, streamed.max_abs, streamed.first_index, streamed.max_index) == \
        (whole.n_differ, whole.max_abs, whole.first_index, whole.max_index)
    assert (whole.n_differ, whole.first_index, whole.max_index) == (3, (0, 5), (40, 7))
    assert whole.max_abs == pytest.approx(3.0, rel=1e-6)
    assert streamed.sum_abs == pytest.approx(6.0, rel=1e-6)


def test_dtype_change_with_equal_values_and_reset_to_ones():
    a = torch.full((8,), 0.99)
    vd = compare_tensor(DictValues({"x": a}), DictValues({"x": torch.ones(8)}), "x", (8,), Tolerance())
    assert vd.b_constant == 1.0 and vd.a_constant is None and vd.n_differ == 8
    same = compare_tensor(DictValues({"x": torch.ones(4)}), DictValues({"x": torch.ones(4, dtype=torch.bfloat16)}),
                          "x", (4,), Tolerance())
    assert same.n_differ == 0


def test_json_carries_what_the_terminal_view_shows(tmp_path):
    coords = ParallelDims().coords(0)
    model = Big()
    weightdiff.dump(model, iteration=1, tag="after", out=tmp_path / "a", coords=coords)
    with torch.no_grad():
        model.weight[10:20] = 1.0
    weightdiff.dump(model, iteration=2, tag="before", out=tmp_path / "b", coords=coords)
    _, text, _ = _cli([str(tmp_path / "a"), str(tmp_path / "b")])
    _, raw, _ = _cli([str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    import json

    data = json.loads(raw)
    assert data["headline"] in text and data["has_differences"] is True
    (param,) = data["params"]
    assert f"{param['name']}  {param['status']} on {param['where']}" in text
    assert data["compared_elements"] == 1_000_000 and f"{data['compared_elements']:,} elements" in text


def test_dense_differences_with_equal_nans_in_the_block():
    a = torch.arange(100, dtype=torch.float32)
    b = a + 0.5
    a[5] = b[5] = float("nan")
    vd = compare_tensor(DictValues({"x": a}), DictValues({"x": b}), "x", (100,), Tolerance())
    assert vd.n_differ == 99 and vd.max_abs == 0.5 and vd.mean_abs == pytest.approx(0.5 * 99 / 100)
    b[7] = float("nan")
    vd = compare_tensor(DictValues({"x": a}), DictValues({"x": b}), "x", (100,), Tolerance())
    assert vd.n_differ == 99 and vd.max_abs == float("inf") and vd.max_index == (7,)


def test_fingerprint_only_dumps_diff_by_hash_and_trust_fingerprints_skips_reading(tmp_path):
    coords = ParallelDims().coords(0)
    model = Big()
    weightdiff.dump(model, iteration=1, tag="after", out=tmp_path / "a", coords=coords)
    weightdiff.dump(model, iteration=1, tag="after", out=tmp_path / "fa", coords=coords, mode="fingerprint")
    with torch.no_grad():
        model.weight[999, 999] += 1
    weightdiff.dump(model, iteration=2, tag="before", out=tmp_path / "fb", coords=coords, mode="fingerprint")
    code, out, _ = _cli([str(tmp_path / "fa"), str(tmp_path / "fb")])
    assert code == 1 and "weight  differs on all ranks" in out and "hashes differ" in out

    # Flip one byte of a's values behind the sidecar's back: reading finds it, trusting the hashes does not.
    import shutil

    shutil.copytree(tmp_path / "a", tmp_path / "a2")
    tensor_file = next((tmp_path / "a2").glob("*.safetensors"))
    data = bytearray(tensor_file.read_bytes())
    data[-2] ^= 0x01
    tensor_file.write_bytes(bytes(data))
    assert _cli([str(tmp_path / "a"), str(tmp_path / "a2")])[0] == 1
    code, out, _ = _cli([str(tmp_path / "a"), str(tmp_path / "a2"), "--trust-fingerprints"])
    assert code == 0 and "SAME" in out


def test_jobs_split_one_pair_by_tensor_and_the_report_is_the_same(tmp_path):
    """One rank pair (--jobs used to split rank pairs only): its tensors compared in several threads give the
    very report --jobs 1 gives, in the same order, with the same counts."""
    torch.manual_seed(1)
    model = nn.ModuleDict({f"layer{i}": nn.Linear(64, 64) for i in range(12)})
    coords = ParallelDims().coords(0)
    weightdiff.dump(model, iteration=1, tag="after", out=tmp_path / "a", coords=coords)
    with torch.no_grad():
        for i in (2, 5, 11):
            model[f"layer{i}"].weight[i, 3] += 0.5 * i
        model["layer7"].bias.add_(1e-3)
    weightdiff.dump(model, iteration=2, tag="before", out=tmp_path / "b", coords=coords)
    reports = {}
    for jobs in ("1", "2", "4"):
        out = io.StringIO()
        code = main([str(tmp_path / "a"), str(tmp_path / "b"), "--json", "--jobs", jobs],
                    out=Console(file=out, width=200), err=Console(file=io.StringIO()))
        assert code == 1
        reports[jobs] = json.loads(out.getvalue())
    assert reports["2"] == reports["1"] == reports["4"]
    changed = [d["name"] for pair in reports["1"]["pairs"] for d in pair["diffs"]]
    assert changed == ["layer2.weight", "layer5.weight", "layer7.bias", "layer11.weight"], changed
