"""Naming what a rank waits in: torch.distributed and deepspeed.comm calls, with their caller."""

from hangdoctor.analysis.waits import find_wait
from hangdoctor.model import Frame


def stack(*frames):
    """Frames written innermost first, as py-spy prints them: 'name file:line' or 'name lib' (native)."""
    out = []
    for text in frames:
        name, _, where = text.rpartition(" ")
        file, _, line = where.partition(":")
        out.append(Frame(name, file, int(line) if line else 0, not line))
    return tuple(out)


DS_BROADCAST = stack(
    "broadcast torch/distributed/distributed_c10d.py:3151",
    "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
    "TorchBackend.broadcast deepspeed/comm/torch.py:351",
    "stage_on_cpu.<locals>.wrapper deepspeed/comm/torch.py:173",
    "broadcast deepspeed/comm/comm.py:243",
    "timed_op.<locals>.log_wrapper deepspeed/comm/comm.py:129",
    "PipelineEngine._aggregate_total_loss deepspeed/runtime/pipe/engine.py:629",
    "PipelineEngine.train_batch deepspeed/runtime/pipe/engine.py:373",
)


def test_deepspeed_broadcast_is_named_by_the_api_the_engine_called_and_its_caller():
    wait = find_wait(DS_BROADCAST)
    assert (wait.op, wait.kind) == ("broadcast", "collective")
    assert wait.call == Frame("broadcast", "deepspeed/comm/comm.py", 243)
    assert wait.label == "broadcast <- PipelineEngine._aggregate_total_loss (deepspeed/runtime/pipe/engine.py)"


def test_pipeline_p2p_recv_is_named_after_deepspeeds_p2p_layer():
    wait = find_wait(stack(
        "recv torch/distributed/distributed_c10d.py:2799",
        "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
        "TorchBackend.recv deepspeed/comm/torch.py:477",
        "recv deepspeed/comm/comm.py:407",
        "timed_op.<locals>.log_wrapper deepspeed/comm/comm.py:129",
        "recv deepspeed/runtime/pipe/p2p.py:81",
        "PipelineEngine._exec_recv_activations deepspeed/runtime/pipe/engine.py:1127",
    ))
    assert (wait.op, wait.kind, wait.caller.name) == ("recv", "p2p", "PipelineEngine._exec_recv_activations")


def test_the_seeds_torch_1x_broadcast_and_barrier_and_all_reduce():
    seed = stack("broadcast torch/distributed/distributed_c10d.py:1191",
                 "_aggregate_total_loss deepspeed/runtime/pipe/engine.py:540",
                 "train_batch deepspeed/runtime/pipe/engine.py:330")
    assert find_wait(seed).label == "broadcast <- _aggregate_total_loss (deepspeed/runtime/pipe/engine.py)"
    barrier = find_wait(stack("barrier torch/distributed/distributed_c10d.py:4000", "main train.py:9"))
    assert (barrier.op, barrier.kind) == ("barrier", "barrier")
    gather = find_wait(stack("all_gather_into_tensor torch/distributed/distributed_c10d.py:3800",
                             "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
                             "all_gather_into_tensor deepspeed/comm/comm.py:300", "step zero.py:5"))
    assert gather.label == "all_gather_into_tensor <- step (zero.py)"


def test_not_in_a_collective():
    assert find_wait(stack("train megatron/training.py:915", "pretrain megatron/training.py:187")) is None
    # torchrun's agent sleeps inside torch.distributed, but not in a communication call
    assert find_wait(stack("sleep time.py:0", "_invoke_run torch/distributed/elastic/agent/server/api.py:900")) is None
    assert find_wait(()) is None


def test_native_frames_show_a_wait_below_a_non_communication_python_frame():
    wait = find_wait(stack("pthread_cond_wait libc.so.6", "c10d::ProcessGroupNCCL::WorkNCCL::wait libtorch_cuda.so",
                           "pybind11::cpp_function::dispatcher libtorch_python.so", "train megatron/training.py:915"))
    assert (wait.op, wait.kind, wait.caller) == ("wait", "work-wait", Frame("train", "megatron/training.py", 915))
    sync = find_wait(stack("cudaStreamSynchronize libcudart.so", "train megatron/training.py:915"))
    assert (sync.kind, sync.evidence, sync.caller.name) == ("device-sync", "native", "train")


def test_native_frames_under_a_python_collective_do_not_change_its_name():
    wait = find_wait(stack("pthread_cond_wait libc.so.6", "c10d::Work::wait libtorch_cpu.so", *[
        f"{f.name} {f.file}:{f.line}" for f in DS_BROADCAST]))
    assert wait.label == "broadcast <- PipelineEngine._aggregate_total_loss (deepspeed/runtime/pipe/engine.py)"


