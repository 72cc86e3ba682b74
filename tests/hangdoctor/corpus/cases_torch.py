"""Live corpus cases on CPU with torch.distributed (gloo): DDP, async work handles, FileBaton, DataLoader workers,
a busy rank, and a torch.multiprocessing.spawn job."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

register(LiveCase("ddp_barrier", torchrun(4, "ddp_barrier.py"), ranks=4))
register(LiveCase("async_op_sync", torchrun(3, "async_op_sync.py"), ranks=3))
register(LiveCase("file_baton", torchrun(3, "file_baton.py"), ranks=3))
register(LiveCase("dataloader_worker", torchrun(3, "dataloader_worker.py"), ranks=3))
register(LiveCase("busy_python", torchrun(3, "busy_python.py"), ranks=3))
register(LiveCase("spawn_launcher", (PYTHON, "{fixtures}/spawn_launcher.py"), ranks=3))
