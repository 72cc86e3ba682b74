"""First-contact batch fdv (twenty-fourth first-contact round, part V): live cases from public programs and reports
(see each case.json). New to the corpus: a remote debugger's accept() on a NaN guard, a SQLite busy wait on the same
process's own uncommitted write, a threading.Barrier left one party short by a dead decoder thread, a lost
Condition notify, open() of a FIFO nobody reads (PyTorch-Ignite), subprocess.run reading pipes a background
grandchild holds open (`deepspeed` launcher), a lock held by a suspended generator, and a Future waited on under
the lock its task needs (Lightning)."""

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


# NaN guard that opens a remote debugger port (NVIDIA/Megatron-LM PR #939, apoorvkh/torchrunx#67): rank 1 waits in
# socket.accept() for a client nobody starts; ranks 0 and 2 in step 3's backward.
register(LiveCase("fdv_remote_pdb_accept_nan", torchrun(3, "fdv_remote_pdb_accept_nan.py"), ranks=3, settle=2.0))

# Rank 0's SQLite run registry with a one-day busy timeout (optuna/optuna#497, #820): its second connection waits for
# the first connection's uncommitted write; ranks 1-2 in the epoch barrier.
register(LiveCase("fdv_sqlite_registry_second_conn", torchrun(3, "fdv_sqlite_registry_second_conn.py"), ranks=3,
                  settle=2.0))

# torch.multiprocessing.spawn; decoder threads meet at a threading.Barrier and one dies on a corrupt record
# (h2oai/datatable PR #2521, Quansight-Labs/free-threaded-compatibility#133): rank 2 waits in Barrier.wait, ranks
# 0-1 in the token-count all_reduce.
register(LiveCase("fdv_spawn_decode_thread_barrier", (PYTHON, "{fixtures}/fdv_spawn_decode_thread_barrier.py"),
                  ranks=3, settle=2.0))

# accelerate launch; a prefetcher's Condition waited on without a predicate loses the refill's notify on the
# process whose shard is cached (bshoshany/thread-pool PR #108, wpilibsuite/allwpilib PR #9423): process 1 in
# Condition.wait, 0 and 2 in the next epoch's backward.
register(LiveCase("fdv_accel_prefetch_lost_notify",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(), "{fixtures}/fdv_accel_prefetch_lost_notify.py"),
                  ranks=3, settle=2.0))

# PyTorch-Ignite, 4 ranks; the last local rank opens a metrics FIFO whose reader was never started
# (beave/sagan#16, nodejs/node#3628): rank 3 in open(), ranks 0-2 in backward.
register(LiveCase("fdv_ignite_fifo_sidecar_no_reader", torchrun(4, "fdv_ignite_fifo_sidecar_no_reader.py"), ranks=4,
                  settle=2.0))

# `deepspeed` launcher, ZeRO-1; rank 0's subprocess.run(capture_output=True) of a helper that backgrounds a server
# holding the pipes (gptme/gptme#3756, NousResearch/hermes-agent PR #12647, stripe/subprocess PR #39): rank 0 in
# Popen.communicate, ranks 1-2 in the ZeRO gradient all-reduce.
register(LiveCase("fdv_ds_setup_script_background_daemon",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fdv_ds_setup_script_background_daemon.py"), ranks=3, env=DS_ENV, settle=2.0))

# A shard reader's generator holds its lock while suspended at the epoch budget (dotnet/roslyn#76442, ipfs/helia PR
# #99): rank 2 joins a saver thread blocked on that lock; ranks 0-1 in the next epoch's backward.
register(LiveCase("fdv_generator_lock_snapshot_join", torchrun(3, "fdv_generator_lock_snapshot_join.py"), ranks=3,
                  settle=2.0))

# Lightning DDP under torchrun; a global-zero callback waits for an upload Future inside the lock the upload needs
# (apache/james-project PR #1048, d2iq-archive/marathon PR #5879): rank 0 in Future.result, ranks 1-2 in backward.
register(LiveCase("fdv_lightning_upload_future_under_lock", torchrun(3, "fdv_lightning_upload_future_under_lock.py"),
                  ranks=3, settle=3.0))
