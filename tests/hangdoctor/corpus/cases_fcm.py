"""First-contact batch M (seventh first-contact round, part M): live cases from public reports and programs on an
experiment tracker's login prompt waiting for the terminal on rank 0, a per-batch nvidia-smi query that never
returns on one rank (Lightning), a torch.multiprocessing producer process killed under one rank's queue.get(), and
an ImageNet-example multiprocessing-distributed launch whose second node never started; and a shape case from a
public thread (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# s-JoL/Open-Llama#47 and the wandb prompt of ultralytics/yolov5#5160, 3 ranks: rank 0 waits in input() for the
# tracker's account choice; ranks 1-2 wait in DDP's construction.
register(LiveCase("fcm_tracker_login_prompt", torchrun(3, "fcm_tracker_login_prompt.py"), ranks=3, settle=3.0))

# Lightning 1.5's GPUStatsMonitor (nvidia-smi per batch, no timeout) and unias/docklet PR #408, 3 ranks: rank 1's
# query never returns (subprocess.run), ranks 0 and 2 wait in DDP's gradient all_reduce.
register(LiveCase("fcm_lightning_nvsmi_stats", torchrun(3, "fcm_lightning_nvsmi_stats.py"), ranks=3, settle=3.0))

# torch.multiprocessing producer process + python/cpython#87971, 3 ranks: rank 1's producer is SIGKILLed, rank 1
# waits in Queue.get(); ranks 0 and 2 in DDP's gradient all_reduce; their producers idle in Queue.put.
register(LiveCase("fcm_mp_producer_killed", torchrun(3, "fcm_mp_producer_killed.py"), ranks=3, settle=2.0))

# pytorch/examples imagenet/main.py --multiprocessing-distributed and pytorch/pytorch#8091, node 0 of 2 only: ranks
# 0-2 (mp.spawn workers) wait in init_process_group for the never-started ranks 3-5.
register(LiveCase("fcm_imagenet_world_size_nodes",
                  (PYTHON, "{fixtures}/fcm_imagenet_world_size_nodes.py", "--world-size", "2", "--rank", "0"),
                  ranks=3, settle=3.0))


# Shape case (fixtures/corpus/shapes/fcm_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402

# vllm-project/vllm#3974 (vLLM 0.4.0.post1, `vllm.entrypoints.openai.api_server --tensor-parallel-size 4` on Ray
# workers; the 2024-04-15 comment: the 3 non-lead workers stuck in CustomAllreduce._gather_ipc_meta while the custom
# all-reduce meant to disable itself on >2 PCIe-only GPUs): each rank decides alone from its own GPU's NVLink links;
# rank 0 (the driver, in the server process) disables it and waits in ray.get for the workers' init_device, ranks 1-3
# (RayWorkerVllm actors) enable it and wait in all_gather_object for rank 0.
register(LiveCase(
    "fcm_vllm_custom_ar_nvlink_split",
    in_tree("fcm_vllm_custom_ar_nvlink_split",
            f"{shlex.quote(PYTHON)} -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-2-70b-chat-hf "
            "--tensor-parallel-size 4"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcm_vllm_custom_ar_nvlink_split"),
))
