"""First-contact batch fdx (twenty-fifth first-contact round, part X): live cases from public programs and reports
(see each case.json). New to the corpus: an import-time thread joined while it waits for the module lock, a Pipe recv() with the parent's own write end still
open (`accelerate launch`), a bounded queue's put() after its consumer thread died, a multiprocessing.Lock left held
by a SIGKILLed worker (`deepspeed` runner), ThreadPoolExecutor's `with` exit joining a worker stuck past
result(timeout), and a property re-taking a non-reentrant lock (4 ranks)."""

import socket
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

DS_ENV = {"DS_ACCELERATOR": "cpu"}


def _free_port() -> str:
    """`accelerate launch` and the `deepspeed` runner have no standalone rendezvous: a port nobody holds now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


# A plugin module starts a thread at import time and joins it; the thread imports the module (python/cpython#125037):
# rank 1 in Thread.join inside the import, ranks 0 and 2 in step 2's backward.
register(LiveCase("fdx_import_thread_join_plugin", torchrun(3, "fdx_import_thread_join_plugin.py"), ranks=3,
                  settle=2.0))

# accelerate launch; a forked stats child dies before sending and the parent kept the Pipe's write end
# (Bogdanp/dramatiq PR #707, python/cpython#118981): process 1 in Connection.recv, 0 and 2 in backward.
register(LiveCase("fdx_accel_pipe_writer_kept",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(), "{fixtures}/fdx_accel_pipe_writer_kept.py"),
                  ranks=3, settle=2.0))

# Rank 0's checkpoint writer thread dies; the bounded queue fills and put() blocks (apache/maven-indexer PR #314):
# rank 0 in Queue.put, ranks 1-2 in step 6's backward.
register(LiveCase("fdx_ckpt_queue_put_writer_died", torchrun(3, "fdx_ckpt_queue_put_writer_died.py"), ranks=3,
                  settle=2.0))

# `deepspeed` launcher, ZeRO-1; a forked worker is SIGKILLed holding a multiprocessing.Lock (birdnet-team/birdnet#73,
# python/cpython#88304): rank 2 in SemLock acquire, ranks 0-1 in the ZeRO gradient all-reduce.
register(LiveCase("fdx_ds_semlock_killed_holder",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fdx_ds_semlock_killed_holder.py"), ranks=3, env=DS_ENV, settle=2.0))

# `with ThreadPoolExecutor` around result(timeout): the exit joins the stuck worker (huggingface/smolagents#2464,
# PR #2465): rank 0 in shutdown's join, ranks 1-2 in backward.
register(LiveCase("fdx_judge_pool_with_exit_join", torchrun(3, "fdx_judge_pool_with_exit_join.py"), ranks=3,
                  settle=2.0))

# 4 ranks; a meter's get_and_reset() reads a property that re-takes the non-reentrant lock (apache/texera#4794):
# rank 3 in Lock.acquire, ranks 0-2 in backward.
register(LiveCase("fdx_meter_property_lock_reentry", torchrun(4, "fdx_meter_property_lock_reentry.py"), ranks=4,
                  settle=2.0))
