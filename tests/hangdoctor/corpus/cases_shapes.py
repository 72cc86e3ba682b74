"""Shape cases: hangs reported in public threads on GPUs (NCCL, vLLM, SGLang, DeepSpeed), reproduced by our own
stand-in programs whose py-spy stacks have the same shape (fixtures/corpus/shapes/, see hdshape.py there), and
recorded with real py-spy like the live cases. Each case starts its job the way the report did: its launcher
(torch.distributed.launch, accelerate, `vllm serve`, `sglang.launch_server`, a Lightning script) runs from the
stand-in tree with that tree first on PYTHONPATH; a multi-node shape starts one launcher per node from a shell
(`sh` is no Python process: it is not dumped, as srun is not), each with HD_CORPUS_HOST naming its node.

The stand-in native libraries are compiled by the first process that needs them, into <repo>/build/corpus-shapes/
(ignored), never into the repository. Record a case with `python -m tests.hangdoctor.corpus.record CASE`, then
derive its paste forms with `python -m tests.hangdoctor.corpus.pastes CASE`; case.json is written by hand.
"""

from __future__ import annotations

import os
import shlex

from tests.hangdoctor.corpus.live import FIXTURES, LiveCase, register
from tests.support import PYTHON, REPO

SHAPES = FIXTURES / "shapes"
LAUNCHERS = SHAPES / "launchers"


def tree(case: str) -> str:
    return str(SHAPES / case)


def shape_env(case: str, launcher_tree: str | None = None, **extra: str) -> dict[str, str]:
    """The launcher's environment: its own tree first on PYTHONPATH (the stand-in launchers, or the case's tree
    when the launcher is the case's own program), HD_SHAPES_TREE naming the tree the ranks run. With a separate
    launcher tree, PYTHONSAFEPATH keeps the working directory (the case's tree, where the report ran its launcher
    from) off sys.path, so that `python -m torch.distributed.launch` finds the stand-in launcher, not the case's own
    stand-in torch."""
    path = os.pathsep.join([launcher_tree or tree(case), str(SHAPES), str(REPO)])
    env = {"PYTHONPATH": path, "HD_SHAPES_TREE": tree(case), **extra}
    if launcher_tree:
        env["PYTHONSAFEPATH"] = "1"
    return env


def nodes(case: str, hosts: list[str], per_node: str) -> tuple[str, ...]:
    """`sh -c` that starts `per_node` (a shell command; `{node_rank}` in it is the node's index) once per host,
    each with HD_CORPUS_HOST set, from the case's tree, and waits for them."""
    lines = [f"cd {shlex.quote(tree(case))}"]
    for index, host in enumerate(hosts):
        lines.append(f"HD_CORPUS_HOST={shlex.quote(host)} {per_node.replace('{node_rank}', str(index))} &")
    lines.append("wait")
    return ("sh", "-c", "\n".join(lines))


def in_tree(case: str, command: str) -> tuple[str, ...]:
    """`sh -c 'cd TREE && exec COMMAND'`: the launcher runs from the case's tree, as the report ran it from its
    project folder (relative script paths in the ranks' frames), and is the job's first process."""
    return ("sh", "-c", f"cd {shlex.quote(tree(case))} && exec {command}")


# 1. BigScience 200B (the seed document): TP=8 PP=10 DP=4 on 40 nodes; the dumps cover 2 nodes x 8 ranks.
BLOOM_ARGS = ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 10 --num-layers 80 --hidden-size 14336 "
              "--num-attention-heads 112 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
              "--global-batch-size 64 --train-samples 300000000 --bf16 --deepspeed --deepspeed_config ds_config.json "
              "--zero-stage 0 --deepspeed-activation-checkpointing")
register(LiveCase(
    "bloom_200b",
    nodes("bloom_200b", ["jean-zay-iam01", "jean-zay-iam02"],
          f"{shlex.quote(PYTHON)} -u -m torch.distributed.launch --nproc_per_node 8 --nnodes 40 "
          f"--master_addr jean-zay-iam01 --master_port 6000 --node_rank {{node_rank}} pretrain_gpt.py {BLOOM_ARGS}"),
    ranks=16, shape=True, settle=2.0, env=shape_env("bloom_200b", str(LAUNCHERS)),
))


# 2. Mixtral-8x7B under `accelerate launch` with DeepSpeed ZeRO-3 on 8 GPUs (huggingface/accelerate#3104).
register(LiveCase(
    "ds_zero3_mixtral",
    in_tree("ds_zero3_mixtral",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'accelerate'))} launch "
            "src/model_back/healing/scripts/fine_tune_accelerate.py "
            "--config_file src/model_back/healing/configs/mixtral_8x7b/config.yaml"),
    ranks=8, shape=True, settle=2.0, env=shape_env("ds_zero3_mixtral", str(LAUNCHERS)),
))

# 3. vLLM 0.5.4 `vllm serve --tensor-parallel-size 4`, stuck at startup in pynccl's warm-up (vllm-project/vllm#12292).
register(LiveCase(
    "vllm_pynccl_p2p",
    in_tree("vllm_pynccl_p2p",
            f"{shlex.quote(PYTHON)} {shlex.quote(tree('vllm_pynccl_p2p') + '/bin/vllm')} serve "
            "/data/shujubu/models/deepseek-ai/DeepSeek-R1-Distill-Qwen-32B --tensor-parallel-size 4 "
            "--max-model-len 16384 --enforce-eager"),
    ranks=4, shape=True, settle=2.0, env=shape_env("vllm_pynccl_p2p"),
))

# 4. SGLang DeepSeek-V4-Flash + DSpark, TP=2 over 2 nodes: a rank-divergence deadlock (sgl-project/sglang#33289).
register(LiveCase(
    "sglang_dspark_tp2",
    nodes("sglang_dspark_tp2", ["spark-01", "spark-02"],
          f"{shlex.quote(PYTHON)} -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash-0731 --tp 2 "
          "--nnodes 2 --node-rank {node_rank} --dist-init-addr 192.168.100.10:20000 --speculative-algorithm DSPARK "
          "--trust-remote-code --mem-fraction-static 0.85 --host 0.0.0.0 --port 30000"),
    ranks=2, shape=True, settle=2.0, env=shape_env("sglang_dspark_tp2"),
))

# 5. Megatron-LM (late 2023), TP=2 PP=4, variable_seq_lengths: the shape exchange on the default group
#    (NVIDIA/Megatron-LM#620).
register(LiveCase(
    "megatron_shapes_world_group",
    in_tree("megatron_shapes_world_group",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 8 --nnodes 1 "
            "--master_addr localhost --master_port 6000 pretrain_gpt.py --tensor-model-parallel-size 2 "
            "--pipeline-model-parallel-size 4 --num-layers 24 --hidden-size 4096 --num-attention-heads 32 "
            "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8 --bf16"),
    ranks=8, shape=True, settle=2.0, env=shape_env("megatron_shapes_world_group", str(LAUNCHERS)),
))

# 6. Lightning 2.1 DDP on 2 GPUs: ModelCheckpoint with a metric logged rank_zero_only=True
#    (Lightning-AI/pytorch-lightning#19045).
register(LiveCase(
    "lightning_ckpt_rank_zero_log",
    in_tree("lightning_ckpt_rank_zero_log", f"{shlex.quote(PYTHON)} train.py +implementation=latent_diffusion_vae_debug"),
    ranks=2, shape=True, settle=2.0, env=shape_env("lightning_ckpt_rank_zero_log"),
))
