"""No rank started and the launchers wait in their rendezvous (analysis/rendezvous.py): the verdict says which
nodes are missing, on a recorded torchrun job asked for 3 nodes with 2 agents started (corpus fcq_rdzv_missing_node)."""

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from hangdoctor.topology.launcher import flag_number
from hangdoctor.cli import main

CASE = Path(__file__).parent / "corpus" / "fcq_rdzv_missing_node"


@pytest.mark.parametrize("form", [["attach"], ["text/s1", "text/s2"]])
def test_agents_in_the_rendezvous_say_a_node_never_joined(form):
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", *(str(CASE / f) for f in form), "--json"], out=Console(file=out, width=200),
                err=Console(file=err, width=200))
    verdict = json.loads(out.getvalue())
    assert verdict["headline"].startswith("No rank started: 2 launchers wait in the rendezvous (their command line "
                                          "asks for 3 nodes and 2 agents are here: 1 node never joined)")
    assert verdict["suspects"] == [] and code == 1
    assert "no rank has started" in err.getvalue()


def test_the_nodes_asked_for():
    assert flag_number(("torchrun", "--nnodes=3", "x.py"), ("--nnodes",), least=True) == 3
    assert flag_number(("torchrun", "--nnodes", "2:4", "x.py"), ("--nnodes",), least=True) == 2
    assert flag_number(("torchrun", "--nnodes", "2:4", "x.py"), ("--nnodes",)) is None  # how many it started: unknown
    assert flag_number(("torchrun", "--nproc-per-node=8", "x.py"), ("--nnodes",), least=True) is None
