"""The table of wait kinds: built-in rows for the frameworks users run, users' own rows, and bad rule files.

Stacks below are written innermost first, as py-spy prints them, in the shapes these frameworks produce
(file paths and function names as in their sources; line numbers are arbitrary)."""

import json

import pytest

from hangdoctor.analysis.frameworks import RULES
from hangdoctor.analysis.wait_rule import KINDS, WaitRule
from hangdoctor.analysis.wait_rules import active_rules, load_rules
from hangdoctor.analysis.waits import WaitTable, find_wait
from hangdoctor.cli import main
from tests.hangdoctor.test_waits import stack

ZERO3 = stack(
    "instrument_w_nvtx.<locals>.wrapped_fn deepspeed/utils/nvtx.py:33",
    "AllGatherCoalescedHandle.wait deepspeed/runtime/zero/partition_parameters.py:765",
    "MultipleAllGatherHandles.wait deepspeed/runtime/zero/partition_parameters.py:820",
    "PartitionedParameterCoordinator._fetch_sub_module_impl deepspeed/runtime/zero/partitioned_param_coordinator.py:406",
    "PartitionedParameterCoordinator.fetch_sub_module deepspeed/runtime/zero/partitioned_param_coordinator.py:344",
    "DeepSpeedZeRoOffload.pre_sub_module_forward_function deepspeed/runtime/zero/parameter_offload.py:470",
    "Module._call_impl torch/nn/modules/module.py:1784",
    "MLP.forward train.py:20",
)
FSDP2 = stack(
    "all_gather_single torch/distributed/distributed_c10d.py:4394",
    "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
    "DefaultAllGather.__call__ torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:119",
    "foreach_all_gather torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:364",
    "FSDPParamGroup.unshard torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py:407",
    "FSDPParamGroup.pre_forward torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py:551",
    "main train.py:60",
)


