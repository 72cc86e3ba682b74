"""Ranks told to reach different rendezvous stores (MASTER_ADDR:MASTER_PORT in each rank's environment, or the
address in the locals of torch's store set-up): places split by store, the ranks whose store rank 0 does not serve
are the ones the others wait for (analysis/waitgraph.py `_store_edges`), and a port 0 is named in the hint. On
recorded jobs: corpus fcz_slurm_node_port_mismatch (one node's ranks given another port) and
ffd_torchrun_static_rdzv_port0 (torchrun's static rendezvous with --rdzv-endpoint=localhost:0)."""

import io
import json
import shutil
from pathlib import Path

from rich.console import Console

from hangdoctor.cli import main

CORPUS = Path(__file__).parent / "corpus"
MISMATCH = CORPUS / "fcz_slurm_node_port_mismatch"


def verdict(*paths) -> dict:
    out = io.StringIO()
    main(["analyze", *map(str, paths), "--json"], out=Console(file=out, width=200), err=Console(file=io.StringIO()))
    return json.loads(out.getvalue())


def test_the_rank_told_another_store_is_the_one_the_others_wait_for():
    for form in ("attach", "locals"):  # the environment attach keeps; the store set-up's locals
        found = verdict(MISMATCH / form)
        first = found["suspects"][0]
        assert (first["folded"], first["confidence"]) == ("2", "medium"), form
        assert "told to reach the store at 127.0.0.1:51931, not 127.0.0.1:51189" in first["reason"]


def test_ranks_told_one_store_are_not_split(tmp_path):
    # the same recording with every rank given rank 0's port: nothing sets rank 2 apart by its store any more
    copy = tmp_path / "attach"
    shutil.copytree(MISMATCH / "attach", copy)
    node = copy / "nodes" / "vm.json"
    doc = json.loads(node.read_text())
    for proc in doc["processes"]:
        proc["env"]["MASTER_PORT"] = "51189"
    node.write_text(json.dumps(doc))
    found = verdict(copy)
    assert [(s["folded"], s["confidence"]) for s in found["suspects"]] == [("1", "low")]  # the stacks' guess
    assert any("every one told to reach the store at 127.0.0.1:51189" in h for h in found["hints"])


def test_a_port_0_endpoint_is_named_in_the_hint():
    found = verdict(CORPUS / "ffd_torchrun_static_rdzv_port0" / "attach")
    assert found["suspects"] == []
    hint = next(h for h in found["hints"] if "every one told to reach the store at localhost:0" in h)
    assert "port 0 is no port a client can connect to" in hint


SPAWNED = CORPUS / "fff_spawn_find_free_port_per_rank"


def test_ranks_each_told_a_store_of_their_own_are_one_suspect():
    # mp.spawn ranks that each picked a free port (pytorch#53395): rank 0 hosts its store, ranks 1-2 each connect
    # to their own: one mistake, one suspect (attach: the addresses; native: who hosts and who still connects)
    for form in ("attach", "locals", "native"):
        first = verdict(SPAWNED / form)["suspects"][0]
        assert (first["folded"], first["confidence"]) == ("1-2", "medium"), form
    assert "told to reach stores that no rank of the job serves" in verdict(SPAWNED / "attach")["suspects"][0]["reason"]
    assert "still connecting to the store" in verdict(SPAWNED / "native")["suspects"][0]["reason"]


def test_python_only_dumps_of_the_same_job_name_nobody():
    # no address, no native frame: one stack for all three, and nothing to tell them apart
    assert verdict(SPAWNED / "text" / "s1", SPAWNED / "text" / "s2")["suspects"] == []
