"""First-contact batch D (second first-contact round): live cases from public example programs of PyTorch Lightning
(ModelParallelStrategy on a 2-D DeviceMesh), a torchtitan-style trainer (async distributed checkpoint) and a
torchtitan-style interleaved pipeline schedule, and shape cases from public threads of SGLang and vLLM, each hung the
way a public thread reports (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Lightning-AI/pytorch-lightning#20561, 2 x 2 (data_parallel x tensor_parallel): replica 1 runs out of validation data.
register(LiveCase("fcd_lightning_uneven_val_2d", torchrun(4, "fcd_lightning_uneven_val_2d.py"), ranks=4, settle=2.0))

# KempnerInstitute/KempnerForge#104, 2 ranks: dcp.async_save's planning thread and save()'s barrier race on one group.
register(LiveCase("fcd_titan_async_ckpt_race", torchrun(2, "fcd_titan_async_ckpt_race.py"), ranks=2, settle=2.0))

# pytorch/pytorch#172668, 2 ranks x 2 virtual stages: deferred receives make both ranks send to each other first.
register(LiveCase("fcd_pp_deferred_recv_cycle", torchrun(2, "fcd_pp_deferred_recv_cycle.py"), ranks=2, settle=2.0))


# Shape cases (fixtures/corpus/shapes/fcd_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env, tree  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# SGLang offline Engine with --pp-size 2 (sgl-project/sglang#24687): save_remote_model's RPC reaches the first stage
# only; its handle_rpc_request ends in a world barrier before it forwards the step's requests to stage 1, which waits
# for them in point_to_point_pyobj.
register(LiveCase(
    "fcd_sglang_pp_rpc_barrier",
    in_tree("fcd_sglang_pp_rpc_barrier",
            f"{shlex.quote(PYTHON)} sglang/examples/runtime/engine/save_remote_state.py --model-path /data1/Qwen3-32B "
            "--pp-size 2 --remote-model-save-url redis://192.168.1.9:7471/Qwen3-32B6 --mem-fraction-static 0.9 "
            "--host 0.0.0.0"),
    ranks=2, shape=True, settle=2.0, env=shape_env("fcd_sglang_pp_rpc_barrier"),
))

# vLLM V1 `vllm serve <dense model> -dp 2` (vllm-project/vllm#28224): DP1 has no requests left and runs dummy batches
# that skip the per-step DP coordination; DP0 waits in coordinate_batch_across_dp, DP1 in the finish-sync all-reduce.
register(LiveCase(
    "fcd_vllm_dp_dummy_desync",
    in_tree("fcd_vllm_dp_dummy_desync",
            f"{shlex.quote(PYTHON)} {shlex.quote(tree('fcd_vllm_dp_dummy_desync') + '/bin/vllm')} "
            "serve meta-llama/Meta-Llama-3-8B-Instruct -dp 2"),
    ranks=2, shape=True, settle=2.0, env=shape_env("fcd_vllm_dp_dummy_desync"),
))
