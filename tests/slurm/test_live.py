"""Job lookup, listpids, one-step-per-node and a rendered sbatch script against the real local cluster."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import sys
import time

import pytest

from hangdoctor.experiments.trainer_job import trainer_batch_job
from slurm.daemons import free_ports, read_daemons
from slurm.errors import JobNotFound, JobNotRunning, NotJobOwner, SlurmCommandMissing
from slurm.jobs import hostnames, list_jobs, lookup_running_job, show_job
from slurm.nodelist import expand_nodelist
from slurm.pids import list_pids
from slurm.process import run_command
from slurm.sbatch import render_sbatch, submit, wait_for_state, wait_until_done
from slurm.steps import run_step_on_each_node
from slurm.testcluster import LocalCluster
from tests.support import REPO
from hangdoctor.topology import ParallelDims

pytestmark = pytest.mark.slurm

SLEEPER = "import os, time; print(os.environ['SLURM_PROCID'], flush=True); time.sleep(600)"


def sbatch(cluster: LocalCluster, *args: str, user: str | None = None) -> str:
    argv = ["sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", *args]
    if user:
        argv = ["runuser", "-u", user, "--", *argv]
    result = run_command(argv, timeout=30, env=cluster.env())
    assert result.ok, result.stderr
    return result.stdout.strip()


def cancel(cluster: LocalCluster, job_id: str) -> None:
    run_command(["scancel", job_id], timeout=30, env=cluster.env())


@pytest.fixture(scope="module")
def running_job(slurm_cluster):
    """A 4-node job with 2 tasks per node, all of them sleeping; cancelled at the end of the module."""
    script = f"#!/bin/bash\nsrun {sys.executable} -c \"{SLEEPER}\"\n"
    result = run_command(["sbatch", "--parsable", "--nodes=4", "--ntasks-per-node=2", "--job-name=sleepers",
                          "--output=/dev/null", "--chdir=/tmp"], timeout=30, env=slurm_cluster.env(), input=script)
    job_id = result.stdout.strip()
    wait_for_state(job_id, {"RUNNING"}, timeout=60, env=slurm_cluster.env())
    deadline = time.monotonic() + 30  # RUNNING comes before every task of the step has started
    while sum(len([p for p in list_pids(job_id, n, env=slurm_cluster.env()) if p.step == "0"])
              for n in slurm_cluster.node_names) < 8:
        assert time.monotonic() < deadline, "the sleepers never all started"
        time.sleep(0.2)
    yield job_id
    cancel(slurm_cluster, job_id)


def test_lookup_of_a_running_job(slurm_cluster, running_job):
    job = lookup_running_job(running_job, env=slurm_cluster.env())
    assert job.job_id == running_job and job.user == "root" and job.name == "sleepers"
    assert job.nodes == slurm_cluster.node_names and job.num_tasks == 8
    assert any(row.job_id == running_job and row.state == "RUNNING" for row in list_jobs(env=slurm_cluster.env()))
    assert [r.job_id for r in list_jobs(job_ids=[running_job], env=slurm_cluster.env())] == [running_job]


def test_job_that_does_not_exist(slurm_cluster):
    with pytest.raises(JobNotFound) as info:
        lookup_running_job("987654321", env=slurm_cluster.env())
    assert info.value.message == "job 987654321 not found" and "squeue" in info.value.hint


def test_pending_and_finished_jobs_are_not_running(slurm_cluster):
    later = sbatch(slurm_cluster, "--begin=now+3600", "--wrap", "true")
    try:
        with pytest.raises(JobNotRunning, match=r"is PENDING \(BeginTime\), not RUNNING"):
            lookup_running_job(later, env=slurm_cluster.env())
    finally:
        cancel(slurm_cluster, later)
    quick = sbatch(slurm_cluster, "--wrap", "true")
    assert wait_until_done(quick, timeout=60, env=slurm_cluster.env()).state == "COMPLETED"
    with pytest.raises(JobNotRunning, match="is COMPLETED") as info:
        lookup_running_job(quick, env=slurm_cluster.env())
    assert "output file" in info.value.hint


def test_another_users_job_is_refused_by_us_and_by_srun(slurm_cluster):
    theirs = sbatch(slurm_cluster, "--wrap", "sleep 300", user="nobody")
    try:
        wait_for_state(theirs, {"RUNNING"}, timeout=60, env=slurm_cluster.env())
        with pytest.raises(NotJobOwner, match="belongs to nobody, not to root") as info:
            lookup_running_job(theirs, env=slurm_cluster.env())
        assert "run as nobody" in info.value.hint
        node = show_job(theirs, env=slurm_cluster.env()).nodes[0]
        with pytest.raises(NotJobOwner, match="Access/permission denied"):  # what srun itself says, as root
            run_step_on_each_node(theirs, [node], ["true"], timeout=20, env=slurm_cluster.env())
    finally:
        cancel(slurm_cluster, theirs)


def test_missing_squeue_is_a_clear_error():
    with pytest.raises(SlurmCommandMissing, match="squeue not found on PATH") as info:
        list_jobs(env={"PATH": "/nonexistent"})
    assert "login node" in info.value.hint


def test_hostnames_agree_with_the_pure_expander(slurm_cluster):
    for text in ("n[1-4]", "jean-zay-iam[01-05,07],gpu[1-2]", "r[1-2]n[08-10]"):
        assert hostnames(text, env=slurm_cluster.env()) == expand_nodelist(text)
    assert hostnames("gpu[1-2]", env={"PATH": "/nonexistent"}) == ["gpu1", "gpu2"]  # no scontrol: pure expander


def test_listpids_finds_each_nodes_tasks_and_marks_helpers(slurm_cluster, running_job):
    ranks = {}
    for node in slurm_cluster.node_names:
        rows = list_pids(running_job, node, env=slurm_cluster.env())
        step0 = [r for r in rows if r.step == "0"]
        assert all(r.is_task for r in step0) and len(step0) == 2
        for r in step0:
            ranks[r.global_id] = node
            assert f"SLURM_PROCID={r.global_id}".encode() in open(f"/proc/{r.pid}/environ", "rb").read()
    assert sorted(ranks) == list(range(8))
    batch = [r for r in list_pids(running_job, "n1", env=slurm_cluster.env()) if r.step == "batch"]
    assert any(not r.is_task for r in batch)  # srun and its forwarder are helpers ("-")


def test_one_step_runs_on_each_node(slurm_cluster, running_job):
    nodes = slurm_cluster.node_names
    run = run_step_on_each_node(running_job, nodes + nodes[:1],  # a repeated node still gets one task
                                ["sh", "-c", "echo $SLURMD_NODENAME $SLURM_JOB_ID; echo e >&2"],
                                timeout=30, env=slurm_cluster.env())
    assert list(run.results) == nodes and not run.missing
    for node, result in run.results.items():
        assert (result.status, result.returncode) == ("ok", 0)
        assert result.stdout == f"{node} {running_job}\n" and result.stderr == "e\n"
    assert "--overlap" in run.srun_argv and "--gres=gpu:0" in run.srun_argv


def test_output_longer_than_srun_lines_comes_back_whole(slurm_cluster, running_job):
    """srun cuts labelled lines at 1,024 bytes; a node's report (py-spy stacks) is far longer."""
    program = "import os; print(os.environ['SLURMD_NODENAME'] * 100000)"
    run = run_step_on_each_node(running_job, ["n1", "n4"], [sys.executable, "-c", program], timeout=30,
                                env=slurm_cluster.env())
    assert [(r.status, r.stdout) for r in run.results.values()] == [("ok", "n1" * 100000 + "\n"),
                                                                    ("ok", "n4" * 100000 + "\n")]


