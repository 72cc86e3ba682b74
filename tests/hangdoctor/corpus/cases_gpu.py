"""GPU cases: real hangs on a real GPU (CUDA, NCCL), recorded with real py-spy on a machine that has one.
They cannot run here: test_corpus_live.py leaves them out (`gpu=True`), and their recordings are analysed like
every other case's. Record one on a GPU machine with `python -m tests.hangdoctor.corpus.record CASE`."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("gpu_device_spin", torchrun(2, "gpu_device_spin.py"), ranks=2, gpu=True, settle=3.0))
register(LiveCase("gpu_nccl_init_straggler", torchrun(2, "gpu_nccl_init_straggler.py"), ranks=2, gpu=True,
                  settle=3.0, env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}))
