"""First-contact batch Z (fourteenth first-contact round, part Z): live cases from public programs and reports on
per-node MASTER_PORTs, a lock-order deadlock between a metrics registry and the logging handler, a node-local
multiprocessing.Barrier skipped by one rank, ... (see each case.json); and one shape case."""

import shlex

from tests.hangdoctor.corpus.live import FIXTURES, LiveCase, register, torchrun
from tests.support import PYTHON

# Two "nodes" whose job script each export MASTER_PORT=$(get_open_port) (pytorch/pytorch#76069), 3 ranks: node 1
# (ranks 0, 1) and node 2 (rank 2) point at different ports; rank 2 retries a port nobody listens on, rank 0 waits
# for the third worker in the store it hosts, rank 1 in the gloo rendezvous.
_PY = shlex.quote(PYTHON)
_FX = shlex.quote(str(FIXTURES / "fcz_slurm_node_port_mismatch.py"))
register(LiveCase(
    "fcz_slurm_node_port_mismatch",
    ("sh", "-c",
     f"P1=$({_PY} {_FX} --open-port); P2=$({_PY} {_FX} --open-port); export WORLD_SIZE=3 MASTER_ADDR=127.0.0.1; "
     f"HD_CORPUS_HOST=node1 RANK=0 LOCAL_RANK=0 MASTER_PORT=$P1 {_PY} {_FX} & sleep 0.3; "
     f"HD_CORPUS_HOST=node1 RANK=1 LOCAL_RANK=1 MASTER_PORT=$P1 {_PY} {_FX} & sleep 0.3; "
     f"HD_CORPUS_HOST=node2 RANK=2 LOCAL_RANK=0 MASTER_PORT=$P2 {_PY} {_FX} & wait"),
    ranks=3, settle=4.0))


# DDP trainer with a metrics registry whose __str__ takes its lock and a flusher thread that logs under that lock
# (storaged-project/blivet#1500, the same ABBA with the logging handler's lock), 3 ranks: on rank 1 the main thread
# (handler lock held, in __str__) and the flusher (registry lock held, in Handler.acquire) deadlock at step 3; ranks 0
# and 2 wait in step 3's DDP gradient all_reduce.
register(LiveCase("fcz_registry_logging_lock_order", torchrun(3, "fcz_registry_logging_lock_order.py"), ranks=3,
                  settle=2.5))

# mp.spawn with a multiprocessing.Barrier as the node-local main-process-first gate (martin-kukla/distributed-llm-
# code-samples test_mp_barrier_gpus.py; huggingface/transformers PR #12351), 3 ranks: rank 0's cache write fails and
# its except skips barrier.wait(); rank 0 waits in DDP's constructor, ranks 1 and 2 in Barrier.wait.
register(LiveCase("fcz_spawn_mp_barrier_main_first", (PYTHON, "{fixtures}/fcz_spawn_mp_barrier_main_first.py"),
                  ranks=3, settle=2.0))

# accelerate loop with a per-rank prediction writer thread whose except skips task_done() (RagnarGrootKoerkamp/
# BAPCtools PR #268, Rikorose/DeepFilterNet PR #245), 3 ranks: rank 2's step-4 dump fails, its main thread waits in
# queue.join() for ever; ranks 0 and 1 wait in accelerator.wait_for_everyone().
register(LiveCase("fcz_accel_writer_queue_join", torchrun(3, "fcz_accel_writer_queue_join.py"), ranks=3, settle=2.0))


# Shape (NCCL, 4 GPUs, torchrun; 8 in the thread): meta-pytorch/torchrec#189, a two-tower model with a torchrec
# sharded EmbeddingCollection trained on per-rank shards of unequal size: in the last epoch ranks 2 and 3 run out of
# batches one batch early and exit; ranks 0 and 1 wait in the user embedding's input_dist (the lengths all-to-all,
# host copy of the lengths) for peers that are gone.
from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402

register(LiveCase(
    "fcz_torchrec_uneven_batches_exit",
    in_tree("fcz_torchrec_uneven_batches_exit",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 "
            "src/main_torchrec.py"),
    ranks=4, shape=True, settle=3.0, env=shape_env("fcz_torchrec_uneven_batches_exit", str(LAUNCHERS)),
))
