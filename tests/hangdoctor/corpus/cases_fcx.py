"""First-contact batch X (thirteenth first-contact round, part X): live cases from public programs and reports on a
ring exchange with blocking sends first on every rank, a Lightning validation_step that returns early before
self.all_gather, a DeepSpeed ZeRO-3 GatheredParameters entered by rank 0 only, a rank that exits early while the
others wait on a store key it would have set (see each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# 1-D halo exchange on a ring with blocking dist.send before dist.recv on every rank (NVIDIA/nccl#479), 3 ranks:
# every rank waits in its first send; nobody is at fault more than the others.
register(LiveCase("fcx_ring_halo_send_first", torchrun(3, "fcx_ring_halo_send_first.py"), ranks=3, settle=2.0))

# Lightning DDP whose validation_step returns early for a batch with no labelled token, before self.all_gather
# (Lightning-AI/pytorch-lightning#702, #20561), 3 ranks: rank 1's batch 1 is all padding; rank 1 waits in
# on_validation_epoch_end's self.log(sync_dist=True) barrier, ranks 0 and 2 in their last batch's all_gather.
register(LiveCase("fcx_lightning_val_empty_all_gather", torchrun(3, "fcx_lightning_val_empty_all_gather.py"),
                  ranks=3, settle=3.0))

# Distributed detector evaluation with a custom torchmetrics Metric whose per-image list states have
# dist_reduce_fx=None, over 8 files sharded 3/3/2 across 3 ranks (Lightning-AI/torchmetrics#626): compute() syncs
# each list element with its own collectives; rank 2 (2 images) finishes early and waits in the next all_reduce,
# ranks 0 and 1 in the sync (gather_all_tensors' barrier) of their third image.
register(LiveCase("fcx_torchmetrics_list_state_uneven", torchrun(3, "fcx_torchmetrics_list_state_uneven.py"),
                  ranks=3, settle=2.0))

# DDP trainer whose DataLoader worker_init_fn broadcasts an augmentation seed from rank 0 (meta-pytorch/data#868,
# pytorch/pytorch PR #85279), num_workers per rank (only rank 0 streams its shard: 1 worker), 3 ranks: rank 0's
# worker waits in the broadcast, rank 0 in the DataLoader's queue, ranks 1 and 2 in step 0's gradient all_reduce.
register(LiveCase("fcx_worker_init_seed_broadcast", torchrun(3, "fcx_worker_init_seed_broadcast.py"), ranks=3,
                  settle=2.0))


# Shape (NCCL, 3 GPUs, torchrun): pytorch/pytorch#44957's video model under DDP with SyncBatchNorm, whose forward
# skips modelB on a clip's first frame; rank 1's clip is shorter: at step 3 it skips modelB; ranks 0 and 2 wait in
# modelB's SyncBatchNorm forward (host copy after the all-gather), rank 1 at step 4 in modelA's.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fcx_syncbn_skipped_branch",
    in_tree("fcx_syncbn_skipped_branch",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 3 "
            "train_video.py"),
    ranks=3, shape=True, settle=3.0, env=shape_env("fcx_syncbn_skipped_branch", str(LAUNCHERS)),
))