def test_zero_redundancy_optimizers_wait_on_its_broadcast_handles_has_no_frame_of_its_own_yet_is_a_work_wait():
    # torch 2.x: `_ = [x.wait() for x in handles]` at the end of _sync_params; Work.wait is C, so py-spy's innermost
    # Python frame is the list comprehension
    wait = find_wait(stack(
        "ZeroRedundancyOptimizer._sync_params.<locals>.<listcomp> torch/distributed/optim/zero_redundancy_optimizer.py:826",
        "ZeroRedundancyOptimizer._sync_params torch/distributed/optim/zero_redundancy_optimizer.py:826",
        "ZeroRedundancyOptimizer.step torch/distributed/optim/zero_redundancy_optimizer.py:1151",
        "main train.py:57"))
    assert (wait.kind, wait.op, wait.caller.name) == ("work-wait", "broadcast", "ZeroRedundancyOptimizer.step")


def test_library_calls_whose_collective_has_no_python_frame_of_its_own():
    # each the innermost Python frame of a rank waiting on its GPU (NCCL) or in C: the library's own function
    syncbn = find_wait(stack("SyncBatchNorm.forward torch/nn/modules/_functions.py:26",
                             "Function.apply torch/autograd/function.py:575", "Backbone.forward train.py:25"))
    titan = find_wait(stack("_dist_reduce torchtitan/distributed/utils.py:40", "dist_mean torchtitan/distributed/utils.py:60",
                            "Trainer.train_step torchtitan/train.py:500"))
    rec = find_wait(stack("KJTAllToAllLengthsAwaitable._wait_impl torchrec/distributed/dist_data.py:300",
                          "Awaitable.wait torchrec/distributed/types.py:330", "main train.py:40"))
    assert [(w.kind, w.op) for w in (syncbn, titan, rec)] == [("collective", "all_gather"), ("collective", "all_reduce"),
                                                             ("collective", "all_to_all")]


def test_a_frameworks_gather_is_named_by_the_torch_call_it_makes_not_as_a_rooted_gather():
    # accelerate's `gather` is an all_gather (transformers' Trainer calls it for its token count); reduce, gather
    # and scatter are those rooted ops only in torch.distributed and deepspeed.comm (the 38th first-contact batch)
    wait = find_wait(stack(
        "all_gather torch/distributed/distributed_c10d.py:4287",
        "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
        "_gpu_gather.<locals>._gpu_gather_one accelerate/utils/operations.py:355",
        "recursively_apply accelerate/utils/operations.py:127",
        "gather accelerate/utils/operations.py:390",
        "Accelerator.gather accelerate/accelerator.py:3107",
        "Trainer._get_num_items_in_batch transformers/trainer.py:2350",
    ))
    assert (wait.op, wait.kind) == ("all_gather", "collective")
    assert wait.caller.name == "Trainer._get_num_items_in_batch"
    # deepspeed.comm's own gather is torch's gather, rooted: still named by the API the caller used
    rooted = find_wait(stack(
        "gather torch/distributed/distributed_c10d.py:4100",
        "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
        "TorchBackend.gather deepspeed/comm/torch.py:300",
        "gather deepspeed/comm/comm.py:260",
        "collect_metrics train.py:40",
    ))
    assert rooted.op == "gather" and rooted.call.file == "deepspeed/comm/comm.py"


def test_a_decorators_wrapper_inside_a_call_is_looked_through_and_zero3s_gathered_parameters_names_its_caller():
    # torch's all_gather_into_tensor under typing_extensions' @deprecated, called by ZeRO-3's GatheredParameters
    # (transformers#11464's shape, the 38th first-contact batch): the wait's caller is the user's code
    frames = stack(
        "all_gather_single torch/distributed/distributed_c10d.py:4394",
        "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
        "all_gather_into_tensor torch/distributed/distributed_c10d.py:4413",
        "deprecated.__call__.<locals>.wrapper typing_extensions.py:3140",
        "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
        "TorchBackend.all_gather_into_tensor deepspeed/comm/torch.py:380",
        "all_gather_into_tensor deepspeed/comm/comm.py:342",
        "Init._allgather_params_sequential deepspeed/runtime/zero/partition_parameters.py:2145",
        "Init._convert_to_deepspeed_param.<locals>.all_gather deepspeed/runtime/zero/partition_parameters.py:1327",
        "GatheredParameters.__enter__ deepspeed/runtime/zero/partition_parameters.py:2474",
        "init_new_rows train.py:55",
        "main train.py:75",
    )
    wait = find_wait(frames)
    assert (wait.op, wait.kind) == ("all_gather", "collective")
    assert wait.caller.name == "init_new_rows"
    assert "GatheredParameters" in wait.says
    # a wrapper closure with nothing known outside it is the caller, as any unknown frame
    bare = find_wait(stack(
        "all_reduce torch/distributed/distributed_c10d.py:2800",
        "retry.<locals>.wrapper mylib/retry.py:12",
        "main train.py:9",
    ))
    assert bare.caller.name == "retry.<locals>.wrapper"
