"""The one launcher table (topology/launcher.py): which command lines run a launcher, read as Python reads its own
command line. hangdoctor's analysis (a dump's command line), its collector (an executable) and tracing (is this
process a launcher: never traced) all ask it."""

import pytest

from hangdoctor.topology.launcher import PROCESS_STARTERS, launcher_in_command


@pytest.mark.parametrize("argv,launcher", [
    (["/venv/bin/python3", "/venv/bin/torchrun", "--nproc-per-node=2", "train.py"], "torchrun"),
    (["python", "-u", "-m", "torch.distributed.run", "--standalone", "train.py"], "torch.distributed.run"),
    (["python", "-X", "faulthandler", "-m", "deepspeed.launcher.launch", "--world_info=x"], "deepspeed.launcher.launch"),
    (["/usr/bin/python3", "/usr/local/bin/deepspeed", "--num_gpus", "8", "train.py"], "deepspeed"),
    (["python", "/venv/bin/accelerate", "launch", "--num_processes", "2", "train.py"], "accelerate"),
    (["torchrun", "--nnodes", "2", "train.py"], "torchrun"),
    (["ds", "train.py"], "ds"),
    # not launchers: the ranks themselves, accelerate's other commands, code given with -c, a script's argument
    (["python", "-u", "train.py", "--launcher", "torchrun"], ""),
    (["python", "/venv/bin/accelerate", "config"], ""),
    (["python", "-c", "import torch.distributed.run"], ""),
    (["python", "-m", "tracing", "run", "--", "train.py"], ""),
    ([], ""),
])
def test_which_command_lines_run_a_launcher(argv, launcher):
    assert launcher_in_command(argv) == launcher


def test_a_caller_adds_its_own_modules():
    assert launcher_in_command(["python", "-m", "tracing", "run"], extra_modules=("tracing",)) == "tracing"


def test_shells_and_slurm_start_processes():
    assert {"srun", "bash", "mpirun", "pdsh"} <= PROCESS_STARTERS and "python" not in PROCESS_STARTERS
