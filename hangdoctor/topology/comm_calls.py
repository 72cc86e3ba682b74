"""The one table of communication calls by name: what hangdoctor's wait table (hangdoctor/analysis/frameworks.py)
and tracing's `diverge` (tracing/analysis/comms.py) both read. Pure Python.

- COLLECTIVE_OPS, P2P_OPS, BARRIER_OPS: the calls as the APIs name them (torch.distributed, deepspeed.comm,
  Megatron's and DeepSpeed's pipeline p2p, accelerate), "|"-joined for the wait table's regular expressions; a
  frame of one of these names inside a communication layer is the op.
- The words that make any function's name a communication call (tracing compares calls of code it recorded, where
  a framework's own wrapper, `_exec_send_activations`, counts too): COLLECTIVE_PHRASES anywhere in the name,
  P2P_WORDS as one of its `_`-separated words, and GENERIC_COLLECTIVES (reduce, gather, scatter) only as the whole
  name of a function of torch.distributed or deepspeed.comm (elsewhere they are ordinary words).
"""

COLLECTIVE_OPS = (
    "broadcast|all_reduce|allreduce|all_gather|allgather|all_gather_into_tensor|all_gather_object|all_gather_coalesced|"
    "_all_gather_base|all_gather_base|allgather_fn|reduce_scatter|reduce_scatter_tensor|_reduce_scatter_base|"
    "reduce_scatter_fn|reduce_scatter_coalesced|all_to_all|all_to_all_single|alltoall|reduce|gather|scatter|"
    "broadcast_object_list|scatter_object_list|gather_object|all_reduce_coalesced|inference_all_reduce|"
    "broadcast_multigpu|all_reduce_multigpu|batch_all_gather|all_gather_into_tensor_coalesced|all_gather_single|"
    "reduce_scatter_single|full_tensor|redistribute|gather_for_metrics|pad_across_processes"
)
P2P_OPS = ("send|recv|isend|irecv|batch_isend_irecv|send_obj|recv_obj|send_object_list|recv_object_list|"
           "send_forward|recv_forward|send_backward|recv_backward|send_forward_recv_backward|"
           "send_backward_recv_forward|send_forward_recv_forward|send_backward_recv_backward|_communicate|"
           "_batched_p2p_ops|_p2p_ops|send_activations|recv_activations|send_grads|recv_grads")
BARRIER_OPS = "barrier|monitored_barrier|wait_for_everyone"
WAIT_OPS = ("wait", "wait_all", "synchronize")  # a work handle's or the device's wait, named as the op

COLLECTIVE_PHRASES = r"broadcast|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|barrier"
P2P_WORDS = frozenset({"send", "recv", "isend", "irecv", "sendrecv"})
GENERIC_COLLECTIVES = frozenset({"reduce", "gather", "scatter"})
COLLECTIVE_MODULES = ("torch.distributed", "deepspeed.comm")
