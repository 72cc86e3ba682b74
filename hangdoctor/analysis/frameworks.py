"""The built-in rows of the wait table: what the frames of each framework mean (see wait_rules.py).

One row per (framework, file, functions); rows are tried in order and the first that matches a frame wins, so
specific rows come before a file's catch-all layer row. The frameworks: torch.distributed (c10d, functional
collectives, DDP, FSDP 1 and 2), DeepSpeed (comm, pipeline p2p, ZeRO-1/2/3), Megatron (tensor-parallel mappings,
pipeline p2p, grad buffers), vLLM and SGLang, Lightning, accelerate, transformers; CUDA synchronisations; locks,
DataLoader queues, threading and multiprocessing; launchers and helper processes; native frames of py-spy
--native (c10d work and reducer, TCPStore, gloo, NCCL, CUDA, libc). File paths and function names are those of
the frameworks' sources, as py-spy prints them.
"""

from __future__ import annotations

from hangdoctor.analysis.wait_rule import WaitRule
from hangdoctor.topology.comm_calls import BARRIER_OPS, COLLECTIVE_OPS, P2P_OPS, WAIT_OPS

# a frame of one of these names inside a communication layer is the op (topology/comm_calls.py: the one table)
OP_NAMES = frozenset("|".join((COLLECTIVE_OPS, P2P_OPS, BARRIER_OPS)).split("|")) | set(WAIT_OPS)


def R(kind, framework, file, function, op="", *, native=False, says="", sure="high", role="wait", weight=1,
      idle=False):
    return WaitRule(kind, framework, file, function, op, native, says, sure, role, weight, idle=idle)


C10D = "torch/distributed/distributed_c10d.py"
ZERO = "deepspeed/runtime/zero/"
GENERIC = dict(weight=0, sure="low")

