"""First-contact batch fdf (seventeenth first-contact round, part B): live cases from public programs and reports
(see each case.json)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Lightning DDP, a best-model callback runs trainer.test() from on_fit_end on the main process only
# (roboflow/rf-detr#1505), 3 ranks: rank 0 waits in trainer.test's log_dir broadcast (broadcast_object_list);
# ranks 1 and 2 returned from fit and wait in the script's barrier after it.
register(LiveCase("fdf_lightning_fit_end_test_main", torchrun(3, "fdf_lightning_fit_end_test_main.py"), ranks=3,
                  settle=3.0))
