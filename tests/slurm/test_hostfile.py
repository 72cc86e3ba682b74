"""Hostfiles like the seed's makehostfile: `node slots=N`, slots from SLURM_STEP_GPUS, 8 when unset."""

import pytest

from slurm.hostfile import hostfile_from_env, make_hostfile, slots_from_env
from tests.support import PYTHON, child_env, run_bounded


def test_seed_makehostfile_equivalent():
    env = {"SLURM_JOB_NODELIST": "jean-zay-iam[01-02]", "SLURM_STEP_GPUS": "0,1,2,3"}
    assert hostfile_from_env(env) == "jean-zay-iam01 slots=4\njean-zay-iam02 slots=4\n"


def test_slots_fall_back_to_8_like_the_seed_workaround():
    assert slots_from_env({}) == 8
    assert slots_from_env({"SLURM_STEP_GPUS": ""}) == 8
    assert slots_from_env({"SLURM_JOB_GPUS": "0,1"}) == 2
    assert slots_from_env({}, default_slots=4) == 4


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="SLURM_JOB_NODELIST is not set"):
        hostfile_from_env({})
    with pytest.raises(ValueError, match="slots=0"):
        make_hostfile(["n1"], 0)


def test_cli_prints_hostfile_and_one_line_errors():
    ok = run_bounded([PYTHON, "-m", "slurm.hostfile", "--nodes", "gpu[1-2]", "--slots", "8"], timeout=30)
    assert (ok.returncode, ok.stdout) == (0, "gpu1 slots=8\ngpu2 slots=8\n")
    env = child_env()
    env.pop("SLURM_JOB_NODELIST", None)
    env.pop("SLURM_NODELIST", None)
    bad = run_bounded([PYTHON, "-m", "slurm.hostfile", "--nodes", "gpu[1-"], timeout=30, env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("Error: bad node list") and bad.stderr.count("\n") == 1
    missing = run_bounded([PYTHON, "-m", "slurm.hostfile"], timeout=30, env=env)
    assert missing.returncode == 2 and "SLURM_JOB_NODELIST is not set" in missing.stderr
