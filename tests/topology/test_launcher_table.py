"""The one launcher table (topology/launcher.py): which command lines run a launcher, read as Python reads its own
command line. hangdoctor's analysis (a dump's command line), its collector (an executable) and tracing (is this
process a launcher: never traced) all ask it."""

import pytest

from hangdoctor.topology.launcher import PROCESS_STARTERS, launcher_in_command, workers_started


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


@pytest.mark.parametrize("argv,world", [
    (["/venv/bin/python3", "/venv/bin/torchrun", "--nproc-per-node=4", "train.py"], (4, None, False)),
    (["python", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "8", "train.py"], (8, 2, False)),
    (["torchrun", "--nnodes=2:2", "--nproc_per_node=8", "train.py"], (8, 2, False)),
    (["torchrun", "--nnodes=1:4", "--nproc_per_node=8", "train.py"], (8, None, False)),  # elastic: no one count
    (["/usr/bin/python3", "/usr/local/bin/deepspeed", "--num_gpus", "8", "--num_nodes", "4", "train.py"], (8, 4, False)),
    (["python", "/venv/bin/accelerate", "launch", "--num_processes", "16", "--num_machines", "2", "t.py"], (16, None, True)),
    # no count: a launcher's default or "gpu", the script's own flag of that name, no launcher
    (["torchrun", "--nproc_per_node", "gpu", "train.py"], None),
    (["torchrun", "train.py", "--nproc_per_node", "4"], None),
    (["python", "train.py", "--nproc_per_node", "4"], None),
])
def test_how_many_ranks_a_launcher_says_it_starts(argv, world):
    started = workers_started(argv)
    assert (started and (started.per_node, started.nodes, started.whole_job)) == world
