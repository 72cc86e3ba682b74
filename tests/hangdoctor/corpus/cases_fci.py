"""First-contact batch I (fifth first-contact round, part I): live cases from public reports on a web UI that reads its
trainer's stderr pipe only after the run (LlamaFactory), a background-thread batch prefetcher whose thread dies
(prefetch_generator's DataLoaderX idiom), ..., and shape cases from public threads (see each case.json's source and
thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# hiyouga/LlamaFactory PR #10584: the web UI's runner starts torchrun (3 ranks) with stderr=PIPE and reads it only
# after the child exits; rank 0's per-step log fills the pipe and blocks in write; 1 and 2 wait in DDP's all_reduce.
register(LiveCase("fci_webui_stderr_pipe", (PYTHON, "{fixtures}/fci_webui_stderr_pipe.py"), ranks=3, settle=2.0))

# justheuristic/prefetch_generator's BackgroundGenerator as DataLoaderX + RadarML/red-rover#23, 3 ranks: rank 1's
# prefetch thread dies on a corrupt record, its main thread waits in queue.get(); 0 and 2 wait in DDP's all_reduce.
register(LiveCase("fci_prefetch_thread_died", torchrun(3, "fci_prefetch_thread_died.py"), ranks=3, settle=2.0))
