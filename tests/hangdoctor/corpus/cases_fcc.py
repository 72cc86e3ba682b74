"""First-contact batch C (second round): live cases from public examples of DeepSpeed ZeRO-3 (a VLM on mixed data),
torch.distributed.checkpoint (async_save and a barrier on one group), accelerate without a Trainer (evaluation
gated by a main-process-only progress bar) and DDP's Join (a loss with its own collective), and a shape case from
a public Megatron-LM thread (MoE aux-loss tracker with MTP under pipeline parallelism). Each fixture names its
public source and thread in its docstring; each case.json in `source`/`thread`."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

DS_ENV = {"DS_ACCELERATOR": "cpu"}

register(LiveCase("fcc_ds_zero3_vlm_text_only", torchrun(3, "fcc_ds_zero3_vlm_text_only.py"), ranks=3, env=DS_ENV,
                  settle=2.0))
register(LiveCase("fcc_dcp_async_save_barrier", torchrun(3, "fcc_dcp_async_save_barrier.py"), ranks=3, settle=2.0))
register(LiveCase("fcc_accel_eval_progress_bar", torchrun(3, "fcc_accel_eval_progress_bar.py"), ranks=3, settle=2.0))
register(LiveCase("fcc_ddp_join_loss_gather", torchrun(3, "fcc_ddp_join_loss_gather.py"), ranks=3, settle=2.0))