@pytest.mark.parametrize("frames,kind,op,caller", [
    (ZERO3, "collective", "all_gather", "MLP.forward"),
    (FSDP2, "collective", "all_gather", "main"),
    (stack("_reduce megatron/core/tensor_parallel/mappings.py:40",
           "_ReduceFromModelParallelRegion.forward megatron/core/tensor_parallel/mappings.py:220",
           "RowParallelLinear.forward megatron/core/tensor_parallel/layers.py:900"),
     "collective", "all_reduce", "RowParallelLinear.forward"),
    (stack("_batched_p2p_ops megatron/core/pipeline_parallel/p2p_communication.py:120",
           "_communicate megatron/core/pipeline_parallel/p2p_communication.py:350",
           "recv_forward megatron/core/pipeline_parallel/p2p_communication.py:420",
           "forward_backward_pipelining_without_interleaving megatron/core/pipeline_parallel/schedules.py:1300"),
     "p2p", "recv_forward", "forward_backward_pipelining_without_interleaving"),
    (stack("MessageQueue.acquire_read vllm/distributed/device_communicators/shm_broadcast.py:400",
           "MessageQueue.dequeue vllm/distributed/device_communicators/shm_broadcast.py:450",
           "MessageQueue.broadcast_object vllm/distributed/device_communicators/shm_broadcast.py:480",
           "Worker.execute_model vllm/worker/worker_base.py:300"),
     "collective", "broadcast", "Worker.execute_model"),
    (stack("_ResultCollection.__to_tensor lightning/pytorch/trainer/connectors/logger_connector/result.py:460",
           "_ResultCollection.log lightning/pytorch/trainer/connectors/logger_connector/result.py:410",
           "LightningModule.log lightning/pytorch/core/module.py:500", "Model.training_step model.py:30"),
     "device-sync", "to_tensor", "_ResultCollection.log"),
    (stack("Condition.wait threading.py:331", "Queue.get queue.py:180",
           "_MultiProcessingDataLoaderIter._try_get_data torch/utils/data/dataloader.py:1290",
           "_MultiProcessingDataLoaderIter._get_data torch/utils/data/dataloader.py:1456",
           "_MultiProcessingDataLoaderIter._next_data torch/utils/data/dataloader.py:1485",
           "_BaseDataLoaderIter.__next__ torch/utils/data/dataloader.py:734", "train train.py:50"),
     "dataloader", "next batch", "train"),
    # ignite's idist.all_gather under its EpochMetric (ffl_ignite_shard_files_uneven_epoch_eval): named after the
    # metric that called it, not ignite's computation model inside
    (stack("all_gather torch/distributed/distributed_c10d.py:4287",
           "_exception_logger.<locals>.wrapper torch/distributed/c10d_logger.py:83",
           "_NativeDistModel._do_all_gather ignite/distributed/comp_models/native.py:468",
           "ComputationModel._apply_op ignite/distributed/comp_models/base.py:186",
           "ComputationModel._collective_op ignite/distributed/comp_models/base.py:212",
           "ComputationModel.all_gather ignite/distributed/comp_models/base.py:234",
           "all_gather ignite/distributed/utils.py:432", "EpochMetric.compute ignite/metrics/epoch_metric.py:156",
           "Metric.completed ignite/metrics/metric.py:505"),
     "collective", "all_gather", "EpochMetric.compute"),
    (stack("barrier torch/distributed/distributed_c10d.py:4800",
           "_NativeDistModel.barrier ignite/distributed/comp_models/native.py:520",
           "barrier ignite/distributed/utils.py:500", "save_best train.py:90"),
     "barrier", "barrier", "save_best"),
    (stack("FileBaton.wait torch/utils/file_baton.py:42", "_jit_compile torch/utils/cpp_extension.py:2100",
           "load torch/utils/cpp_extension.py:1600", "build ops.py:10"),
     "lock", "FileBaton", "_jit_compile"),
    (stack("_engine_run_backward torch/autograd/graph.py:829", "backward torch/autograd/__init__.py:364",
           "Tensor.backward torch/_tensor.py:647", "Trainer._run_batch multigpu.py:45"),
     "ddp-reducer", "backward", "Trainer._run_batch"),
    (stack("__futex_abstimed_wait_common libc.so.6", "std::condition_variable::wait libstdc++.so.6",
           "c10d::Reducer::finalize_backward libtorch_cpu.so", "torch::autograd::Engine::execute libtorch_cpu.so",
           "_engine_run_backward torch/autograd/graph.py:829", "backward torch/autograd/__init__.py:364",
           "Tensor.backward torch/_tensor.py:647", "Trainer._run_batch multigpu.py:45"),
     "ddp-reducer", "backward", "Trainer._run_batch"),
    (stack("ncclGroupEnd libnccl.so.2", "c10d::ProcessGroupNCCL::collective libtorch_cuda.so",
           "all_reduce torch/distributed/distributed_c10d.py:2800", "train train.py:9"),
     "collective", "all_reduce", "train"),
    # the interpreter's exit joins the non-daemon threads (python/cpython#116982's shape: fex_atexit_barrier_...)
    (stack("_shutdown threading.py:1590"), "lock", "interpreter exit, joining its threads", None),
    # torch.save's zip writer opens its file in C++ (a FIFO with no reader, a hung mount: fey_ds_ckpt_model_states_...)
    (stack("_open_zipfile_writer_file.__init__ torch/serialization.py:828",
           "_open_zipfile_writer torch/serialization.py:880", "save torch/serialization.py:980",
           "save_checkpoint ckpt.py:12"),
     "io", "torch.save/load file", "save_checkpoint"),
    (stack("c10d::TCPStore::doWait libtorch_cpu.so", "_store_based_barrier torch/distributed/distributed_c10d.py:4000",
           "init_process_group torch/distributed/distributed_c10d.py:1500", "setup train.py:5"),
     "store", "init", "setup"),
])
def test_framework_waits_are_named(frames, kind, op, caller):
    wait = find_wait(frames)
    assert (wait.kind, wait.op, wait.caller.name if wait.caller else None) == (kind, op, caller)


def test_the_native_reducer_frame_makes_the_backward_wait_certain():
    python_only = find_wait(stack("_engine_run_backward torch/autograd/graph.py:829", "step train.py:3"))
    native = find_wait(stack("c10d::Reducer::finalize_backward libtorch_cpu.so",
                             "_engine_run_backward torch/autograd/graph.py:829", "step train.py:3"))
    assert (python_only.sure, native.sure) == ("medium", "high")


def test_launchers_and_workers_are_known_by_their_whole_stack():
    table = WaitTable(RULES)
    agent = stack("SimpleElasticAgent._invoke_run torch/distributed/elastic/agent/server/api.py:923",
                  "SimpleElasticAgent.run torch/distributed/elastic/agent/server/api.py:745", "main torch/distributed/run.py:1028")
    worker = stack("Queue.get multiprocessing/queues.py:113", "_worker_loop torch/utils/data/_utils/worker.py:300",
                   "BaseProcess._bootstrap multiprocessing/process.py:314")
    spawned_rank = stack("all_reduce torch/distributed/distributed_c10d.py:2800", "train job.py:9",
                         "_wrap torch/multiprocessing/spawn.py:90", "BaseProcess._bootstrap multiprocessing/process.py:314")
    assert table.process_role(agent).kind == "launcher"
    assert table.process_role(worker).kind == "worker"
    assert table.process_role(spawned_rank) is None  # a spawned rank runs under spawn's _wrap: not its parent


