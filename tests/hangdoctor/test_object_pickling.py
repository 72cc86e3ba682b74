"""A rank that pickles or unpickles inside one of torch.distributed's object collectives computes; it does not
wait in the collective (a 'work' row of the wait table). Stacks as py-spy printed them on this machine (torch
2.13.0), from our corpus case fet_dcp_custom_planner_quadratic_dedup caught early: dcp.save's coordinator
(rank 0) still unpickling the gathered plans of 60,000 write items, for seconds, while ranks 1-2 had gone on to
wait in the scatter of the global plans (pytorch/pytorch#163548: the coordinator's planning is the slow part)."""

from hangdoctor.analysis.verdict import diagnose
from hangdoctor.analysis.waits import find_wait
from hangdoctor.model import OK, Collection, RankIdentity, RankRecord, Sample, ThreadStack
from tests.hangdoctor.test_waits import stack

GATHER_CALLERS = (
    "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
    "_DistWrapper.gather_object torch/distributed/checkpoint/utils.py:135",
    "_DistWrapper.reduce_scatter torch/distributed/checkpoint/utils.py:197",
    "_save_state_dict torch/distributed/checkpoint/state_dict_saver.py:487",
    "save torch/distributed/checkpoint/state_dict_saver.py:201",
    "main fet_dcp_custom_planner_quadratic_dedup.py:79",
)
UNPICKLING_LINES = ("_tensor_to_object torch/distributed/distributed_c10d.py:3435",
                    "gather_object torch/distributed/distributed_c10d.py:3661", *GATHER_CALLERS)
UNPICKLING = stack(*UNPICKLING_LINES)
IN_A_SETSTATE = stack("TensorProperties.__setstate__ torch/distributed/checkpoint/metadata.py:89", *UNPICKLING_LINES)
PICKLING = stack("TensorProperties.__getstate__ torch/distributed/checkpoint/metadata.py:61",
                 "_object_to_tensor torch/distributed/distributed_c10d.py:3405",
                 "gather_object torch/distributed/distributed_c10d.py:3617", *GATHER_CALLERS)
IN_THE_GATHER = stack("gather torch/distributed/distributed_c10d.py:4667",
                      "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
                      "gather_object torch/distributed/distributed_c10d.py:3646", *GATHER_CALLERS)
IN_THE_SCATTER = stack(
    "broadcast torch/distributed/distributed_c10d.py:3151",
    "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
    "scatter_object_list torch/distributed/distributed_c10d.py:3989",
    "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
    "_DistWrapper.scatter_object torch/distributed/checkpoint/utils.py:159",
    "_DistWrapper.reduce_scatter torch/distributed/checkpoint/utils.py:219",
    "_save_state_dict torch/distributed/checkpoint/state_dict_saver.py:487",
    "save torch/distributed/checkpoint/state_dict_saver.py:201",
    "main fet_dcp_custom_planner_quadratic_dedup.py:79",
)


def test_the_pickling_frames_end_the_wait_reading_the_gather_itself_does_not():
    assert find_wait(UNPICKLING) is None and find_wait(IN_A_SETSTATE) is None and find_wait(PICKLING) is None
    waiting = find_wait(IN_THE_GATHER)
    assert (waiting.kind, waiting.op) == ("collective", "gather_object")


def _job(rank0, *, active0: bool):
    records = []
    for rank, frames, active in ((0, rank0, active0), (1, IN_THE_SCATTER, False), (2, IN_THE_SCATTER, False)):
        samples = [Sample(index=i, time=float(i), status=OK,
                          threads=(ThreadStack(100 + rank, "MainThread", frames, active=active,
                                               owns_gil=active),)) for i in range(2)]
        records.append(RankRecord(RankIdentity(rank=rank, host="n0", pid=100 + rank), samples))
    return diagnose(Collection(records=records, world_size=3, samples=2))


def test_the_coordinator_unpickling_the_gathered_plans_is_the_busy_rank_the_others_wait_for():
    verdict = _job(UNPICKLING, active0=True)
    assert verdict.views[0].activity == "busy"
    first = verdict.suspects[0]
    assert (first.ranks, first.kind) == ([0], "busy") and first.confidence in ("high", "medium"), first
    assert all(1 not in s.ranks and 2 not in s.ranks for s in verdict.suspects if s.confidence == "high")


def test_an_idle_thread_in_the_gather_still_waits_in_it():
    assert _job(IN_THE_GATHER, active0=False).views[0].activity == "collective"
