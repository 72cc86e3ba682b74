"""End to end with the reference trainer's injected faults (TP=2 x PP=2, --embed-layernorm, 4 processes):

- a healthy run, saved at iteration 2, and a healthy resume: `weightdiff a/ b/` is clean, exit 0;
- the same checkpoint resumed with embed-norm-not-saved: the embedding norm on the last stage is named,
  back at its defaults;
- no-tied-grad-reduce + layernorm-alias in one run: `weightdiff check` names the drifted tied copies and by
  how much, and the audit flags the embedding norm with its class.
Weights move between runs as in the seed (`mkdir a; mv debug-* a`).
"""

from __future__ import annotations

import io
import json
import shutil
import sys

import pytest
from rich.console import Console
from safetensors.torch import load_file

from tests.support import REPO, child_env, run_bounded
from weightdiff.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # four trainer launches in the fixture

MODEL = ["--tp", "2", "--pp", "2", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
         "--seq-length", "16", "--vocab-size", "64", "--micro-batch-size", "2", "--global-batch-size", "4",
         "--embed-layernorm", "--pg-timeout", "60", "--dump-weights", "before,after"]


def _train(run_dir, *extra):
    done = run_bounded([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
                        "-m", "trainer", *MODEL, "--run-dir", str(run_dir), *extra],
                       timeout=300, env=child_env(), cwd=REPO)
    assert done.returncode == 0, done.output[-6000:]


def _move_weights(run_dir, name):
    target = run_dir / name
    shutil.move(str(run_dir / "weights"), str(target))
    return target


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("trainer")
    saved = root / "saved"
    _train(saved, "--train-iters", "2", "--save-interval", "2")
    _move_weights(saved, "a")
    _train(saved, "--train-iters", "3", "--resume")
    _move_weights(saved, "b_healthy")
    _train(saved, "--train-iters", "3", "--resume", "--fault", "embed-norm-not-saved")
    _move_weights(saved, "b_fault")
    faulty = root / "faulty"
    _train(faulty, "--train-iters", "2", "--fault", "no-tied-grad-reduce", "--fault", "layernorm-alias")
    return saved, faulty


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=120), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def test_healthy_run_and_resume_are_clean(runs):
    saved, _ = runs
    code, out, err = _cli([str(saved / "a"), str(saved / "b_healthy")])
    assert code == 0 and err == "", out + err
    assert "after-dumps of iteration 2" in out and "before-dumps of iteration 3" in out
    assert "SAME: no differences in 4 rank pairs" in out
    code, out, _ = _cli(["check", str(saved / "b_healthy"), "--json"])
    report = json.loads(out)
    assert code == 0 and report["findings"] == [] and report["checked"]["tp duplicates"] > 0
    code, out, _ = _cli([str(saved / "checkpoints"), str(saved / "b_healthy")])
    assert code == 0 and "restored by load" in out


def test_embed_norm_not_saved_is_named_and_reset_to_defaults(runs):
    saved, _ = runs
    code, out, _ = _cli([str(saved / "a"), str(saved / "b_fault")])
    assert code == 1
    assert ("all 4 differences are on pp=1 (all tp): tied_modules.embed.norm.bias, "
            "tied_modules.embed.norm.weight") in " ".join(out.split())
    assert "tied_modules.embed.norm.weight  differs on pp=1 (all tp) (2 ranks)" in out
    assert "now all ones: back at a default initialisation" in out
    assert "now all zeros: back at a default initialisation" in out
    # the checkpoint alone tells the same: the last stage's copy was not restored from the stored one
    code, out, _ = _cli([str(saved / "checkpoints"), str(saved / "b_fault")])
    assert code == 1 and "was not restored at load: it differs from the stored pp=0 copy" in out


def test_no_tied_grad_reduce_and_layernorm_alias(runs):
    _, faulty = runs
    code, out, _ = _cli(["check", str(faulty / "weights"), "--json"])
    assert code == 1
    found = {(f["kind"], f["name"]): f for f in json.loads(out)["findings"]}
    tied = found[("tied copies", "tied_modules.embed.word_embeddings.weight")]
    assert tied["where"] == "pp=1 (all tp)"
    name = "tied_modules.embed.word_embeddings.weight"
    expected = 0.0
    for tp in range(2):
        first = load_file(str(next((faulty / "weights").glob(f"debug-2-pp0-tp{tp}-*-after-*.safetensors"))))
        last = load_file(str(next((faulty / "weights").glob(f"debug-2-pp1-tp{tp}-*-after-*.safetensors"))))
        expected = max(expected, float((first[name].double() - last[name].double()).abs().max()))
    assert expected > 0 and tied["max_abs"] == pytest.approx(expected, rel=1e-12)
    audit = found[("param groups", "tied_modules.embed.norm.weight")]
    assert "torch.nn.modules.normalization.LayerNorm" in audit["detail"] and "weight_decay=0.1" in audit["detail"]
    assert not any(k == "param groups" and n != "tied_modules.embed.norm.weight" for k, n in found)
    code, text, _ = _cli(["check", str(faulty / "weights")])
    assert "[tied copies] tied_modules.embed.word_embeddings.weight on pp=1 (all tp), max |diff|" in text