RULES: tuple[WaitRule, ...] = (
    # ---- torch.distributed ------------------------------------------------------------------------------
    R("collective", "torch.distributed", C10D, COLLECTIVE_OPS, says="a torch.distributed collective"),
    R("p2p", "torch.distributed", C10D, P2P_OPS, says="a torch.distributed point-to-point call"),
    R("barrier", "torch.distributed", C10D, BARRIER_OPS, says="a torch.distributed barrier"),
    R("store", "torch.distributed", C10D, "new_group|new_subgroups|new_subgroups_by_enumeration|split_group|"
      "shrink_group", op="new_group",
      says="creating a process group: every rank of the job must call it, members or not, in the same order"),
    R("store", "torch.distributed", C10D, "_store_based_barrier|init_process_group|_new_process_group_helper|"
      "_create_process_group_wrapper", op="init",
      says="process-group set-up: every rank of the group must arrive at the store"),
    # the object collectives' own pickling (all_gather_object, gather_object, broadcast_object_list, ...): a rank
    # there computes (a large object takes seconds to pickle or unpickle), it does not wait in the collective
    R("", "torch.distributed", C10D, "_object_to_tensor|_tensor_to_object", role="work"),
    R("", "torch.distributed", C10D, ".*", role="layer"),
    R("", "torch.distributed", "torch/distributed/c10d_logger.py", ".*", role="layer"),
    # torch.distributed.nn's differentiable collectives (an autograd Function around each c10d call)
    R("", "torch.distributed", "torch/distributed/nn/functional.py", ".*", role="layer"),
    R("store", "torch.distributed", "torch/distributed/rendezvous.py", ".*", op="rendezvous",
      says="the rendezvous: waiting for every rank to join the store"),
    R("store", "torch.distributed", "torch/distributed/elastic/utils/store.py", ".*", op="store barrier",
      says="a store barrier: waiting for every rank"),
    R("collective", "torch.distributed", "torch/distributed/_functional_collectives", COLLECTIVE_OPS + "|.*_inplace|"
      "(all_gather|reduce_scatter|all_reduce|all_to_all)_\\w+|permute_tensor"),  # its whole API (DTensor's too)
    R("work-wait", "torch.distributed", "torch/distributed/_functional_collectives", "wait_tensor|wait",
      op="wait_tensor", says="a functional collective's result"),
    R("collective", "torch.distributed", "torch/distributed/_symmetric_memory", ".*", op="symmetric memory"),
    R("collective", "torch.distributed", "torch/distributed/utils.py", "_verify_param_shape_across_processes",
      op="verify parameter shapes", says="DDP's check at construction that every rank's parameters have the same "
      "shapes (an all_gather)"),
    R("collective", "torch.distributed", "torch/distributed/utils.py", "_sync_module_states|_sync_params_and_buffers",
      op="broadcast", says="the broadcast of module states at wrapping time"),
    R("work-wait", "torch", "torch/futures/__init__.py", "wait|wait_all|value|Future.wait", op="wait",
      says="a future (an asynchronous collective's result)"),
    R("", "torch", "torch/futures/__init__.py", ".*", role="layer"),
    R("collective", "torch DDP", "torch/nn/parallel/distributed.py",
      "_sync_buffers|_sync_module_buffers|_default_broadcast_coalesced|_distributed_broadcast_coalesced|"
      "_verify_param_shape_across_processes|_match_all_reduce_for_bwd_pass|_check_global_requires_backward_grad_sync|"
      "_sync_params_and_buffers|_sync_final_model", says="DDP's own collective (buffers, set-up, join)"),
    # forward's set-up: in the second iteration the reducer rebuilds its buckets in the order gradients came, which
    # rank 0 broadcasts (`self.reducer._rebuild_buckets()`, a C call: no Python frame of its own)
    R("collective", "torch DDP", "torch/nn/parallel/distributed.py", "_pre_forward", op="rebuild buckets",
      says="DDP's forward set-up: the second iteration's bucket rebuild, a broadcast from rank 0", sure="medium"),
    R("ddp-reducer", "torch autograd", "torch/autograd/graph.py", "_engine_run_backward", op="backward",
      says="backward: DDP's gradient all_reduce (and ZeRO/FSDP gradient reductions) run inside it", sure="medium"),
    R("ddp-reducer", "torch autograd", "torch/autograd/__init__.py", "backward|grad", op="backward",
      says="backward: DDP's gradient all_reduce (and ZeRO/FSDP gradient reductions) run inside it", sure="medium"),
    R("", "torch autograd", "torch/_tensor.py", "backward", role="layer"),
    # ZeroRedundancyOptimizer's step ends broadcasting every rank's shard and waiting on the handles (a C call: no
    # Python frame of its own under the list comprehension that waits)
    R("work-wait", "torch ZeRO", "torch/distributed/optim/zero_redundancy_optimizer.py",
      r".*_sync_params.*|.*wait_for_broadcasts.*|.*_broadcast_params_from_rank.*", op="broadcast",
      says="ZeroRedundancyOptimizer's parameter broadcasts (it waits on their handles)"),
    # SyncBatchNorm's autograd function gathers every rank's batch statistics in forward (all-reduces the gradient
    # statistics in backward); under NCCL the host waits there on the GPU
    R("collective", "torch SyncBatchNorm", "torch/nn/modules/_functions.py", "SyncBatchNorm.forward|SyncBatchNorm.backward",
      op="all_gather", says="SyncBatchNorm's exchange of every rank's batch statistics", sure="medium"),
    # torchtitan's metrics: a functional all-reduce whose result it reads at once (.item())
    R("collective", "torchtitan", "torchtitan/distributed/utils.py", "_dist_reduce|dist_max|dist_mean|dist_sum|dist_min",
      op="all_reduce", says="torchtitan's reduction of a metric across ranks"),
    # torchrec: sharded modules' input and output distributions are all-to-alls behind Awaitables
    R("collective", "torchrec", "torchrec/distributed/", r".*Awaitable\._wait_impl|.*Awaitable\.wait", op="all_to_all",
      says="torchrec's input or output distribution (an all-to-all it waits on)", sure="medium"),
    # torch.distributed.rpc: a call waits for its callee; shutdown gathers every worker (a collective over RPC)
    R("collective", "torch rpc", "torch/distributed/rpc/api.py", "_all_gather|_wait_all_workers|shutdown|"
      "_barrier|_broadcast_to_followers", op="rpc shutdown",
      says="RPC's shutdown (or barrier): every worker must arrive"),
    R("p2p", "torch rpc", "torch/distributed/rpc/api.py", "rpc_sync|_invoke_rpc|remote|rpc_async",
      op="rpc_sync", says="an RPC call: waits for the callee to run it and answer"),
    R("", "torch rpc", "torch/distributed/rpc/", ".*", role="layer"),
    # torch.distributed.pipelining: the schedules wait on batched P2P work (schedules.py's _wait_batch_p2p)
    R("p2p", "torch pipelining", "torch/distributed/pipelining/schedules.py", "_wait_batch_p2p|_batch_p2p|"
      "_sorted_batch_p2p", op="batch_isend_irecv", says="a pipeline schedule's batch of sends and receives between "
      "stages (which of the two, the schedule's line tells)"),
    R("p2p", "torch pipelining", "torch/distributed/pipelining/stage.py", ".*_shape_inference", op="recv",
      says="the pipeline stages' shape inference exchange"),
    # FSDP (1 and 2)
    R("collective", "torch FSDP", "torch/distributed/fsdp/", "_unshard|_pre_forward_unshard|unshard|"
      "_all_gather_flat_param|foreach_all_gather|foreach_all_gather_copy_out|wait_for_unshard|_lazy_init|"
      "_pre_forward|_pre_backward_prefetch|_prefetch_handle", op="all_gather", says="FSDP's parameter all-gather"),
    R("collective", "torch FSDP", "torch/distributed/fsdp/", "_reduce_grad|_post_backward_hook|foreach_reduce|"
      "post_backward|_post_backward_final_callback|_finalize_params|_wait_for_post_backward", op="reduce_scatter",
      says="FSDP's gradient reduce-scatter"),
    R("collective", "torch FSDP", "torch/distributed/_composable/fsdp/", "foreach_all_gather|.*unshard.*",
      op="all_gather", says="FSDP's parameter all-gather"),
    R("collective", "torch FSDP", "torch/distributed/_composable/fsdp/", "foreach_reduce|post_backward",
      op="reduce_scatter", says="FSDP's gradient reduce-scatter"),
    R("", "torch FSDP", "torch/distributed/fsdp/", ".*", role="layer"),
    R("", "torch FSDP", "torch/distributed/_composable/", ".*", role="layer"),
    # ---- DeepSpeed --------------------------------------------------------------------------------------
    R("collective", "deepspeed", "deepspeed/comm/", COLLECTIVE_OPS, says="a deepspeed.comm collective"),
    R("p2p", "deepspeed", "deepspeed/comm/", P2P_OPS),
    R("barrier", "deepspeed", "deepspeed/comm/", BARRIER_OPS),
    R("", "deepspeed", "deepspeed/comm/", ".*", role="layer"),
    R("p2p", "deepspeed", "deepspeed/runtime/pipe/p2p.py", P2P_OPS + "|_recv|_send|wait",
      says="a pipeline-stage send/recv"),
    R("collective", "deepspeed ZeRO-3", ZERO + "partitioned_param_coordinator.py",
      "fetch_sub_module|__all_gather_params|_all_gather_params|__all_gather_params_|_PartitionedParameterCoordinator__all_gather_params",
      op="all_gather", says="ZeRO-3's parameter all-gather"),
    R("collective", "deepspeed ZeRO-3", ZERO + "partition_parameters.py",
      "all_gather_coalesced|_all_gather|_allgather_params|_all_gather_dtype|allgather_fn|_dist_allgather_fn|"
      "all_gather_into_tensor_coalesced|_allgather_params_coalesced|_allgather_params_sequential", op="all_gather",
      says="ZeRO-3's parameter all-gather"),
    R("collective", "deepspeed ZeRO-3", ZERO + "partition_parameters.py", "GatheredParameters.__enter__|"
      "GatheredParameters.__exit__", op="all_gather", says="ZeRO-3's GatheredParameters: an all-gather (on entry) or "
      "re-partition (on exit) that every rank of the parameters' group must enter"),
    R("work-wait", "deepspeed ZeRO-3", ZERO + "partition_parameters.py", ".*Handle.wait|wait", op="all_gather",
      says="ZeRO-3's parameter all-gather handle"),
    R("", "deepspeed ZeRO-3", ZERO + "partition_parameters.py", ".*", role="layer"),  # its gather's internals
    R("collective", "deepspeed ZeRO", ZERO, "__reduce_and_partition_ipg_grads|_reduce_and_partition_ipg_grads|"
      "reduce_scatter_coalesced|allreduce_bucket|allreduce_and_copy|allreduce_no_retain|average_tensor|"
      "reduce_ipg_grads|gradient_reduction_w_predivide|_DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads|"
      "all_gather_dp_groups|_partition_all_gather|step_all_gather", op="reduce",
      says="ZeRO's gradient reduction or parameter all-gather"),
    R("collective", "deepspeed", "deepspeed/runtime/comm/coalesced_collectives.py", ".*", op="reduce_scatter"),
    R("collective", "deepspeed", "deepspeed/runtime/engine.py", "allreduce_gradients|buffered_allreduce_fallback|"
      "allreduce_and_copy|allreduce_bucket|allreduce_no_retain|_reduce_non_expert_gradients|_reduce_expert_gradients|"
      "_broadcast_model", op="all_reduce", says="the engine's gradient all-reduce"),
    R("device-sync", "deepspeed", "deepspeed/accelerator/", "synchronize", op="synchronize",
      says="the accelerator's synchronize: waiting for the GPU"),
    # ---- Megatron ---------------------------------------------------------------------------------------
    R("collective", "megatron", "tensor_parallel/mappings.py", "_reduce", op="all_reduce",
      says="tensor-parallel all-reduce"),
    R("collective", "megatron", "tensor_parallel/mappings.py", "_gather.*|all_gather.*|gather_.*", op="all_gather",
      says="tensor-parallel all-gather"),
    R("collective", "megatron", "tensor_parallel/mappings.py", "_reduce_scatter.*|reduce_scatter.*",
      op="reduce_scatter", says="tensor-parallel reduce-scatter"),
    R("collective", "megatron", "tensor_parallel/mappings.py", "all_to_all.*|_AllToAll.*", op="all_to_all"),
    R("", "megatron", "tensor_parallel/mappings.py", ".*", role="layer"),
    R("collective", "megatron", "megatron/mpu/mappings.py", "_reduce", op="all_reduce"),
    R("collective", "megatron", "megatron/mpu/mappings.py", "_gather.*", op="all_gather"),
    R("", "megatron", "megatron/mpu/mappings.py", ".*", role="layer"),
    R("p2p", "megatron", "p2p_communication.py", P2P_OPS + "|.*", says="a pipeline-stage send/recv"),
    R("collective", "megatron", "megatron/core/distributed/", "finish_grad_sync|start_grad_sync|finish_param_sync|"
      "start_param_sync|finalize_model_grads|_allreduce_.*|allreduce_.*", op="all_reduce",
      says="the data-parallel gradient reduction"),
    R("collective", "megatron", "megatron/core/parallel_state.py", "initialize_model_parallel|new_group|"
      "create_group", op="new_group", says="creating the model-parallel groups (every rank must take part)"),
    # ---- vLLM / SGLang (SGLang's distributed layer derives from vLLM's) ----------------------------------
    R("collective", "vllm/sglang", "distributed/device_communicators/pynccl", COLLECTIVE_OPS + "|nccl.*",
      says="the framework's own NCCL wrapper (pynccl)"),
    R("p2p", "vllm/sglang", "distributed/device_communicators/pynccl", "send|recv|ncclSend|ncclRecv"),
    R("store", "vllm/sglang", "distributed/device_communicators/pynccl", "ncclCommInitRank|ncclGetUniqueId",
      op="nccl init", says="NCCL communicator set-up: every rank of the group must arrive"),
    R("collective", "vllm/sglang", "distributed/device_communicators/custom_all_reduce", ".*all_reduce.*|"
      ".*register.*|.*capture.*", op="all_reduce", says="the custom (IPC) all-reduce"),
    R("collective", "vllm/sglang", "distributed/device_communicators/shm_broadcast", "acquire_read|acquire_write|"
      "dequeue|enqueue|broadcast_object|wait_until_ready|recv|send", op="broadcast",
      says="the shared-memory broadcast queue (the driver's broadcast of work to the workers)"),
    R("collective", "vllm/sglang", "distributed/parallel_state.py", COLLECTIVE_OPS + "|broadcast_tensor_dict|"
      "broadcast_object|all_gatherv|reduce_scatterv|_all_reduce_out_place|_all_reduce_in_place"),
    R("p2p", "vllm/sglang", "distributed/parallel_state.py", "send.*|recv.*"),
    R("barrier", "vllm/sglang", "distributed/parallel_state.py", "barrier"),
    R("collective", "vllm/sglang", "distributed/communication_op.py", ".*"),
    R("collective", "sglang", "", "broadcast_pyobj", op="broadcast",
      says="SGLang's broadcast of Python objects (requests) across the TP group"),
    R("p2p", "sglang", "", "point_to_point_pyobj", says="SGLang's send or receive of Python objects (requests) "
      "between pipeline stages"),
    # DeepEP's expert-parallel all-to-all (its kernels poll the peers' counters from C++ or, on the CPU, a loop)
    R("collective", "deep_ep", "deep_ep/buffer.py", "(Buffer\\.)?((internode|intranode|low_latency)_)?(dispatch|combine)",
      op="all_to_all", says="DeepEP's expert-parallel dispatch or combine: an all-to-all every rank of the "
      "expert-parallel group must enter"),
    R("collective", "vllm", "vllm/v1/executor/multiproc_executor.py", "collective_rpc|get_response",
      op="collective_rpc", says="the executor waiting for every worker's answer"),
    # ---- Lightning / accelerate / transformers ------------------------------------------------------------
    R("collective", "lightning", "utilities/distributed.py", "_sync_ddp.*|_all_gather_ddp_if_available|"
      "_gather_all_tensors|gather_all_tensors|sync_ddp.*|_simple_gather_all_tensors",
      says="Lightning's metric/log sync across ranks"),
    R("barrier", "lightning", "strategies/", "barrier", says="the strategy's barrier"),
    R("barrier", "lightning", "utilities/distributed.py", "_InfiniteBarrier.*", op="barrier",
      says="Lightning's barrier without a timeout (a gloo group's monitored_barrier)"),
    R("collective", "lightning", "strategies/", "reduce|broadcast|all_gather|reduce_boolean_decision"),
    R("collective", "lightning", "core/module.py", "all_gather|LightningModule.all_gather", op="all_gather",
      says="the module's self.all_gather: every rank must call it"),
    R("", "lightning", "lightning_utilities/core/apply_func.py", "apply_to_collection.*", role="layer"),
    R("device-sync", "lightning", "logger_connector/result.py", "__to_tensor|_ResultCollection__to_tensor|"
      "_to_tensor", op="to_tensor", says="a logged value copied to the device: waits for the GPU", sure="medium"),
    R("device-sync", "lightning", "core/module.py", ".*__to_tensor|_LightningModule__to_tensor", op="to_tensor",
      says="self.log copies a value to the device: waits for the GPU", sure="medium"),
    R("device-sync", "lightning", "fabric/utilities/apply_func.py", "convert_tensors_to_scalars.*", op="item",
      says="logged metrics turned into numbers (.item()): waits for the GPU", sure="medium"),
    R("collective", "lightning", "logger_connector/result.py", "sync|compute|_sync|reduce", op="all_reduce",
      says="Lightning's sync_dist of a logged value", sure="medium"),
    R("collective", "accelerate", "accelerate/utils/operations.py", "gather|_gpu_gather|_gpu_gather_one|"
      "broadcast|_gpu_broadcast|reduce|_reduce_across_processes|pad_across_processes|gather_object|"
      "broadcast_object_list|_gpu_gather_object"),
    R("", "accelerate", "accelerate/utils/operations.py", ".*", role="layer"),  # its collective helpers' internals
    R("collective", "accelerate", "accelerate/accelerator.py", "Accelerator.gather_for_metrics|gather_for_metrics|"
      "Accelerator.gather|Accelerator.reduce|Accelerator.pad_across_processes",
      says="accelerate's gather (or reduce) across processes"),
    R("barrier", "accelerate", "accelerate/", "wait_for_everyone", op="barrier"),
    # pytorch-ignite's idist helpers (ignite.distributed): a collective of its computation model (native, Horovod,
    # XLA), whose internals (comp_models/) are a layer: the call is named after idist's caller (EpochMetric.compute)
    R("collective", "ignite", "ignite/distributed/utils.py", "all_reduce|all_gather|broadcast|"
      "all_gather_tensors_with_shapes", says="ignite's idist collective: every process must call it"),
    R("barrier", "ignite", "ignite/distributed/utils.py", "barrier", op="barrier"),
    R("", "ignite", "ignite/distributed/comp_models/", ".*", role="layer"),
    R("collective", "transformers", "transformers/trainer_pt_utils.py", "distributed_concat|nested_gather|"
      "distributed_broadcast_scalars", op="all_gather"),
    # ---- JAX multi-process (its collectives run as computations; the host waits in their result) -----------
    R("barrier", "jax", "jax/experimental/multihost_utils.py", "sync_global_devices", op="barrier",
      says="JAX's barrier across processes (an all-gather of a name every process must reach)"),
    R("collective", "jax", "jax/experimental/multihost_utils.py", "process_allgather|broadcast_one_to_all|"
      "host_local_array_to_global_array|global_array_to_host_local_array", op="all_gather",
      says="JAX's collective across processes"),
    R("", "jax", "jax/experimental/multihost_utils.py", ".*", role="layer"),  # its helpers' internals
    R("device-sync", "jax", "jax/_src/array.py", "ArrayImpl._value|ArrayImpl.__array__|ArrayImpl.block_until_ready|"
      "ArrayImpl._single_device_array_to_np_array|ArrayImpl.tolist|ArrayImpl.item", op="synchronize",
      says="a JAX array's value read by the host: it waits for the computation that makes it"),
    # ---- waiting for the GPU --------------------------------------------------------------------------------
    R("device-sync", "torch.cuda", "torch/cuda/", "synchronize|Stream.synchronize|Event.synchronize|Event.wait|"
      "Stream.wait_event|Stream.wait_stream|Event.elapsed_time|Event.query", op="synchronize",
      says="waiting for the GPU"),
    # ---- locks, data, sleep, I/O ---------------------------------------------------------------------------
    R("io", "tensorstore", "tensorstore/", "Future.result|result|Future.wait|wait", op="storage I/O",
      says="a TensorStore read or write (checkpoint storage: a slow or hung file system or object store)"),
    R("io", "torch profiler", "torch/autograd/profiler.py", "export_chrome_trace|export_stacks|.*export_chrome_trace",
      op="profiler export", says="writing the profiler's trace file: a slow or hung file system"),
    R("io", "torch profiler", "torch/profiler/profiler.py", ".*export_chrome_trace|.*export_stacks|"
      ".*export_memory_timeline", op="profiler export", says="writing the profiler's trace file"),
    # torch.save's and torch.load's file openers: the zip writer and reader open, write and close the file in C++,
    # with no Python frame below these
    R("io", "torch", "torch/serialization.py", "_open_zipfile_writer_file.__init__|_open_zipfile_writer_file.__exit__|"
      "_open_zipfile_reader.__init__|_open_file.__init__|__init__|__exit__", op="torch.save/load file",
      says="torch.save or torch.load opening, writing or closing its file: a slow or hung file system (a network "
      "mount), or a FIFO (named pipe) with no process at its other end"),
    R("", "torch", "torch/serialization.py", "_open_zipfile_writer|_open_file_like|save|load", role="layer"),
    R("lock", "torch", "torch/utils/file_baton.py", "wait|FileBaton.wait", op="FileBaton",
      says="a lock file (torch.utils.file_baton): another process holds it, or a stale one was left behind"),
    R("lock", "filelock", "filelock/", "acquire|_acquire|__enter__|.*_poll_until_acquired|.*_acquire_level|"
      "BaseFileLock\\..*", op="file lock",
      says="a file lock (filelock): another process holds it, or a SoftFileLock's file outlived the process that made "
      "it (a stale lock nobody will remove)"),
    R("dataloader", "torch", "torch/utils/data/dataloader.py", "_try_get_data|_get_data", op="next batch",
      says="waiting for a batch from the DataLoader's worker processes"),
    R("", "torch", "torch/utils/data/dataloader.py", "_next_data|__next__", role="layer"),
    R("dataloader", "fairseq", "fairseq/data/iterators.py", "BufferedIterator.__next__|__next__", op="next batch",
      says="waiting for a batch from fairseq's BufferedIterator (its background thread reads the DataLoader)"),
    R("", "fairseq", "fairseq/data/iterators.py", ".*", role="layer"),
    # wrappers between a wait and the code that asked for it: transparent
    R("", "torch", "torch/nn/modules/module.py", "_call_impl|_wrapped_call_impl|__call__|Module._call_impl|"
      "Module._wrapped_call_impl", role="layer"),
    R("", "torch", "torch/utils/_contextlib.py", "decorate_context", role="layer"),
    # a @contextmanager's enter and exit between a call and the generator that does its work (torch's
    # batch_isend_irecv posts its batch in _coalescing_manager's exit)
    R("", "python", "contextlib.py", r"_GeneratorContextManager\.__(enter|exit)__|__enter__|__exit__", role="layer"),
    R("", "torch", "torch/autograd/function.py", "apply|Function.apply", role="layer"),
    R("", "torch", "torch/_dynamo/eval_frame.py", "_fn|.*_fn", role="layer"),
    # PyTorch's dispatch machinery between a Python API and the op it runs (a functional collective's wait_tensor
    # under DTensor, a custom op's autograd wrapper): transparent, so the wait below them is still read
    R("", "torch", "torch/_ops.py", ".*", role="layer"),
    R("", "torch", "torch/_library/", ".*", role="layer"),
    R("", "torch", "torch/_higher_order_ops/", ".*", role="layer"),
    R("", "torch", "torch/utils/_python_dispatch.py", ".*", role="layer"),
    R("", "torch", "torch/_compile.py", ".*", role="layer"),
    R("", "torch DTensor", "torch/distributed/tensor/_dispatch.py", ".*", role="layer"),
    R("", "torch DTensor", "torch/distributed/tensor/_redistribute.py", ".*", role="layer"),
    R("collective", "torch DTensor", "torch/distributed/tensor/_api.py", "DTensor.full_tensor|full_tensor|"
      "DTensor.redistribute|redistribute", says="a DTensor redistribution (its collectives: all-gather, "
      "all-reduce, reduce-scatter)"),
    R("", "torch", "torch/utils/_pytree.py", ".*", role="layer"),
    R("", "torch DTensor", "torch/distributed/tensor/_api.py", "__torch_dispatch__|.*__torch_dispatch__", role="layer"),
    R("", "torch", "torch/distributed/_functional_collectives.py", "AsyncCollectiveTensor.*|_maybe_wrap_tensor|"
      "__torch_dispatch__|.*unwrap.*", role="layer"),
    R("", "deepspeed", ZERO + "parameter_offload.py", ".*", role="layer"),
    R("", "deepspeed", ZERO + "partitioned_param_coordinator.py", ".*", role="layer"),
    R("", "deepspeed", "deepspeed/utils/nvtx.py", ".*", role="layer"),
    R("", "deepspeed", "deepspeed/runtime/zero/utils.py", ".*", role="layer"),
    R("lock", "python", "threading.py", "_shutdown", op="interpreter exit, joining its threads", says="the interpreter is exiting: "
      "threading._shutdown joins every non-daemon thread before atexit's handlers run; a thread that never ends "
      "holds the exit there", **GENERIC),
    R("lock", "python", "threading.py", "Condition.wait|wait|Event.wait|Semaphore.acquire|acquire|Thread.join|join|"
      "_wait_for_tstate_lock|Barrier.wait|_wait", op="thread wait", says="a thread lock, event or join", **GENERIC),
    R("lock", "python", "concurrent/futures/", "ThreadPoolExecutor.shutdown|ProcessPoolExecutor.shutdown|shutdown|"
      "Executor.__exit__|__exit__", op="executor shutdown", says="an executor's shutdown: it joins its workers, "
      "which finish the tasks they run first", **GENERIC),
    R("lock", "python", "concurrent/futures/", "result|wait|as_completed|_wait_for_tstate_lock",
      op="future", says="a concurrent.futures result", **GENERIC),
    R("lock", "python", "queue.py", "get|put|join", op="queue", says="a queue", **GENERIC),
    R("lock", "python", "logging/__init__.py", "Handler.acquire|acquire|_acquireLock", op="logging lock",
      says="a logging handler's lock (held by the thread that is writing a record)", **GENERIC),
    # a Lock, RLock or Semaphore shared between processes: another process holds it (one that died holding it
    # leaves it held for ever: a POSIX semaphore is not released when its holder is killed)
    R("lock", "python", "multiprocessing/synchronize.py", "SemLock.__enter__|SemLock.acquire|__enter__|acquire",
      op="multiprocessing lock", says="a lock or semaphore shared between processes (multiprocessing.Lock, RLock, "
      "Semaphore): held by another process, perhaps one that died holding it"),
    # a Barrier or Event shared between processes (an mp.spawn job's own barrier): it waits for other processes,
    # which may be the job's other ranks, not for something of this rank's own
    R("barrier", "python", "multiprocessing/synchronize.py", "Condition.wait_for|Event.wait",
      op="multiprocessing barrier", says="a barrier or event shared between processes: the processes it waits for "
      "may be other ranks (multiprocessing.Barrier, multiprocessing.Event)", sure="medium"),
    # the same through a Manager's proxy (manager.Event(), manager.Barrier()): the wait runs in the manager's server
    # process, and what it waits for is another process's set() or wait()
    R("barrier", "python", "multiprocessing/managers.py", "EventProxy.wait|BarrierProxy.wait|ConditionProxy.wait|"
      "ConditionProxy.wait_for", op="multiprocessing barrier", says="a Manager's event, barrier or condition shared "
      "between processes: the processes it waits for may be other ranks", sure="medium"),
    R("io", "python", "multiprocessing/managers.py", "BaseProxy._callmethod|_callmethod", op="manager call",
      says="a call into a Manager's server process", **GENERIC),
    R("io", "python", "multiprocessing/", "get|recv|recv_bytes|_recv_bytes|_recv|poll|_poll|wait|join|"
      "Connection.recv|Connection.poll|Popen.wait|Popen.poll|BaseProcess.join|put|_send", op="multiprocessing",
      says="another process (a pipe, queue or join)", **GENERIC),
    R("io", "python", "selectors.py", "select|EpollSelector.select|PollSelector.select", op="select", **GENERIC),
    R("work-wait", "ray", "ray/_private/worker.py", "get|Worker.get_objects|get_objects|wait", op="ray.get",
      says="a Ray object: another task's or actor's result"),
    # Ray before 2.0 kept the worker in ray/worker.py
    R("work-wait", "ray", "ray/worker.py", "get|Worker.get_objects|get_objects|wait", op="ray.get",
      says="a Ray object: another task's or actor's result"),
    R("", "ray", "ray/_private/", "client_mode_hook.*|.*auto_init_wrapper|wrap_auto_init.*", role="layer"),
    R("io", "ray", "ray/_private/worker.py", "main_loop|Worker.main_loop", op="Ray task loop",
      says="idle in Ray's task loop: this actor runs no task (its task ended or failed: see its log)", idle=True),
    # Ray before 2.0 kept the worker in ray/worker.py
    R("io", "ray", "ray/worker.py", "main_loop|Worker.main_loop", op="Ray task loop",
      says="idle in Ray's task loop: this actor runs no task (its task ended or failed: see its log)", idle=True),
    R("io", "pyzmq", "zmq/", "poll|Poller.poll|recv.*|Socket.recv.*|send.*|Socket.send.*|select", op="zmq",
      says="a ZeroMQ socket", **GENERIC),
    R("io", "python", "socket.py", "readinto|recv.*|accept|SocketIO.readinto|create_connection", op="socket",
      **GENERIC),
    R("io", "python", "subprocess.py", "wait|_wait|communicate|_try_wait|_communicate", op="subprocess",
      says="waiting for a child process (its exit or its output)", **GENERIC),
    R("io", "python", "ssl.py", "read|recv.*", op="socket", **GENERIC),
    # httpx's transport (huggingface_hub's Hub calls): its socket's recv and sendall are C, below these frames
    R("io", "httpcore", "_backends/sync.py", "SyncStream.read|SyncStream.write|SyncBackend.connect_tcp|"
      "SyncBackend.connect_unix_socket", op="socket", says="an HTTP request's socket (httpx/httpcore): a server "
      "that never answers, with no timeout set, waits for ever", **GENERIC),
    # pathlib's file calls end in C (io.open, a read or a write) with no Python frame of their own below
    R("io", "python", "pathlib.py", "Path.open|Path.read_bytes|Path.read_text|Path.write_bytes|Path.write_text|"
      "open|read_bytes|read_text|write_bytes|write_text", op="file I/O", says="opening, reading or writing a file: a "
      "slow or hung file system (a network mount), or the open of a FIFO (named pipe) with no process at its other "
      "end", **GENERIC),
    R("sleep", "python", "asyncio/tasks.py", "sleep", op="sleep", **GENERIC),
    # ---- launchers and helper processes: matched anywhere in the main stack ---------------------------------
    R("launcher", "torchrun", "torch/distributed/elastic/agent/", "_invoke_run|run|SimpleElasticAgent._invoke_run|"
      "SimpleElasticAgent.run|_monitor_workers", op="torchrun agent", role="process"),
    R("launcher", "torchrun", "torch/distributed/run.py", ".*", op="torchrun", role="process"),
    R("launcher", "torchrun", "torch/distributed/launch.py", ".*", op="torch.distributed.launch", role="process"),
    R("launcher", "torchrun", "torch/distributed/launcher/api.py", "launch_agent|.*__call__", op="torchrun",
      role="process"),
    R("launcher", "torch", "torch/multiprocessing/spawn.py", "join|start_processes|spawn|ProcessContext.join",
      op="mp.spawn parent", role="process"),
    R("launcher", "deepspeed", "deepspeed/launcher/", ".*", op="deepspeed launcher", role="process"),
    R("launcher", "accelerate", "accelerate/commands/", ".*", op="accelerate launch", role="process"),
    R("worker", "torch", "torch/utils/data/_utils/worker.py", "_worker_loop", op="DataLoader worker", role="process"),
    R("worker", "torchdata", "torchdata/stateful_dataloader/worker.py", "_worker_loop",
      op="DataLoader worker (torchdata's StatefulDataLoader)", role="process"),
    # the compile-worker sidecar's own entry and loop, not the rank's calls into its pool (SubprocPool.shutdown at
    # exit: a rank waiting for its sidecar is still a rank)
    R("worker", "torch", "torch/_inductor/compile_worker/", r"main|<module>|SubprocMain\..*|_async_compile_initializer",
      op="inductor compile worker", role="process"),
    R("launcher", "vllm", "vllm/entrypoints/openai/api_server.py", ".*", op="vLLM API server", role="process"),
    R("launcher", "vllm", "vllm/entrypoints/api_server.py", ".*", op="vLLM API server", role="process"),
    R("launcher", "vllm", "vllm/entrypoints/cli/", ".*", op="vLLM API server", role="process"),
    R("launcher", "vllm", "vllm/scripts.py", "serve|main", op="vLLM API server", role="process"),
    R("launcher", "sglang", "launch_server.py", ".*", op="SGLang server", role="process"),
    R("launcher", "sglang", "entrypoints/http_server.py", "launch_server", op="SGLang server", role="process"),
    R("launcher", "python", "uvicorn/", "Server.run|Server.serve|run", op="HTTP server front end", role="process"),
    R("worker", "sglang", "detokenizer_manager.py", ".*", op="SGLang detokenizer", role="process"),
    R("launcher", "sglang", "entrypoints/engine.py", "Engine\\..*", op="SGLang engine front end (offline Engine)",
      role="process"),
    R("worker", "vllm", "vllm/v1/engine/coordinator.py", ".*", op="vLLM data-parallel coordinator", role="process"),
    R("worker", "sglang", "sglang/srt/managers/data_parallel_controller.py", ".*",
      op="SGLang data-parallel controller", role="process"),
    # a Ray driver or controller actor blocked in ray.get waits for its actors' results: not a rank (verl's
    # main_ppo and TaskRunner, OpenRLHF's trainer); an actor with no task idles in main_loop (a wait row below)
    R("launcher", "ray", "ray/_private/worker.py", "get|Worker.get_objects|get_objects|wait", op="Ray driver (ray.get)",
      role="process"),
    # Ray before 2.0 kept the worker in ray/worker.py
    R("launcher", "ray", "ray/worker.py", "get|Worker.get_objects|get_objects|wait", op="Ray driver (ray.get)",
      role="process"),
    R("worker", "python", "multiprocessing/pool.py", "worker", op="multiprocessing pool worker", role="process"),
    R("worker", "pyspark", "pyspark/daemon.py", ".*", op="PySpark's Python worker daemon", role="process"),
    R("worker", "pyspark", "pyspark/worker.py", "main", op="PySpark Python worker", role="process"),
    R("worker", "python", "concurrent/futures/process.py", "_process_worker", op="process pool worker",
      role="process"),
    R("worker", "python", "multiprocessing/resource_tracker.py", "main", op="multiprocessing resource tracker",
      role="process"),
    R("worker", "python", "multiprocessing/semaphore_tracker.py", "main", op="multiprocessing semaphore tracker",
      role="process"),
    R("worker", "python", "multiprocessing/forkserver.py", "main", op="multiprocessing fork server", role="process"),
    R("worker", "python", "multiprocessing/spawn.py", "prepare|_fixup_main_from_path|get_preparation_data",
      op="a spawned child importing its parent's main module", role="process"),
    # a watchdog that runs py-spy on the ranks (SGLang's, a job's own): its stack is in the dumping, not in rank work
    R("worker", "python", "", r".*py_?spy.*", op="a watchdog running py-spy", role="process"),
    # ---- native frames (py-spy --native) ------------------------------------------------------------------
    R("ddp-reducer", "torch DDP", "", r"c10d::Reducer::.*", native=True, op="backward",
      says="DDP's reducer: the gradient all_reduce of backward"),
    R("store", "torch.distributed", "", r"c10d::(TCPStore|PrefixStore|Store|FileStore|HashStore)::.*|"
      r"c10d::detail::TCPClient::.*|c10d::detail::.*Store.*", native=True, op="store",
      says="the c10d store: waiting for other ranks to set a key"),
    R("work-wait", "torch.distributed", "", r"c10d::.*Work.*::(wait|synchronize.*|getFuture|result).*|"
      r"c10d::ProcessGroup.*::wait.*|c10d::Work::wait", native=True, op="wait",
      says="a c10d work handle: an asynchronous collective that has not completed"),
    R("collective", "gloo", "", r"gloo::.*(allreduce|broadcast|allgather|reduce_scatter|alltoall|barrier|gather|"
      r"scatter|reduce).*", native=True, says="a gloo collective"),
    R("work-wait", "gloo", "", r"gloo::transport::.*::(waitRecv|waitSend|wait).*|gloo::.*Buffer::wait.*",
      native=True, op="wait", says="gloo waiting for a peer's data"),
    R("store", "nccl", "", r"ncclCommInitRank.*|ncclCommInitAll|ncclCommSplit|ncclGetUniqueId", native=True,
      op="nccl init", says="NCCL communicator set-up: every rank of the group must arrive"),
    R("collective", "nccl", "", r"nccl(AllReduce|Broadcast|Bcast|AllGather|ReduceScatter|Reduce|AllToAll|"
      r"GroupEnd|Group.*)", native=True, says="an NCCL call"),
    R("p2p", "nccl", "", r"nccl(Send|Recv)", native=True),
    R("device-sync", "cuda", "", r"cuda(StreamSynchronize|DeviceSynchronize|EventSynchronize|Memcpy|MemcpyAsync|"
      r"StreamWaitEvent)|cu(StreamSynchronize|CtxSynchronize|EventSynchronize|MemcpyDtoH.*|MemcpyAsync.*)|"
      r"hip(StreamSynchronize|DeviceSynchronize|EventSynchronize|Memcpy)|"
      r"at::native::_local_scalar_dense.*|at::_ops::_local_scalar_dense.*|c10::cuda::.*[sS]ynchron.*|"
      r"at::cuda::.*[sS]ynchron.*", native=True, op="synchronize",
      says="waiting for the GPU (a synchronising call: .item(), .cpu(), synchronize)"),
    R("sleep", "libc", "", r"clock_nanosleep.*|__clock_nanosleep.*|nanosleep|__nanosleep|usleep", native=True,
      op="sleep", says="sleeping", weight=0),
    R("lock", "python", "", r"_multiprocessing_SemLock_acquire(_impl)?|semlock_acquire", native=True,
      op="multiprocessing lock", says="a lock or semaphore shared between processes (multiprocessing.Lock, RLock, "
      "Semaphore): held by another process, perhaps one that died holding it", **GENERIC),
    R("lock", "python", "", r"lock_PyThread_acquire_lock|rlock_acquire|PyThread_acquire_lock(_timed)?|acquire_timed",
      native=True, op="lock acquire", says="a Python lock's acquire (`with lock:`, lock.acquire())", **GENERIC),
    R("lock", "libc", "", r"pthread_cond_(timed)?wait.*|__pthread_cond_wait.*|__futex_abstimed_wait.*|futex_wait.*|"
      r"__lll_lock_wait.*|pthread_mutex_lock|sem_wait|std::condition_variable::wait.*|pthread_join.*|"
      r"__GI___futex.*|___pthread_cond_.*", native=True, op="wait", says="blocked on a lock or condition", **GENERIC),
    R("lock", "libc", "", r"(__)?(libc_)?(flock|lockf)(64)?", native=True, op="file lock",
      says="a file lock (flock/lockf): held by another process, perhaps a child that inherited it", **GENERIC),
    R("io", "libc", "", r"(__)?(libc_)?(recv|recvfrom|recvmsg|read|poll|ppoll|epoll_wait|select|pselect|accept|"
      r"connect|waitpid|wait4)(64)?", native=True, op="io", says="waiting on a file, socket or child", **GENERIC),
    R("io", "libc", "", r"(__)?(libc_)?(open|openat|creat|write|pwrite|writev|fsync|fdatasync|sync_file_range|close|"
      r"stat|fstat|lstat|statx|fstatat|__xstat|__fxstat|unlink|rename|mkdir|ftruncate|fallocate)(64)?", native=True,
      op="file I/O", says="a file system call: a slow or hung file system (a network mount), the open of a "
      "FIFO (named pipe) that no process has open at its other end, or a write to a pipe whose reader stopped "
      "reading (its buffer full)", **GENERIC),
)

