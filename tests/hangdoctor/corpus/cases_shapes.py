"""Shape cases: hangs reported in public threads on GPUs (NCCL, vLLM, SGLang, DeepSpeed), reproduced by our own
stand-in programs whose py-spy stacks have the same shape (fixtures/corpus/shapes/, see hdshape.py there), and
recorded with real py-spy like the live cases. Each case starts its job the way the report did: its launcher
(torch.distributed.launch, accelerate, `vllm serve`, `sglang.launch_server`, a Lightning script) runs from the
stand-in tree with that tree first on PYTHONPATH; a multi-node shape starts one launcher per node from a shell
(`sh` is no Python process: it is not dumped, as srun is not), each with HD_CORPUS_HOST naming its node.

The stand-in native libraries are compiled by the first process that needs them, into <repo>/build/corpus-shapes/
(ignored), never into the repository.
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
    when the launcher is the case's own program), HD_SHAPES_TREE naming the tree the ranks run. PYTHONSAFEPATH
    keeps the working directory (the case's tree, where the report ran its launcher from) off sys.path, so that
    `python -m torch.distributed.launch` finds the stand-in launcher, not the case's own stand-in torch."""
    path = os.pathsep.join([launcher_tree or tree(case), str(SHAPES), str(REPO)])
    return {"PYTHONPATH": path, "HD_SHAPES_TREE": tree(case), "PYTHONSAFEPATH": "1", **extra}


def nodes(case: str, hosts: list[str], per_node: str) -> tuple[str, ...]:
    """`sh -c` that starts `per_node` (a shell command; `{node_rank}` in it is the node's index) once per host,
    each with HD_CORPUS_HOST set, from the case's tree, and waits for them."""
    lines = [f"cd {shlex.quote(tree(case))}"]
    for index, host in enumerate(hosts):
        lines.append(f"HD_CORPUS_HOST={shlex.quote(host)} {per_node.replace('{node_rank}', str(index))} &")
    lines.append("wait")
    return ("sh", "-c", "\n".join(lines))


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
