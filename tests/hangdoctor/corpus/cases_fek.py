"""First-contact batch fek (thirty-first first-contact round, part K): live hangs in PyTorch's own distributed
stack (see each case.json): an FSDP2 side encoder skipped by a rank whose batch lacks the optional input, a
hand-written pipeline whose last stage all-reduces its clipping norm before sending the input gradient back, a
rank still waiting on a stale dataset-cache lock while the others are inside dcp.load, and a script that asks for
its own tcp:// rendezvous under torchrun (TORCHELASTIC_USE_AGENT_STORE: every rank a client, no store server)."""

from tests.hangdoctor.corpus.cases_deepspeed import _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# FSDP2 two-input model, the encoder run only when the batch has the side input (pytorch/pytorch#148334): rank 1's
# batch has none at step 2: rank 1 in the first trunk block's all-gather; ranks 0, 2 in the encoder's all-gather.
register(LiveCase("fek_fsdp2_optional_encoder_skip", torchrun(3, "fek_fsdp2_optional_encoder_skip.py"), ranks=3,
                  settle=2.0))

# hand-written 3-stage pipeline (batch_isend_irecv) with global-norm clipping, the last stage clipping before it
# sends its input gradient back (pytorch/pytorch#120741): rank 2 in the clip's world all_reduce; ranks 1, 0 waiting
# on the gradient irecv from the next stage.
register(LiveCase("fek_pp_clip_norm_before_grad_send", torchrun(3, "fek_pp_clip_norm_before_grad_send.py"), ranks=3,
                  settle=2.0))

# resume: dataset cache behind a soft lock file, then dcp.load (pytorch/torchtitan#3065): rank 2 polls a stale
# shard2.lock (time.sleep); ranks 0, 1 inside dcp.load's collectives.
register(LiveCase("fek_dcp_load_stale_cache_lock", torchrun(3, "fek_dcp_load_stale_cache_lock.py"), ranks=3,
                  settle=2.0))

# an imagenet-style --dist-url tcp:// rendezvous under torchrun (pytorch/pytorch PR #191989): with
# TORCHELASTIC_USE_AGENT_STORE=True every rank builds a TCPStore client for the script's own port, no server: all
# ranks in init_process_group's store connect-retry; nobody at fault among them.
register(LiveCase("fek_torchrun_dist_url_agent_store",
                  torchrun(3, "fek_torchrun_dist_url_agent_store.py", "--dist-url", f"tcp://127.0.0.1:{_free_port()}"),
                  ranks=3, settle=2.0))

# torch.distributed.pipelining (PipelineStage + ScheduleGPipe) on a 2-D ("dp", "pp") mesh, replica 1's shard one
# batch short (msr-fiddle/pipedream#59): ranks 2, 3 in the end-of-training world barrier; ranks 0, 1 in step 3's
# dp gradient all_reduce ({0, 2} and {1, 3}).
register(LiveCase("fek_pipelining_dp_replica_short_shard", torchrun(4, "fek_pipelining_dp_replica_short_shard.py"),
                  ranks=4, settle=2.0))
