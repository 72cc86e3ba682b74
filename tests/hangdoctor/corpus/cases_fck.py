"""First-contact batch K (sixth first-contact round, part K): live cases from public reports and programs on a
pipeline whose last stage receives without a tag (tags honoured by gloo, ignored by NCCL), a feature cache built
under a cross-process FileLock whose save helper ends in a barrier, composer-style checkpoint download on local rank
zero while the other ranks busy-wait for its signal file, and DDP multi-dataset training whose per-dataset head goes
unused on one rank; and a shape case from a public thread (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# pytorch/pytorch#94819 (NCCL ignores send/recv tags, gloo matches on them), 3 ranks: stages tag their activations
# with the micro-batch index; the last stage's receive has no tag: rank 2 waits in recv(tag=0) for micro-batch 1,
# rank 1 in send(tag=1), rank 0 in send(tag=2).
register(LiveCase("fck_p2p_tag_untagged_recv", torchrun(3, "fck_p2p_tag_untagged_recv.py"), ranks=3, settle=2.0))

# HF transformers' legacy cached-features FileLock + a cache_save helper that barriers first, 3 ranks: rank 0 holds
# the lock and waits in the barrier, ranks 1-2 wait in FileLock.acquire.
register(LiveCase("fck_filelock_cache_barrier", torchrun(3, "fck_filelock_cache_barrier.py"), ranks=3, settle=2.0))

# mosaicml/composer's local_rank_zero_download_and_wait (PR #2054/#2071), 3 ranks: local rank 0's checkpoint GET
# stalls in the HTTP response read; ranks 1-2 busy-wait (sleep 0.1 s) for its signal file.
register(LiveCase("fck_local_rank0_download_spin", torchrun(3, "fck_local_rank0_download_spin.py"), ranks=3,
                  settle=2.0))

# lhotse-speech/lhotse#554 (multi-dataset training, one head per dataset, DDP hangs unless find_unused_parameters),
# 3 ranks: rank 1's last batch of the epoch has no GigaSpeech sample, its reducer never launches the gradient
# all_reduce and it waits in validation's barrier; ranks 0 and 2 wait in DDP's gradient all_reduce.
register(LiveCase("fck_ddp_multidataset_unused_head", torchrun(3, "fck_ddp_multidataset_unused_head.py"), ranks=3,
                  settle=2.0))


# Shape case (fixtures/corpus/shapes/fck_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# RLinf/RLinf#1539 (fixed by PR #1540): PPO for an embodied policy with actor, rollout and env collocated, FSDP
# full_shard, PatchWeightSyncer's init-sync at the first sync_model_to_rollout; scaled to 4 GPUs (the report had 8),
# env workers left out. Actor rank 0 (the weight sender) broadcasts bucket 1 to the rollout workers; actor ranks 1-3
# skipped the send and wait in bucket 2's full_tensor all-gather (host side spinning in NCCL, on the AsyncIO thread);
# the rollout workers wait in the broadcast; the driver waits in update_rollout_weights.
RLINF_ARGS = ("--config-path examples/embodiment/config --config-name maniskill_ppo_openvlaoft "
              "cluster.num_nodes=1 actor.fsdp_config.sharding_strategy=full_shard")
register(LiveCase(
    "fck_rlinf_init_sync_runahead",
    in_tree("fck_rlinf_init_sync_runahead",
            f"{shlex.quote(PYTHON)} examples/embodiment/train_embodied_agent.py {RLINF_ARGS}"),
    ranks=8, shape=True, settle=2.0, env=shape_env("fck_rlinf_init_sync_runahead"),
))
