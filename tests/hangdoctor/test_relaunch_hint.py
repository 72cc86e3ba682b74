"""Ranks that another rank started by running its own command line again (Lightning's DDP launcher): the hint says
so, since what the script does before the launch runs again in each of them (hints.py `relaunch_hints`). Recorded
jobs: corpus ffc_lightning_relaunch_filelock_held (rank 0 relaunches the script for ranks 1-2 inside a FileLock) and
vllm_pynccl_p2p (workers forked by multiprocessing: the same command line, but no relaunch)."""

import io
import json
from pathlib import Path

from rich.console import Console

from hangdoctor.cli import main

CORPUS = Path(__file__).parent / "corpus"


def relaunch_hints(case: str) -> list[str]:
    out = io.StringIO()
    main(["analyze", str(CORPUS / case / "attach"), "--json"], out=Console(file=out, width=200),
         err=Console(file=io.StringIO()))
    return [h for h in json.loads(out.getvalue())["hints"] if "running its own command line again" in h]


def test_ranks_a_rank_started_again_from_its_script_are_said_to_be():
    hints = relaunch_hints("ffc_lightning_relaunch_filelock_held")
    assert len(hints) == 1 and hints[0].startswith("ranks 1-2 were started by rank 0 running its own command line")


def test_children_that_multiprocessing_forked_are_no_relaunch():
    assert relaunch_hints("vllm_pynccl_p2p") == []
