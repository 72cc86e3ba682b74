"""The reference trainer's step: one `engine.train_batch()` of DeepSpeed's pipeline engine per step.

A single rank (world 1, gloo), built at import (untimed); the traced code is what a user would select in the
seed's situation, `trainer,deepspeed` (Megatron's and DeepSpeed's own Python), while torch stays unselected.
Needs torch and deepspeed, so it runs on the project's Python (3.11) only.
"""

from __future__ import annotations

import os
import socket


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=_free_port())

from trainer.config import TrainConfig  # noqa: E402
from trainer.data import replica_micro_batches  # noqa: E402
from trainer.distributed import identify_process, init_distributed, prepare_deepspeed_import  # noqa: E402
from trainer.engine import build_engine  # noqa: E402
from trainer.train import prepare  # noqa: E402

CONFIG = TrainConfig(num_layers=4, hidden_size=64, num_attention_heads=4, seq_length=32, vocab_size=128,
                     micro_batch_size=2, global_batch_size=8, train_iters=10**6, zero_stage=1)


def _engine():
    ctx = prepare(CONFIG, identify_process())
    prepare_deepspeed_import()
    init_distributed(120.0, 0)
    built = build_engine(CONFIG, ctx.dims, ctx.coords, ctx.faults)
    built.engine.set_dataiterator(replica_micro_batches(
        start_iteration=0, dp_rank=0, dp_size=1, micro_batch_size=CONFIG.micro_batch_size,
        grad_accum_steps=CONFIG.gradient_accumulation_steps(ctx.dims), seed=CONFIG.seed,
        seq_length=CONFIG.seq_length, vocab_size=CONFIG.vocab_size))
    return built.engine


ENGINE = _engine()


def step():
    return ENGINE.train_batch()
