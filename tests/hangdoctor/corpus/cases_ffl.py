"""First-contact batch ffl (forty-third first-contact round, part L): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a transformers Trainer callback that stops reading a
TextIteratorStreamer and joins the generation thread, an accelerate console prompt read by the main process only
before pad_across_processes, PyTorch-Ignite training on uneven per-process shard files whose short rank runs the
evaluator's EpochMetric all_gather, a Trainer whose evaluate() runs on the main process only and broadcasts its
metrics, and DeepSpeed's CPU comm-op JIT load waiting on a stale build lock on every rank."""

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# a main-process-only streamed sample whose reader stops at the first line and then joins the generation thread
# (huggingface/transformers#27927, PR #29536), transformers Trainer + DDP: rank 0 in Thread.join (its generation
# thread busy in generate); ranks 1 and 2 in step 3's Accelerator.gather.
register(LiveCase("ffl_hf_trainer_streamer_break_join_generate",
                  torchrun(3, "ffl_hf_trainer_streamer_break_join_generate.py"), ranks=3, settle=3.0))

# a main-process-only console prompt before pad_across_processes (huggingface/accelerate#1110), accelerate on CPU:
# rank 0 opening a console FIFO that no front-end writes; ranks 1 and 2 in pad_across_processes' size all_gather.
register(LiveCase("ffl_accel_console_prompt_pad_across",
                  torchrun(3, "ffl_accel_console_prompt_pad_across.py"), ranks=3, settle=3.0))

# per-process shard files of an IterableDataset, uneven (Lightning-AI/pytorch-lightning#20404, pytorch/ignite#1518),
# PyTorch-Ignite + DDP: rank 2 (3 shards of 11) ends its epoch first and runs the evaluator's MedianAbsoluteError
# all_gather; ranks 0 and 1 in batch 7's DDP backward.
register(LiveCase("ffl_ignite_shard_files_uneven_epoch_eval",
                  torchrun(3, "ffl_ignite_shard_files_uneven_epoch_eval.py"), ranks=3, settle=3.0))

# main-process-only evaluate() with its metrics broadcast to the others (huggingface/sentence-transformers PR #3994),
# transformers Trainer + DDP: rank 0 in evaluate()'s all_gather (prediction_step's item-count gather); ranks 1 and 2
# in broadcast_object_list from rank 0.
register(LiveCase("ffl_hf_trainer_main_only_evaluate_bcast_metrics",
                  torchrun(3, "ffl_hf_trainer_main_only_evaluate_bcast_metrics.py"), ranks=3, settle=3.0))

# a stale JIT-build lock left in the extensions cache by an earlier, killed run (deepspeedai/DeepSpeedExamples#302,
# huggingface/transformers#26015), DeepSpeed on CPU: every rank in FileBaton.wait inside init_distributed's
# shm-comm op load, before any process group exists. The shell recreates the leftover lock, then execs torchrun.
register(LiveCase("ffl_ds_init_shm_op_stale_build_lock",
                  ("/bin/sh", "-c",
                   'export TORCH_EXTENSIONS_DIR="$TMPDIR/torch_extensions"; '
                   'mkdir -p "$TORCH_EXTENSIONS_DIR/deepspeed_shm_comm" && '
                   ': > "$TORCH_EXTENSIONS_DIR/deepspeed_shm_comm/lock" && '
                   'exec "$0" -m torch.distributed.run --standalone --nproc-per-node=3 '
                   '"{fixtures}/ffl_ds_init_shm_op_stale_build_lock.py"', PYTHON),
                  ranks=3, env=DS_ENV, settle=4.0))
