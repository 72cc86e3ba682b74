"""First-contact batch fev (thirty-sixth first-contact round, part V): live hangs in PyTorch's own distributed stack
and programs built directly on it (see each case.json): a pipeline stage with no monitored layer that skips a layer
monitor's all_gather_object, ZeroRedundancyOptimizer.consolidate_state_dict called from a rank-0-only checkpoint
function, a torch.distributed.checkpoint load whose custom reader communicates on an I/O group while the rank whose
fetch failed shares its error, a metrics monitor whose log hook takes the lock its caller holds, and a random IoU crop
that never accepts a crop for a zero-area box."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# a layer monitor whose aggregate() returns early on a stage with no monitored layer (bo-ke/llm-internal-medicine
# PR #45): stages 0-1 in all_gather_object (world); stage 2 (head only) in step 1's recv(src=1).
register(LiveCase("fev_pp_layer_monitor_empty_stage_gather", torchrun(3, "fev_pp_layer_monitor_empty_stage_gather.py"),
                  ranks=3, settle=2.0))

# ZeroRedundancyOptimizer.consolidate_state_dict inside a rank-0-only save (pytorch/ignite#2623): rank 0 in the
# consolidation's broadcast (ZeRO group); ranks 1-2 in step 2's DDP backward (default group).
register(LiveCase("fev_zero_consolidate_rank0_checkpoint", torchrun(3, "fev_zero_consolidate_rank0_checkpoint.py"),
                  ranks=3, settle=2.0))

# dcp.load with a reader that all_reduces on an I/O group inside read_data (pytorch/pytorch#122529): rank 2's fetch
# fails and it waits in DCP's error all_gather_object (default group); ranks 0-1 in the reader's all_reduce (I/O group).
register(LiveCase("fev_dcp_load_reader_fetch_error_io_group",
                  torchrun(3, "fev_dcp_load_reader_fetch_error_io_group.py"), ranks=3, settle=2.0))

# a metrics monitor that logs under its lock while a log hook takes the same lock (sugar-org/swarm-external-secrets#125):
# rank 1 in snapshot()'s lock acquire (its own main thread holds it); ranks 0, 2 in step 3's DDP backward.
register(LiveCase("fev_ddp_metrics_monitor_log_hook_relock", torchrun(3, "fev_ddp_metrics_monitor_log_hook_relock.py"),
                  ranks=3, settle=2.0))

# a random IoU crop with no attempt limit and a zero-area box (lightly-ai/lightly-train PR #320): rank 1 busy in the
# transform (DataLoader, num_workers=0); ranks 0, 2 in step 2's DDP backward.
register(LiveCase("fev_ddp_iou_crop_retry_degenerate_box", torchrun(3, "fev_ddp_iou_crop_retry_degenerate_box.py"),
                  ranks=3, settle=2.0))