def returns_within(seconds: float, what: str, call):
    """call()'s result; fails naming `what` if it has not returned after `seconds`. A safety bound several times
    the bound under test, so that a regression fails here with a message instead of hanging the suite."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(call).result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        raise AssertionError(f"{what} did not return within {seconds:.0f}s") from None
    finally:
        pool.shutdown(wait=False)


def running_command(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_a_node_whose_command_hangs_is_cut_at_the_bound_and_keeps_its_output(slurm_cluster, running_job):
    # $$ is the shell's pid, which `exec` hands on to the sleep: the test checks that this very process was killed
    script = "echo started on $SLURMD_NODENAME $$; [ $SLURMD_NODENAME = n2 ] && exec sleep 300; exit 3"
    run = returns_within(60, "run_step_on_each_node(timeout=12) with a 300 s sleep on n2",
                         lambda: run_step_on_each_node(running_job, ["n1", "n2", "n3"], ["sh", "-c", script],
                                                       timeout=12, env=slurm_cluster.env()))
    n2 = run.results["n2"]
    assert n2.status == "timeout" and n2.stdout.startswith("started on n2 "), n2
    sleeper = int(n2.stdout.split()[-1])
    assert running_command(sleeper) != "sleep 300", "the command that overran its bound was killed on its node"
    assert run.results["n1"].status == "failed" and run.results["n1"].returncode == 3


def test_a_node_that_never_answers_is_reported_and_the_others_kept(tmp_path_factory):
    """A SIGSTOPped slurmd (a dead node, as far as srun can tell) on a cluster of our own, not the shared one."""
    from slurm.testcluster import local_cluster_for_tests

    cluster = local_cluster_for_tests(tmp_path_factory.getbasetemp(), nodes=3)
    slurmd = next(d for d in read_daemons(cluster.layout) if d.name == "slurmd-n2")
    try:
        job = sbatch(cluster, "--nodes=3", "--wrap", "sleep 300")
        wait_for_state(job, {"RUNNING"}, timeout=60, env=cluster.env())
        os.kill(slurmd.pid, signal.SIGSTOP)
        echo_node = ["sh", "-c", "echo $SLURMD_NODENAME"]
        run = returns_within(60, "run_step_on_each_node(timeout=8) with n2's slurmd stopped",
                             lambda: run_step_on_each_node(job, ["n1", "n2", "n3"], echo_node, timeout=8,
                                                           env=cluster.env()))
        assert run.missing == ["n2"] and run.results["n2"].status == "no answer"
        assert [run.results[n].stdout for n in ("n1", "n3")] == ["n1\n", "n3\n"]
    finally:
        os.kill(slurmd.pid, signal.SIGCONT)
        assert cluster.stop() == []


def test_rendered_sbatch_script_runs_every_rank_with_a_usable_rendezvous(slurm_cluster, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    job = trainer_batch_job(
        ParallelDims(tp=2, pp=2, dp=2), 2, ["--num-layers", "4", "--run-dir", str(run_dir)],
        program=(sys.executable, str(REPO / "tests" / "slurm" / "rank_payload.py")), env={"CUDA_LAUNCH_BLOCKING": "1"},
        master_port=free_ports(1)[0], output=str(run_dir / "%x-%j.out"),
    )
    env = slurm_cluster.env()
    env["PYTHONPATH"] = str(REPO)
    job_id = submit(render_sbatch(job), env=env, cwd=run_dir)
    final = wait_until_done(job_id, timeout=120, env=env)
    log = next(run_dir.glob("*.out")).read_text()
    assert (final.state, final.fields["ExitCode"]) == ("COMPLETED", "0:0"), log
    records = [json.loads((run_dir / f"rank{r}.json").read_text()) for r in range(8)]
    assert [r["rank"] for r in records] == list(range(8)) and {r["world"] for r in records} == {8}
    assert [r["node"] for r in records] == ["n1", "n1", "n2", "n2", "n3", "n3", "n4", "n4"]
    assert {r["master_addr"] for r in records} == {"127.0.0.1"}  # n1's NodeAddr, not its unresolvable name
    assert {r["cuda_launch_blocking"] for r in records} == {"1"}
    assert records[0]["argv"][:4] == ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]
    assert json.loads((run_dir / "rendezvous.json").read_text()) == list(range(1, 8))