def test_source_line_names_a_c_call_the_frames_cannot():
    frames = stack("GradBuckets.finish_grad_sync job.py:40", "main job.py:80")
    table = WaitTable(RULES)
    assert table.classify(frames) is None
    wait = table.classify(frames, {("job.py", 40): "handle.wait()"})
    assert (wait.kind, wait.evidence, wait.caller.name) == ("work-wait", "source", "GradBuckets.finish_grad_sync")


def test_a_file_opened_through_pathlib_or_io_open_is_file_io_not_unknown():
    # DCP's FileSystemWriter opens each shard with Path.open, which calls io.open in C: a hung mount (or a FIFO
    # with no reader) shows Path.open innermost and no Python frame below it (fer_dcp_save_rank_write_stalled)
    table = WaitTable(RULES)
    dcp = stack("Path.open pathlib.py:1044", "FileSystem.create_stream torch/distributed/checkpoint/filesystem.py:520")
    assert (table.classify(dcp).kind, table.classify(dcp).op) == ("io", "file I/O")
    frames = stack("save_shard job.py:12", "main job.py:80")
    assert table.classify(frames, {("job.py", 12): "    with gzip.open(path, 'wb') as f:"}).kind == "io"
    assert table.classify(stack("exists <frozen genericpath>:19", "main job.py:8")) is None  # a check, not a wait


def test_every_builtin_row_is_well_formed():
    assert all(r.kind in KINDS or r.role in ("layer", "work") for r in RULES)
    with pytest.raises(ValueError, match="kind"):
        WaitRule("waiting", "x", "x.py", "f")
    with pytest.raises(ValueError, match="regular expression"):
        WaitRule("lock", "x", "x.py", "(")


MYLIB = stack("Comm.allreduce mylib/comm/nccl.py:40", "Trainer.step mylib/trainer.py:99")


def test_users_rows_name_their_own_framework(tmp_path, monkeypatch):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"kind": "collective", "framework": "mylib", "file": "mylib/comm/",
                                  "function": "allreduce", "op": "all_reduce", "comment": "our NCCL wrapper"}]))
    assert find_wait(MYLIB) is None
    wait = WaitTable(active_rules([rules])).classify(MYLIB)
    assert (wait.kind, wait.op, wait.framework, wait.caller.name) == ("collective", "all_reduce", "mylib", "Trainer.step")
    monkeypatch.setenv("HANGDOCTOR_WAIT_RULES", str(rules))
    assert WaitTable(active_rules()).classify(MYLIB).kind == "collective"


def test_a_users_work_row_ends_the_wait_reading_at_its_frame(tmp_path):
    """mylib's collective packs its payload with its own codec: a rank in the codec computes, not waits."""
    packing = stack("Codec.pack mylib/codec.py:30", "Comm.allreduce mylib/comm/nccl.py:40", "Trainer.step mylib/t.py:9")
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"kind": "collective", "framework": "mylib", "file": "mylib/comm/",
                                  "function": "allreduce"},
                                 {"role": "layer", "framework": "mylib", "file": "mylib/codec.py", "function": ".*"}]))
    assert WaitTable(active_rules([rules])).classify(packing).kind == "collective"
    rules.write_text(rules.read_text().replace('"layer"', '"work"'))
    assert WaitTable(active_rules([rules])).classify(packing) is None


def test_users_rows_change_the_verdict_of_analyze(tmp_path, capsys):
    dump = tmp_path / "trace-n1.out"
    dump.write_text("".join(f'Thread {100 + r} (idle): "MainThread"\n    {frame}\n    <module> (mylib/trainer.py:5)\n'
                            for r, frame in enumerate(["Comm.allreduce (mylib/comm/nccl.py:40)"] * 3
                                                      + ["Loader.next_batch (mylib/data.py:12)"])))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"kind": "collective", "framework": "mylib", "file": "mylib/comm/",
                                  "function": "allreduce"}]))
    main(["analyze", str(dump), "--json"])
    before = json.loads(capsys.readouterr().out)
    main(["analyze", str(dump), "--json", "--wait-rules", str(rules)])
    after = json.loads(capsys.readouterr().out)
    assert [r["activity"] for r in before["ranks"]] == ["unknown"] * 4
    assert [r["activity"] for r in after["ranks"]] == ["collective"] * 3 + ["unknown"]
    assert after["suspects"][0]["folded"] == "3"


