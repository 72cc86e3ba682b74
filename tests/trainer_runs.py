"""Real runs of the reference trainer, launched at most once per test session and shared between suites.

A DeepSpeed launch costs 10-30 s on these 2-core machines, so the trainer's own tests and weightdiff's
end-to-end tests inspect the same runs: `trainer_runs.get("pp2dp2_save")` launches on first use and caches.
Resume runs start from a copy of their parent's checkpoints, so the parent's folder is never modified.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import PYTHON, Finished, child_env, run_bounded

MODEL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
         "--vocab-size", "128", "--micro-batch-size", "2", "--global-batch-size", "8"]


@dataclass(frozen=True)
class RunSpec:
    nproc: int
    args: list[str]
    expect_ok: bool = True
    resume_from: str | None = None  # name of the run whose checkpoints this one resumes from
    timeout: float = 240
    flight_recorder: bool = False  # add --flight-recorder RUN_DIR/fr


@dataclass
class TrainerRun:
    name: str
    run_dir: Path
    result: Finished
    spec: RunSpec = field(repr=False)

    def losses(self) -> dict[int, float]:
        path = self.run_dir / "metrics.jsonl"
        if not path.exists():
            return {}
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return {row["iteration"]: row["loss"] for row in rows}

    def metric(self, key: str) -> dict[int, float]:
        rows = [json.loads(line) for line in (self.run_dir / "metrics.jsonl").read_text().splitlines()]
        return {row["iteration"]: row[key] for row in rows}

    def elapsed_ms(self) -> dict[int, float]:
        return self.metric("elapsed_ms")

    def grad_norms(self) -> dict[int, float]:
        return self.metric("grad_norm")

    @property
    def weights(self) -> Path:
        return self.run_dir / "weights"

    @property
    def flight_recorder(self) -> Path:
        return self.run_dir / "fr"


# Every run compared with the single-process reference clips at this norm. The reference's grad norm is above it
# at every iteration (0.75-0.94 with --embed-layernorm, 1.42-1.78 without), so clipping acts at every step.
CLIP_GRAD = 0.5
CLIP = ["--clip-grad", str(CLIP_GRAD)]

EMBED_NORM_RUN = ["--pp", "2", "--embed-layernorm", "--train-iters", "6", "--dump-weights", "before,after", *CLIP,
                  *MODEL]

# Loss and grad-norm equivalence with the single-process reference (3 iterations each, clipping on).
PARITY_RUNS = ["tp2", "pp2", "dp2_zero1", "pp2tp2", "pp2dp2_save", "dp2tp2", "pp2tp2dp2_zero0", "dp2_zero0"]

RUNS: dict[str, RunSpec] = {
    "tp2": RunSpec(2, ["--tp", "2", "--embed-layernorm", "--train-iters", "3", *CLIP, *MODEL]),
    # ZeRO-0 under PP clips by the trainer's own global norm (trainer/grad_clip.py): DeepSpeed's is wrong there.
    "pp2": RunSpec(2, ["--pp", "2", "--zero-stage", "0", "--train-iters", "3", "--checkpoint-activations", *CLIP,
                       *MODEL]),
    "dp2_zero1": RunSpec(2, ["--zero-stage", "1", "--train-iters", "3", *CLIP, *MODEL]),
    "pp2tp2": RunSpec(4, ["--pp", "2", "--tp", "2", "--embed-layernorm", "--train-iters", "3", *CLIP, *MODEL,
                          "--partition-method", "type:transformer|embedding", "--dump-weights", "after"]),
    "dp2tp2": RunSpec(4, ["--tp", "2", "--zero-stage", "1", "--embed-layernorm", "--train-iters", "3", *CLIP, *MODEL]),
    # All three axes at once, 8 ranks (about 25 s), ZeRO-0: DeepSpeed's norm was 41% too high here.
    "pp2tp2dp2_zero0": RunSpec(8, ["--pp", "2", "--tp", "2", "--zero-stage", "0", "--embed-layernorm",
                                   "--train-iters", "3", *CLIP, *MODEL]),
    "dp2_zero0": RunSpec(2, ["--zero-stage", "0", "--train-iters", "3", *CLIP, *MODEL]),
    # PP=2 x DP=2 with ZeRO-1: 6 iterations, a checkpoint at 4, weights dumped around every iteration.
    "pp2dp2_save": RunSpec(4, [*EMBED_NORM_RUN, "--save-interval", "4"]),
    "pp2dp2_resume": RunSpec(4, [*EMBED_NORM_RUN, "--resume"], resume_from="pp2dp2_save"),
    "pp2dp2_resume_embed_norm_not_saved": RunSpec(
        4, [*EMBED_NORM_RUN, "--resume", "--fault", "embed-norm-not-saved"], resume_from="pp2dp2_save"),
    # Three independent symptoms in one launch: tied copies drift, the embedding norm is decayed, rank 1 is slow.
    "tied_alias_straggler": RunSpec(2, [
        "--pp", "2", "--embed-layernorm", "--train-iters", "4", "--dump-weights", "after", *MODEL,
        "--fault", "no-tied-grad-reduce", "--fault", "layernorm-alias",
        "--fault", "straggler:rank=1,iteration=3,seconds=2"]),
    # The seed's hang: the last stage skips the loss broadcast at iteration 2; gloo ends it after 10 s, and
    # each rank dumps its Flight Recorder on the way out.
    "hang_pp2": RunSpec(2, ["--pp", "2", "--train-iters", "4", "--pg-timeout", "10", *MODEL,
                            "--fault", "skip-loss-broadcast:iteration=2"], expect_ok=False, timeout=120,
                        flight_recorder=True),
    "dead_rank": RunSpec(2, ["--pp", "2", "--train-iters", "4", "--pg-timeout", "20", *MODEL,
                             "--fault", "dead-rank:rank=1,iteration=2"], expect_ok=False, timeout=120),
}


def torchrun_command(nproc: int, run_dir: Path, args: list[str]) -> list[str]:
    return [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "trainer", "--run-dir", str(run_dir), *args]


class TrainerRuns:
    def __init__(self, base: Path):
        self.base = base
        self._done: dict[str, TrainerRun] = {}

    def get(self, name: str) -> TrainerRun:
        if name not in self._done:
            self._done[name] = self._launch(name, RUNS[name])
        return self._done[name]

    def _launch(self, name: str, spec: RunSpec) -> TrainerRun:
        run_dir = self.base / name
        if spec.resume_from:
            parent = self.get(spec.resume_from)
            shutil.copytree(parent.run_dir / "checkpoints", run_dir / "checkpoints")
        args = [*spec.args, "--flight-recorder", str(run_dir / "fr")] if spec.flight_recorder else spec.args
        result = run_bounded(torchrun_command(spec.nproc, run_dir, args), timeout=spec.timeout, env=child_env())
        if spec.expect_ok and result.returncode != 0:
            raise AssertionError(f"trainer run {name} failed (exit {result.returncode}):\n{result.output[-6000:]}")
        return TrainerRun(name, run_dir, result, spec)
