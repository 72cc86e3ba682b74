"""`weightdiff check`: DP replicas, TP duplicates (and legitimately different shards), the param-group audit
that an alias, a subclass or an odd name cannot dodge, fingerprint-only dumps, JSON and PNG outputs."""

from __future__ import annotations

import io
import json

import torch
from rich.console import Console
from torch import nn

import weightdiff
from tests.weightdiff.dumpsets import make_set
from tests.weightdiff.models import TinyGPT, naive_groups
from hangdoctor.topology import ParallelDims
from weightdiff.analysis.classify import no_decay_reason, norm_reason, tp_duplicate_reason
from weightdiff.cli import main
from weightdiff.read.sidecar import read_sidecar

DIMS = ParallelDims(tp=2, pp=2, dp=2)


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=120), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def test_a_consistent_set_passes_though_row_parallel_shards_differ(tmp_path):
    folder = make_set(tmp_path / "run", DIMS)
    code, out, err = _cli(["check", str(folder)])
    assert code == 0, out + err
    assert "FAIL" not in out
    report = json.loads(_cli(["check", str(folder), "--json"])[1])
    assert report["format"] == "weightdiff-check/1"
    # per (pp, dp): norm weight+bias, row-parallel bias, mlp weight+bias are duplicates; dense.weight is a shard
    assert report["checked"] == {"tied copies": 0, "dp replicas": 24, "tp duplicates": 20, "param groups": 48}
    assert report["findings"] == []


def test_diverged_dp_replica_and_tp_duplicates_are_named_with_their_place(tmp_path):
    def corrupt(coords, model):
        if (coords.pp, coords.dp, coords.tp) == (1, 1, 0):
            model.mlp.weight[2, 2] += 1e-3  # one DP replica drifts
        if (coords.pp, coords.tp) == (0, 1):
            model.input_layernorm.weight[0] = 0.5  # a norm that TP should replicate
            model.dense.bias[1] += 0.25  # a row-parallel bias, replicated too

    folder = make_set(tmp_path / "run", DIMS, mutate=corrupt)
    code, out, _ = _cli(["check", str(folder), "--json"])
    assert code == 1
    report = json.loads(out)
    found = {(f["kind"], f["name"]): f for f in report["findings"]}
    dp = found[("dp replicas", "mlp.weight")]
    assert dp["where"] == "pp=1 dp=1 tp=0" and abs(dp["max_abs"] - 1e-3) < 1e-6
    assert dp["fraction"] == 1 / 256
    norm = found[("tp duplicates", "input_layernorm.weight")]
    assert norm["where"] == "pp=0 tp=1 (all dp)" and norm["max_abs"] == 0.5
    assert "module class tests.weightdiff.models.MixedFusedLayerNorm" in norm["detail"]
    bias = found[("tp duplicates", "dense.bias")]
    assert "row-parallel bias" in bias["detail"]
    assert ("tp duplicates", "dense.weight") not in found  # shards are supposed to differ
    code, text, _ = _cli(["check", str(folder)])
    assert "[dp replicas] mlp.weight on pp=1 dp=1 tp=0, max |diff|" in text


def test_param_group_audit_sees_through_aliases_subclasses_and_names(tmp_path):
    class FancyNorm(nn.LayerNorm):  # a subclass
        pass

    class Gain(nn.Module):  # a norm whose class hides it; its path does not
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

    model = TinyGPT()
    model.blocks[1].extra_norm = FancyNorm(8)
    model.ln_f = Gain(8)
    decay_everything = torch.optim.AdamW([{"params": list(model.parameters()), "weight_decay": 0.1}], lr=1e-3)
    groups = weightdiff.param_groups_by_name(model, decay_everything)
    weightdiff.dump(model, iteration=1, tag="after", out=tmp_path / "run", coords=ParallelDims().coords(0),
                    param_groups=groups)
    code, out, _ = _cli(["check", str(tmp_path / "run"), "--json"])
    flagged = {f["name"]: f for f in json.loads(out)["findings"] if f["kind"] == "param groups"}
    assert code == 1
    assert "embedding norm" in flagged["embed.norm.weight"]["detail"]
    assert "torch.nn.modules.normalization.LayerNorm" in flagged["embed.norm.weight"]["detail"]
    assert "MixedFusedLayerNorm" in flagged["blocks.0.input_layernorm.weight"]["detail"]
    assert "FancyNorm" in flagged["blocks.1.extra_norm.weight"]["module_class"]
    assert "norm-like module path" in flagged["ln_f.weight"]["detail"]
    assert "bias" in flagged["blocks.0.dense.bias"]["detail"]
    assert "embed.word_embeddings.weight" not in flagged and "blocks.0.dense.weight" not in flagged


