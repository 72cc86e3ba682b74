"""First-contact batch J (sixth first-contact round, part J): live cases from public reports on a world-collective
new_group() entered by only some ranks (llm-compressor), a torch.distributed.pipelining stage that skips a step, an
accelerate evaluation loop over uneven per-rank eval shards, and a DataLoader worker forked while a thread held a
lock; and a shape case from a public thread; see each case.json's source and thread."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# vllm-project/llm-compressor PR #2869 (review: new_group is collective over the world), 3 ranks: the extended-timeout
# helper's new_group(backend="gloo") is entered by the module owners 0 and 1 only; they wait in the gloo group's
# store rendezvous, rank 2 (owns no module) waits in the broadcast of the compressed weights.
register(LiveCase("fcj_new_group_subset", torchrun(3, "fcj_new_group_subset.py"), ranks=3, settle=2.0))

# pytorch/tutorials pipelining tutorial (PipelineStage per rank) with Schedule1F1B, 3 stages, and allenai/OLMo-core
# PR #657's all-ignore_index batch: the last stage (rank 2) skips that step locally, ends one step early and waits in
# the final barrier; ranks 0-1 wait in their last schedule step's pipeline p2p (rank 1 on its send to 2).
register(LiveCase("fcj_pipe_last_stage_skip", torchrun(3, "fcj_pipe_last_stage_skip.py"), ranks=3, settle=2.0))

# accelerate's no_trainer loop with DataLoaderConfiguration(even_batches=False) on the eval set (huggingface/accelerate
# PR #776) and the freeze of Chris-hughes10/pytorch-accelerated PR #53, 3 ranks: rank 2 has one eval batch fewer and
# waits in the epoch checkpoint's wait_for_everyone; ranks 0-1 wait in gather_for_metrics' all_gather.
register(LiveCase("fcj_accel_uneven_eval_shards", torchrun(3, "fcj_accel_uneven_eval_shards.py"), ranks=3, settle=2.0))

# pytorch/pytorch#24927 and #130610 (a lock held by another thread when the DataLoader forks its workers), DDP with
# num_workers=1, 3 ranks: rank 1's stats-uploader thread holds the stats lock when the worker is forked; the worker
# waits on its copy for ever, rank 1 waits in the DataLoader, ranks 0 and 2 in DDP's gradient all_reduce.
register(LiveCase("fcj_dataloader_fork_held_lock", torchrun(3, "fcj_dataloader_fork_held_lock.py"), ranks=3,
                  settle=2.0))
