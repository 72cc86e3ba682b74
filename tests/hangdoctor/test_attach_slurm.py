"""`hangdoctor attach --jobid` (and `--hostfile` over pdsh) against real hung jobs on the local SLURM cluster.

Two jobs run side by side on the 4 virtual nodes, submitted with the slurm package's sbatch template:
- the gloo fixture, 8 ranks on 4 nodes (tp=2 pp=2 dp=2; rank 2 SIGSTOPped, rank 7 a straggler);
- the reference trainer, PP=2 DP=2 on 2 nodes, with the skip-loss-broadcast fault at iteration 2.
The fixture declares them hung by evidence the test reads itself: ready markers and /proc states, then every rank
that should wait holding the same main-thread stack in two py-spy samples. Each test then asks attach once and
asserts its first answer; rank 7 of the gloo job never settles, and the verdict must say so without blaming the
ranks that wait.
"""

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from hangdoctor.experiments.trainer_job import trainer_batch_job
from slurm.daemons import read_daemons
from slurm.process import run_command
from slurm.sbatch import render_sbatch, submit, wait_for_state
from slurm.pids import list_pids
from tests.hangdoctor.livejobs import FIXTURES, Stack, innermost, proc_state, wait_until, wait_until_stacks_hold
from tests.support import PYTHON, REPO, child_env, run_bounded
from tests.trainer_runs import MODEL
from hangdoctor.topology import ParallelDims

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
ENGINE = "deepspeed/runtime/pipe/engine.py"


def job_env(cluster) -> dict:
    return cluster.env(child_env())


@dataclass
class HungJobs:
    ids: dict[str, str]  # "gloo" / "trainer" -> SLURM job id
    stacks: dict[str, dict[int, Stack]]  # the main-thread stacks that held still when the fixture sampled them

    def __getitem__(self, name: str) -> str:
        return self.ids[name]

    def saw(self, name: str) -> str:
        return "the test saw: " + "; ".join(f"rank {r}: {innermost(s)}" for r, s in sorted(self.stacks[name].items()))


def step_ranks(cluster, job_id: str) -> dict[int, int]:
    """{rank: pid} of the tasks of the job's step 0, from `scontrol listpids` on each node."""
    rows = [row for node in cluster.node_names for row in list_pids(job_id, node, env=job_env(cluster))]
    return {int(row.global_id): row.pid for row in rows if row.step == "0" and row.is_task and row.pid}


@pytest.fixture(scope="module")
def hung_jobs(slurm_cluster, tmp_path_factory):
    base = Path(f"/tmp/hangdoctor-slurm-{os.getpid()}")  # reachable by the job's tasks
    ready, run_dir = base / "ready", base / "trainer-run"
    env = job_env(slurm_cluster)
    # hung_gloo.py takes the trainer's topology flags, so that hangdoctor reads the topology from argv alike
    gloo = trainer_batch_job(ParallelDims(tp=2, pp=2, dp=2), 2, ["--ready-dir", str(ready), "--lifetime", "400",
                                                                 "--stop-rank", "2", "--straggler-rank", "7"],
                             program=(PYTHON, "-u", str(FIXTURES / "hung_gloo.py")), job_name="hung-gloo",
                             output=str(base / "gloo-%j.out"), master_port=29631)
    trainer = trainer_batch_job(ParallelDims(tp=1, pp=2, dp=2), 2, [*MODEL, "--train-iters", "4", "--run-dir",
                                                                    str(run_dir), "--pg-timeout", "400", "--fault",
                                                                    "skip-loss-broadcast:iteration=2"],
                                program=(PYTHON, "-m", "trainer"), job_name="hung-trainer",
                                output=str(base / "trainer-%j.out"), master_port=29632)
    base.mkdir(parents=True, exist_ok=True)
    ids = {"gloo": submit(render_sbatch(gloo), env=env, cwd=REPO),
           "trainer": submit(render_sbatch(trainer), env=env, cwd=REPO)}
    try:
        for job_id in ids.values():
            wait_for_state(job_id, {"RUNNING"}, timeout=60, env=env)
        wait_until(lambda: len(list(ready.glob("rank*[0-9]"))) == 8, timeout=180, what="all 8 gloo ranks' ready markers")
        gloo_pids = {int(p.name[4:]): int(p.read_text()) for p in ready.glob("rank*[0-9]")}
        wait_until(lambda: proc_state(gloo_pids[2]) == "T", timeout=30, what="gloo rank 2 stopped (state T)")
        stacks = {"gloo": wait_until_stacks_hold({r: pid for r, pid in gloo_pids.items() if r not in (2, 7)},
                                                 timeout=120)}  # rank 2 is stopped, rank 7 never settles
        metrics = run_dir / "metrics.jsonl"
        wait_until(lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= 2, timeout=240,
                   what="the trainer's iteration 2 in metrics.jsonl")
        wait_until(lambda: len(step_ranks(slurm_cluster, ids["trainer"])) == 4, timeout=30,
                   what="the trainer's 4 tasks in scontrol listpids")
        stacks["trainer"] = wait_until_stacks_hold(step_ranks(slurm_cluster, ids["trainer"]), timeout=180)
        yield HungJobs(ids, stacks)
    finally:
        for job_id in ids.values():
            run_command(["scancel", job_id], timeout=30, env=env)
        run_command(["rm", "-rf", str(base)], timeout=30)


