"""First-contact batch J (sixth first-contact round, part J): live cases from public reports on a world-collective
new_group() entered by only some ranks (llm-compressor), a torch.distributed.pipelining stage that skips a step, an
accelerate evaluation loop over uneven per-rank eval shards, and a DataLoader worker forked while a thread held a
lock; and a shape case from a public thread; see each case.json's source and thread."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# vllm-project/llm-compressor PR #2869 (review: new_group is collective over the world), 3 ranks: the extended-timeout
# helper's new_group(backend="gloo") is entered by the module owners 0 and 1 only; they wait in the gloo group's
# store rendezvous, rank 2 (owns no module) waits in the broadcast of the compressed weights.
register(LiveCase("fcj_new_group_subset", torchrun(3, "fcj_new_group_subset.py"), ranks=3, settle=2.0))

# pytorch/tutorials pipelining tutorial (PipelineStage per rank) with Schedule1F1B, 3 stages, and allenai/OLMo-core
# PR #657's all-ignore_index batch: the last stage (rank 2) skips that step locally, ends one step early and waits in
# the final barrier; ranks 0-1 wait in their last schedule step's pipeline p2p (rank 1 on its send to 2).
register(LiveCase("fcj_pipe_last_stage_skip", torchrun(3, "fcj_pipe_last_stage_skip.py"), ranks=3, settle=2.0))

# accelerate's no_trainer loop with DataLoaderConfiguration(even_batches=False) on the eval set (huggingface/accelerate
# PR #776) and the freeze of Chris-hughes10/pytorch-accelerated PR #53, 3 ranks: rank 2 has one eval batch fewer and
# waits in the epoch checkpoint's wait_for_everyone; ranks 0-1 wait in gather_for_metrics' all_gather.
register(LiveCase("fcj_accel_uneven_eval_shards", torchrun(3, "fcj_accel_uneven_eval_shards.py"), ranks=3, settle=2.0))

# pytorch/pytorch#24927 and #130610 (a lock held by another thread when the DataLoader forks its workers), DDP with
# num_workers=1, 3 ranks: rank 1's stats-uploader thread holds the stats lock when the worker is forked; the worker
# waits on its copy for ever, rank 1 waits in the DataLoader, ranks 0 and 2 in DDP's gradient all_reduce.
register(LiveCase("fcj_dataloader_fork_held_lock", torchrun(3, "fcj_dataloader_fork_held_lock.py"), ranks=3,
                  settle=2.0))


# Shape case (fixtures/corpus/shapes/fcj_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import shape_env, tree  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# NVIDIA-NeMo/Speech PR #14380 (the race in NeMoModelCheckpoint.on_save_checkpoint's per-rank 'does the best .ckpt
# exist' check) with the symptom of NVIDIA-NeMo/Speech#13739 (DDP ASR training hangs after saving a checkpoint whose
# name holds val_loss; every GPU at 99%): NeMo's ASR CTC example on 4 GPUs, Lightning DDP (rank 0 starts ranks 1-3).
# Rank 0 checked before it wrote the file, skipped the .nemo re-save and went on training (waits on the GPU in the
# progress bar's .item()); ranks 1-3 saw the file and wait in _backup_existing_nemo_ckpt's file_exists broadcast.
NEMO_ASR_ARGS = ("--config-path=../conf/fastconformer --config-name=fast-conformer_ctc_bpe "
                 "model.train_ds.manifest_filepath=/data/train_manifest.json "
                 "model.validation_ds.manifest_filepath=/data/dev_manifest.json "
                 "model.tokenizer.dir=/data/tokenizer_spe_unigram_v1024 trainer.devices=4 trainer.strategy=ddp "
                 "exp_manager.checkpoint_callback_params.always_save_nemo=True "
                 "exp_manager.checkpoint_callback_params.filename='FastConformer-CTC-BPE-{val_loss:.3f}-{step}'")
register(LiveCase(
    "fcj_nemo_ckpt_exists_race",
    ("sh", "-c", f"cd {shlex.quote(tree('fcj_nemo_ckpt_exists_race'))}/examples/asr/asr_ctc && "
                 f"exec {shlex.quote(PYTHON)} speech_to_text_ctc_bpe.py {NEMO_ASR_ARGS}"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcj_nemo_ckpt_exists_race"),
))
