"""Helper fdq's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fdq_nccl_gather_layer_backward_skipped_contrastive",
                  torchrun(3, "fdq_nccl_gather_layer_backward_skipped_contrastive.py"), ranks=3, gpu=True,
                  settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fdq_nccl_all_gather_flat_preds_dynamic_pad",
                  torchrun(3, "fdq_nccl_all_gather_flat_preds_dynamic_pad.py"), ranks=3, gpu=True,
                  settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
