"""First-contact batch fdh (eighteenth first-contact round, part B): live cases from public programs and reports
(see each case.json), and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# TP=2 x DP=2 trainer whose data-parallel group is picked as dp_groups[rank // tp] (pytorch/pytorch#67600: a
# collective on a group the rank is not in returns at once), 4 ranks: ranks 1 and 2 skip the DP all_reduce and wait
# in the next step's TP all_reduce; ranks 0 and 3 wait in the DP all_reduce for them.
register(LiveCase("fdh_dp_group_index_noop", torchrun(4, "fdh_dp_group_index_noop.py"), ranks=4, settle=2.0))

# Lightning DDP, a Callback calling trainer.save_checkpoint() from a @rank_zero_only method
# (Lightning-AI/pytorch-lightning#10947), 3 ranks: rank 0 waits in save_checkpoint's closing barrier; ranks 1 and 2
# in the next step's SIGTERM-flag broadcast (_broadcast_sigterm_tensor).
register(LiveCase("fdh_lightning_save_ckpt_rank_zero", torchrun(3, "fdh_lightning_save_ckpt_rank_zero.py"), ranks=3,
                  settle=3.0))

# DDP re-ID trainer whose dataset's read_image retries an unreadable image until it opens
# (DTennant/reid_baseline_with_syncbn#6), 3 ranks: rank 1 spins in read_image on a truncated JPEG; ranks 0 and 2
# wait in step 2's backward (DDP gradient all_reduce).
register(LiveCase("fdh_reid_read_image_retry_spin", torchrun(3, "fdh_reid_read_image_retry_spin.py"), ranks=3,
                  settle=2.0))

# Multilingual evaluation with lazily imported per-language scoring plugins (python/cpython#125037: an import that
# starts a thread and joins it while the thread imports the same module hangs undetected), 3 ranks: only rank 1
# imports the Japanese plugin and deadlocks inside the import (main thread in join, warm-up thread on the import
# lock); ranks 0 and 2 wait in the score all_reduce. fdh_import_thread_plugin_ja.py is its helper module.
register(LiveCase("fdh_import_thread_join_deadlock", torchrun(3, "fdh_import_thread_join_deadlock.py"), ranks=3,
                  settle=2.0))


# Shape (EleutherAI/sae on 8 GPUs over NCCL, 4 ranks here): EleutherAI/sparsify PR #5, SaeTrainer.save() returns at
# once on every rank but 0 (layers not distributed) and only rank 0 reaches the dist.barrier() that ends it: rank 0
# waits in that barrier; ranks 1-3 go on training (NCCL all_reduces enqueue without blocking) and wait on the GPU at
# the next logging step's .item().
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fdh_sae_save_early_return_barrier",
    in_tree("fdh_sae_save_early_return_barrier",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 -m sae "
            "EleutherAI/pythia-160m togethercomputer/RedPajama-Data-1T-Sample --attn_implementation=eager"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fdh_sae_save_early_return_barrier", str(LAUNCHERS)),
))
