"""Bad input: one clear line on stderr each, never a traceback, and everything else still compared."""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.support import child_env, run_bounded
from tests.weightdiff.dumpsets import make_set
from hangdoctor.topology import ParallelDims
from weightdiff.cli import main
from weightdiff.safetensors_writer import write_safetensors

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
    assert _error_lines(err) == [f"Error: {tmp_path / 'nope'}: no such file or folder"]


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
    assert "INCOMPLETE: no differences among the 42 tensors compared in 7 rank pairs; some of the input was not " \
           "compared" in out  # never SAME over what was not read


def test_reading_leaves_the_garbage_collector_as_it_found_it(tmp_path):
    """select() pauses the cyclic collector while the sidecars become records (read/sources.py), a bad sidecar
    among them, and puts back the state it found."""
    import gc

    from weightdiff.read.sources import select

    a = make_set(tmp_path / "a", DIMS)
    next(a.glob("debug-*.json")).write_text("{")
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            selection = select(a)
            assert gc.isenabled() is enabled
            assert len(selection.dumps) == 7 and "not a weightdiff sidecar" in selection.errors[0]
        finally:
            gc.enable()


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
    assert "INCOMPLETE: no differences among the" in out and "in 4 rank pairs; some of the input" in out


def test_bad_iteration_flag_and_bad_tolerance(tmp_path):
    a, b = _pair(tmp_path)
    code, _, err = _cli([str(a), str(b), "--b-iteration", "7"])
    assert code == 2 and _error_lines(err) == [f"Error: {b}: no before-dumps of iteration 7 (available: 806)"]
    code, _, err = _cli([str(a), str(b), "--atol", "-1"])
    assert code == 2 and _error_lines(err) == ["Error: argument --atol: -1 is out of range (allowed: >= 0)"]


def test_the_console_script_path_gives_one_line_and_no_traceback(tmp_path):
    a = make_set(tmp_path / "a", DIMS)
    done = run_bounded([sys.executable, "-m", "weightdiff", str(a), str(tmp_path / "missing")], timeout=120,
                       env=child_env())
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[0] == f"Error: {tmp_path / 'missing'}: no such file or folder"
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


# --- The bad-input sweep: each row damages a copy of one run's dumps and runs the real CLI on it ------------------
#
# A/ stands for the weights/ folder of a 2-rank `--pp 2` trainer run with `--dump-weights before,after`
# (iterations 1 and 2), made with the real dump code; X/ is a damaged copy. `weightdiff A X` compares A's
# last after-dump (iteration 2) with X's first before-dump (iteration 1).

PP2 = ParallelDims(tp=1, pp=2, dp=1)
BEFORE_1 = "debug-1-*-before-iteration-*"
AFTER_2 = "debug-2-*-after-iteration-*"


@dataclass(frozen=True)
class Case:
    name: str
    damage: Callable[[Path, Path], list[str]]  # (A, a scratch folder) -> the weightdiff arguments
    expect: str  # in the first Error line
    errors: int = 1  # how many Error lines
    subprocess: bool = False  # could hang: run as a child with a timeout
    check: Callable[[Path, str], None] | None = None  # (scratch folder, stdout) -> extra assertions


def _x(a: Path, tmp: Path, pattern: str = "", change: Callable[[Path], None] | None = None) -> Path:
    x = tmp / "X"
    shutil.copytree(a, x)
    for path in sorted(x.glob(pattern)) if pattern else []:
        change(path)
    return x


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(path.name).randbytes(4096))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _cut(keep: Callable[[int], int]) -> Callable[[Path], None]:
    def cut(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: keep(len(data))])
    return cut


def _huge_header(path: Path) -> None:
    path.write_bytes(struct.pack("<Q", 2**63 - 1) + path.read_bytes()[8:])


def _off_sidecar(path: Path) -> None:
    """Rewrite the tensor file so that two tensors no longer match the sidecar: a shape and a dtype."""
    from safetensors.torch import load_file

    tensors = load_file(str(path))
    tensors["mlp.weight"] = tensors["mlp.weight"][:8].clone()
    tensors["mlp.bias"] = tensors["mlp.bias"].double()
    write_safetensors(path, list(tensors.items()))


def _loop(a: Path, tmp: Path) -> list[str]:
    (tmp / "loop").mkdir()
    os.symlink("b", tmp / "loop" / "a")
    os.symlink("a", tmp / "loop" / "b")
    return [str(a), str(tmp / "loop" / "a")]


def _folder(tmp: Path) -> Path:
    (tmp / "plots").mkdir(exist_ok=True)
    return tmp / "plots"


def _victim(tmp: Path) -> str:
    (tmp / "victim.json").write_text("{}")
    return str(tmp / "victim.json")


def _no_png_written(tmp: Path, out: str) -> None:
    assert out == "" and not list(tmp.rglob("*.png"))  # refused before any work


def _nothing_called_same(tmp: Path, out: str) -> None:
    assert "SAME" not in out and "NOT COMPARED: nothing could be read: 0 of 12 tensors in 2 rank pairs" in out


def _incomplete_verdict(tmp: Path, out: str) -> None:
    assert "INCOMPLETE: no differences among the 8 tensors compared; 4 tensors in 2 of 2 rank pairs" in out


def _sidecar_kept(tmp: Path, out: str) -> None:
    assert out == "" and (tmp / "victim.json").read_text() == "{}"


