"""Bad flags give one line on stderr that names the numbers, and exit 2; param-group rules; topology mapping."""

import pytest
from torch import nn

from tests.support import PYTHON, child_env, run_bounded
from hangdoctor.topology import ParallelDims
from trainer.config import TrainConfig
from trainer.faults import FaultInjector, parse_fault
from trainer.model import EmbeddingPipe, GPTShape, ParallelTransformerLayerPipe
from trainer.param_groups import build_param_groups, naive_megatron_no_decay, robust_no_decay


def run_trainer(*args, world_size=1):
    env = child_env(RANK="0", WORLD_SIZE=str(world_size), LOCAL_RANK="0")
    return run_bounded([PYTHON, "-m", "trainer", *args], timeout=60, env=env)


@pytest.mark.parametrize("args, world, message", [
    (["--tp", "2", "--pp", "2"], 6, "Error: world size 6 is not divisible by tp=2 x pp=2 = 4"),
    (["--pp", "3", "--num-layers", "4"], 3, "Error: 4 layers = 4 is not divisible by pipeline-parallel size pp=3"),
    (["--fault", "nosuch"], 1, "Error: unknown fault 'nosuch'; known faults: skip-loss-broadcast"),
])
def test_bad_flags_give_one_line_naming_the_numbers(args, world, message):
    result = run_trainer(*args, world_size=world)
    assert result.returncode == 2
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("cfg, world, message", [
    (dict(partition_method="type:transformer|embedding", pp=4, num_layers=4), 4,
     "4 layers + 2 embeddings = 6 is not divisible by pipeline-parallel size pp=4"),
    (dict(num_attention_heads=6, hidden_size=96, tp=4), 4, "6 attention heads are not divisible by tensor-parallel size tp=4"),
    (dict(global_batch_size=6, micro_batch_size=2), 2, "global batch size 6 is not divisible by micro batch size 2 x dp=2 = 4"),
    (dict(zero_stage=2, pp=2), 2, "ZeRO stage 0 or 1 only"),
    (dict(fr_buffer_size=500), 1, "--fr-buffer-size 500 needs --flight-recorder DIR"),
    (dict(fr_buffer_size=-1, flight_recorder="fr"), 1, "--fr-buffer-size -1 must not be negative"),
])
def test_config_validation_messages(cfg, world, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        TrainConfig(**cfg).validate(world)


def test_fault_options_are_checked_against_the_topology():
    dims = ParallelDims(pp=2, dp=2)
    with pytest.raises(ValueError, match="needs pipeline parallelism"):
        FaultInjector(["no-tied-grad-reduce"], dims=ParallelDims(dp=2), coords=ParallelDims(dp=2).coords(0), embed_layernorm=False)
    with pytest.raises(ValueError, match="needs --embed-layernorm"):
        FaultInjector(["layernorm-alias"], dims=dims, coords=dims.coords(0), embed_layernorm=False)
    with pytest.raises(ValueError, match=r"ranks \[0\] are not on the last stage pp=1"):
        FaultInjector(["skip-loss-broadcast:ranks=0"], dims=dims, coords=dims.coords(0), embed_layernorm=False)
    with pytest.raises(ValueError, match="rank=9 is outside 0..3"):
        FaultInjector(["dead-rank:rank=9"], dims=dims, coords=dims.coords(0), embed_layernorm=False)
    with pytest.raises(ValueError, match="bad option 'when=3'; options: rank, iteration, seconds, iterations"):
        parse_fault("straggler:when=3")
    assert parse_fault("straggler:rank=3,seconds=0.5").options == {"rank": 3, "iteration": 2, "seconds": 0.5, "iterations": 1}


def _decay_names(model: nn.Module, rule) -> set[str]:
    names = {id(p): n for n, p in model.named_parameters()}
    groups = build_param_groups(model, weight_decay=0.1, rule=rule)
    return {names[id(p)] for g in groups if g["weight_decay"] > 0 for p in g["params"]}


def test_only_the_naive_rule_puts_the_embedding_layernorm_in_the_decay_group():
    shape = GPTShape(vocab=128, hidden=32, heads=4, seq=8, layers=1, embed_layernorm=True, seed=1)
    model = nn.ModuleDict({"embed": EmbeddingPipe(shape, None), "block": ParallelTransformerLayerPipe(shape, 0, None)})
    robust = _decay_names(model, robust_no_decay)
    naive = _decay_names(model, naive_megatron_no_decay)
    weights = {"embed.word_embeddings.weight", "block.query_key_value.weight", "block.dense.weight",
               "block.dense_h_to_4h.weight", "block.dense_4h_to_h.weight"}
    assert robust == weights
    assert naive == weights | {"embed.norm.weight"}, "the alias hides torch.nn.LayerNorm from isinstance(LayerNorm)"


@pytest.mark.parametrize("order", ["tp-dp-pp", "tp-pp-dp", "dp-tp-pp"])
def test_deepspeed_topology_has_our_rank_layout(order):
    from trainer.engine import deepspeed_topology

    dims = ParallelDims(tp=2, pp=2, dp=2, order=order)
    topo = deepspeed_topology(dims)
    for rank in range(dims.world_size):
        c, ds = dims.coords(rank), topo.get_coord(rank)
        assert (ds.model, ds.data, ds.pipe) == (c.tp, c.dp, c.pp)


@pytest.mark.parametrize("fault, skipping", [
    ("skip-loss-broadcast", [4, 5, 6, 7]),            # every last-stage rank
    ("skip-loss-broadcast:dp=1", [6, 7]),             # replica dp=1 only (all tp)
    ("skip-loss-broadcast:ranks=5,7", [5, 7]),        # chosen last-stage ranks
])
def test_skip_loss_broadcast_selects_ranks_of_the_last_stage(fault, skipping):
    dims = ParallelDims(tp=2, pp=2, dp=2)  # ranks 4-7 are pp=1; dp=1 there is ranks 6-7
    chosen = [r for r in range(8)
              if FaultInjector([fault], dims=dims, coords=dims.coords(r), embed_layernorm=False)._skips_broadcast(parse_fault(fault))]
    assert chosen == skipping


@pytest.mark.parametrize("earlier", [["config.json"], ["metrics.jsonl"], ["checkpoints/latest"], ["weights/w.json"]])
def test_a_run_dir_with_an_earlier_run_needs_resume(tmp_path, earlier):
    run_dir = tmp_path / "run"
    for name in earlier:
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text("earlier\n")
    result = run_trainer("--run-dir", str(run_dir))
    assert result.returncode == 2, result.output[-2000:]
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: --run-dir {run_dir} holds an earlier run (") and "pass --resume" in line
    assert all((run_dir / name).read_text() == "earlier\n" for name in earlier)


def test_identify_process_under_each_launcher():
    """The trainer reads the launcher table too, and hands torch.distributed the torchrun names."""
    from trainer.distributed import identify_process

    env = {"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "localhost",
           "SLURM_JOB_ID": "77"}
    ident = identify_process(env)
    assert (ident.rank, ident.world_size, ident.local_rank, ident.launcher) == (3, 4, 1, "srun")
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == (
        "3", "4", "1", "localhost", "20077")
    env = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "6000"}
    assert identify_process(env).launcher == "mpi" and (env["RANK"], env["WORLD_SIZE"]) == ("2", "4")
    with pytest.raises(ValueError, match="MASTER_ADDR is not"):
        identify_process({"PMI_RANK": "0", "PMI_SIZE": "2"})
    env = {}
    assert identify_process(env).launcher == "single" and env["WORLD_SIZE"] == "1"
