"""No output path replaces what a command reads or evidence already collected (clicore/outputs.py), through the
real commands, one row per tool and flag (sweep round 2: `analyze d.txt --html d.txt` replaced its input, `--svg`
onto a collected node file, `tracing export traces/ -o traces/<ring>` replaced the ring, `--png` likewise); and
two attaches with one `--out` at once: one collects, the other is refused, the folder holds one run."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded
from tests.tracing.test_bad_input import write_ring

CASE = REPO / "tests" / "hangdoctor" / "corpus" / "deepspeed_launcher"


def _dumps(tmp: Path) -> tuple[list[str], Path]:
    text = tmp / "d.txt"
    shutil.copy(CASE / "text" / "s1" / "trace-node1.out", text)
    return [PYTHON, "-m", "hangdoctor", "analyze", str(text), "--html", str(text)], text


def _svg_onto_a_node_file(tmp: Path) -> tuple[list[str], Path]:
    shutil.copytree(CASE / "attach", tmp / "collected")
    node = tmp / "collected" / "nodes" / "node1.json"
    return [PYTHON, "-m", "hangdoctor", "analyze", str(tmp / "collected"), "--svg", str(node)], node


def _html_through_a_link(tmp: Path) -> tuple[list[str], Path]:
    argv, text = _dumps(tmp)
    (tmp / "link.html").symlink_to(text)
    return [*argv[:-1], str(tmp / "link.html")], text


def _export_onto_a_ring(tmp: Path) -> tuple[list[str], Path]:
    (tmp / "traces").mkdir()
    ring = write_ring(tmp / "traces" / "trace-h-0-1.ring")
    return [PYTHON, "-m", "tracing", "export", str(tmp / "traces"), "-o", str(ring)], ring


def _png_inside_a_compared_folder(tmp: Path) -> tuple[list[str], Path]:
    (tmp / "a").mkdir()
    torch.save({"w": torch.ones(3)}, tmp / "a" / "model.pt")
    torch.save({"w": torch.zeros(3)}, tmp / "b.pt")
    kept = tmp / "a" / "heatmap.png"  # a picture someone saved beside the model: a PNG, yet not ours to replace
    kept.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    return [PYTHON, "-m", "weightdiff", str(tmp / "a"), str(tmp / "b.pt"), "--png", str(kept)], kept


@pytest.mark.parametrize("setup", [_dumps, _svg_onto_a_node_file, _html_through_a_link, _export_onto_a_ring,
                                   _png_inside_a_compared_folder], ids=lambda f: f.__name__.strip("_"))
def test_an_output_never_replaces_an_input(tmp_path: Path, setup: Callable[[Path], tuple[list[str], Path]]):
    argv, kept = setup(tmp_path)
    before = kept.read_bytes()
    result = run_bounded(argv, timeout=120, env=child_env(), cwd=REPO)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.output[-3000:]
    assert len(errors) == 1 and ("is an input of this command" in errors[0] or "inside the input folder" in errors[0])
    assert kept.read_bytes() == before


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=child_env())


def test_an_out_folder_held_by_another_run_is_refused_before_collecting(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a running attach holds
    target = _sleeper()
    try:
        result = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", str(target.pid), "--samples", "1",
                              "--out", str(out)], timeout=120, env=child_env(), cwd=REPO)
    finally:
        os.close(fd)
        kill_tree(target.pid)
    assert result.returncode == 2, result.output[-3000:]
    assert f"Error: --out {out} is being written by another run now" in result.stderr
    assert list(out.iterdir()) == []


def test_two_attaches_with_one_out_leave_one_run(tmp_path):
    out = tmp_path / "out"
    target = _sleeper()
    argv = [PYTHON, "-m", "hangdoctor", "attach", "--pid", str(target.pid), "--samples", "2", "--interval", "0.5",
            "--out", str(out)]
    try:
        time.sleep(0.5)  # the target's interpreter is up
        runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                                 cwd=REPO, start_new_session=True) for _ in range(2)]
        results = [(run.wait(timeout=120), run.communicate(timeout=30)) for run in runs]
    finally:
        kill_tree(target.pid)
    codes = sorted(code for code, _ in results)
    loser = next(err for code, (_, err) in results if code == 2)
    assert codes[0] in (0, 1) and codes[1] == 2, results
    assert "being written by another run now" in loser or "already holds a report" in loser, loser
    assert [p.name for p in (out / "nodes").iterdir()] == [f"{os.uname().nodename}.json"]