def attach(cluster, *args, timeout=120):
    return run_bounded([PYTHON, "-m", "hangdoctor", "attach", *args], timeout=timeout, env=job_env(cluster))


def attach_once(cluster, job_id: str, out: Path, returncode: int) -> dict:
    """attach --jobid, asked once (the fixture waited for the job to settle): its first answer."""
    result = attach(cluster, "--jobid", job_id, "--samples", "2", "--interval", "0.5", "--json", "--out", str(out))
    assert result.returncode == returncode, result.output[-3000:]
    return json.loads(result.stdout)


def test_gloo_job_verdict_with_nodes(slurm_cluster, hung_jobs, tmp_path):
    data = attach_once(slurm_cluster, hung_jobs["gloo"], tmp_path / "out", returncode=1)  # 1: rank 2 is stopped
    assert [p["folded"] for p in data["places"]] == ["0-1,3", "4-6", "7"], hung_jobs.saw("gloo")
    assert data["source"] == f"SLURM job {hung_jobs['gloo']} 'hung-gloo' (4 nodes)"
    places = {p["folded"]: p for p in data["places"]}
    assert places["0-1,3"]["wait"]["op"] == "broadcast" and places["0-1,3"]["hosts"] == ["n1", "n2"]
    assert places["4-6"]["wait"]["op"] == "all_reduce" and places["4-6"]["hosts"] == ["n3", "n4"]
    assert places["7"]["progress"] == {"progressing": 1}
    assert data["unresponsive"] == {"stopped": {"count": 1, "folded": "2", "ranks": [2]}}
    hosts = {r["rank"]: r["host"] for r in data["ranks"]}
    assert hosts == {0: "n1", 1: "n1", 2: "n2", 3: "n2", 4: "n3", 5: "n3", 6: "n4", 7: "n4"}
    assert sorted(p.name for p in (tmp_path / "out" / "nodes").iterdir()) == ["n1.json", "n2.json", "n3.json", "n4.json"]


def test_a_rank_that_never_settles_is_progressing_and_the_waiting_ranks_are_not_blamed(slurm_cluster, hung_jobs,
                                                                                        tmp_path):
    """Rank 7 never reaches a collective: it keeps computing, so the job as a whole never settles. Asked once,
    attach calls rank 7 progressing (a straggler), and never blames the ranks that wait where the hang leaves them
    (0-1,3 in the pipeline broadcast): the suspects are exactly the three places out of step by construction."""
    data = attach_once(slurm_cluster, hung_jobs["gloo"], tmp_path / "out", returncode=1)
    progress = {r["rank"]: r["progress"] for r in data["ranks"] if r["rank"] != 2}  # 2: stopped, not sampled
    assert progress == {7: "progressing", **{r: "stuck" for r in (0, 1, 3, 4, 5, 6)}}, hung_jobs.saw("gloo")
    assert {s["folded"]: s["kind"] for s in data["suspects"]} == {"7": "straggler", "2": "unresponsive",
                                                                   "4-6": "other-call"}
    assert not {0, 1, 3} & {r for s in data["suspects"] for r in s["ranks"]}
    assert data["headline"].startswith("HUNG: 6 ranks stuck") and "1 progressing" in data["headline"]


def test_trainer_skip_loss_broadcast_under_slurm(slurm_cluster, hung_jobs, tmp_path):
    data = attach_once(slurm_cluster, hung_jobs["trainer"], tmp_path / "out", returncode=0)
    assert [p["folded"] for p in data["places"]] == ["0-1", "2-3"], hung_jobs.saw("trainer")
    assert data["hung"] is True and data["responded"]["count"] == 4 and data["expected"] == 4
    assert data["topology"]["pp"] == 2 and data["topology"]["dp"] == 2
    first, last = data["places"]
    assert (first["folded"], first["where"], first["hosts"]) == ("0-1", "pp=0 (all dp)", ["n1"])
    assert first["position"] == f"broadcast <- PipelineEngine._aggregate_total_loss ({ENGINE})"
    assert (last["folded"], last["where"], last["hosts"]) == ("2-3", "pp=1 (all dp)", ["n2"])
    assert last["position"] == f"recv <- PipelineEngine._exec_recv_activations ({ENGINE})"
    assert data["suspects"][0]["folded"] == "2-3" and data["suspects"][0]["reason"].startswith(
        "never entered the broadcast of the loss from the last stage that ranks 0-1 wait in")


def unshare_works() -> bool:
    try:
        return run_bounded(["unshare", "--mount", "true"], timeout=10).returncode == 0
    except FileNotFoundError:
        return False


