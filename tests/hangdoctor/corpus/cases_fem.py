"""First-contact batch fem (thirty-first first-contact round, part M): two live hangs in bare torch.distributed
programs from public reports (see each case.json): a cross-rank batch norm on its own process group skipped by one
rank whose clip starts a new video (pytorch/pytorch#44957), and a hand-written batch generator whose `while True`
skips images without instances for ever on the rank whose shard has none (matterport/Mask_RCNN#1522)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# a batch norm synchronised over a dist.new_group, run only for clips with a previous clip of the same video
# (pytorch/pytorch#44957), DDP find_unused_parameters=True: rank 1 (first clip of a new video at step 3) skipped it
# and waits in backward (DDP all-reduce, world group); ranks 0, 2 in the batch norm's all_reduce (batch-norm group).
register(LiveCase("fem_syncbn_group_skipped_branch",
                  torchrun(3, "fem_syncbn_group_skipped_branch.py"), ranks=3, settle=2.0))

# Mask_RCNN-style data_generator (`while True`, skip images with no instances; matterport/Mask_RCNN#1522) over a
# rank-strided shard: rank 2's shard has no annotated image, so it spins in the generator (busy, no sleep); ranks
# 0, 1 in step 1's backward (DDP all-reduce).
register(LiveCase("fem_ddp_generator_skip_empty_annotations",
                  torchrun(3, "fem_ddp_generator_skip_empty_annotations.py"), ranks=3, settle=2.0))
