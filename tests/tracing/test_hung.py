"""A hung 4-rank job under `tracing run`: `tracing last` names the open frames of the stuck ranks, while they
hang and after they were SIGKILLed; `tracing diverge` finds where they parted. Pure Python, so it runs under every
Python the project supports (3.12/3.13 without torch or rich: --json)."""

from __future__ import annotations

import json

import pytest

from tests.support import PYTHON, child_env
from tests.tracing.helpers import FIXTURES, Background, last_json, pyenv_python, tracing_cli

ALL_REDUCE = ["<module>", "pretrain", "train", "all_reduce", "_block"]
BROADCAST = ["<module>", "pretrain", "train", "train_step", "_aggregate_total_loss", "broadcast", "_block"]


def start_ranks(bg: Background, python: str, out, ready, extra: list[str]) -> list:
    return [
        bg.start([python, "-m", "tracing", "run", "--include", "__main__", "--out", str(out), *extra, "--",
                  str(FIXTURES / "hung_ranks.py")],
                 env=child_env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="4", READY_DIR=str(ready)))
        for r in range(4)
    ]


def groups_by_ranks(report: dict) -> dict[str, dict]:
    return {g["ranks_text"]: g for g in report["groups"]}


@pytest.mark.parametrize("version", [None, "3.10.13", "3.12.1", "3.13.0"], ids=lambda v: v or "venv")
def test_last_names_open_frames_while_hung_and_after_kill(version, tmp_path):
    python = PYTHON if version is None else pyenv_python(version)
    out = tmp_path / "traces"
    with Background() as bg:
        procs = start_ranks(bg, python, out, tmp_path, ["--ring", "256"])
        bg.wait_for(lambda: all((tmp_path / f"ready-{r}").exists() for r in range(4)), 60, "all 4 ranks blocking")
        report = last_json(out, python=python)
        groups = groups_by_ranks(report)
        assert set(groups) == {"0-1", "2-3"}
        assert [f["qualname"] for f in groups["0-1"]["open_frames"]] == ALL_REDUCE
        assert [f["qualname"] for f in groups["2-3"]["open_frames"]] == BROADCAST
        assert groups["0-1"]["condition"] == groups["2-3"]["condition"] == "running"
        assert groups["2-3"]["summary"].endswith("_aggregate_total_loss > broadcast > _block")
        # The ring (256 events) wrapped long ago: `train` was entered thousands of events earlier, yet its frame
        # is known from the ring's stack slots.
        rank0 = next(r for r in report["ranks"] if r["rank"] == 0)
        assert rank0["total_events"] > 10 * 256
        assert rank0["threads"][0]["last_events"][-1]["function"]["qualname"] == "_block"

        bg.kill(procs[0])
        bg.kill(procs[2])
        report = last_json(out, python=python)
        conditions = {r["rank"]: r["condition"] for r in report["ranks"]}
        assert conditions == {0: "dead", 1: "running", 2: "dead", 3: "running"}
        dead0 = next(g for g in report["groups"] if g["ranks"] == [0])
        assert [f["qualname"] for f in dead0["open_frames"]] == ALL_REDUCE


def test_diverge_and_stream_only_traces(tmp_path):
    """Stream files alone carry the full history: open frames are replayed from it, and diverge finds the split."""
    out = tmp_path / "traces"
    with Background() as bg:
        start_ranks(bg, PYTHON, out, tmp_path, ["--ring", "0", "--stream"])
        bg.wait_for(lambda: all((tmp_path / f"ready-{r}").exists() for r in range(4)), 60, "all 4 ranks blocking")
        assert sorted(p.suffix for p in out.iterdir()) == [".txt"] * 4
        groups = groups_by_ranks(last_json(out))
        assert [f["qualname"] for f in groups["2-3"]["open_frames"]] == BROADCAST
        done = tracing_cli("diverge", str(out), "--json")
        assert done.returncode == 1, done.output  # 1: the ranks diverged
        report = json.loads(done.stdout)
        first = report["divergences"][0]
        assert first["ranks_text"] == "0-3"
        branches = {b["ranks_text"]: b for b in first["branches"]}
        assert branches["0-1"]["events"][0]["kind"] == "ret"
        assert branches["0-1"]["events"][0]["function"]["qualname"] == "train_step"
        assert [e["function"]["qualname"] for e in branches["2-3"]["events"]] == [
            "_aggregate_total_loss", "broadcast", "_block"]
        # The human view says the same.
        human = tracing_cli("diverge", str(out))
        said = " ".join(human.stdout.split())  # as one line, however the terminal wrapped it
        assert "First departure: event" in said and "ranks 2-3 called _aggregate_total_loss, then broadcast" in said
        text = tracing_cli("last", str(out)).stdout
        assert "ranks 2-3 (2 ranks) · running" in text
        assert "inside <module> > … > _aggregate_total_loss > broadcast > _block" in text
