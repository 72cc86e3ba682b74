"""`hangdoctor plan` on the command line: rows and exit 0 when some topology fits, exit 1 when none does
(or none is valid), --json with the same rows as the table, one-line usage errors."""

import contextlib
import io
import json

import pytest
from rich.console import Console

from hangdoctor.cli import main
from tests.support import PYTHON, REPO, child_env, run_bounded

# The seeds' 181B candidate on 48 nodes of 8 A100s.
MODEL = ["--gpus", "384", "--gpus-per-node", "8", "--layers", "72", "--hidden", "14336", "--heads", "64",
         "--vocab", "250880", "--seq-length", "2048", "--global-batch-size", "2048"]


def plan(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(["plan", *argv], out=Console(file=out, width=160), err=Console(file=err, width=160))
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_valid_topologies_exit_0_through_the_console_entry_point():
    """stdout is a pipe of 80 columns, as in `hangdoctor plan ... | less`: every line fits, every figure whole."""
    result = run_bounded([PYTHON, "-m", "hangdoctor", "plan", *MODEL, "--gpu-memory", "80", "--top", "5"],
                         timeout=60, env=child_env(COLUMNS="80"), cwd=REPO)
    assert result.returncode == 0, result.output
    words = " ".join(result.stdout.split())
    assert "64 valid topologies of 208 for 384 GPUs (8 per node), GBS 2048, ZeRO-1: Model size: 181B" in words
    assert "... 59 more (--top to show more)" in result.stdout
    assert "…" not in result.stdout and max(len(line) for line in result.stdout.splitlines()) <= 80
    assert " 8   3  16    1      128      2%  7,849M " in result.stdout
    assert result.stderr == ""


def test_gpus_that_are_not_whole_nodes_are_named_as_the_reason():
    twelve = [v if v != "384" else "12" for v in MODEL]
    code, out, err = plan(*twelve, "--global-batch-size", "48")
    assert code == 1 and "every topology is rejected: 12 GPUs are not whole nodes of 8" in out
    assert err.strip() == "Warning: no topology is valid for 12 GPUs: 12 GPUs are not whole nodes of 8"


def test_json_rows_obey_the_rules_and_match_the_table():
    code, out, _ = plan(*MODEL, "--gpu-memory", "80", "--json")
    assert code == 0
    data = json.loads(out)
    rows = data["rows"]
    assert len(rows) == 64 and data["rejected_candidates"] == 144 and data["candidates"] == 208
    assert data["rejected"] == {"gbs-divisible": 104, "layers-divisible": 80, "block-per-stage": 28}
    for row in rows:
        assert row["tp"] * row["pp"] * row["dp"] == 384 and 8 % row["tp"] == 0  # TP within a node
        assert 2048 % (row["mbs"] * row["dp"]) == 0 and 72 % row["pp"] == 0 and 64 % row["tp"] == 0
        assert row["micro_batches"] == 2048 // (row["mbs"] * row["dp"])
    fits = [row["fits"] for row in rows]
    assert fits == sorted(fits, reverse=True) and fits[0] is True  # the ones that fit come first
    code, table, _ = plan(*MODEL, "--gpu-memory", "80", "--top", "64")
    table_rows = [line.split("│")[1:5] for line in table.splitlines() if line.startswith("│")]
    assert [tuple(int(c) for c in cells) for cells in table_rows] == [
        (r["tp"], r["pp"], r["dp"], r["mbs"]) for r in rows]


def test_nothing_fits_or_nothing_is_valid_exits_1_with_a_warning():
    code, out, err = plan(*MODEL, "--gpu-memory", "10")
    assert code == 1 and "64 valid topologies" in out
    assert err.strip() == "Warning: none fits in memory for 384 GPUs"
    seventy = [v if v != "72" else "70" for v in MODEL]
    code, out, err = plan(*seventy, "--json")
    assert code == 1 and json.loads(out)["rows"] == []
    assert err.strip() == "Warning: no topology is valid for 384 GPUs"


@pytest.mark.parametrize("argv, expected", [
    (["--micro-batch-sizes", "1,x"], "'1,x' is not a comma-separated list of integers"),
    (["--micro-batch-sizes", "0"], "micro-batch sizes must be positive"),
    (["--heads", "0"], "argument --heads: '0' must be at least 1"),
    (["--zero-stage", "4"], "argument --zero-stage: invalid choice"),
])
def test_bad_usage_is_one_line_and_exit_2(argv, expected):
    code, out, err = plan(*MODEL, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("Error: ") and expected in lines[0] and lines[1].startswith("Hint: ")
    assert len(lines) == 2
