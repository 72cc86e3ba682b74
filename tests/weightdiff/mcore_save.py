"""Real Megatron-Core `torch_dist` checkpoints for weightdiff's tests: megatron-core's own
`dist_checkpointing.save`, 2 processes (TP=2, or TP=1 and DP=2), gloo, CPU.

    python tests/weightdiff/mcore_save.py OUT

Each rank builds its tensor-parallel slice of a tiny GPT's state as Megatron-Core's layers describe it in
`sharded_state_dict()`: `ShardedTensor.from_rank_offsets` with the TP axis of each weight (the embedding and
QKV split by rows, the output projection by columns, layer norms replicated; replica_id (pp, tp rank where
replicated, dp rank), as Megatron's `make_sharded_tensor_for_checkpoint` sets it), the rng state as a
`ShardedObject` per (pp, tp) rank (replica_id: the dp rank), and the plain entries (args, iteration, checkpoint_version) that
go to `common.pt`. Saved as Megatron-LM's `save_checkpoint` does with `--ckpt-format torch_dist`:
`dist_checkpointing.save(state, OUT/NAME/iter_0000010, sharded_strategy=("torch_dist", 1))`, then rank 0 writes
`latest_checkpointed_iteration.txt`. Written:

    OUT/a, OUT/a2    the same state
    OUT/b            decoder.layers.0.self_attention.linear_qkv.weight[13, 2] + 1 (in tp rank 1's half)
    OUT/lr           the same tensors, args.lr 5e-4 instead of 1e-3 (common.pt only)
    OUT/tp1          a's tensors saved with TP=1, DP=2 (one rng state, not two; its args say so)
    OUT/full.pt      the whole tensors (rank 0, a torch.save), the reference

Megatron-Core (0.16.1) saves on CPU with two of its `torch.cuda` calls stubbed here (`stub_cuda`), in these
processes only: the writer's `torch.cuda.synchronize()` after its (non-blocking) copies of the tensors to CPU,
a no-op for tensors that are on CPU already, and `torch.cuda.current_device()` as the device of the one-element
failure flag it broadcasts after writing, made on CPU instead (gloo). Everything else is megatron-core's path.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import warnings

import numpy as np
import torch
import torch.distributed as dist

from tests.weightdiff.savers import spawn_gloo

ITERATION = 10
WORLD = 2  # processes: TP=2, or TP=1 with DP=2
HIDDEN, VOCAB, FFN = 8, 16, 32


def full_tensors(changed: bool) -> dict[str, torch.Tensor]:
    """The whole model: name -> (tensor), as one process would hold it."""
    g = torch.Generator().manual_seed(0)
    full = {
        "embedding.word_embeddings.weight": torch.randn(VOCAB, HIDDEN, generator=g),  # (vocab, h)
        "decoder.layers.0.self_attention.linear_qkv.weight": torch.randn(3 * HIDDEN, HIDDEN, generator=g),
        "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight": torch.ones(HIDDEN),
        "decoder.layers.0.self_attention.linear_proj.weight": torch.randn(HIDDEN, HIDDEN, generator=g),
        "decoder.layers.0.mlp.linear_fc1.weight": torch.randn(FFN, HIDDEN, generator=g).bfloat16(),
        "decoder.layers.0.mlp.linear_fc2.weight": torch.randn(HIDDEN, FFN, generator=g).bfloat16(),
        "decoder.final_layernorm.weight": torch.randn(HIDDEN, generator=g),
    }
    if changed:
        full["decoder.layers.0.self_attention.linear_qkv.weight"][13, 2] += 1.0
    return full


TP_AXIS = {  # the axis each weight is split on across tensor-parallel ranks (None: replicated)
    "embedding.word_embeddings.weight": 0,  # VocabParallelEmbedding
    "decoder.layers.0.self_attention.linear_qkv.weight": 0,  # ColumnParallelLinear
    "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight": None,
    "decoder.layers.0.self_attention.linear_proj.weight": 1,  # RowParallelLinear
    "decoder.layers.0.mlp.linear_fc1.weight": 0,
    "decoder.layers.0.mlp.linear_fc2.weight": 1,
    "decoder.final_layernorm.weight": None,
}


def sharded_state(tp: int, rank: int, changed: bool, lr: float) -> dict:
    """Rank `rank`'s state with TP=tp over the 2 processes (tp rank fastest, then dp, as Megatron orders them)."""
    from megatron.core.dist_checkpointing import ShardedObject, ShardedTensor

    dp_rank, tp_rank = divmod(rank, tp)
    model = {}
    for name, tensor in full_tensors(changed).items():
        axis = TP_AXIS[name]
        if axis is None or tp == 1:
            model[name] = ShardedTensor.from_rank_offsets(name, tensor.clone(), replica_id=(0, tp_rank, dp_rank))
        else:
            local = tensor.chunk(tp, dim=axis)[tp_rank].clone()
            model[name] = ShardedTensor.from_rank_offsets(name, local, (axis, tp_rank, tp),
                                                          replica_id=(0, 0, dp_rank))
    random.seed(1234)
    np.random.seed(1234)
    torch.manual_seed(1234)
    rng = [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
            "torch_rng_state": torch.get_rng_state(), "rng_tracker_states": {}}]
    args = argparse.Namespace(tensor_model_parallel_size=tp, pipeline_model_parallel_size=1,
                              data_parallel_size=WORLD // tp, hidden_size=HIDDEN, lr=lr, ckpt_format="torch_dist",
                              iteration=ITERATION)
    return {"args": args, "checkpoint_version": 3.0, "iteration": ITERATION, "model": model,
            "rng_state": ShardedObject("rng_state", rng, (1, tp), (0, tp_rank), replica_id=dp_rank),
            "num_floating_point_operations_so_far": 0}


def save(root: str, rank: int, *, tp: int = 2, changed: bool = False, lr: float = 1e-3) -> None:
    from megatron.core import dist_checkpointing

    folder = os.path.join(root, f"iter_{ITERATION:07d}")
    if rank == 0:
        os.makedirs(folder)
    dist.barrier()
    dist_checkpointing.save(sharded_state(tp, rank, changed, lr), folder, sharded_strategy=("torch_dist", 1))
    dist.barrier()
    if rank == 0:
        with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(ITERATION))


def stub_cuda() -> None:
    """The two CUDA calls of megatron-core's save path, for a CPU-only torch (see the module's docstring)."""
    torch.cuda.synchronize = lambda *args, **kwargs: None
    torch.cuda.current_device = lambda: "cpu"


def work(rank: int, out: str) -> None:
    stub_cuda()
    warnings.filterwarnings("ignore")  # Transformer Engine and Apex are not installed: expected here
    for name, options in (("a", {}), ("a2", {}), ("b", {"changed": True}), ("lr", {"lr": 5e-4}), ("tp1", {"tp": 1})):
        save(os.path.join(out, name), rank, **options)
    if rank == 0:
        torch.save(full_tensors(False), os.path.join(out, "full.pt"))


if __name__ == "__main__":
    spawn_gloo(work, WORLD, sys.argv[1])
