"""First-contact batch I (fifth first-contact round, part I): live cases from public reports on a web UI that reads its
trainer's stderr pipe only after the run (LlamaFactory), a background-thread batch prefetcher whose thread dies
(prefetch_generator's DataLoaderX idiom), a GRPO tool-call parser's regex in catastrophic backtracking (TRL) and
per-key collectives issued in a set's per-process order (nvalchemi-toolkit), and shape cases from public threads on
miles (a rank-0-only Megatron async-save finalization) and TuFT (an FSDP actor with an empty data shard); see each
case.json's source and thread."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# hiyouga/LlamaFactory PR #10584: the web UI's runner starts torchrun (3 ranks) with stderr=PIPE and reads it only
# after the child exits; rank 0's per-step log fills the pipe and blocks in write; 1 and 2 wait in DDP's all_reduce.
register(LiveCase("fci_webui_stderr_pipe", (PYTHON, "{fixtures}/fci_webui_stderr_pipe.py"), ranks=3, settle=2.0))

# justheuristic/prefetch_generator's BackgroundGenerator as DataLoaderX + RadarML/red-rover#23, 3 ranks: rank 1's
# prefetch thread dies on a corrupt record, its main thread waits in queue.get(); 0 and 2 wait in DDP's all_reduce.
register(LiveCase("fci_prefetch_thread_died", torchrun(3, "fci_prefetch_thread_died.py"), ranks=3, settle=2.0))

# huggingface/trl#5415 in a GRPO-style accelerate loop, 3 ranks: rank 1's completion is cut inside a tool call and its
# tool-call parser's regex backtracks for hours (on the CPU, holding the GIL); 0 and 2 wait in the reward gather.
register(LiveCase("fci_grpo_tool_regex_backtrack", torchrun(3, "fci_grpo_tool_regex_backtrack.py"), ranks=3,
                  settle=2.0))

# NVIDIA/nvalchemi-toolkit PR #143, 3 ranks: one collective per output key in the order of a set of key names (per-
# process hash seeds): ranks 0 and 2 wait in the stress all_reduce, rank 1 in the forces halo all_to_all.
register(LiveCase("fci_set_order_collectives", torchrun(3, "fci_set_order_collectives.py"), ranks=3, settle=2.0))


# Shape cases (fixtures/corpus/shapes/fci_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402

# radixark/miles PR #1763 (the post-save hook of PR #1586 with --async-save): miles' train.py driver, 4 Megatron
# training actors on Ray; at a save, global rank 0 alone blocks in Megatron's collective async-save finalization
# (waiting on the GPU for an all_reduce), ranks 1-3 returned from save_model and idle in Ray's task loop.
MILES_ARGS = ("--actor-num-nodes 1 --actor-num-gpus-per-node 4 --rollout-num-gpus 4 --colocate "
              "--hf-checkpoint /root/Qwen3-4B --ref-load /root/Qwen3-4B_torch_dist --save /root/Qwen3-4B_miles "
              "--save-interval 20 --async-save --custom-megatron-post-save-hook-path my_hooks.upload_to_s3 "
              "--tensor-model-parallel-size 2 --sequence-parallel --advantage-estimator grpo --num-rollout 3000")
register(LiveCase(
    "fci_miles_async_save_hook",
    in_tree("fci_miles_async_save_hook", f"{shlex.quote(PYTHON)} train.py {MILES_ARGS}"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fci_miles_async_save_hook"),
))

# agentscope-ai/TuFT PR #121 (fix 1: fail fast when len(data) < world_size): TuFT's server with its FSDP training
# backend on 4 GPUs (one VerlWorkerActor per GPU on Ray); a forward_backward with 3 datums gives actor 3 an empty shard:
# it returns at once and idles in Ray's task loop, actors 0-2 wait on the GPU in verl's batch_num_tokens all_reduce.
register(LiveCase(
    "fci_tuft_fsdp_empty_shard",
    in_tree("fci_tuft_fsdp_empty_shard", f"{shlex.quote(PYTHON)} -m tuft.cli launch --config tuft_config.yaml"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fci_tuft_fsdp_empty_shard"),
))
