"""First-contact batch ffe (fortieth first-contact round, part E): live hangs from public reports in third-party
frameworks' own code paths (see each case.json)."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON


def _accelerate(nproc: int, script: str) -> tuple[str, ...]:
    return (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", str(nproc),
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", _free_port(), f"{{fixtures}}/{script}")


# accelerate's join_uneven_inputs with a per-step loss gather (huggingface/accelerate#684, torch's generic Join):
# process 2 (one batch short) in Join.__exit__'s shadow all-reduce; processes 0-1 in step 4's accelerate gather.
register(LiveCase("ffe_accel_join_uneven_step_gather", _accelerate(3, "ffe_accel_join_uneven_step_gather.py"),
                  ranks=3, settle=3.0))

# ignite's TerminateOnNan on an output dict whose logged label mean is NaN on one rank (ai2cm/ace PR #850): rank 1
# (terminated) in validation's MedianAbsoluteError all_gather; ranks 0 and 2 in iteration 4's DDP backward.
register(LiveCase("ffe_ignite_terminate_on_nan_label_stat", torchrun(3, "ffe_ignite_terminate_on_nan_label_stat.py"),
                  ranks=3, settle=3.0))

# a per-step FileLock taken by every rank of an SPMD launch (marin-community/marin#7080): rank 0 holds the lock and
# waits in the Accelerator's init_process_group rendezvous; ranks 1-2 poll the lock for ever.
register(LiveCase("ffe_accel_step_filelock_spmd_init", torchrun(3, "ffe_accel_step_filelock_spmd_init.py"), ranks=3,
                  settle=3.0))

# a streamed corpus whose shard reader retries a missing file for ever (huggingface/datasets#7440), Trainer with
# accelerate's batch dispatch: process 0 sleeps in the retry loop; processes 1-2 wait for the batch broadcast.
register(LiveCase("ffe_hf_trainer_stream_shard_retry_forever",
                  torchrun(3, "ffe_hf_trainer_stream_shard_retry_forever.py"), ranks=3, settle=3.0))

# a wall-clock checkpoint trigger checked on each rank's own clock (Lightning-AI/pytorch-lightning#6286, anemoi-core
# PR #1279), DeepSpeed ZeRO-3 under the `deepspeed` runner: rank 2 (clock ahead) in save_checkpoint's world barrier;
# ranks 0-1 in the next step's ZeRO-3 parameter all-gather (pre-forward hook).
register(LiveCase("ffe_ds_zero3_time_ckpt_local_clock",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/ffe_ds_zero3_time_ckpt_local_clock.py"), ranks=3, env=DS_ENV, settle=8.0))