SWEEP = [
    Case("1 sidecars of random bytes: diff", lambda a, t: [str(a), str(_x(a, t, BEFORE_1 + ".json", _random_bytes))],
         "not a weightdiff sidecar (not UTF-8 text"),
    Case("1 sidecars of random bytes: check", lambda a, t: ["check", str(_x(a, t, AFTER_2 + ".json", _random_bytes))],
         "not a weightdiff sidecar (not UTF-8 text"),
    Case("2 symlink loop", _loop, "loop/a: cannot open (a symlink loop)"),
    Case("3 --png in a missing folder: check", lambda a, t: ["check", str(a), "--png", f"{t}/nope/heat.png"],
         "argument --png: cannot write", check=_no_png_written),
    Case("3 --png in a missing folder: drift", lambda a, t: ["drift", str(a), "mlp.weight", "--png",
                                                              f"{t}/nope/heat.png"], "nope does not exist",
         check=_no_png_written),
    Case("3 --png in a missing folder: diff", lambda a, t: [str(a), str(a), "--a-iteration", "1", "--b-iteration",
                                                             "2", "--png", f"{t}/nope/heat.png"],
         "nope does not exist", check=_no_png_written),
    Case("3 --png onto a file that is not a PNG", lambda a, t: ["check", str(a), "--png", _victim(t)],
         "is not a PNG image; refusing to overwrite it", check=_sidecar_kept),
    Case("4 --atol nan", lambda a, t: [str(a), str(a), "--a-iteration", "1", "--b-iteration", "2", "--atol", "nan"],
         "argument --atol: nan is not a finite number (allowed: >= 0)"),
    Case("4 --rtol inf", lambda a, t: ["check", str(a), "--rtol", "inf"], "argument --rtol: inf is not a finite"),
    Case("4 --jobs 0", lambda a, t: ["drift", str(a), "mlp.weight", "--jobs", "0"],
         "argument --jobs/-j: 0 is out of range (allowed: from 1 to 256)"),
    Case("4 --b-iteration -1", lambda a, t: [str(a), str(a), "--b-iteration=-1"], "-1 is out of range"),
    Case("5 tensors unlike their sidecar: diff", lambda a, t: [str(a), str(_x(a, t, BEFORE_1 + ".safetensors",
                                                                               _off_sidecar))],
         "tensor mlp.weight has shape [8, 16] in the file, [16, 16] in its sidecar", errors=4,
         check=_incomplete_verdict),
    Case("5 tensors unlike their sidecar: check", lambda a, t: ["check", str(_x(a, t, AFTER_2 + ".safetensors",
                                                                                 _off_sidecar))],
         "tensor mlp.weight has shape [8, 16] in the file, [16, 16] in its sidecar", errors=4),
    Case("7 FIFO as a tensor file: diff", lambda a, t: [str(a), str(_x(a, t, BEFORE_1 + ".safetensors", _fifo))],
         "a FIFO, not a regular file", errors=2, subprocess=True),
    Case("7 FIFO as a tensor file: check", lambda a, t: ["check", str(_x(a, t, AFTER_2 + ".safetensors", _fifo))],
         "a FIFO, not a regular file", errors=2, subprocess=True),
    Case("7 FIFO as a sidecar", lambda a, t: [str(a), str(_x(a, t, "debug-1-pp0-*-before-*.json", _fifo))],
         "a FIFO, not a regular file", errors=2, subprocess=True),
    Case("11 side b truncated", lambda a, t: [str(a), str(_x(a, t, BEFORE_1 + ".safetensors", _cut(lambda n: n // 2)))],
         "truncated (", errors=2, check=_nothing_called_same),
    Case("11 side b zero bytes", lambda a, t: [str(a), str(_x(a, t, BEFORE_1 + ".safetensors", _cut(lambda n: 0)))],
         "truncated (0 bytes", errors=2, check=_nothing_called_same),
    Case("11 side b header length 2^63-1", lambda a, t: [str(a), str(_x(a, t, BEFORE_1 + ".safetensors",
                                                                          _huge_header))],
         "header length 9,223,372,036,854,775,807 bytes", errors=2, check=_nothing_called_same),
    Case("16 drift --png an existing folder", lambda a, t: ["drift", str(a), "mlp.weight", "--png", str(_folder(t))],
         "plots: it is a folder; give a file in it", check=_no_png_written),
    Case("17 check: tensor files one byte short",
         lambda a, t: ["check", str(_x(a, t, AFTER_2 + ".safetensors", _cut(lambda n: n - 1)))],
         "bytes, its header needs", errors=2),
]


@pytest.fixture(scope="module")
def sweep_a(tmp_path_factory) -> Path:
    a = tmp_path_factory.mktemp("sweep") / "A"
    for iteration in (1, 2):
        for tag in ("before", "after"):
            make_set(a, PP2, iteration=iteration, tag=tag)
    return a


@pytest.mark.parametrize("case", SWEEP, ids=[c.name for c in SWEEP])
def test_bad_input_sweep_one_line_each(case, sweep_a, tmp_path):
    argv = case.damage(sweep_a, tmp_path)
    if case.subprocess:
        done = run_bounded([sys.executable, "-m", "weightdiff", *argv], timeout=60, env=child_env())
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        code, out, err = _cli(argv)
    assert code == 2, out + err
    assert all(line.startswith(("Error: ", "Hint: ", "Warning: ")) for line in err.splitlines()), err
    errors = _error_lines(err)
    assert len(errors) == case.errors and case.expect in errors[0], err
    if case.check is not None:
        case.check(tmp_path, out)