# Source text of a frame's line, when known (the collector reads it on the node): what a C call on that line is.
SOURCE_RULES: tuple[tuple[str, str, str, str], ...] = (
    # (kind, regular expression over the line, op, says)
    ("work-wait", r"\.wait\(\s*(timeout\s*=[^)]*)?\)", "wait",
     "an asynchronous collective's work handle (.wait(), .wait(timeout=...))"),
    ("store", r"(?i)\b\w*store\w*\.(wait|get)\(", "store",
     "the c10d store: waiting for another rank to set a key (store.wait, store.get)"),
    ("store", r"\b(TCPStore|FileStore)\(", "store",
     "the c10d store's constructor: its host waits there for every client to connect (wait_for_workers), a client "
     "for the host"),
    ("device-sync", r"\.(item|cpu|tolist|numpy)\(\s*\)|cuda\.synchronize\(|\.synchronize\(\s*\)", "synchronize",
     "a synchronising call: waits for the GPU when the tensor is on it"),
    ("ddp-reducer", r"\.backward\(", "backward", "backward: DDP's gradient all_reduce runs inside it"),
    ("sleep", r"\btime\.sleep\(|\bsleep\(", "sleep", "sleeping"),
    ("device-sync", r"^\s*(if|elif|while|assert)\b.*\btorch\.(isfinite|isnan|isinf|any|all|equal)\(", "synchronize",
     "a tensor's value read by Python (a condition): waits for the GPU when the tensor is on it"),
    ("io", r"(^|[=\s(])open\(|\b(io|os|gzip|bz2|lzma|codecs)\.open\(|\.write\(|\.flush\(|os\.fsync\(|torch\.save\(|json\.dump\(|\.to_csv\(|"
     r"\.savez?\(|shutil\.(copy|move)", "file I/O", "writing or opening a file: a slow or hung file system, a "
     "FIFO (named pipe) that no process has open at its other end, or a pipe whose reader stopped reading"),
    ("io", r"\.(recv|recv_into|recvfrom|recvmsg|accept|sendall)\(", "socket",
     "a socket call made from this line (torch.distributed's recv has Python frames of its own below the caller)"),
    # a join of a thread, process or queue takes no argument but a timeout (a string's or a path's join takes parts)
    ("lock", r"\.acquire\(|\.join\(\s*(timeout\s*=[^)]*|[\d.]+|[\w.]*time\w*)?\s*\)", "thread wait", "a lock or a join"),
    ("lock", r"\b(fcntl\.)?(flock|lockf)\(", "file lock",
     "a file lock (flock/lockf): held by another process, perhaps a child that inherited it"),
    ("lock", r"(?i)^\s*(async\s+)?with\b[^#]*(lock|mutex|semaphore|cond\b|condition\b)\w*[^#]*:", "thread wait",
     "a lock taken by a with statement"),
)

