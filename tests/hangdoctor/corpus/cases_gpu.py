"""GPU cases: real hangs on a real GPU (CUDA, NCCL), recorded with real py-spy on a machine that has one.
They cannot run here: test_corpus_live.py leaves them out (`gpu=True`), and their recordings are analysed like
every other case's. Record one on a GPU machine with `python -m tests.hangdoctor.corpus.record CASE`."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("gpu_device_spin", torchrun(2, "gpu_device_spin.py"), ranks=2, gpu=True, settle=3.0))
register(LiveCase("gpu_nccl_init_straggler", torchrun(2, "gpu_nccl_init_straggler.py"), ranks=2, gpu=True,
                  settle=3.0, env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}))

# NCCL with every rank on the one GPU (fixtures/corpus/nccl_one_gpu.py: a host id per rank); each rank dumps its
# Flight Recorder while it hangs, and the recorder keeps the dumps (fr/) and joins them in attach/
NCCL_ONE_GPU = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "NCCL_SOCKET_IFNAME": "lo",
                "NCCL_IB_DISABLE": "1"}
register(LiveCase("gpu_nccl_ddp_data_stall", torchrun(2, "gpu_nccl_ddp_data_stall.py"), ranks=2, gpu=True,
                  settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("gpu_nccl_tp_skip_allreduce", torchrun(4, "gpu_nccl_tp_skip_allreduce.py"), ranks=4, gpu=True,
                  settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("gpu_nccl_pp_skip_send", torchrun(2, "gpu_nccl_pp_skip_send.py"), ranks=2, gpu=True,
                  settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
