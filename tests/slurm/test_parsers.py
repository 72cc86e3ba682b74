"""Parsers on real output captured from the local cluster (tests/slurm/data, made by capture_outputs.py)."""

from pathlib import Path

import pytest

from slurm.jobs import parse_key_values, parse_show_job, parse_squeue
from slurm.pids import parse_listpids
from slurm.steps import parse_step_output
from slurm.frames import encode

DATA = Path(__file__).parent / "data"
JOBS = dict(line.split("=") for line in (DATA / "jobs.txt").read_text().split())


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_show_job_running_oneliner():
    (job,) = parse_show_job(read("show_job_running_oneliner.txt"))
    assert job.job_id == JOBS["running"]
    assert job.name == "tiny gpt"  # a value with a space stays whole
    assert (job.user, job.uid, job.state, job.running) == ("root", 0, "RUNNING", True)
    assert job.nodelist == "n[1-4]" and job.nodes == ["n1", "n2", "n3", "n4"]
    assert (job.num_nodes, job.num_tasks, job.batch_host) == (4, 8, "n1")
    assert job.fields["NtasksPerN:B:S:C"] == "2:0:*:*"
    assert job.fields["TRES"] == "cpu=8,node=4,billing=8"


def test_multiline_and_oneliner_forms_agree():
    (multi,) = parse_show_job(read("show_job_running.txt"))
    (one,) = parse_show_job(read("show_job_running_oneliner.txt"))
    assert multi == one
    assert multi.fields == one.fields


def test_show_job_of_all_jobs_splits_them():
    jobs = parse_show_job(read("show_job_all.txt"))
    assert {j.job_id for j in jobs} == set(JOBS.values())
    by_id = {j.job_id: j for j in jobs}
    assert by_id[JOBS["pending"]].state == "PENDING" and by_id[JOBS["pending"]].nodes == []
    assert by_id[JOBS["other"]].user == "nobody"


def test_pending_and_completed_and_other_users_jobs():
    (pending,) = parse_show_job(read("show_job_pending.txt"))
    assert (pending.state, pending.reason, pending.nodelist, pending.num_nodes) == ("PENDING", "BeginTime", "", 2)
    (done,) = parse_show_job(read("show_job_completed.txt"))
    assert done.state == "COMPLETED" and done.fields["ExitCode"] == "0:0"
    (other,) = parse_show_job(read("show_job_other_user.txt"))
    assert (other.user, other.uid) == ("nobody", 65534)


def test_key_values_keep_empty_values_and_odd_keys():
    fields = parse_key_values("JobId=5 Power= Socks/Node=* ReqB:S:C:T=0:0:*:* Comment=a b=c")
    assert fields["Power"] == "" and fields["Socks/Node"] == "*" and fields["ReqB:S:C:T"] == "0:0:*:*"
    assert fields["JobId"] == "5"


def test_squeue_rows():
    rows = {r.job_id: r for r in parse_squeue(read("squeue.txt"))}
    running = rows[JOBS["running"]]
    assert (running.user, running.state, running.num_nodes, running.nodelist, running.name) == (
        "root", "RUNNING", 4, "n[1-4]", "tiny gpt")
    assert rows[JOBS["pending"]].nodelist == ""
    assert rows[JOBS["other"]].user == "nobody"


def test_squeue_rejects_a_foreign_format_with_a_clear_error():
    with pytest.raises(ValueError, match="unexpected squeue line"):
        parse_squeue(read("squeue_seed_format.txt"))


def test_listpids_separates_tasks_from_helpers():
    rows = parse_listpids(read("listpids_n1.txt"), node="n1")
    tasks = [r for r in rows if r.is_task]
    helpers = [r for r in rows if not r.is_task]
    # step 0 has ranks 0 and 1 on n1; the batch step's shell is task 0 of "batch"; srun and its forwarder are "-"
    assert sorted((r.step, r.global_id) for r in tasks) == [("0", 0), ("0", 1), ("batch", 0)]
    assert len(helpers) == 2 and all(r.step == "batch" and r.global_id is None for r in helpers)
    assert all(r.node == "n1" and r.job_id == JOBS["running"] for r in rows)
    n3 = parse_listpids(read("listpids_n3.txt"), node="n3")
    assert sorted(r.global_id for r in n3) == [4, 5] and all(r.is_task for r in n3)


def test_listpids_without_steps_has_no_rows():
    assert parse_listpids(read("listpids_no_steps.txt")) == []


def record(node: str, stdout: str = "", status: str = "ok") -> dict:
    return {"node": node, "status": status, "returncode": 0 if status == "ok" else None, "stdout": stdout,
            "stderr": "", "seconds": 0.1}


def test_step_output_reassembles_interleaved_frames_and_ignores_noise():
    big = "".join(f"{i:06d} MainThread all_reduce (torch/distributed/distributed_c10d.py:1191)\n" for i in range(3000))
    a, b = encode(record("n1", big), "n1"), encode(record("n13", "x", "timeout"), "n13")
    assert len(a) > 10 and all(len(line) < 1000 for line in a)  # srun cuts labelled lines at 1,024 bytes
    lines = [f"0: {a[0]}", "1: some stray line", f"12: {b[0]}", *(f"0: {line}" for line in a[1:])]
    lines += [f"12: {line}" for line in b[1:]]
    results, incomplete = parse_step_output("\n".join(lines))
    assert set(results) == {"n1", "n13"} and not incomplete
    assert results["n1"].stdout == big and results["n13"].status == "timeout"


def test_step_output_with_frames_missing_says_so():
    frames = encode(record("n4", "y" * 100_000 + "".join(map(str, range(20000)))), "n4")
    results, incomplete = parse_step_output("\n".join(f"3: {line}" for line in frames[:-1]))
    assert results == {} and incomplete == {"n4": f"its report was cut short: {len(frames) - 1} of {len(frames)} "
                                                  "parts arrived"}


def test_listpids_row_of_a_task_not_forked_yet_has_no_pid():
    # Seen on the local cluster right after a step started: slurmstepd lists the task before it has a pid.
    (row,) = parse_listpids(read("listpids_launching.txt"))
    assert row.pid is None and row.is_task and row.global_id == 0


def test_each_nodes_command_gets_most_of_the_bound_but_not_all():
    """Worked by hand: srun gets the bound less 1.5 s to stop it; the command gets srun's share less 30% of it for
    srun's launch, that launch allowance kept between 1 and 10 s; never less than 0.1 s."""
    from slurm.steps import command_time_limit

    assert command_time_limit(30) == pytest.approx(19.95)  # 30 - 1.5 = 28.5; 30% of it 8.55; 28.5 - 8.55
    assert command_time_limit(12) == pytest.approx(7.35)  # 10.5; 30% = 3.15; 10.5 - 3.15
    assert command_time_limit(4) == pytest.approx(1.5)  # 2.5; 30% = 0.75, raised to 1 s; 2.5 - 1
    assert command_time_limit(100) == pytest.approx(88.5)  # 98.5; 30% = 29.55, capped at 10 s; 98.5 - 10
    assert command_time_limit(0.5) == pytest.approx(0.1)  # srun's share at least 0.5; 0.5 - 1 < 0: the floor
