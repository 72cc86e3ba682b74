"""`tracing diverge` on hangs shaped after public reports, not on our trainer: hangdoctor's corpus programs
(tests/hangdoctor/fixtures/corpus/, each naming its public source) run here under `tracing run` and torchrun, 2
gloo ranks each, with torch.distributed in the selection.

- ddp_barrier.py: PyTorch's DDP tutorial trainer with a barrier inside the rank-0-only snapshot branch
  (EleutherAI/sparsify PR #5). DDP's gradient all_reduce runs in C++, so rank 1 makes no Python-level collective
  call at all: the first departure is rank 0's barrier against nothing.
- fsdp_skip_step.py: FSDP2 (`fully_shard`) where rank 1 skips a step on an empty batch (lightseekorg/TorchSpec
  #126): the ranks' collectives pair off alike until rank 1, one step short, calls the final barrier where
  rank 0 calls the next all-gather. The round-by-round comparison alone gave a dozen FSDP helper functions with
  "all_gather" in their names here; the numbered collectives give the one call where the ranks part.
"""

from __future__ import annotations

import json

import pytest

from tests.support import PYTHON, REPO, child_env
from tests.tracing.helpers import Background, tracing_cli

pytest.importorskip("torch")
CORPUS = REPO / "tests" / "hangdoctor" / "fixtures" / "corpus"
pytestmark = pytest.mark.timeout(300)


def _diverge_first(out) -> str | None:
    done = tracing_cli("diverge", str(out), "--json", timeout=60)
    if done.returncode not in (0, 1) or not done.stdout.strip():
        return None
    return json.loads(done.stdout).get("first")


def _run_until(tmp_path, script: str, include: str, said) -> dict:
    """Start the corpus program traced under torchrun; wait (bounded) until diverge's first departure satisfies
    `said`; return diverge's JSON, after checking that the human view says the same."""
    out, markers = tmp_path / "traces", tmp_path / "markers"
    markers.mkdir()
    with Background() as bg:
        bg.start([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "tracing",
                  "run", "--include", include, "--out", str(out), "--", str(CORPUS / script)],
                 env=child_env(HD_CORPUS_MARKERS=str(markers), PYTHONPATH=str(REPO)))
        bg.wait_for(lambda: (markers / "rank0").exists() and (markers / "rank1").exists(), 150,
                    f"both ranks of {script} at their blocking call")
        bg.wait_for(lambda: said(_diverge_first(out) or ""), 90, f"diverge's first departure on {script}")
        done = tracing_cli("diverge", str(out), "--json", timeout=60)
        human = tracing_cli("diverge", str(out), timeout=60)
    assert done.returncode == 1 and human.returncode == 1, done.output
    report = json.loads(done.stdout)
    assert f"First departure: {report['first']}" in " ".join(human.stdout.split())
    return report


def test_ddp_tutorial_barrier_on_rank_0_only(tmp_path):
    expected = ("collective #1: rank 0 barrier (from Trainer._save_snapshot), its last; rank 1 made none "
                "(now inside Trainer._run_batch).")
    report = _run_until(tmp_path, "ddp_barrier.py", "__main__,torch.distributed,torch.nn.parallel",
                        lambda first: first == expected)
    (evidence,) = [d for d in report["collectives"] if d["kind"] == "last"]
    sides = {s["ranks_text"]: s for s in evidence["sides"]}
    assert sides["0"]["call"]["event"]["function"]["qualname"] == "barrier" and sides["1"]["call"] is None


def test_fsdp2_rank_that_skipped_a_step(tmp_path):
    """FSDP2 traced in full fills the rings: numbers then count from the oldest call every ring still holds."""
    tail = "rank 0 all_gather_single (from DefaultAllGather.__call__), its last; rank 1 barrier (from main), its last."
    report = _run_until(tmp_path, "fsdp_skip_step.py", "__main__,torch.distributed",
                        lambda first: first.startswith("collective #") and first.endswith(tail))
    (evidence,) = [d for d in report["collectives"] if d["kind"] == "last"]
    names = {s["ranks_text"]: s["call"]["event"]["function"]["qualname"] for s in evidence["sides"]}
    assert names == {"0": "all_gather_single", "1": "barrier"}
    assert evidence["number"] > 10  # every collective before it alike: forwards and backwards of the steps before
