"""`attach --pid`: given every rank of a job on its node, a rank its world size names that is on no node looked at
is missing (it exited, never started, or runs where nobody looked), as in a whole job's attach; given some of a
launcher's ranks and not the others, the absent ranks were not looked at and are not counted. Either way
`analyze` of attach's saved node files gives attach's own verdict (a first-contact helper found them apart: attach
named rank 0, its saved files ranks 3-5).

The job: a Lightning Fabric start-up whose copied config asks for two nodes of three (WORLD_SIZE 6) on a one-node
run (the corpus case feo_fabric_num_nodes_copied_config, from Lightning-AI/pytorch-lightning#17228): ranks 0-2
wait in init_process_group for ranks 3-5, which were never started. Rank 0 starts ranks 1-2 itself."""

from __future__ import annotations

import json

import pytest

from tests.hangdoctor.corpus.live import LiveJob, load_cases
from tests.support import PYTHON, REPO, child_env, run_bounded


@pytest.fixture(scope="module")
def fabric_job(tmp_path_factory):
    with LiveJob(load_cases()["feo_fabric_num_nodes_copied_config"], tmp_path_factory.mktemp("fabric")) as job:
        yield job


def verdicts(pids: list[int], out) -> tuple[dict, dict]:
    """(attach's verdict, analyze's of the node files attach saved)."""
    done = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", *map(str, pids), "--json", "--out", str(out)],
                       timeout=180, env=child_env(), cwd=REPO)
    assert done.returncode in (0, 1), done.output[-3000:]
    again = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(out / "nodes"), "--json"], timeout=120,
                        env=child_env(), cwd=REPO)
    return json.loads(done.stdout), json.loads(again.stdout)


def first(verdict: dict) -> list[int]:
    return verdict["suspects"][0]["ranks"] if verdict["suspects"] else []


@pytest.mark.slow
def test_every_rank_given_counts_the_ranks_never_started_and_analyze_agrees(fabric_job, tmp_path):
    attached, analyzed = verdicts(fabric_job.python_pids(), tmp_path / "all")
    assert attached["headline"].endswith("(3/6 responded)"), attached["headline"]
    assert first(attached) == [3, 4, 5], attached["suspects"][:2]
    assert analyzed["headline"] == attached["headline"] and first(analyzed) == first(attached)


@pytest.mark.slow
def test_some_of_a_launchers_ranks_given_count_nobody_missing_and_analyze_agrees(fabric_job, tmp_path):
    ranks = fabric_job.rank_pids
    attached, analyzed = verdicts([ranks[0], ranks[1]], tmp_path / "some")  # rank 2, rank 1's sibling, left out
    assert attached["headline"].endswith("(2/2 responded)"), attached["headline"]
    assert not any(3 in s["ranks"] for s in attached["suspects"])
    assert any(f"pids {ranks[2]}" in w for w in attached["warnings"]), attached["warnings"]
    assert analyzed["headline"] == attached["headline"] and first(analyzed) == first(attached)
