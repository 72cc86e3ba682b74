"""The training loop: one DeepSpeed `train_batch` per iteration, Megatron's log line, checkpoints, weight dumps.

Each iteration, on every rank: set the fault clock, dump weights (before), `engine.train_batch`, dump weights
(after), and every `save_interval` iterations a collective checkpoint save. The last global rank prints the
Megatron-DeepSpeed line and appends the exact loss to RUN/metrics.jsonl (as Megatron's `print_rank_last`).
With `--flight-recorder DIR`, an exception that leaves training first dumps each rank's Flight Recorder there.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from hangdoctor.topology import ParallelDims, RankCoords
from hangdoctor.throughput.flops import megatron_tflops
from hangdoctor.throughput.logline import IterationStats, format_iteration_line
from trainer import flight_recorder
from trainer.config import TrainConfig
from trainer.data import replica_micro_batches
from trainer.distributed import ProcessIdentity, init_distributed, prepare_deepspeed_import, use_cuda
from trainer.engine import BuiltEngine, build_engine
from trainer.faults import FaultInjector


@dataclass
class RunContext:
    cfg: TrainConfig
    ident: ProcessIdentity
    dims: ParallelDims
    coords: RankCoords
    faults: FaultInjector
    iteration: int = 0

    @property
    def run_dir(self) -> Path:
        return Path(self.cfg.run_dir)

    @property
    def is_logging_rank(self) -> bool:
        return self.ident.rank == self.ident.world_size - 1


def prepare(cfg: TrainConfig, ident: ProcessIdentity) -> RunContext:
    """Validate everything that can be validated before any process group exists. Raises ValueError."""
    dims = cfg.validate(ident.world_size)
    _check_run_dir(Path(cfg.run_dir), cfg.resume)
    coords = dims.coords(ident.rank)
    faults = FaultInjector(cfg.faults, dims=dims, coords=coords, embed_layernorm=cfg.embed_layernorm,
                           forward_passes_per_iteration=cfg.gradient_accumulation_steps(dims))
    return RunContext(cfg, ident, dims, coords, faults)


def _check_run_dir(run_dir: Path, resume: bool) -> None:
    """A run folder that holds an earlier run is continued with --resume, never silently written over: its
    config.json, its metrics and its checkpoints' `latest` would be replaced or mixed with this run's."""
    if resume:
        return
    earlier = [name for name in ("config.json", "metrics.jsonl") if (run_dir / name).exists()]
    earlier += [f"{name}/" for name in ("checkpoints", "weights")
                if (run_dir / name).is_dir() and any((run_dir / name).iterdir())]
    if earlier:
        raise ValueError(f"--run-dir {run_dir} holds an earlier run ({', '.join(earlier)}): pass --resume to "
                         f"continue it, or a new --run-dir")


def _quiet_deepspeed() -> None:
    warnings.filterwarnings("ignore", message=".*autograd kernel was not registered.*")
    warnings.filterwarnings("ignore", message=".*all_gather_into_tensor. is deprecated.*")
    from deepspeed.utils import logger

    logger.setLevel(logging.WARNING)


def _write_config(ctx: RunContext) -> None:
    import deepspeed
    import torch

    d = ctx.dims
    ctx.cfg.write_json(
        ctx.run_dir / "config.json",
        world_size=d.world_size, dp=d.dp, dims={"tp": d.tp, "pp": d.pp, "dp": d.dp, "order": "-".join(d.axes)},
        padded_vocab_size=ctx.cfg.padded_vocab_size, launcher=ctx.ident.launcher,
        backend="nccl" if use_cuda() else "gloo", torch_version=torch.__version__, deepspeed_version=deepspeed.__version__,
    )


def _dump_weights(ctx: RunContext, built: BuiltEngine, tag: str) -> None:
    cfg = ctx.cfg
    if tag not in cfg.dump_weights or ctx.iteration % cfg.dump_interval:
        return
    import weightdiff

    weightdiff.dump(built.engine.module, iteration=ctx.iteration, tag=tag, out=ctx.run_dir / "weights",
                    coords=ctx.coords, param_groups=built.groups_by_name, mode=cfg.dump_mode)


def _log_iteration(ctx: RunContext, loss: float, seconds: float, built: BuiltEngine) -> None:
    cfg, engine = ctx.cfg, built.engine
    grad_norm = built.global_grad_norm()
    stats = IterationStats(
        iteration=ctx.iteration, train_iters=cfg.train_iters,
        consumed_samples=ctx.iteration * cfg.global_batch_size,
        consumed_tokens=ctx.iteration * cfg.global_batch_size * cfg.seq_length,
        elapsed_ms=seconds * 1000.0, learning_rate=engine.get_lr()[0], global_batch_size=cfg.global_batch_size,
        lm_loss=loss, grad_norm=grad_norm, seq_length=cfg.seq_length,
        samples_per_second=cfg.global_batch_size / seconds,
        tflops=megatron_tflops(
            global_batch_size=cfg.global_batch_size, seq_length=cfg.seq_length, num_layers=cfg.num_layers,
            hidden_size=cfg.hidden_size, vocab_size=cfg.padded_vocab_size,
            activation_checkpointing=cfg.checkpoint_activations, seconds_per_iteration=seconds,
            num_gpus=ctx.dims.world_size,
        ),
    )
    if ctx.iteration % cfg.log_interval == 0:
        print(format_iteration_line(stats), flush=True)
    with open(ctx.run_dir / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"iteration": ctx.iteration, "loss": loss, "elapsed_ms": stats.elapsed_ms,
                             "grad_norm": stats.grad_norm, "tflops": stats.tflops}) + "\n")


def train(ctx: RunContext) -> None:
    """Start torch.distributed, then build and train; with --flight-recorder, a failure first dumps the FR."""
    cfg = ctx.cfg
    if cfg.flight_recorder:  # before any process group exists, or torch records nothing
        flight_recorder.enable(cfg.flight_recorder, buffer_size=cfg.fr_buffer_size, rank=ctx.ident.rank)
    prepare_deepspeed_import()
    _quiet_deepspeed()
    init_distributed(cfg.pg_timeout, ctx.ident.local_rank)
    with flight_recorder.dump_on_error(cfg.flight_recorder or None, ctx.ident.rank):
        _build_and_train(ctx)


def _build_and_train(ctx: RunContext) -> None:
    cfg = ctx.cfg
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    if ctx.ident.rank == 0:
        _write_config(ctx)
        print(f"trainer: {ctx.dims.describe()}, ZeRO-{cfg.zero_stage}, {cfg.num_layers} layers x hidden "
              f"{cfg.hidden_size}, GBS {cfg.global_batch_size} = MBS {cfg.micro_batch_size} x GAS "
              f"{cfg.gradient_accumulation_steps(ctx.dims)} x DP {ctx.dims.dp}, faults: {cfg.faults or 'none'}",
              file=sys.stderr, flush=True)
    built = build_engine(cfg, ctx.dims, ctx.coords, ctx.faults)
    engine = built.engine
    checkpoints = ctx.run_dir / "checkpoints"
    if cfg.resume:
        path, _ = engine.load_checkpoint(str(checkpoints))
        if path is None:
            raise ValueError(f"--resume: no checkpoint under {checkpoints}")
    start = engine.global_steps
    engine.set_dataiterator(replica_micro_batches(
        start_iteration=start, dp_rank=ctx.coords.dp, dp_size=ctx.dims.dp, micro_batch_size=cfg.micro_batch_size,
        grad_accum_steps=cfg.gradient_accumulation_steps(ctx.dims), seed=cfg.seed, seq_length=cfg.seq_length,
        vocab_size=cfg.vocab_size,
    ))
    for iteration in range(start + 1, cfg.train_iters + 1):
        ctx.iteration = ctx.faults.iteration = iteration
        _dump_weights(ctx, built, "before")
        began = time.perf_counter()
        loss = float(engine.train_batch())
        seconds = time.perf_counter() - began
        _dump_weights(ctx, built, "after")
        if ctx.is_logging_rank:
            _log_iteration(ctx, loss, seconds, built)
        if cfg.save_interval and iteration % cfg.save_interval == 0:
            engine.save_checkpoint(str(checkpoints))
