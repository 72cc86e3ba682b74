"""First-contact batch fec (twenty-seventh first-contact round, part C): live communication mismatches from public
reports (see each case.json): a worker that skips a batch on OOM and ends the epoch one gradient all_reduce short, an
eval-only call that reaches a cache-building barrier on rank 0 alone, validation run on the main process only whose
inference gathers every rank's predictions, and a last pipeline stage that skips sending a non-finite loss back to
the first stage."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# OOM recovered by skipping the batch (facebookresearch/fairseq PR #3989): rank 1 ends the epoch one flat-gradient
# all_reduce short and waits in the end-of-epoch barrier; ranks 0 and 2 in step 4's all_reduce (data-parallel group).
register(LiveCase("fec_fairseq_oom_skip_flat_grad_allreduce",
                  torchrun(3, "fec_fairseq_oom_skip_flat_grad_allreduce.py"), ranks=3, settle=2.0))

# load_and_cache_examples' closing barrier reached by the eval-only call on rank 0 (huggingface/transformers PR #1081):
# rank 0 in barrier; ranks 1-2 in store.wait for the eval result.
register(LiveCase("fec_hf_glue_eval_cache_barrier_rank0", torchrun(3, "fec_hf_glue_eval_cache_barrier_rank0.py"),
                  ranks=3, settle=2.0))

# validation inside `if is_main_process()` whose inference gathers every rank's predictions
# (facebookresearch/maskrcnn-benchmark#275): rank 0 in gather_object (gloo object group); ranks 1-2 in synchronize().
register(LiveCase("fec_maskrcnn_main_only_inference_gather", torchrun(3, "fec_maskrcnn_main_only_inference_gather.py"),
                  ranks=3, settle=2.0))

# last stage sends the loss back for logging only when finite (huggingface/nanotron PR #422): stage 0 in recv(src=2);
# stages 1-2 in the end-of-training barrier.
register(LiveCase("fec_nanotron_pp_loss_log_sendback", torchrun(3, "fec_nanotron_pp_loss_log_sendback.py"), ranks=3,
                  settle=2.0))

# a distributed streamer that broadcasts over the world, used by one TP group only (run-ai/runai-model-streamer#165),
# TP 2 x DP 2: ranks 0-1 in the streamer's world broadcast; ranks 2-3 in the DP-group broadcast of the loaded weights.
register(LiveCase("fec_runai_stream_world_bcast_tp_load", torchrun(4, "fec_runai_stream_world_bcast_tp_load.py"),
                  ranks=4, settle=2.0))

# hand-made sharding where the last rank takes the remainder, DDP on a data-parallel group, an end-of-epoch
# monitored_barrier (pytorch/pytorch PR #53773), torch.multiprocessing.spawn, 3 ranks: ranks 0-1 in monitored_barrier;
# rank 2 in its extra batch's backward.
register(LiveCase("fec_spawn_monitored_barrier_last_rank_remainder",
                  (PYTHON, "{fixtures}/fec_spawn_monitored_barrier_last_rank_remainder.py"), ranks=3, settle=2.0))
