"""First-contact batch fed (twenty-seventh first-contact round, part D): live hangs inside frameworks' own code paths
(see each case.json): DeepSpeed's save_checkpoint reached one gradient all-reduce early by a rank that dropped a
batch, a DCP Stateful whose state_dict() reduces only when it has data, and a DCP save on a new best validation loss
decided from a dist.reduce that only rank 0 receives."""

import socket
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

DS_ENV = {"DS_ACCELERATOR": "cpu"}


def _free_port() -> str:
    """The `deepspeed` runner has no standalone rendezvous: a port nobody holds now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


# per-rank batch drop before backward (deepspeedai/DeepSpeed#7495), ZeRO-1: rank 1 runs out one all-reduce early and
# waits in save_checkpoint's world barrier; ranks 0 and 2 in step 6's backward (ZeRO gradient all-reduce).
register(LiveCase("fed_ds_drop_batch_skip_backward",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fed_ds_drop_batch_skip_backward.py"), ranks=3, env=DS_ENV, settle=2.0))

# collective inside a DCP Stateful's state_dict() (pytorch/pytorch PR #114304): ranks 0-1 in the meter's all_reduce on
# the statistics group; rank 2 (empty validation shard) in dcp.save's plan gather on the world group.
register(LiveCase("fed_dcp_stateful_meter_reduce", torchrun(3, "fed_dcp_stateful_meter_reduce.py"), ranks=3,
                  settle=2.0))

# new-best save decided from dist.reduce(dst=0) (pytorch/pytorch#77562): rank 0 alone in dcp.save's plan gather;
# ranks 1-2 in epoch 3's backward (DDP all_reduce on the data-parallel group).
register(LiveCase("fed_ddp_best_save_reduce_dst0", torchrun(3, "fed_ddp_best_save_reduce_dst0.py"), ranks=3,
                  settle=2.0))
