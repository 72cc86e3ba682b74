"""First-contact batch fdd (sixteenth first-contact round, part B): live cases from public programs and reports on
a pipelining stage built with another microbatch count, a git subprocess without a timeout before a metadata
broadcast, two zipped iterable sources with one rank's shard shorter, Megatron-style broadcast_data after the data
runs out on tensor-parallel rank 0 (see each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# torch.distributed.pipelining, 3 stages with ScheduleGPipe (pytorch/tutorials pipelining_tutorial.rst): the last
# stage's schedule takes n_microbatches=2 where stages 0 and 1 use 4; in step 0 rank 2 waits in its gradient send to
# stage 1, rank 1 in its forward sends of microbatches 2-3, rank 0 in its gradient receive.
register(LiveCase("fdd_pipelining_stage_microbatches", torchrun(3, "fdd_pipelining_stage_microbatches.py"), ranks=3,
                  settle=2.5))

# Rank 0 reads the commit and `git ls-remote origin` through subprocess.check_output without a timeout (the ssh
# remote never answers), 3 ranks: rank 0 waits in Popen.communicate; ranks 1 and 2 in broadcast_object_list(src=0).
register(LiveCase("fdd_git_metadata_broadcast", torchrun(3, "fdd_git_metadata_broadcast.py"), ranks=3, settle=2.5))

# Two sharded iterable sources zipped (sandyresearch/parcae#12's data-exhaustion hang), 3 ranks: rank 2's second
# source is one record shorter, its epoch has 3 batches, it waits in the pre-checkpoint barrier; ranks 0 and 1 wait in
# the 4th batch's DDP gradient all_reduce.
register(LiveCase("fdd_zip_iterable_short_shard", torchrun(3, "fdd_zip_iterable_short_shard.py"), ranks=3,
                  settle=2.0))

# Megatron-style broadcast_data from TP rank 0 (Megatron-LM tensor_parallel/data.py; modelscope/ms-swift#4644), TP=3:
# the iterator on TP rank 0 runs out, it catches StopIteration and waits in the pre-checkpoint barrier; TP ranks 1
# and 2 wait in broadcast_data's size broadcast.
register(LiveCase("fdd_megatron_broadcast_data_exhausted", torchrun(3, "fdd_megatron_broadcast_data_exhausted.py"),
                  ranks=3, settle=2.0))
