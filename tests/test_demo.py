"""`make demo` end to end (scripts/demo.py, about 3 minutes here): it must finish, and what it shows must be the
tools' findings on the faults it injects. The strings below are what a reader of the demo is told to look for,
checked in the demo's own output."""

import re
import sys

import pytest

from tests.support import REPO, child_env, run_bounded

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1200)
def test_the_demo_runs_end_to_end_and_shows_each_fault_found(tmp_path):
    result = run_bounded([sys.executable, str(REPO / "scripts" / "demo.py"), "--out", str(tmp_path / "demo")],
                         timeout=1100, env=child_env(COLUMNS="160"), cwd=REPO)
    out = result.stdout
    assert result.returncode == 0, result.output[-4000:]
    assert "Error:" not in out, out[-4000:]
    # the hang: attach, the tracer, the Flight Recorder joined with the stacks, and the GPU hang offline
    assert re.search(r"HUNG: 4 ranks stuck, 4 in 2 calls", out)
    assert "broadcast <- PipelineEngine._aggregate_total_loss" in out and "PipelineEngine._exec_recv_activations" in out
    assert "never issued broadcast #2" in out
    assert "HUNG: 16 ranks stuck" in out  # bloom_200b, 2 of 40 nodes: the other 304 ranks did not respond
    # the resume that loses the last stage's embedding norm, against the dumps and against the checkpoint
    assert out.count("tied_modules.embed.norm.weight  differs on pp=1 (all dp)") == 2
    # the tied embedding not reduced, and the embedding norm weight-decayed
    assert "[tied copies] tied_modules.embed.word_embeddings.weight on pp=1" in out
    assert "[param groups] tied_modules.embed.norm.weight on all ranks" in out
    # every command is shown as it runs, from the repository's root
    commands = [line for line in out.splitlines() if line.startswith("\x1b[2m$ ")]
    assert len(commands) == 11 and all(" -m " in c for c in commands), commands
    assert (tmp_path / "demo" / "hang" / "hangdoctor" / "report.json").exists()
