"""An active thread outside any known wait is busy when its code never waits on a GPU (host_code.py): the standard
library, numpy, or a native stack with no GPU runtime in it; a CUDA spin under the same Python line is not."""

from hangdoctor.analysis.host_code import host_only, runs_on_host
from hangdoctor.analysis.verdict import diagnose
from hangdoctor.model import OK, Collection, Frame, RankIdentity, RankRecord, Sample, ThreadStack


def test_which_files_never_wait_on_a_gpu():
    assert host_only("<frozen genericpath>") and host_only("numpy/_core/fromnumeric.py")
    assert host_only("/usr/lib/python3.11/json/decoder.py") and host_only("multiprocessing/queues.py")
    assert host_only("/opt/conda/lib/python3.10/site-packages/pandas/core/frame.py")
    # a bare file name may be a user's script that shares a standard module's name; torch may wait on a GPU
    assert not host_only("trace.py") and not host_only("train.py") and not host_only("torch/_tensor.py")
    assert not host_only("/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py")


def test_native_frames_decide_for_the_whole_stack():
    user = Frame("step", "train.py", 10)
    assert runs_on_host((Frame("sgemm_kernel", "libopenblas.so", 0, native=True), user))
    assert not runs_on_host((Frame("cuStreamSynchronize", "libcuda.so.1", 0, native=True), user))
    assert not runs_on_host((user,)), "a user's line alone may be a CUDA spin below it"


def _job(rank0, rank1, *, active0):
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 50), Frame("main", "train.py", 9))
    records = []
    for rank, stack, active in ((0, rank0, active0), (1, rank1, False), (2, barrier, False)):
        samples = [Sample(index=i, time=float(i), status=OK,
                          threads=(ThreadStack(100 + rank, "MainThread", stack, active=active),)) for i in range(2)]
        records.append(RankRecord(RankIdentity(rank=rank, host="n0", pid=100 + rank), samples))
    return diagnose(Collection(records=records, world_size=3, samples=2))


def test_an_active_rank_polling_a_file_is_busy_and_named_an_idle_one_is_not_read_busy():
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 50), Frame("main", "train.py", 9))
    polling = (Frame("exists", "<frozen genericpath>", 19), Frame("main", "train.py", 44))
    v = _job(polling, barrier, active0=True)
    assert v.views[0].activity == "busy" and (v.suspects[0].ranks, v.suspects[0].kind) == ([0], "busy")
    assert _job(polling, barrier, active0=False).views[0].activity != "busy"


def test_a_file_read_caught_while_the_os_runs_it_is_busy_not_io():
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 50), Frame("main", "train.py", 9))
    reading = (Frame("read", "libc.so.6", 0, native=True), Frame("open", "PIL/Image.py", 3665),
               Frame("main", "train.py", 33))
    assert _job(reading, barrier, active0=True).views[0].activity == "busy"
    assert _job(reading, barrier, active0=False).views[0].activity == "io"
