"""First-contact batch G (fourth first-contact round, part G): live cases from public reports on the DDP tutorial
trainer (a crashed rank that cannot exit: a non-daemon thread), the minGPT DDP trainer (a NaN detector that drops one
rank into torch.distributed.breakpoint under --local-ranks-filter), lm-evaluation-harness under accelerate
(batch_size auto:2 re-detecting on one rank only) and DeepSpeed-MoE expert-parallel generation (one rank stops
decoding first), and a shape case from a public thread on Ray Train's TorchTrainer with Lightning (the checkpointing
guide's rank-guarded save_checkpoint), each hung the way its public thread reports (see each case.json's source and
thread)."""

import socket
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON


def _free_port() -> str:
    """`accelerate launch` has no standalone rendezvous: give it a port nobody holds now (its default is 29500)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


# lincc-frameworks/hyrax PR #1011 + mlc-ai/pith-train PR #31 in the DDP tutorial trainer, 3 ranks: rank 1 raises on a
# corrupt sample and cannot exit (a non-daemon monitor thread); 0 and 2 wait in DDP's gradient all_reduce.
register(LiveCase("fcg_ddp_crash_nondaemon_exit", torchrun(3, "fcg_ddp_crash_nondaemon_exit.py"), ranks=3,
                  settle=2.0))

# drisspg/transformer_nuggets PR #46 + pytorch/torchtitan#652 in the minGPT DDP trainer, 3 ranks: rank 1's loss is NaN,
# its NaN detector calls torch.distributed.breakpoint(rank=1) under --local-ranks-filter 0; 0 and 2 wait in backward.
# `sleep` piped into torchrun stands for the terminal nobody types into (the ranks inherit it as stdin; pdb reads it).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.live import FIXTURES  # noqa: E402

register(LiveCase(
    "fcg_ddp_nan_breakpoint_filtered",
    ("sh", "-c", f"sleep 330 | exec {shlex.quote(PYTHON)} -m torch.distributed.run --standalone --nproc-per-node=3 "
                 f"--local-ranks-filter 0 {shlex.quote(str(FIXTURES / 'fcg_ddp_nan_breakpoint_filtered.py'))}"),
    ranks=3, settle=2.0,
))

# EleutherAI/lm-evaluation-harness#1743 (batch_size auto:2 under `accelerate launch`), 3 ranks: rank 1 has an odd number
# of reordered requests and re-detects its batch size alone at its last request (the detection's gather); 0 and 2
# wait in evaluate's barrier.
register(LiveCase("fcg_accel_autobatch_regather",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(), "{fixtures}/fcg_accel_autobatch_regather.py"),
                  ranks=3, settle=2.0))

# deepspeedai/DeepSpeed#6634 on DeepSpeedExamples' MoE setup, 3 ranks (EP=3): rank 2's prompts are longest, it stops
# generating first and waits in all_gather_object; 0 and 1 wait in the MoE layer's dispatch all-to-all.
register(LiveCase("fcg_ds_moe_generate_early_stop", torchrun(3, "fcg_ds_moe_generate_early_stop.py"), ranks=3,
                  env={"DS_ACCELERATOR": "cpu"}, settle=2.0))


# Shape case (fixtures/corpus/shapes/fcg_*; see cases_shapes.py for the mechanism).
from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402

# Ray Train V2 TorchTrainer + Lightning on 4 GPU workers, the checkpointing guide's callback with its rank guard
# (ray-project/ray#56997): workers 1-3 wait in Trainer.save_checkpoint's NCCL barrier, worker 0 in ray.train.report's
# SynchronizationActor barrier; the driver, the TrainController and the SynchronizationActor are processes too.
register(LiveCase(
    "fcg_ray_train_lightning_report_ckpt",
    in_tree("fcg_ray_train_lightning_report_ckpt", f"{shlex.quote(PYTHON)} train.py"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcg_ray_train_lightning_report_ckpt"),
))