def test_out_needs_no_file_system_shared_with_the_nodes(slurm_cluster, hung_jobs, tmp_path):
    """attach runs in a mount namespace of its own, with --out on a tmpfs mounted only there.

    The job's nodes (slurmd, slurmstepd, stepwrap, the collector) stay in the machine's mount namespace, where
    the mount point is an empty folder and `--out` does not exist: a collector that wrote its report into --out
    would fail there. Proves that the node reports come back through srun's output and are written only by
    attach; not that the collector's own code needs no shared path (it is still started by its path).
    """
    if not unshare_works():
        pytest.skip("unshare --mount is not permitted here (needs CAP_SYS_ADMIN)")
    private = Path(f"/tmp/hangdoctor-private-{os.getpid()}")
    private.mkdir()
    kept = tmp_path / "kept"
    script = ('mount -t tmpfs hangdoctor-private "$1" || exit 97; readlink /proc/self/ns/mnt >&2; '
              '"$2" -m hangdoctor attach --jobid "$3" --json --out "$1/out"; rc=$?; cp -a "$1/out" "$4"; exit $rc')
    try:
        result = run_bounded(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                              str(private), PYTHON, hung_jobs["gloo"], str(kept)], timeout=120,
                             env=job_env(slurm_cluster), cwd=REPO)
        assert result.returncode == 1, result.output[-3000:]  # partial only because rank 2 is SIGSTOPped
        assert os.listdir(private) == []  # the nodes' view of the mount point: nothing was written there
    finally:
        private.rmdir()
    data = json.loads(result.stdout)
    assert data["responded"]["count"] == 7 and data["missing"]["count"] == 0 and data["expected"] == 8
    attach_namespace = result.stderr.splitlines()[0]
    rank_pid = next(r["pid"] for r in data["ranks"] if r["rank"] == 0)
    assert os.readlink(f"/proc/{rank_pid}/ns/mnt") != attach_namespace  # the job lives in another namespace
    nodes = sorted(p.name for p in (kept / "nodes").iterdir())
    assert nodes == ["n1.json", "n2.json", "n3.json", "n4.json"]
    doc = json.loads((kept / "nodes" / "n3.json").read_text())
    assert sorted(p["rank"] for p in doc["processes"]) == [4, 5]
    assert (kept / "report.json").exists()


def test_hostfile_over_pdsh_gives_the_same_places(slurm_cluster, hung_jobs, tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{n} slots=2\n" for n in slurm_cluster.node_names))
    result = attach(slurm_cluster, "--hostfile", str(hostfile), "--rcmd", "exec", "--match",
                    f"SLURM_JOB_ID={hung_jobs['gloo']}", "--json", "--out", str(tmp_path / "p"))
    assert result.returncode == 1, result.output[-3000:]
    data = json.loads(result.stdout)
    assert {p["folded"] for p in data["places"]} == {"0-1,3", "4-6", "7"}
    assert {r["rank"]: r["host"] for r in data["ranks"]}[6] == "n4"


def test_jobs_that_cannot_be_attached_give_one_line_errors(slurm_cluster, tmp_path):
    result = attach(slurm_cluster, "--jobid", "987654321", "--out", str(tmp_path / "a"))
    assert result.returncode == 3 and result.stderr.startswith("Error: job 987654321 not found\nHint: ")
    assert not (tmp_path / "a").exists()  # nothing collected: no empty output folder left behind
    env = job_env(slurm_cluster)
    later = submit("#!/bin/bash\n#SBATCH --begin=now+3600\n#SBATCH --output=/dev/null\ntrue\n", env=env, cwd="/tmp")
    try:
        result = attach(slurm_cluster, "--jobid", later, "--out", str(tmp_path / "b"))
        assert result.returncode == 3 and f"Error: job {later} is PENDING" in result.stderr
    finally:
        run_command(["scancel", later], timeout=30, env=env)
    result = attach(slurm_cluster, "--jobid", "12x", "--out", str(tmp_path / "c"))
    assert result.returncode == 2 and result.stderr.startswith("Error: '12x' is not a SLURM job id")


def test_a_silent_node_gives_a_partial_report_within_the_bound(slurm_cluster, hung_jobs, tmp_path):
    slurmd = next(d for d in read_daemons(slurm_cluster.layout) if d.name == "slurmd-n4")
    os.kill(slurmd.pid, signal.SIGSTOP)  # the test cluster's daemon, not the job: n4 can start no step now
    try:
        result = attach(slurm_cluster, "--jobid", hung_jobs["gloo"], "--timeout", "15", "--json",
                        "--out", str(tmp_path / "d"), timeout=90)
    finally:
        os.kill(slurmd.pid, signal.SIGCONT)
    assert result.returncode == 1, result.output[-3000:]
    data = json.loads(result.stdout)
    assert data["missing"]["folded"] == "6-7" and "node n4: no answer" in data["warnings"]
    assert data["responded"]["count"] == 5 and data["headline"].endswith("(5/8 responded)")
    assert "Warning: node n4: no answer" in result.stderr
