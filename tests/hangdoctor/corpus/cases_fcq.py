"""First-contact batch Q (ninth first-contact round, part Q): live cases from public programs and reports on an
evaluation collective queued behind a stuck upload on a one-worker ThreadPoolExecutor, two process groups used in
a different order on one rank, ... (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# ThreadPoolExecutor evaluation with an all_reduce (pytorch/pytorch#115861), 3 ranks: rank 2's single worker is
# stuck in a log upload (socket recv), its evaluation never runs; ranks 0-1's workers wait in the all_reduce.
register(LiveCase("fcq_threadpool_eval_collective", torchrun(3, "fcq_threadpool_eval_collective.py"), ranks=3,
                  settle=2.0))

# Two groups issued in a rank-divergent order (meta-pytorch/torchrec#4149), 3 ranks: rank 2 waits in the replicate
# group's all_reduce, ranks 0-1 in the shard group's all_to_all_single.
register(LiveCase("fcq_pg_order_two_groups", torchrun(3, "fcq_pg_order_two_groups.py"), ranks=3, settle=2.0))

DS_ENV = {"DS_ACCELERATOR": "cpu"}

# DeepSpeed ZeRO-2 on per-rank shard files of unequal size (deepspeedai/DeepSpeed#2223), 3 ranks: rank 2 has one
# batch more and waits in its gradient reduction; ranks 0-1 finished the epoch and wait in save_checkpoint's barrier.
register(LiveCase("fcq_ds_uneven_shard_batches", torchrun(3, "fcq_ds_uneven_shard_batches.py"), ranks=3, env=DS_ENV,
                  settle=3.0))

# torchrun --nnodes=3 --rdzv-backend=c10d with only 2 agents started (pytorch/pytorch#81313): both agents wait in the
# rendezvous; no trainer starts, so no rank writes a marker (ranks=0: the recorder waits `settle` seconds instead).
import shlex  # noqa: E402

from tests.support import PYTHON  # noqa: E402

_AGENT = (f"{shlex.quote(PYTHON)} -m torch.distributed.run --nnodes=3 --nproc-per-node=1 --rdzv-backend=c10d "
          "--rdzv-endpoint=127.0.0.1:29517 --rdzv-id=fcq-rdzv --rdzv-conf=join_timeout=300 "
          "{fixtures}/fcq_rdzv_missing_node.py")
register(LiveCase("fcq_rdzv_missing_node",
                  ("sh", "-c", f"HD_CORPUS_HOST=node1 {_AGENT} & sleep 2; HD_CORPUS_HOST=node2 {_AGENT} & wait"),
                  ranks=0, settle=12.0))


# Shape case (fixtures/corpus/shapes/fcq_*; see cases_shapes.py for the mechanism).
from tests.hangdoctor.corpus.cases_shapes import nodes, shape_env  # noqa: E402

# sgl-project/sglang PR #23185 (Kimi-K2 with EP+DP+TP and DeepEP: DeepGEMM's compile of all Ms runs only on the first
# rank of each node, nodes compile at different speeds, the ranks that went on wait in DeepEP's internode dispatch
# until its CPU timeout), 2 nodes x 2 GPUs: node2's first rank (rank 2) is still compiling in layer 0's dense GEMM;
# ranks 0, 1 and 3 wait in layer 1's DeepEP dispatch. Launchers: each node's `python -m sglang.launch_server`.
SKEW_ARGS = ("--model-path moonshotai/Kimi-K2-Instruct --trust-remote-code --tp 4 --dp 4 --enable-dp-attention "
             "--moe-a2a-backend deepep --chunked-prefill-size 262144 --nnodes 2 --node-rank {node_rank} "
             "--dist-init-addr node1:5000")
register(LiveCase(
    "fcq_sglang_deepgemm_compile_skew",
    nodes("fcq_sglang_deepgemm_compile_skew", ["node1", "node2"],
          f"{shlex.quote(PYTHON)} -m sglang.launch_server {SKEW_ARGS}"),
    ranks=4, shape=True, settle=3.0, env=shape_env("fcq_sglang_deepgemm_compile_skew"),
))
