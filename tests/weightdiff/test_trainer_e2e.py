"""End to end with the reference trainer's injected faults, on the session's shared trainer runs
(tests/trainer_runs.py: PP=2 x DP=2, ZeRO-1, --embed-layernorm, dumps before and after every iteration,
a checkpoint at iteration 4 and resumes from it) plus one TP=2 x PP=2 run of our own:

- a healthy run and resume: `weightdiff a/ b/` is clean, exit 0 (dumps against dumps, and the checkpoint
  against the resumed run's dumps);
- embed-norm-not-saved + resume: the embedding norm on the last stage is named, back at its defaults;
- no-tied-grad-reduce: `weightdiff check` names the drifted tied copies and by how much;
- layernorm-alias: the audit flags the embedding norm and names its class;
- real tensor parallelism: TP duplicates (norms, row-parallel biases) are checked and equal.
"""

from __future__ import annotations

import io
import json
import sys

import pytest
from rich.console import Console
from safetensors.torch import load_file

from tests.support import child_env, run_bounded
from weightdiff.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # fixtures may launch the shared trainer runs

TIED, NORM_WEIGHT = "tied_modules.embed.word_embeddings.weight", "tied_modules.embed.norm.weight"


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=120), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def test_healthy_run_and_resume_are_clean(trainer_runs):
    saved = trainer_runs.get("pp2dp2_save")
    resumed = trainer_runs.get("pp2dp2_resume")
    code, out, err = _cli([str(saved.weights), str(resumed.weights), "--a-iteration", "4"])
    assert code == 0 and err == "", out + err
    assert "after-dumps of iteration 4, 4 ranks" in out and "before-dumps of iteration 5, 4 ranks" in out
    assert "SAME: no differences in 4 rank pairs" in out
    # the checkpoint itself against the resumed run: the head's tied copy, not stored, was restored by the load
    code, out, err = _cli([str(saved.run_dir / "checkpoints"), str(resumed.weights)])
    assert code == 0, out + err
    assert f"{TIED} on pp=1 (all dp): restored by load" in out
    code, out, _ = _cli(["check", str(resumed.weights)])
    assert code == 0 and "FAIL" not in out


def test_embed_norm_not_saved_is_named_and_reset_to_defaults(trainer_runs):
    saved = trainer_runs.get("pp2dp2_save")
    faulty = trainer_runs.get("pp2dp2_resume_embed_norm_not_saved")
    code, out, _ = _cli([str(saved.weights), str(faulty.weights), "--a-iteration", "4"])
    assert code == 1
    headline = next(line for line in out.splitlines() if line.startswith("DIFFERENT"))
    assert headline.startswith("DIFFERENT: all 4 differences are on pp=1 (all dp): ")
    assert set(headline.split(": ", 2)[2].split(", ")) == {NORM_WEIGHT, "tied_modules.embed.norm.bias"}
    assert f"{NORM_WEIGHT}  differs on pp=1 (all dp) (2 ranks)" in out
    assert "now all ones: back at a default initialisation" in out
    assert "now all zeros: back at a default initialisation" in out
    assert "module class torch.nn.modules.normalization.LayerNorm" in out
    # the checkpoint alone tells the same: the last stage's copy was not restored from the stored one
    code, out, _ = _cli([str(saved.run_dir / "checkpoints"), str(faulty.weights)])
    assert code == 1 and "was not restored at load: it differs from the stored pp=0 copy" in out


def test_no_tied_grad_reduce_and_layernorm_alias(trainer_runs):
    weights = trainer_runs.get("tied_alias_straggler").weights  # PP=2, rank 0 is pp=0, rank 1 is pp=1
    code, out, _ = _cli(["check", str(weights), "--json"])
    assert code == 1
    report = json.loads(out)
    assert report["iteration"] == 4 and report["tag"] == "after"
    found = {(f["kind"], f["name"]): f for f in report["findings"]}
    tied = found[("tied copies", TIED)]
    first = load_file(str(next(weights.glob("debug-4-pp0-*-after-*.safetensors"))))[TIED]
    last = load_file(str(next(weights.glob("debug-4-pp1-*-after-*.safetensors"))))[TIED]
    expected = float((first.double() - last.double()).abs().max())
    assert tied["where"] == "pp=1" and expected > 0 and tied["max_abs"] == pytest.approx(expected, rel=1e-12)
    audit = found[("param groups", NORM_WEIGHT)]
    assert "torch.nn.modules.normalization.LayerNorm" in audit["detail"] and "weight_decay=0.1" in audit["detail"]
    assert [n for k, n in found if k == "param groups"] == [NORM_WEIGHT]
    code, text, _ = _cli(["check", str(weights)])
    assert f"[tied copies] {TIED} on pp=1, max |diff|" in text
    assert f"[param groups] {NORM_WEIGHT} on all ranks" in text
    code, text, _ = _cli(["drift", str(weights), TIED, "--json"])
    gaps = [p["max_abs"] for p in json.loads(text)["points"]]
    assert code == 1 and len(gaps) == 4 and gaps[0] > 0 and gaps[-1] > gaps[0]


@pytest.fixture(scope="module")
def tp_run(trainer_runs):
    return trainer_runs.get("pp2tp2").weights  # TP=2 x PP=2, embedding norm, dumps after each iteration


def test_tensor_parallel_duplicates_are_checked_on_a_real_tp_run(tp_run):
    code, out, err = _cli(["check", str(tp_run), "--json"])
    report = json.loads(out)
    assert code == 0, out + err
    assert report["dims"] == {"tp": 2, "pp": 2, "dp": 1, "order": "tp-dp-pp"}
    assert report["checked"]["tp duplicates"] > 0 and report["checked"]["tied copies"] > 0
    assert report["findings"] == []


def test_python_dash_m_on_a_trainer_run(tp_run):
    done = run_bounded([sys.executable, "-m", "weightdiff", "check", str(tp_run)], timeout=120, env=child_env())
    assert done.returncode == 0 and "tp duplicates ok" in " ".join(done.stdout.split()), done.output