def test_the_seed_alias_rule_is_caught_and_the_robust_rule_passes(tmp_path):
    model = TinyGPT()
    weightdiff.dump(model, iteration=1, tag="after", out=tmp_path / "naive", coords=ParallelDims().coords(0),
                    optimizer=torch.optim.AdamW(naive_groups(model), lr=1e-3))
    dump = read_sidecar(next((tmp_path / "naive").glob("*.json")))
    flagged = [n for n, m in dump.tensors.items()
               if no_decay_reason(m) and m.group and m.group["weight_decay"] > 0]
    assert flagged == ["embed.norm.weight"]  # the seed's bug: exactly the embedding's torch LayerNorm weight
    code, out, _ = _cli(["check", str(tmp_path / "naive")])
    assert code == 1 and "[param groups] embed.norm.weight" in out


def test_with_three_replicas_the_odd_one_out_is_reported(tmp_path):
    def corrupt(coords, model):
        if (coords.pp, coords.dp) == (0, 0):
            model.mlp.bias[0] += 1.0

    folder = make_set(tmp_path / "run", ParallelDims(tp=1, pp=2, dp=3), mutate=corrupt)
    code, out, _ = _cli(["check", str(folder), "--json"])
    (finding,) = json.loads(out)["findings"]
    assert code == 1 and finding["kind"] == "dp replicas" and finding["where"] == "pp=0 dp=0"
    assert "from the dp=1 copy" in finding["detail"]


def test_fingerprint_only_dumps_still_find_a_diverged_replica(tmp_path):
    def corrupt(coords, model):
        if (coords.pp, coords.dp, coords.tp) == (0, 1, 1):
            model.mlp.bias[7] += 1e-7

    folder = make_set(tmp_path / "run", DIMS, mutate=corrupt, mode="fingerprint")
    assert not list(folder.glob("*.safetensors"))
    code, out, _ = _cli(["check", str(folder)])
    assert code == 1 and "[dp replicas] mlp.bias on pp=0 dp=1 tp=1" in out and "hashes differ" in out


def test_classification_rules_directly():
    model = TinyGPT()
    dump_metas = weightdiff.dump.__globals__["describe_parameters"](model, None)
    by_name = {m.name: m for m in dump_metas}
    assert norm_reason(by_name["blocks.0.input_layernorm.bias"]).startswith("module class")
    assert norm_reason(by_name["blocks.0.dense.weight"]) is None
    assert tp_duplicate_reason(by_name["embed.norm.weight"]).startswith("a norm")
    assert no_decay_reason(by_name["embed.word_embeddings.weight"]) is None


def test_png_heat_map_is_written(tmp_path):
    def corrupt(coords, model):
        if coords.pp == 1:
            model.mlp.weight[0, 0] += 1

    a = make_set(tmp_path / "a", DIMS, iteration=1, tag="after")
    b = make_set(tmp_path / "b", DIMS, iteration=2, tag="before", mutate=corrupt)
    png = tmp_path / "heat.png"
    code, out, _ = _cli([str(a), str(b), "--png", str(png)])
    assert code == 1 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    image = matplotlib.image.imread(png)
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_entries_wrap_at_words_under_their_text_on_a_terminal_and_stay_whole_in_a_pipe(tmp_path):
    """Issue 14: a finding's line was cut mid-word by an 80-column terminal. On a terminal it now wraps at words,
    each continuation under the entry's text; into a pipe or a file it stays one line, for grep."""
    def drift_one_replica(coords, model):
        if coords.dp == 1 and coords.pp == 1:
            model.dense.bias.view(-1)[3] += 0.01
    folder = make_set(tmp_path / "run", DIMS, mutate=drift_one_replica)
    terminal = io.StringIO()
    assert main(["check", str(folder)], out=Console(file=terminal, width=80, force_terminal=True, color_system=None),
                err=Console(file=io.StringIO())) == 1
    lines = terminal.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80, lines
    first = next(i for i, line in enumerate(lines) if line.startswith("  1. [dp replicas] dense.bias"))
    detail = lines[first + 1:first + 3]
    assert detail[0].startswith("       2 copies differ from the dp=0 copy") and detail[1].startswith("       ")
    assert detail[1].strip() and not detail[1][7].isspace()  # continued under the text, at a word
    assert " ".join(" ".join(detail).split()).endswith("class tests.weightdiff.dumpsets.RowParallelLinear")
    code, piped, _ = _cli(["check", str(folder)])
    whole = next(line for line in piped.splitlines() if line.startswith("       2 copies differ"))
    assert whole.endswith("of elements differ; class tests.weightdiff.dumpsets.RowParallelLinear")
