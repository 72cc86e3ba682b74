"""First-contact batch fdt (twenty-third first-contact round, part T): live cases from public programs and reports
(see each case.json). New to the corpus: a key-value-store wait on a key named from a per-rank timestamp, a
queue.join() left waiting by a dead uploader thread, an exponential-backoff sleep (base used as multiplier) before
monitored_barrier, an HTTP metrics POST without a timeout under the `deepspeed` launcher, a two-thread lock-order
deadlock inside one rank, and a sample packer that never emits."""

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


# Timestamp-named run folder computed on every rank (huggingface/trl#3233, facebookresearch/fairchem PR #137):
# rank 2 waits in TCPStore.get for a key under a later second; ranks 0-1 wait in DDP's constructor broadcast.
register(LiveCase("fdt_run_dir_stamp_store_key", torchrun(3, "fdt_run_dir_stamp_store_key.py"), ranks=3,
                  settle=2.0))

# accelerate launch; the main process's checkpoint uploader thread dies between get() and task_done()
# (RagnarGrootKoerkamp/BAPCtools PR #268, tilezen/tilequeue#131): process 0 waits in Queue.join(), 1-2 in
# wait_for_everyone.
register(LiveCase("fdt_accel_upload_queue_join_dead_worker",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(), "{fixtures}/fdt_accel_upload_queue_join_dead_worker.py"),
                  ranks=3, settle=2.0))

# torch.multiprocessing.spawn; a retry helper whose backoff uses the base as multiplier (huggingface/xet-core PR
# #893): rank 2 sleeps 9,000 s, ranks 0-1 wait in dist.monitored_barrier.
register(LiveCase("fdt_spawn_download_backoff_sleep", (PYTHON, "{fixtures}/fdt_spawn_download_backoff_sleep.py"),
                  ranks=3, settle=2.0))

# `deepspeed` launcher, ZeRO-1; rank 0 POSTs metrics to a tracker that never answers, with no timeout
# (comet-ml/issue-tracking#297, Yelp/task_processing PR #141): rank 0 in the socket read, ranks 1-2 in backward.
register(LiveCase("fdt_ds_tracker_post_no_timeout",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fdt_ds_tracker_post_no_timeout.py"), ranks=3, env=DS_ENV, settle=2.0))

# DDP, 4 ranks; an event log whose append path and flush thread take two locks in opposite orders
# (Foundry376/Mailspring-Sync PR #34): rank 1 deadlocks with itself, ranks 0, 2, 3 wait in backward.
register(LiveCase("fdt_flush_thread_lock_order", torchrun(4, "fdt_flush_thread_lock_order.py"), ranks=4,
                  settle=2.0))

# DDP over a sample packer that emits only exactly full bins (pytorch/torchtitan PR #4606): rank 2 spins in the
# packer on a caption shard, ranks 0-1 wait in backward.
register(LiveCase("fdt_titan_packer_exact_fill_spin", torchrun(3, "fdt_titan_packer_exact_fill_spin.py"), ranks=3,
                  settle=2.0))

# DDP; rank 0 scores validation with a multiprocessing.Pool whose worker is killed mid-task (huggingface/datasets
# PR #5976, python/cpython#96062): rank 0 waits in Pool.map for ever, ranks 1-2 in the epoch's barrier.
register(LiveCase("fdt_eval_pool_worker_killed", torchrun(3, "fdt_eval_pool_worker_killed.py"), ranks=3,
                  settle=2.0))

# DDP; asyncio shard prefetch whose semaphore slot leaks on a missing shard (python-telegram-bot PR #251): rank 1
# idles in the event loop, ranks 0 and 2 wait in the next epoch's backward.
register(LiveCase("fdt_async_prefetch_semaphore_leak", torchrun(3, "fdt_async_prefetch_semaphore_leak.py"), ranks=3,
                  settle=2.0))

# DDP; node B's leader forks a metrics exporter while holding the cache's fcntl.flock (ceph/ceph-qa-suite PR #583,
# brooklyncentral/clocker PR #382): rank 2 blocks in its next flock, held by its own child; ranks 0-1 in backward.
register(LiveCase("fdt_flock_inherited_by_exporter", torchrun(3, "fdt_flock_inherited_by_exporter.py"), ranks=3,
                  settle=2.0))
