"""How busy a rank's DataLoader workers are, from the child processes its time profile sampled (`attach --profile`
records with py-spy's --subprocesses).

A worker's main thread runs torch's `_worker_loop`: it waits on its index queue for the next batch to make, or
makes it (the dataset's `__getitem__`, the collate function, the transform below them). Its busy share is the
share of its samples not waiting for an index. Every rank of a synchronous job consumes batches at the job's one
pace, so a rank whose workers are busier than its peers' takes longer per batch: its loader is slower. A
loader-bound job where every loader is as fast shows the same main threads (one rank is last to get its batch,
in phase, and the others wait for it in the collective), but not the same workers: theirs are as busy as its.
"""

from __future__ import annotations

from hangdoctor.model import RankProfile

_WORKER_LOOPS = ("torch/utils/data/_utils/worker.py", "torchdata/stateful_dataloader/worker.py")


def loader_busy(profile: RankProfile | None) -> tuple[float, int] | None:
    """(busy share of its DataLoader workers' samples, those samples); None where no child was a worker."""
    if profile is None:
        return None
    busy = total = 0
    for child in profile.children:
        for stack in child.stacks:
            frames = stack.frames  # innermost first
            at = next((i for i, f in enumerate(frames) if f.name == "_worker_loop"
                       and f.file.replace("\\", "/").endswith(_WORKER_LOOPS)), None)
            if at is None:
                continue
            total += stack.count
            inner = frames[at - 1] if at else None
            waiting = inner is not None and inner.name in ("get", "Queue.get") \
                and inner.file.replace("\\", "/").endswith("multiprocessing/queues.py")
            busy += 0 if waiting else stack.count
    return (busy / total, total) if total else None
