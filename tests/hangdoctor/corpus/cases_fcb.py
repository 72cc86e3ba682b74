"""First-contact batch B: live cases from public example programs of PyTorch Lightning, HF accelerate and
torch.distributed.pipelining, and shape cases from public threads (vLLM, SGLang, Megatron, verl/OpenRLHF,
torchtitan), each hung the way a public thread reports (see each case.json's source and thread)."""

import socket
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON


def _free_port() -> str:
    """`accelerate launch` has no standalone rendezvous: give it a port nobody holds now (its default is 29500)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


register(LiveCase("fcb_lightning_log_dir", torchrun(3, "fcb_lightning_log_dir.py"), ranks=3, settle=2.0))
# `accelerate launch --multi_gpu` on a machine without GPUs: the launcher runs torch's elastic agent in its own
# process (multi_gpu_launcher -> torch.distributed.run), and the ranks' Accelerator(cpu=True) uses gloo.
register(LiveCase("fcb_accel_main_first_pool",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(), "{fixtures}/fcb_accel_main_first_pool.py"),
                  ranks=3, settle=2.0))
register(LiveCase("fcb_pipe_eval_last_stage", torchrun(4, "fcb_pipe_eval_last_stage.py"), ranks=4, settle=2.0))


# Shape cases (fixtures/corpus/shapes/fcb_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, nodes, shape_env  # noqa: E402

# torchtitan (spring 2024) on 2 nodes x 4 GPUs with profiling on: at the profiler step the second node's ranks never
# finish writing their traces to the mounted storage (pytorch/torchtitan#266).
register(LiveCase(
    "fcb_torchtitan_profiler_dump",
    nodes("fcb_torchtitan_profiler_dump", ["titan-node-1", "titan-node-2"],
          f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nnodes 2 --nproc_per_node 4 "
          "--node_rank {node_rank} --rdzv_id 101 --rdzv_backend c10d --rdzv_endpoint titan-node-1:29500 "
          "./train.py --job.config_file ./train_configs/llama2_13b.toml"),
    ranks=8, shape=True, settle=2.0, env=shape_env("fcb_torchtitan_profiler_dump", str(LAUNCHERS)),
))

# vLLM 0.4.3 offline inference, TP=4 on Ray workers: TP worker 2 raises in its forward pass and leaves the execution
# loop; the driver waits on the GPU, workers 1 and 3 for the next step's broadcast (vllm-project/vllm#3455).
register(LiveCase(
    "fcb_vllm_ray_worker_error",
    in_tree("fcb_vllm_ray_worker_error", f"{shlex.quote(PYTHON)} offline_inference.py"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcb_vllm_ray_worker_error"),
))

# verl (spring 2026, FSDP) GRPO with use_dynamic_bsz on 4 GPUs: rank 2 gets 4 micro-batches, the others 5, because
# dp_actor passes no dp_group to prepare_dynamic_batch (verl-project/verl#6176).
VERL_ARGS = ("algorithm.adv_estimator=grpo data.train_files=/data/gsm8k/train.parquet "
             "data.val_files=/data/gsm8k/test.parquet data.train_batch_size=32 data.max_prompt_length=512 "
             "data.max_response_length=1024 actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct "
             "actor_rollout_ref.actor.strategy=fsdp actor_rollout_ref.actor.ppo_mini_batch_size=32 "
             "actor_rollout_ref.actor.use_dynamic_bsz=True actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1000 "
             "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4 trainer.n_gpus_per_node=4 "
             "trainer.nnodes=1 trainer.total_epochs=1")
register(LiveCase(
    "fcb_verl_dynamic_bsz",
    in_tree("fcb_verl_dynamic_bsz", f"{shlex.quote(PYTHON)} -m verl.trainer.main_ppo {VERL_ARGS}"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcb_verl_dynamic_bsz"),
))
