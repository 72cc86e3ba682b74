"""First-contact batch fdj (nineteenth first-contact round, part A): live cases from public programs and reports
(see each case.json), and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Hand-written DDP loop with a best-checkpoint hook that all_gather_objects the scores only when this rank's own
# validation loss improved, 3 ranks: rank 1 alone improves after epoch 1 and waits in all_gather_object; ranks 0
# and 2 wait in the next epoch's first backward (DDP gradient all_reduce).
register(LiveCase("fdj_best_metric_gather_object", torchrun(3, "fdj_best_metric_gather_object.py"), ranks=3,
                  settle=2.0))

# Lightning DDP multi-task model logging one loss per task present in the batch with log_dict(sync_dist=True)
# (Lightning-AI/pytorch-lightning#19106), 3 ranks: rank 1 alone logs the extra "depth" key and waits in its reduce
# (_sync_ddp's barrier); ranks 0 and 2 wait in the backward's DDP gradient all_reduce.
register(LiveCase("fdj_lightning_log_dict_task_keys", torchrun(3, "fdj_lightning_log_dict_task_keys.py"), ranks=3,
                  settle=3.0))

# FSDP2 whose reshard_after_forward is picked per rank from its free memory, 3 ranks: rank 2 (less free memory)
# reshards and all-gathers the blocks again in backward; ranks 0 and 1 do not and wait in the reduce-scatter.
register(LiveCase("fdj_fsdp2_reshard_by_free_memory", torchrun(3, "fdj_fsdp2_reshard_by_free_memory.py"), ranks=3,
                  settle=2.0))

# DDP trainer whose background snapshot thread, triggered by each rank's own clock, holds the state lock while it
# all_gather_objects the ranks' states on a side group, 3 ranks: rank 1's thread fires alone and waits in the
# gather holding the lock, its main thread blocks on the lock at optimizer.step(); ranks 0 and 2 wait in the next
# step's backward (DDP gradient all_reduce).
register(LiveCase("fdj_snapshot_thread_state_lock", torchrun(3, "fdj_snapshot_thread_state_lock.py"), ranks=3,
                  settle=2.0))


# Shape (Megatron-LM with Megatron-FSDP, --ckpt-format fsdp_dtensor and optimizer CPU offload on 8 GPUs over NCCL,
# 4 ranks here): NVIDIA/Megatron-LM#4910 and PR #6573 (rank-local optimizer-state asymmetry): rank 3 holds no
# optimizer state for one parameter, skips that key's all_gather_object in uneven_dtensor.py and goes on to
# save_checkpoint's all_reduce (host read at .item()); ranks 0-2 wait in the key's all_gather_object (its size read).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fdj_megatron_fsdp_ckpt_optim_key_skew",
    in_tree("fdj_megatron_fsdp_ckpt_optim_key_skew",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 "
            "pretrain_gpt.py --use-megatron-fsdp --ckpt-format fsdp_dtensor --optimizer-cpu-offload "
            "--use-distributed-optimizer --save-interval 5 --sft --mock-data"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fdj_megatron_fsdp_ckpt_optim_key_skew", str(LAUNCHERS)),
))
