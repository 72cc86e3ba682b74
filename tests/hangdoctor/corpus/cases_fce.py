"""First-contact batch E (third first-contact round): live cases from public example programs and the bug shapes
their threads report (HF transformers Trainer, a DeepSpeed pipeline, plain torch.distributed, torch.distributed.rpc)
and one shape case from a public py-spy paste, each hung the way its public source reports (see each case.json's
source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

DS_ENV = {"DS_ACCELERATOR": "cpu"}

# IBM/ado PR #41, 3 ranks: a stop_after_seconds callback decided on each rank's own clock.
register(LiveCase("fce_hf_trainer_time_budget", torchrun(3, "fce_hf_trainer_time_budget.py"), ranks=3, settle=2.0))

# deepspeedai/DeepSpeed#797 / PR #801, PP=2 x DP=2: save_checkpoint called on the last pipeline stage only.
register(LiveCase("fce_ds_pipe_ckpt_last_stage", torchrun(4, "fce_ds_pipe_ckpt_last_stage.py"), ranks=4, env=DS_ENV,
                  settle=2.0))

# pytorch/pytorch#39706 shape, 3 ranks (2 + 1 per node): gather to "the first rank of my node" on the world group.
register(LiveCase("fce_gather_node_leader_dst", torchrun(3, "fce_gather_node_leader_dst.py"), ranks=3, settle=2.0))

# pytorch/examples distributed/rpc/batch/reinforce.py, mp.spawn, agent + 3 observers: observer 2 leaves its episode
# on done (the non-batched example's `if done: break`) and the agent's per-step action batch never fills.
register(LiveCase("fce_rpc_batch_rl_observer_done", (PYTHON, "{fixtures}/fce_rpc_batch_rl_observer_done.py"), ranks=4,
                  settle=3.0))


# Shape case (fixtures/corpus/shapes/fce_fairseq_buffered_iterator; see cases_shapes.py for the mechanism): our own
# stand-in fairseq (module paths and function names of the py-spy paste in facebookresearch/fairseq#4816), real torch
# and gloo on CPU. fairseq-train --ddp-backend legacy_ddp --num-workers 1 under torchrun, 4 ranks: rank 0's
# DataLoader worker, forked by the BufferedIterator's BackgroundConsumer thread while another thread held the index
# reader's lock, waits on that lock for ever; rank 0 waits in BufferedIterator.__next__, ranks 1-3 in the gradient
# all_reduce of the next update.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402

register(LiveCase(
    "fce_fairseq_buffered_iterator",
    in_tree("fce_fairseq_buffered_iterator",
            f"{shlex.quote(PYTHON)} -m torch.distributed.run --standalone --nproc_per_node 4 fairseq_cli/train.py "
            "data-bin/wikitext-103 --ddp-backend legacy_ddp --num-workers 1 --batch-size 8 --update-freq 2 "
            "--max-epoch 3"),
    ranks=4, shape=True, settle=3.0, env=shape_env("fce_fairseq_buffered_iterator"),
))
