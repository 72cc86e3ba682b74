"""One hung run through the local torchrun launcher: the watchdog catches the skip-loss-broadcast hang,
`hangdoctor attach --local` (matching this run's ranks only) names both stages' waits, and then the whole
process tree is killed: torchrun's workers live in sessions of their own, none may be left behind."""

import json
import os
import re

import pytest

from tests.support import PYTHON, REPO, child_env, run_bounded

pytestmark = pytest.mark.slow
ENGINE = "deepspeed/runtime/pipe/engine.py"
MODEL = ("--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --vocab-size 64 "
         "--micro-batch-size 2 --global-batch-size 4 --train-iters 5")


def processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def test_a_hung_torchrun_run_is_diagnosed_then_killed_with_every_rank(tmp_path):
    out = tmp_path / "exp"
    result = run_bounded([
        PYTHON, "-m", "hangdoctor", "experiment", "--launcher", "torchrun", "--out", str(out),
        "--config", "pp2-hang=--pp 2 --gpus 2 --fault skip-loss-broadcast:iteration=3 --pg-timeout 300",
        "--common", MODEL, "--hang-timeout", "10", "--poll-interval", "0.5", "--warmup", "1", "--json",
    ], timeout=300, env=child_env(), cwd=REPO)
    assert result.returncode == 1, result.output[-5000:]
    run = json.loads(result.stdout)["runs"][0]
    assert (run["status"], run["last_iteration"], run["launcher"]) == ("hung", 3, "torchrun")
    assert re.search(r"\[1/1\] \S+: iteration 1/5 \(\S+ s/it, loss \S+\)", result.stderr), result.stderr[-3000:]
    assert run["measured_over"] == "median of iterations 2-3" and run["sec_per_it"] > 0  # figures before the hang
    verdict = json.loads((out / "runs" / run["run"] / "hangdoctor" / "verdict.json").read_text())
    assert verdict["headline"] == "HUNG: 2 ranks stuck, 2 in 2 calls (2/2 responded)"
    assert [p["position"] for p in verdict["places"]] == [
        f"broadcast <- PipelineEngine._aggregate_total_loss ({ENGINE})",
        f"recv <- PipelineEngine._exec_recv_activations ({ENGINE})"]
    assert verdict["source"].startswith("processes with HANGDOCTOR_EXPERIMENT_RUN=")
    assert re.fullmatch(r"killed [3-9] processes", run["stopped"])  # torchrun, its two ranks (and any helper)
    assert processes_mentioning(str(out)) == []
