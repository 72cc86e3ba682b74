"""First-contact batch H (fourth first-contact round, part H): live cases from public reports on PyTorch Lightning
(a prepare_data that calls a download helper ending in a world barrier), a torchtitan-style FSDP2 loop (an
out-of-memory handler that runs a collective) and a torchrun elastic restart whose resume reads a checkpoint file
some nodes cannot see yet (torch.distributed.checkpoint + a rank-0 train-state file), and shape cases from public
threads on DeepSpeed-Chat's step-3 generation under ZeRO-3 and OpenRLHF's weight-sync group with a dead vLLM engine,
each hung the way its public thread reports (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# facebookresearch/mmf PR #921 with Lightning 2.x's _InfiniteBarrier, 3 ranks: prepare_data (rank 0 only) calls a
# download helper that ends in dist.barrier().
register(LiveCase("fch_lightning_prepare_data_barrier", torchrun(3, "fch_lightning_prepare_data_barrier.py"),
                  ranks=3, settle=3.0))

# pytorch/pytorch#44353, mosaicml/composer PR #2117 in a torchtitan-style FSDP2 loop, 3 ranks: rank 1's logits do
# not fit, its OOM handler skips the batch and all-reduces a "skip" flag the others never send.
register(LiveCase("fch_titan_oom_skip_allreduce", torchrun(3, "fch_titan_oom_skip_allreduce.py"), ranks=3,
                  settle=2.0))

# KempnerInstitute/KempnerForge#49 (CheckpointManager.load's per-rank train_state.pt exists() before PR #50) after a
# torchrun elastic restart, 2 "nodes" x 2 ranks: node 1's NFS client still remembers train_state.pt as missing.
from tests.hangdoctor.corpus.live import TORCHRUN  # noqa: E402

register(LiveCase("fch_elastic_resume_stale_train_state",
                  (*TORCHRUN, "--max-restarts=1", "--nproc-per-node=4",
                   "{fixtures}/fch_elastic_resume_stale_train_state.py"),
                  ranks=4, settle=2.0, start_timeout=300.0))


# Shape cases (fixtures/corpus/shapes/fch_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import shape_env, tree  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# DeepSpeed-Chat step 3 (June 2023) on 4 GPUs, ZeRO-3 for every model, generate without synced_gpus
# (deepspeedai/DeepSpeed#3550, fixed by DeepSpeedExamples PR #636): rank 2's answers end first; it leaves generate
# and waits in the reward model's parameter fetch, ranks 0, 1, 3 in the actor's fetch of their next generation step.
DSCHAT_ARGS = ("--data_path Dahoas/rm-static --data_split 2,4,4 --actor_model_name_or_path facebook/opt-1.3b "
               "--critic_model_name_or_path /data/step2_output/opt-350m --num_padding_at_beginning 1 "
               "--per_device_generation_batch_size 4 --per_device_training_batch_size 4 --max_answer_seq_len 256 "
               "--max_prompt_seq_len 256 --actor_zero_stage 3 --critic_zero_stage 3 "
               "--output_dir /data/step3_output")
register(LiveCase(
    "fch_dschat_zero3_generate",
    ("sh", "-c", f"cd {shlex.quote(tree('fch_dschat_zero3_generate'))}/training/step3_rlhf_finetuning && exec "
                 f"{shlex.quote(PYTHON)} {shlex.quote(tree('fch_dschat_zero3_generate') + '/bin/deepspeed')} "
                 f"--num_gpus 4 main.py {DSCHAT_ARGS}"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fch_dschat_zero3_generate"),
))

# NeMo r1.21 GPT pretraining (PyTorch Lightning 2.0), TP=4 on 8 GPUs, one SLURM task per GPU: after a day of training
# every rank waits on its GPU, ranks 0-5 in training_step's self.log (__to_tensor's copy of the lr to the GPU), ranks
# 6-7 in the step timer's torch.cuda.synchronize() at on_train_batch_end (Lightning-AI/pytorch-lightning#18857's
# py-spy dumps). The tasks are started by a shell (srun: no Python launcher), in rank order.
NEMO_ARGS = ("--config-path=conf --config-name=megatron_gpt_config trainer.devices=8 trainer.num_nodes=1 "
             "trainer.max_steps=300000 model.tensor_model_parallel_size=4 model.pipeline_model_parallel_size=1 "
             "model.micro_batch_size=1 model.global_batch_size=256 exp_manager.log_step_timing=True")
_NEMO_DIR = tree("fch_nemo_gpt_log_h2d_hang") + "/examples/nlp/language_modeling"
register(LiveCase(
    "fch_nemo_gpt_log_h2d_hang",
    ("sh", "-c", f"cd {shlex.quote(_NEMO_DIR)}\n"
                 "for i in 0 1 2 3 4 5 6 7; do\n"
                 f"  SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NTASKS=8 {shlex.quote(PYTHON)} megatron_gpt_pretraining.py "
                 f"{NEMO_ARGS} &\n"
                 "done\nwait"),
    ranks=8, shape=True, settle=2.0, env=shape_env("fch_nemo_gpt_log_h2d_hang"),
))
