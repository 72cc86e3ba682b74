"""First-contact batch fdf (seventeenth first-contact round, part B): live cases from public programs and reports
(see each case.json)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# Lightning DDP, a best-model callback runs trainer.test() from on_fit_end on the main process only
# (roboflow/rf-detr#1505), 3 ranks: rank 0 waits in trainer.test's log_dir broadcast (broadcast_object_list);
# ranks 1 and 2 returned from fit and wait in the script's barrier after it.
register(LiveCase("fdf_lightning_fit_end_test_main", torchrun(3, "fdf_lightning_fit_end_test_main.py"), ranks=3,
                  settle=3.0))

# torch.multiprocessing.spawn DDP job sharing rank 0's vocabulary through a Manager (dict + Event) made by the parent
# (pytorch/pytorch#32322's event shared with mp.spawn workers), 3 ranks: rank 0's vocabulary build fails, its except
# path never sets the Event and it waits in DDP's constructor; ranks 1 and 2 wait in the managed Event's wait().
register(LiveCase("fdf_spawn_manager_vocab_event", (PYTHON, "{fixtures}/fdf_spawn_manager_vocab_event.py"), ranks=3,
                  settle=2.0))

# accelerate loop whose end-of-epoch save is `if is_main_process: save else: wait_for_everyone()`
# (huggingface/accelerate#2690), 3 ranks: rank 0 saves and goes on to epoch 1, waiting in its first DDP gradient
# all_reduce; ranks 1 and 2 wait in wait_for_everyone()'s barrier.
register(LiveCase("fdf_accel_save_else_wait", torchrun(3, "fdf_accel_save_else_wait.py"), ranks=3, settle=2.5))

# Epoch-end metric sync by all_reduce + Work.wait(timeout=2 s), retried on timeout (elasticdl PR #2446's retry of a
# timed-out allreduce; pytorch/pytorch#37571's Work.wait timeout), 3 ranks: rank 1 (small validation shard) times
# out first and keeps issuing new all_reduces (wait 2 s, back off 1 s); ranks 0 and 2 joined the first one, which
# completed, and wait in the next barrier.
register(LiveCase("fdf_allreduce_wait_timeout_retry", torchrun(3, "fdf_allreduce_wait_timeout_retry.py"), ranks=3,
                  settle=2.0))