def test_an_idle_row_is_where_the_job_is_when_nobody_communicates(tmp_path, capsys):
    # mylib's actors: three idle in their task loop (their task returned), one still in its task at a line the
    # table does not know. Read as a plain io wait, the three idle ones are blamed; read as idle (a worker with
    # no task holds up only peers that wait for it in a collective), the one still at work is the odd one out.
    dump = tmp_path / "trace-n1.out"
    dump.write_text("".join(f'Thread {100 + r} (idle): "MainThread"\n    {frame}\n    <module> (mylib/actor.py:5)\n'
                            for r, frame in enumerate(["Saver.finalize (mylib/save.py:30)"]
                                                      + ["Actor.task_loop (mylib/actor.py:12)"] * 3)))
    row = {"kind": "io", "framework": "mylib", "file": "mylib/actor.py", "function": "Actor.task_loop"}
    verdicts = []
    for idle in (False, True):
        rules = tmp_path / f"rules-{idle}.json"
        rules.write_text(json.dumps([{**row, "idle": idle}]))
        main(["analyze", str(dump), "--json", "--wait-rules", str(rules)])
        verdicts.append(json.loads(capsys.readouterr().out))
    busy_row, idle_row = verdicts
    assert busy_row["suspects"][0]["folded"] == "1-3" and busy_row["suspects"][0]["confidence"] == "medium"
    assert idle_row["suspects"][0]["folded"] == "0"
    assert all(s["confidence"] == "low" for s in idle_row["suspects"] if set(s["ranks"]) & {1, 2, 3})


@pytest.mark.parametrize("content,message", [
    ("not json", "not valid JSON"),
    ('{"kind": "lock"}', "JSON list"),
    ('[{"kind": "lock", "framework": "x", "file": "x", "function": "f", "colour": "red"}]', "unknown fields"),
    ('[{"kind": "locked", "framework": "x", "file": "x", "function": "f"}]', "kind"),
    ('[{"kind": "lock", "framework": "x", "file": "x", "function": "(("}]', "regular expression"),
    ('[{"kind": "lock", "framework": "x"}]', "lacks"),
])
def test_a_bad_rules_file_is_one_error_line_and_exit_2(tmp_path, capsys, content, message):
    rules = tmp_path / "rules.json"
    rules.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_rules(rules)
    assert main(["analyze", str(tmp_path), "--wait-rules", str(rules)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error:") and str(rules) in err and "Traceback" not in err


def test_users_call_rows_say_whom_their_pipeline_waits_for(tmp_path, capsys):
    # mylib's pipeline: stage 1 (ranks 2-3) waits in its own recv of activations, stage 0 (ranks 0-1) in mylib's
    # loss broadcast. A row with "peers" (docs/wait-rules.md) places each wait in the topology: the edges become
    # semantic and the schedule's phases say who went on.
    def rank(r, frames):
        return f'Thread {100 + r} (idle): "MainThread"\n' + "".join(f"    {f}\n" for f in frames)

    recv = ["recv (torch/distributed/distributed_c10d.py:2799)", "Stage.recv_activations (mylib/pipe.py:40)",
            "Stage.step (mylib/pipe.py:80)", "<module> (train.py:9)"]
    bcast = ["broadcast (torch/distributed/distributed_c10d.py:3151)", "Stage.broadcast_loss (mylib/pipe.py:60)",
             "Stage.step (mylib/pipe.py:90)", "<module> (train.py:9)"]
    dump = tmp_path / "trace-n1.out"
    dump.write_text("".join(rank(r, bcast if r < 2 else recv) for r in range(4)))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([
        {"file": "mylib/pipe.py", "function": "Stage.recv_activations", "peers": "prev-stage", "phase": 1,
         "says": "mylib's receive of activations"},
        {"file": "mylib/pipe.py", "function": "Stage.broadcast_loss", "peers": "last-stage", "phase": 2,
         "says": "mylib's loss broadcast from the last stage"}]))
    assert main(["analyze", str(dump), "--json", "--pp", "2", "--wait-rules", str(rules)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    edges = {(e["from"], e["to"], e["strength"]) for e in verdict["wait_graph"]["edges"]}
    assert edges == {(0, 1, "semantic"), (1, 0, "semantic")}
    [cause] = verdict["wait_graph"]["causes"]
    assert (cause["folded"], cause["rule"]) == ("2-3", "schedule") and verdict["suspects"][0]["folded"] == "2-3"
    rules.write_text(json.dumps([{"file": "mylib/pipe.py", "function": "f", "peers": "sideways"}]))
    assert main(["analyze", str(dump), "--wait-rules", str(rules)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error:") and "peers 'sideways'" in err and "Traceback" not in err
