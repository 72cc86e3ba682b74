"""Settings: HANGDOCTOR_TRACE round-trips, and bad values are refused with a message that names them."""

from __future__ import annotations

import pytest

from tracing.config import DEFAULT_RING, TraceConfig


def test_env_round_trip():
    config = TraceConfig(include=("deepspeed", "trainer"), exclude=("deepspeed.utils",), out="/scratch/t", ring=4096,
                         stream=True, start_at="train_step", c_calls=True, backend="setprofile", tee=True, ranks="0-3")
    assert TraceConfig.from_env(config.to_env()) == config
    assert TraceConfig.from_env("include=a").ring == DEFAULT_RING


@pytest.mark.parametrize(("text", "message"), [
    ("out=/x", "include=... is missing"),
    ("include=a;ring=big", "ring='big' is not a number"),
    ("include=a;color=red", "unknown key 'color'"),
    ("include=a;stream=maybe", "expected 1 or 0"),
    ("include=a;ring=4", "at least 16 events"),
    ("include=a;ring=0", "no output"),
    ("include=a;backend=fast", "choose one of"),
    ("include=a;ranks=5-2", "bad rank range"),
    ("include=a;nonsense", "expected key=value"),
])
def test_bad_env_values(text, message):
    with pytest.raises(ValueError, match=message):
        TraceConfig.from_env(text)


def test_identity_from_torchrun_srun_and_nothing():
    from tracing.identity import current_identity
    torchrun = current_identity({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_PROCID": "2"})
    assert (torchrun.rank, torchrun.local_rank, torchrun.world_size, torchrun.rank_source) == (5, 1, 8, "RANK")
    srun = current_identity({"SLURM_PROCID": "13", "SLURM_LOCALID": "3", "SLURM_NTASKS": "16"})
    assert (srun.rank, srun.local_rank, srun.world_size, srun.rank_source) == (13, 3, 16, "SLURM_PROCID")
    alone = current_identity({})
    assert (alone.rank, alone.local_rank, alone.world_size, alone.rank_source) == (0, 0, None, "default")
    assert srun.file_name("trace", "txt") == f"trace-{srun.host}-3-{srun.pid}.txt"
