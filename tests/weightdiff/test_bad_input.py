"""Bad input: one clear line on stderr each, never a traceback, and everything else still compared."""

from __future__ import annotations

import io
import json
import sys

import torch

from tests.support import child_env, run_bounded
from tests.weightdiff.dumpsets import make_set
from topology import ParallelDims
from weightdiff.cli import main

DIMS = ParallelDims(tp=2, pp=2, dp=2)


def _cli(argv):
    from rich.console import Console

    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=100), err=Console(file=err, width=400))
    return code, out.getvalue(), err.getvalue()


def _error_lines(err: str) -> list[str]:
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("Error: ")]


def _pair(tmp_path, mutate_b=None):
    a = make_set(tmp_path / "a", DIMS, iteration=805, tag="after")
    b = make_set(tmp_path / "b", DIMS, iteration=806, tag="before", mutate=mutate_b)
    return a, b


def _bump_mlp_on_pp1(coords, model):
    if coords.pp == 1:
        model.mlp.weight[3, 4] += 1.0


def test_missing_folder_is_one_line_and_exit_2(tmp_path):
    a = make_set(tmp_path / "a", DIMS)
    code, out, err = _cli([str(a), str(tmp_path / "nope")])
    assert code == 2 and out == ""
    assert _error_lines(err) == [f"Error: {tmp_path / 'nope'}: no such folder"]


def test_a_folder_with_nothing_of_ours(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hello")
    code, _, err = _cli(["check", str(tmp_path / "empty")])
    assert code == 2 and len(_error_lines(err)) == 1 and "no weightdiff dumps" in err


def test_truncated_tensor_file_on_one_rank_the_rest_still_compared(tmp_path):
    a, b = _pair(tmp_path, mutate_b=_bump_mlp_on_pp1)
    victim = next(b.glob("debug-806-pp0-tp1-dp0-*.safetensors"))
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    code, out, err = _cli([str(a), str(b)])
    errors = _error_lines(err)
    assert code == 3, out + err  # differences found, and some input could not be compared
    assert len(errors) == 1 and victim.name in errors[0]
    assert "mlp.weight  differs on pp=1 (all tp, all dp) (4 ranks)" in out


def test_foreign_and_truncated_sidecars_are_reported_and_skipped(tmp_path):
    a, b = _pair(tmp_path)
    foreign = b / "debug-806-pp9-tp0-dp0-global99-before-iteration-1.json"
    foreign.write_text(json.dumps({"hello": "world"}))
    truncated = next(b.glob("debug-806-pp1-tp0-dp1-*.json"))
    truncated.write_text(truncated.read_text()[:200])
    code, out, err = _cli([str(a), str(b)])
    errors = _error_lines(err)
    assert code == 2, out + err
    assert any(foreign.name in e and "not a weightdiff sidecar" in e for e in errors)
    assert any(truncated.name in e and "truncated?" in e for e in errors)
    assert any("present in a only, on pp=1 dp=1 tp=0" in e for e in errors)  # the rank whose sidecar broke
    assert "SAME: no differences in 7 rank pairs" in out


def test_a_tensor_file_without_its_sidecar(tmp_path):
    a, b = _pair(tmp_path)
    lone = next(b.glob("debug-806-pp0-tp0-dp0-*.json"))
    lone.unlink()
    code, out, err = _cli([str(a), str(b)])
    errors = _error_lines(err)
    assert code == 2
    assert any("without its .json sidecar" in e for e in errors)
    assert any("1 rank(s) present in a only, on pp=0 dp=0 tp=0" in e for e in errors)


def test_mismatched_shapes_are_an_error_line_and_a_difference(tmp_path):
    def grow(coords, model):
        if coords.pp == 0 and coords.tp == 0:
            model.mlp.bias = torch.nn.Parameter(torch.zeros(17))

    a, b = _pair(tmp_path, mutate_b=grow)
    code, out, err = _cli([str(a), str(b)])
    errors = _error_lines(err)
    assert code == 3
    assert len(errors) == 2 and all("mlp.bias has shape [16] in a, [17] in b" in e for e in errors)
    assert "mlp.bias  shape on pp=0 tp=0 (all dp) (2 ranks)" in out


def test_ranks_present_on_one_side_only(tmp_path):
    a = make_set(tmp_path / "a", DIMS, iteration=805, tag="after")
    b = make_set(tmp_path / "b", ParallelDims(tp=2, pp=1, dp=2), iteration=806, tag="before")
    code, out, err = _cli([str(a), str(b)])
    errors = _error_lines(err)
    assert code == 2
    assert errors == [f"Error: 4 rank(s) present in a only, on pp=1 (all tp, all dp) (no before-dump of "
                      f"iteration 806 for them in {b}); not compared"]
    assert "SAME: no differences in 4 rank pairs" in out


def test_bad_iteration_flag_and_bad_tolerance(tmp_path):
    a, b = _pair(tmp_path)
    code, _, err = _cli([str(a), str(b), "--b-iteration", "7"])
    assert code == 2 and _error_lines(err) == [f"Error: {b}: no before-dumps of iteration 7 (available: 806)"]
    code, _, err = _cli([str(a), str(b), "--atol", "-1"])
    assert code == 2 and "tolerances must be >= 0" in err


def test_the_console_script_path_gives_one_line_and_no_traceback(tmp_path):
    a = make_set(tmp_path / "a", DIMS)
    done = run_bounded([sys.executable, "-m", "weightdiff", str(a), str(tmp_path / "missing")], timeout=120,
                       env=child_env())
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[0] == f"Error: {tmp_path / 'missing'}: no such folder"
    assert "Traceback" not in done.stderr
    usage = run_bounded([sys.executable, "-m", "weightdiff", "--help"], timeout=120, env=child_env())
    assert usage.returncode == 0 and "exit codes:" in usage.stdout and "weightdiff check DIR" in usage.stdout


def test_pairing_a_checkpoint_side_with_every_dp_rank():
    from pathlib import Path

    from weightdiff.analysis.diff import pair_keys
    from weightdiff.read.sources import Selection
    from weightdiff.records import RankDump

    def dump(coords, replicated):
        return RankDump(coords=coords, iteration=1, tag="t", source=Path("x"), kind="k", mode="full", tensors={},
                        replicated_dp=replicated)

    dims = ParallelDims(tp=1, pp=2, dp=2)
    live = Selection(Path("live"), "dumps", 1, "t", {(c.pp, c.tp, c.dp): dump(c, False)
                                                     for c in dims.all_coords()})
    ckpt = Selection(Path("ckpt"), "deepspeed-checkpoint", 1, "checkpoint",
                     {(pp, 0, 0): dump(dims.coords(dims.rank(dp=0, pp=pp, tp=0)), True) for pp in range(2)})
    for a, b in ((live, ckpt), (ckpt, live)):
        pairs, only_a, only_b = pair_keys(a, b)
        assert len(pairs) == 4 and not only_a and not only_b
        assert sorted((da.coords.pp, db.coords.pp) for da, db in pairs) == [(0, 0), (0, 0), (1, 1), (1, 1)]
