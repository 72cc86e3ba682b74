"""A collective's subgroup read from the names its caller keeps it under (analysis/group_names.py), and the
collector's numbering of object addresses that keeps that readable in attach's node files (collector/compact.py).

The recorded case: a (dp, cp) 2x2 DeviceMesh where rank 3 skipped its context-parallel all_reduce
(tests/hangdoctor/corpus/fen_cp_loss_skip_all_ignore_labels): rank 0 waits in its dp_group's all_reduce, rank 2 in
its cp_group's, ranks 1 and 3 in the world barrier."""

import copy
from pathlib import Path

from hangdoctor.analysis.group_names import coordinates, named_group_members
from hangdoctor.analysis.ranks import view_rank
from hangdoctor.analysis.verdict import diagnose
from hangdoctor.analysis.waits import default_table
from hangdoctor.collector import compact
from hangdoctor.formats.load import load_paths
from hangdoctor.identity import TopologyFlags

CASE = Path(__file__).parent / "corpus" / "fen_cp_loss_skip_all_ignore_labels"


def _views():
    collection = load_paths([CASE / "locals"], TopologyFlags())
    return [view_rank(record, default_table()) for record in collection.records]


def test_each_ranks_group_is_read_from_its_callers_name_and_the_mesh_coordinates():
    views = _views()
    by_rank = {v.rank: v for v in views}
    assert coordinates(by_rank[2]) == {"dp": 1, "cp": 0}
    members, said = named_group_members(by_rank[2], views)
    assert members == {2, 3} and "cp_group" in said and "dp_rank=1" in said
    members, said = named_group_members(by_rank[0], views)
    assert members == {0, 2} and "dp_group" in said
    assert named_group_members(by_rank[1], views) is None  # the world barrier: no group argument


def test_the_wait_graph_follows_the_named_groups():
    graph = diagnose(load_paths([CASE / "locals"], TopologyFlags())).graph
    node_of = {r: n for n in graph.nodes for r in n.ranks}
    edges = {(tuple(graph.nodes[e.waiter].ranks), tuple(e.ranks)): e for e in graph.edges}
    assert edges[((2,), (3,))].strength == "semantic" and "cp_group" in edges[((2,), (3,))].evidence
    assert edges[((0,), (2,))].strength == "semantic"
    assert not any(graph.nodes[e.waiter].ranks == [2] and e.target == node_of[1] and 1 in e.ranks
                   for e in graph.edges), "rank 2's cp group does not hold rank 1"


def test_without_every_ranks_coordinates_no_group_is_guessed():
    views = _views()
    stripped = [copy.copy(v) for v in views]
    stripped[3].frame_locals = tuple({k: x for k, x in (f or {}).items() if not k.endswith("_rank")}
                                     for f in stripped[3].frame_locals)
    assert named_group_members(next(v for v in stripped if v.rank == 2), stripped) is None


def _doc(pid, frames):
    return {"pid": pid, "samples": [{"pyspy_json": [{"thread_id": 1, "frames": frames}]}]}


def _frame(name, **values):
    return {"name": name, "locals": [{"name": k, "repr": v, "addr": 1234} for k, v in values.items()]}


def test_addresses_are_numbered_per_process_so_frames_still_factor_and_identity_stays():
    group_a, group_b = "<ProcessGroup at 0x7f00aa>", "<ProcessGroup at 0x7f00bb>"
    ranks = [_doc(10 + r, [_frame("all_reduce", group=g, tensor=f"<Tensor at 0x7f1{r}>"),
                           _frame("main", dp_group=group_a if r == 0 else "<ProcessGroup at 0x7e00aa>",
                                  cp_group=g)])
             for r, g in ((0, group_b), (1, "<ProcessGroup at 0x7e00cc>"))]
    doc = compact.drop_addresses({"processes": ranks})
    first, second = ([{x["name"]: x["repr"] for x in f["locals"]} for f in p["samples"][0]["pyspy_json"][0]["frames"]]
                     for p in doc["processes"])
    assert first[0]["group"] == first[1]["cp_group"] != first[1]["dp_group"]  # one object in two frames: one number
    assert first[1] == second[1] and "0x" not in str(doc)  # the outer frame alike on both ranks: it factors
    assert not any("addr" in x for p in doc["processes"] for f in p["samples"][0]["pyspy_json"][0]["frames"]
                   for x in f["locals"])
