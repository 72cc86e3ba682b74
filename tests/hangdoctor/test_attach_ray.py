"""`hangdoctor attach --ray` on a real local Ray cluster (a head and two worker nodes, ray.cluster_utils.Cluster)
running a gloo job of 3 ranks as Ray actors, one per node, hung by rank 1 skipping an all_reduce
(fixtures/ray_gloo.py). The verdict must name rank 1 first and equal `attach --pid` of the same processes."""

import json
import os
import socket
import sys
import time

import pytest

from hangdoctor.collector.procs import read_stat
from hangdoctor.sources.ray_job import Actor, gcs_address, ranks_from_names, run_on_nodes
from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded

WORLD, FAULTY, LIFETIME = 3, 1, 150.0
ATTACH = [PYTHON, "-m", "hangdoctor", "attach"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ray_job(tmp_path_factory):
    """(cluster address, {rank: pid}, [node id of each rank]) of the hung job; the cluster and every actor end
    with the module (each actor also ends itself after LIFETIME seconds)."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ready = tmp_path_factory.mktemp("ray-ready")
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "RAY_USAGE_STATS_ENABLED")}
    os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]  # the nodes' workers import the fixture and the collector
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # nothing leaves this machine
    cluster, pids = None, {}
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        nodes = [cluster.head_node] + [cluster.add_node(num_cpus=1) for _ in range(WORLD - 1)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        from tests.hangdoctor.fixtures.ray_gloo import GlooRank

        env = {"WORLD_SIZE": str(WORLD), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
               "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
        actors = [GlooRank.options(
            name=f"rank-{rank}", runtime_env={"env_vars": {**env, "RANK": str(rank), "LOCAL_RANK": "0"}},
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)).remote()
            for rank, node in enumerate(nodes)]
        runs = [actor.run.remote(FAULTY, str(ready), LIFETIME) for actor in actors]
        deadline = time.monotonic() + 60
        while len(list(ready.glob("rank*[0-9]"))) < WORLD:
            done, _ = ray.wait(runs, timeout=0)
            assert not done, f"a rank ended before the hang: {ray.get(done[0])!r}"
            assert time.monotonic() < deadline, f"ranks ready after 60 s: {sorted(p.name for p in ready.iterdir())}"
            time.sleep(0.5)
        time.sleep(1.0)  # the ranks reach their waits
        pids = {rank: int((ready / f"rank{rank}").read_text()) for rank in range(WORLD)}
        yield cluster.address, pids, [node.node_id for node in nodes]
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        end_by(list(pids.values()), deadline=time.monotonic() + 10)  # the ranks: gone with their raylets, or killed
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def end_by(pids: list[int], *, deadline: float) -> None:
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if (read_stat(pid) or {"state": "Z"})["state"] != "Z"]
        time.sleep(0.2)
    for pid in pids:
        kill_tree(pid)


def attach(*args, timeout=90):
    return run_bounded([*ATTACH, *args], timeout=timeout, env=child_env(COLUMNS="110"), cwd=REPO)


def verdict_core(data: dict) -> dict:
    """What the verdict says about the ranks, without where the stacks were collected."""
    return {"places": [(p["folded"], p["wait"] and p["wait"].get("op"), p["progress"]) for p in data["places"]],
            "suspects": [(s["folded"], s["kind"]) for s in data["suspects"]], "headline": data["headline"]}


@pytest.mark.slow
def test_ray_attach_names_the_skipping_rank_first_and_matches_attach_pid(ray_job, tmp_path):
    address, pids, _ = ray_job
    result = attach("--ray", address, "--samples", "2", "--interval", "0.5", "--json", "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.output[-3000:]
    data = json.loads(result.stdout)
    assert data["source"].startswith(f"Ray cluster {address}, job ") and data["source"].endswith("(3 nodes)")
    assert data["responded"]["count"] == WORLD and data["expected"] == WORLD
    assert data["suspects"][0]["folded"] == str(FAULTY), data["suspects"]
    waits = {p["folded"]: p["wait"] and p["wait"]["op"] for p in data["places"]}
    assert waits["0,2"] == "all_reduce", data["places"]
    assert len(list((tmp_path / "r" / "nodes").iterdir())) == WORLD  # one document per Ray node

    by_pid = attach("--pid", *map(str, pids.values()), "--samples", "2", "--interval", "0.5", "--json",
                    "--out", str(tmp_path / "p"))
    assert by_pid.returncode == 0, by_pid.output[-3000:]
    same = json.loads(by_pid.stdout)
    assert verdict_core(data) == verdict_core(same)

    named = attach("--ray", address, "--ray-actor-name", "^rank-[02]$", "--samples", "1", "--json",
                   "--out", str(tmp_path / "n"))
    assert named.returncode == 1, named.output[-3000:]  # partial: rank 1 left out by the filter, so missing
    assert [p["folded"] for p in json.loads(named.stdout)["places"]] == ["0,2"]


@pytest.mark.slow
def test_a_node_whose_task_is_late_or_fails_is_a_failed_node_within_the_bound(ray_job):
    import ray
    from tests.hangdoctor.fixtures.ray_gloo import failing_task, late_task

    _, pids, nodes = ray_job
    actors = [Actor(pid=pids[rank], node_id=nodes[rank], job_id="", class_name="GlooRank", name=f"rank-{rank}")
              for rank in range(WORLD)]
    names = {node: f"node{i}" for i, node in enumerate(nodes)}
    start = time.monotonic()
    found, failed = run_on_nodes(ray, late_task, actors, names, timeout=3.0)
    assert time.monotonic() - start < 8 and found == {}
    assert sorted(f.name for f in failed) == ["node0", "node1", "node2"]
    assert all(not f.ok and "did not answer within 3s" in f.error for f in failed)
    found, failed = run_on_nodes(ray, failing_task, actors[:1], names, timeout=20.0)
    assert found == {} and failed[0].name == "node0" and "collector broke on node0" in failed[0].error


def test_ray_address_without_a_cluster_is_one_error_line_within_the_bound():
    pytest.importorskip("ray")
    start = time.monotonic()
    result = attach("--ray", f"127.0.0.1:{free_port()}", timeout=30)
    assert time.monotonic() - start < 20
    assert result.returncode == 4, result.output[-2000:]
    assert result.stderr.startswith("Error: no Ray cluster at 127.0.0.1:") and result.stderr.count("Error:") == 1


def test_ray_address_that_is_no_gcs_is_refused_within_the_bound():
    pytest.importorskip("ray")
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers, as a
        silent.bind(("127.0.0.1", 0))  # wrong port might; ray.init would retry it for minutes
        silent.listen(4)
        start = time.monotonic()
        result = attach("--ray", f"127.0.0.1:{silent.getsockname()[1]}", "--timeout", "3", timeout=30)
    assert time.monotonic() - start < 15
    assert result.returncode == 4, result.output[-2000:]
    assert "it did not answer within 3s" in result.stderr and result.stderr.count("Error:") == 1


def test_ray_filter_without_ray_is_a_usage_error():
    result = attach("--local", "--ray-job", "02000000", timeout=30)
    assert result.returncode == 2 and "--ray-job goes with --ray" in result.stderr


def test_without_ray_installed_attach_ray_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    from hangdoctor.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is not installed
    assert main(["attach", "--ray", "--out", str(tmp_path / "o")]) == 4
    err = capsys.readouterr().err
    assert err.startswith("Error: attach --ray needs ray: pip install 'hangdoctor[ray]'") and err.count("Error:") == 1
    assert not (tmp_path / "o").exists(), "nothing collected: no folder left behind"


def test_ranks_from_actor_names_only_where_the_environment_has_none():
    actors = [Actor(pid=10, node_id="n", job_id="01000000", class_name="Worker", name="rank-3"),
              Actor(pid=11, node_id="n", job_id="01000000", class_name="Worker", name="worker_7"),
              Actor(pid=12, node_id="n", job_id="01000000", class_name="Worker", name="rank-5"),
              Actor(pid=13, node_id="n", job_id="01000000", class_name="RayTrainWorker", name="")]
    doc = {"node": "host-a", "processes": [{"pid": 10, "rank": None}, {"pid": 11, "rank": None},
                                           {"pid": 12, "rank": 1}, {"pid": 13, "rank": None}]}
    other = {"node": "host-b", "processes": [{"pid": 10, "rank": None}]}  # the same pid on another node
    warnings = ranks_from_names([doc, other], actors, {"n": "host-a"})
    assert [(p["rank"], p.get("rank_key")) for p in doc["processes"]] == [
        (3, "Ray actor name"), (7, "Ray actor name"), (1, None), (None, None)]
    assert other["processes"][0]["rank"] is None, "a pid of another node is another process"
    assert len(warnings) == 1 and "RayTrainWorker pid 13" in warnings[0] and "Ray Train" in warnings[0]


def test_gcs_address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert gcs_address("auto") == "10.0.0.1:6379"
    assert gcs_address("ray://head:10001") == "head:10001"
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setenv("RAY_TMPDIR", "/nonexistent")
    assert gcs_address("auto") is None  # Ray finds it, or says there is none


def test_hangdoctor_imports_ray_only_when_attach_ray_runs():
    code = ("import sys, hangdoctor.cli, hangdoctor.commands.attach, hangdoctor.sources.ray_job; "
            "print('ray' in sys.modules)")
    result = run_bounded([PYTHON, "-c", code], timeout=60, cwd=REPO)
    assert result.stdout.strip() == "False", result.output[-2000:]
