"""First-contact batch ffg (forty-first first-contact round, part G): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a Lightning predict whose predict_step all_gathers over the
unrepeated (uneven) predict sampler, an accelerate gather of a metrics dict that lacks a key on one process, a
transformers Trainer upload callback that joins a stalled upload thread, a Trainer.push_to_hub whose Hub mirror
never answers, and a DeepSpeed-Chat-style prompt cache that rank 0 builds alone in a draw-until-unique loop that never
ends."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# predict_step self.all_gather over Lightning's UnrepeatedDistributedSampler (Lightning-AI/pytorch-lightning#5493,
# PR #7215), Lightning DDP: rank 0 in its third batch's all_gather; ranks 1-2 in the barrier after predict.
register(LiveCase("ffg_lightning_predict_unrepeated_all_gather",
                  torchrun(3, "ffg_lightning_predict_unrepeated_all_gather.py"), ranks=3, settle=3.0))

# a metrics dict gathered whole, a key missing where the batch lacks a kind (huggingface/trl#1342), `accelerate
# launch`: process 1 in step 3's DDP backward; processes 0 and 2 in step 2's third all_gather.
register(LiveCase("ffg_accel_pref_metrics_dict_missing_key_gather",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(),
                   "{fixtures}/ffg_accel_pref_metrics_dict_missing_key_gather.py"), ranks=3, settle=3.0))

# one upload at a time: on_save joins the previous upload thread (ray-project/ray PR #56860), transformers Trainer +
# DDP: rank 0 in Thread.join (its upload's tar child blocked on a pipe nobody reads); ranks 1-2 in step 5's backward.
register(LiveCase("ffg_hf_trainer_upload_thread_join_stalled_sink",
                  torchrun(3, "ffg_hf_trainer_upload_thread_join_stalled_sink.py"), ranks=3, settle=3.0))

# push_to_hub then wait_for_everyone (huggingface/alignment-handbook#198), transformers Trainer + DDP: rank 0 in
# create_repo's HTTP read from a mirror that never answers; ranks 1-2 in accelerate's wait_for_everyone barrier.
register(LiveCase("ffg_hf_trainer_push_to_hub_mirror_no_reply",
                  torchrun(3, "ffg_hf_trainer_push_to_hub_mirror_no_reply.py"), ranks=3, settle=3.0))

# DeepSpeed-Chat's create_prompt_dataset (deepspeedai/DeepSpeedExamples#582), the `deepspeed` runner: rank 0 busy in a
# draw-until-unique loop asking for more unique prompts than exist; ranks 1-2 in the cache barrier.
register(LiveCase("ffg_ds_chat_prompt_cache_rank0_unique_draw_spin",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/ffg_ds_chat_prompt_cache_rank0_unique_draw_spin.py"), ranks=3, env=DS_ENV,
                  settle=3.0))
